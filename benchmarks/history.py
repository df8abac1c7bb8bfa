"""Workload 3: reading one long thread (1,000 checkpoints, 100 chat-like turns).

One turn in a hundred carries `config["metadata"]` (a user escalation), so its ten
checkpoints, 1 % of the thread, match the metadata filter. Reads run warm (the saver that
built the thread), interleaved (get_state between history pages, as a UI paging the timeline
does) and cold (a new saver instance each repetition, so nothing is in the saver's memory).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from . import graphs
from .env import KINDS, Bench
from .stats import alternate, summary

CHECKPOINTS_PER_TURN = graphs.TURN_HOPS + 2  # the input checkpoint, the first step, TURN_HOPS passes
FLAG = {"escalation": "billing"}
INTERLEAVED = "get_state_interleaved"  # get_state, each call after an untimed page of history
COLD = "cold_"  # an operation's prefix: on a new saver instance each repetition
COLD_KINDS = ("official", "ours")  # InMemorySaver's memory is where its data is


# Each operation on (compiled graph, thread config); their results are counted against `want`.
OPS: dict[str, Callable[[Any, dict], Any]] = {
    "get_state": lambda app, config: app.get_state(config),
    "full_history": lambda app, config: sum(1 for _ in app.get_state_history(config)),
    "first_10_limit": lambda app, config: len(list(app.get_state_history(config, limit=10))),
    "first_10_break": lambda app, config: _first_10_by_break(app.get_state_history(config)),
    "filter_1pct": lambda app, config: len(list(app.get_state_history(config, filter=FLAG))),
    # The checkpointer alone, without LangGraph building a StateSnapshot per item:
    "list_full": lambda app, config: sum(1 for _ in app.checkpointer.list(config)),
    "list_first_10_break": lambda app, config: _first_10_by_break(app.checkpointer.list(config)),
}


def _first_10_by_break(history: Any) -> int:
    taken = 0
    for _ in history:
        taken += 1
        if taken == 10:
            break
    return taken


def run(bench: Bench, turns: int, reps: dict[str, int]) -> dict[str, Any]:
    """`reps` gives each operation's repetitions; an operation's samples are seconds per call."""
    total = turns * CHECKPOINTS_PER_TURN
    flagged = max(1, total // 100 // CHECKPOINTS_PER_TURN)  # turns that carry the flag
    with ExitStack() as stack:
        apps, configs, build_seconds = {}, {}, {}
        for kind in KINDS:
            saver = stack.enter_context(bench.saver(kind))()
            apps[kind] = app = graphs.conversation(saver)
            configs[kind] = config = {"configurable": {"thread_id": f"w3-{kind}-{uuid.uuid4().hex[:8]}"}}
            start = time.perf_counter()
            for turn in range(turns):
                meta = {"metadata": FLAG} if turn % (turns // flagged) == turns // flagged // 2 else {}
                app.invoke({"messages": [f"user turn {turn}"], "hops": 0}, {**config, **meta}, durability="sync")
            build_seconds[kind] = time.perf_counter() - start
            # Plans then no longer depend on whether autovacuum happened to run during the build.
            bench.analyze(kind)

        want = {
            "full_history": total,
            "first_10_limit": 10,
            "first_10_break": 10,
            "filter_1pct": flagged * CHECKPOINTS_PER_TURN,
            "list_full": total,
            "list_first_10_break": 10,
        }

        def prepare(op: str, kind: str, rep_stack: ExitStack) -> tuple[Any, str]:
            """The untimed part of a repetition: the app to read through, and the operation to time."""
            if op.startswith(COLD):
                return graphs.conversation(rep_stack.enter_context(bench.spec(kind).fresh())), op.removeprefix(COLD)
            if op == INTERLEAVED:
                list(apps[kind].checkpointer.list(configs[kind], limit=10))
                return apps[kind], "get_state"
            return apps[kind], op

        def timed(op: str) -> Callable[[str, int], float]:
            def one(kind: str, rep: int) -> float:
                with ExitStack() as rep_stack:
                    app, base = prepare(op, kind, rep_stack)
                    start = time.perf_counter()
                    got = OPS[base](app, configs[kind])
                    seconds = time.perf_counter() - start
                if base in want and got != want[base]:
                    raise AssertionError(f"{op} on {kind}: {got} items, want {want[base]}")
                return seconds

            return one

        out: dict[str, Any] = {k: {"build_seconds": build_seconds[k], "checkpoints": total} for k in KINDS}
        for op, op_reps in reps.items():
            for kind, samples in alternate(COLD_KINDS if op.startswith(COLD) else KINDS, op_reps, timed(op)).items():
                out[kind][op] = {"ms": summary(samples, 1e3), "seconds": samples}
    return out
