"""Workload 3: reading one long thread (1,000 checkpoints, 100 chat-like turns).

One turn in a hundred carries `config["metadata"]` (a user escalation), so its ten
checkpoints, 1 % of the thread, match the metadata filter.
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
        ops: dict[str, Callable[[str], Any]] = {
            "get_state": lambda k: apps[k].get_state(configs[k]),
            "full_history": lambda k: sum(1 for _ in apps[k].get_state_history(configs[k])),
            "first_10_limit": lambda k: len(list(apps[k].get_state_history(configs[k], limit=10))),
            "first_10_break": lambda k: _first_10_by_break(apps[k].get_state_history(configs[k])),
            "filter_1pct": lambda k: len(list(apps[k].get_state_history(configs[k], filter=FLAG))),
            # The checkpointer alone, without LangGraph building a StateSnapshot per item:
            "list_full": lambda k: sum(1 for _ in apps[k].checkpointer.list(configs[k])),
            "list_first_10_break": lambda k: _first_10_by_break(apps[k].checkpointer.list(configs[k])),
        }

        def timed(op: str) -> Callable[[str, int], float]:
            def one(kind: str, rep: int) -> float:
                start = time.perf_counter()
                got = ops[op](kind)
                seconds = time.perf_counter() - start
                if op in want and got != want[op]:
                    raise AssertionError(f"{op} on {kind}: {got} items, want {want[op]}")
                return seconds

            return one

        out: dict[str, Any] = {k: {"build_seconds": build_seconds[k], "checkpoints": total} for k in KINDS}
        for op, op_reps in reps.items():
            for kind, samples in alternate(KINDS, op_reps, timed(op)).items():
                out[kind][op] = {"ms": summary(samples, 1e3), "seconds": samples}
    return out
