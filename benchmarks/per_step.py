"""Workloads 1 and 2: one thread of many super-steps, timed step by step, then its bytes.

W1 grows a list channel by ~1 KB a step; W2 replaces a 2 MB value every step.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from . import graphs
from .env import KINDS, Bench
from .stats import alternate, summary

WARMUP_STEPS = 8  # past psycopg's prepare threshold (5), so runs time prepared statements


def growing_state(bench: Bench, steps: int, reps: int) -> dict[str, Any]:
    return _run(bench, "w1", graphs.growing, {"items": [], "step": 0}, steps, reps)


def large_value(bench: Bench, steps: int, reps: int) -> dict[str, Any]:
    result = _run(bench, "w2", graphs.large_value, {"blob": b"", "step": 0}, steps, reps)
    for figures in result.values():
        figures["object_store_bytes"] = None  # no object store yet: every value is inline
    return result


def _run(bench: Bench, name: str, make_graph: Callable[..., Any], inputs: dict, steps: int, reps: int
         ) -> dict[str, Any]:
    with ExitStack() as stack:
        savers = {kind: stack.enter_context(bench.saver(kind)) for kind in KINDS}

        def one(kind: str, rep: int, steps: int = steps) -> dict[str, Any]:
            bench.truncate(kind)
            app = make_graph(savers[kind](), steps)
            config = {"configurable": {"thread_id": f"{name}-{kind}-{rep}-{uuid.uuid4().hex[:8]}"},
                      "recursion_limit": steps + 10}
            step_seconds, total = graphs.stream_step_times(app, inputs, config)
            final = app.get_state(config).values["step"]
            if final != steps or len(step_seconds) != steps:
                raise AssertionError(f"{name} on {kind}: {final} steps, {len(step_seconds)} updates; want {steps}")
            return {"step_seconds": step_seconds, "total_seconds": total, "db_bytes": bench.db_bytes(kind)}

        for kind in KINDS:
            one(kind, -1, steps=WARMUP_STEPS)
        runs = alternate(KINDS, reps, one)

    out = {}
    for kind, kind_runs in runs.items():
        pooled = [t for run in kind_runs for t in run["step_seconds"]]
        sizes = sorted(run["db_bytes"] for run in kind_runs if run["db_bytes"] is not None)
        out[kind] = {
            "per_step_ms": summary(pooled, 1e3),
            "db_bytes": sizes[len(sizes) // 2] if sizes else None,
            "runs": kind_runs,
        }
    return out
