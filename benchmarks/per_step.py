"""Workloads 1 and 2: one thread of many super-steps, timed step by step, then its bytes.

W1 grows a list channel by ~1 KB a step, of words or of incompressible text; W2 replaces
a 2 MB value every step.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import obstore

from . import graphs
from .env import KINDS, OFFICIAL_DELTA, OURS_NO_LOG, OURS_ON_DIR, Bench
from .stats import alternate, summary

WARMUP_STEPS = 8  # past psycopg's prepare threshold (5), so runs time prepared statements


def growing_state(bench: Bench, steps: int, reps: int, content: str = "words") -> dict[str, Any]:
    """W1; `content` is the items' (see graphs.item): "words" compress, "random" do not."""

    def make_graph(kind: str, checkpointer: Any, steps: int) -> Any:
        return (graphs.growing_delta if kind == OFFICIAL_DELTA else graphs.growing)(checkpointer, steps, content=content)

    name = "w1" if content == "words" else f"w1_{content}"
    return _run(bench, name, make_graph, {"items": [], "step": 0}, steps, reps, (*KINDS, OFFICIAL_DELTA, OURS_NO_LOG))


def large_value(bench: Bench, steps: int, reps: int) -> dict[str, Any]:
    """W2, and what one PUT of such a value to our saver's object store takes (`store_put_ms`):
    with InMemorySaver's step, the least a step costs a saver that keeps the value in that
    store, whatever it does besides."""
    out = _run(
        bench,
        "w2",
        lambda kind, checkpointer, steps: graphs.large_value(checkpointer, steps),
        {"blob": b"", "step": 0},
        steps,
        reps,
        (*KINDS, OURS_ON_DIR),
    )
    out["store_put_ms"] = summary(_store_puts(bench, steps), 1e3)
    return out


def _store_puts(bench: Bench, count: int) -> list[float]:
    """Seconds of each of `count` PUTs of a new 2 MB random value (as W2's graph makes them)
    to our saver's object store, the objects deleted after."""
    store = bench.object_store("ours")
    keys = [f"w2-put-floor/{uuid.uuid4().hex}" for _ in range(count)]
    seconds = []
    try:
        for n, key in enumerate(keys):
            value = random.Random(f"w2-put-floor/{n}").randbytes(graphs.LARGE_VALUE_BYTES)
            start = time.perf_counter()
            obstore.put(store, key, value)
            seconds.append(time.perf_counter() - start)
    finally:
        obstore.delete(store, keys)
    return seconds


def _run(
    bench: Bench, name: str, make_graph: Callable[..., Any], inputs: dict, steps: int, reps: int, kinds: tuple[str, ...] = KINDS
) -> dict[str, Any]:
    with ExitStack() as stack:
        savers = {kind: stack.enter_context(bench.saver(kind)) for kind in kinds}

        def one(kind: str, rep: int, steps: int = steps) -> dict[str, Any]:
            bench.truncate(kind)
            app = make_graph(kind, savers[kind](), steps)
            config = {"configurable": {"thread_id": f"{name}-{kind}-{rep}-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
            step_seconds, total = graphs.stream_step_times(app, inputs, config)
            final = app.get_state(config).values["step"]
            if final != steps or len(step_seconds) != steps:
                raise AssertionError(f"{name} on {kind}: {final} steps, {len(step_seconds)} updates; want {steps}")
            return {
                "step_seconds": step_seconds,
                "total_seconds": total,
                "db_bytes": bench.db_bytes(kind),
                "object_store_bytes": bench.object_bytes(kind),
            }

        for kind in kinds:
            one(kind, -1, steps=WARMUP_STEPS)
        runs = alternate(kinds, reps, one)

    out = {}
    for kind, kind_runs in runs.items():
        pooled = [t for run in kind_runs for t in run["step_seconds"]]
        out[kind] = {
            "per_step_ms": summary(pooled, 1e3),
            "db_bytes": _median_of(kind_runs, "db_bytes"),
            "object_store_bytes": _median_of(kind_runs, "object_store_bytes"),
            "runs": kind_runs,
        }
    return out


def _median_of(runs: list[dict[str, Any]], key: str) -> int | None:
    sizes = sorted(run[key] for run in runs if run[key] is not None)
    return sizes[len(sizes) // 2] if sizes else None
