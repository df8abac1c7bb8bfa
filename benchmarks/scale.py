"""Scale: one thread whose list holds 1,000 to 100,000 items, then grows by one a step.

Each case (a saver, a list length N) runs in a spawned process of its own, so the peak
memory it reports is that case's alone: one graph input seeds the list with N items of
~200 bytes (words and base64 of random bytes in turn), K super-steps append one item each
with `durability="sync"`, then T more appends each come as an `invoke` of its own (a
turn: the saver reads the thread, then stores the input and the step), then new saver
instances read the thread cold.
"""

from __future__ import annotations

import multiprocessing
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

from . import graphs
from .env import Bench, SaverSpec
from .stats import rotation, summary

ITEM_BYTES = 200
CONTENT = "mixed"
KINDS = ("official", "ours")

T = TypeVar("T")


def run(bench: Bench, sizes: Sequence[int], steps: int, reads: int, turns: int) -> dict[str, Any]:
    """Every case once, the savers' order rotating from one list length to the next, and
    LangGraph's own time per append at each length (`alone`: a saver that keeps nothing)."""
    out: dict[str, Any] = {"sizes": list(sizes), "steps": steps, "turns": turns, **{kind: [] for kind in KINDS}, "alone": []}
    for i, items in enumerate(sizes):
        for kind in rotation(KINDS, i):
            # Every saver's tables, not only this one's: the official saver's case at 100,000
            # items leaves ~2.4 GB behind, which autovacuum may take up during the next case.
            for emptied in KINDS:
                bench.truncate(emptied)
            bench.checkpoint()
            out[kind].append(_in_own_process(case, bench.spec(kind), items, steps, reads, turns))
        bench.checkpoint()  # LangGraph alone uses no server, but shares its two cores
        out["alone"].append(_in_own_process(langgraph_alone, items, steps))
    return out


class KeepsNothing(BaseCheckpointSaver):
    """A checkpointer that stores nothing and finds nothing: what is left of a super-step's
    time is LangGraph's own work (its reducer copies the list, twice, at every step)."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return None

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return iter(())

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        return None


def langgraph_alone(items: int, steps: int) -> dict[str, Any]:
    """Time per append of the same graph on `KeepsNothing`: the input and its appends in
    one run, as nothing it stored could be resumed."""
    app = graphs.growing(KeepsNothing(), steps, ITEM_BYTES, content=CONTENT)
    seed = {"items": [graphs.item(CONTENT, i, ITEM_BYTES) for i in range(items)], "step": 0}
    config = {"configurable": {"thread_id": f"scale-alone-{items}"}, "recursion_limit": steps + 10}
    seconds, _ = graphs.stream_step_times(app, seed, config)
    return {"items": items, "append_ms": summary(seconds[-steps:], 1e3)}


def _in_own_process(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a new spawned process: what it measures of its process is its own."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def case(spec: SaverSpec, items: int, steps: int, reads: int, turns: int) -> dict[str, Any]:
    """One saver at one list length: the seeding put, `steps` appends, `turns` appends by an
    invoke each, `reads` cold get_tuples."""
    began = time.perf_counter()
    imported = _peak_rss_bytes()
    config = {"configurable": {"thread_id": f"scale-{spec.kind}-{items}"}, "recursion_limit": steps + 10}
    with spec.open() as make:
        app = graphs.growing(make(), steps, ITEM_BYTES, content=CONTENT)
        seed = {"items": [graphs.item(CONTENT, i, ITEM_BYTES) for i in range(items)], "step": 0}
        start = time.perf_counter()
        # Stopping before the first pass leaves the input's checkpoints alone in the timing.
        app.invoke(seed, config, interrupt_before=["step"], durability="sync")
        first_put = time.perf_counter() - start
        append_seconds, _ = graphs.stream_step_times(app, None, config)
        turn = graphs.turn(make())
        turn_seconds = []
        for n in range(turns):
            start = time.perf_counter()
            turn.invoke({"items": [graphs.item(CONTENT, items + steps + n, ITEM_BYTES)]}, config, durability="sync")
            turn_seconds.append(time.perf_counter() - start)
    if len(append_seconds) != steps:
        raise AssertionError(f"scale on {spec.kind}, {items} items: {len(append_seconds)} appends, want {steps}")
    cold = [_cold_get_tuple(spec, config, items + steps + turns) for _ in range(reads)]
    return {
        "items": items,
        "append_ms": summary(append_seconds, 1e3),
        "append_seconds": append_seconds,
        "turn_ms": summary(turn_seconds, 1e3),
        "turn_seconds": turn_seconds,
        "first_put_seconds": first_put,
        "cold_get_tuple_ms": summary(cold, 1e3),
        "cold_get_tuple_seconds": cold,
        "peak_rss_bytes": _peak_rss_bytes(),
        "imported_rss_bytes": imported,
        "case_seconds": time.perf_counter() - began,
    }


def _cold_get_tuple(spec: SaverSpec, config: dict, want: int) -> float:
    """Seconds of one get_tuple on a new saver instance (its construction untimed)."""
    with spec.fresh() as saver:
        start = time.perf_counter()
        got = saver.get_tuple(config)
        seconds = time.perf_counter() - start
    held = len(got.checkpoint["channel_values"]["items"]) if got else 0
    if held != want:
        raise AssertionError(f"scale on {spec.kind}: get_tuple holds {held} items, want {want}")
    return seconds


def _peak_rss_bytes() -> int:
    """This process's peak resident set so far.

    Linux's VmHWM, not ru_maxrss: a spawned process's ru_maxrss starts at its parent's,
    which the fork and exec carry over. Elsewhere ru_maxrss (KiB, bytes on macOS).
    """
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
