"""Repeated failover trials, ours beside the official saver: what a caller sees when the
primary is lost mid-run and its standby promoted.

    python tools/failover_trials.py --trials 5 --steps 300 --kill-at 100

Each trial starts a primary and a streaming standby (tests/support/replication.py), runs
a counter graph of `--steps` super-steps through a two-host connection string
(`target_session_attrs=read-write`), SIGKILLs the primary's postmaster from inside the node
at `--kill-at`, and promotes the standby once it has seen the primary go. With
`--replication async`, the standby is cut off `--lost` steps before the kill, so that the
failover loses what the primary acknowledged since (a rewound history). Per trial it
prints: the error that reached the caller (if any), the acknowledged steps lost, the
steps run twice (after resuming the thread with input None, as HistoryRewoundError
advises), whether the final state is exact, and the seconds from the kill to the first
step run on the new primary (and from the promotion, which the harness only starts once
the standby has seen its primary go).
"""

from __future__ import annotations

import argparse
import logging
import operator
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import psycopg
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "tests" / "support")):
    if path not in sys.path:
        sys.path.insert(0, path)

from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402

from langgraph_pg_durable import DurablePostgresSaver  # noqa: E402
from replication import ReplicaPair, start_replica_pair  # noqa: E402

DB = "app"
SCHEMA = "lgpd_trials"


class Counter(TypedDict):
    count: int
    log: Annotated[list[int], operator.add]


def trial(saver_kind: str, replication: str, steps: int, kill_at: int, lost: int) -> dict[str, Any]:
    pair = start_replica_pair(synchronous=replication == "sync")
    try:
        pair.create_database(DB)
        return _run(pair, saver_kind, replication, steps, kill_at, lost)
    finally:
        pair.stop()


def _run(pair: ReplicaPair, saver_kind: str, replication: str, steps: int, kill_at: int, lost: int) -> dict[str, Any]:
    runs: list[int] = []  # the counts the node ran with, in order (a count twice: run twice)
    timing: dict[str, float] = {}
    done: set[str] = set()
    before: set[int] = set()  # the steps whose checkpoints the old primary had acknowledged at the kill
    promoted = threading.Event()

    def promote() -> None:
        try:
            if replication == "sync":
                pair._until(pair.standby_dsn, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)", (), "standby kept its primary")
            pair.promote()
            timing["promoted"] = time.monotonic()
        finally:
            promoted.set()

    def work(state: Counter) -> dict[str, Any]:
        count = state["count"]
        if "kill" in done and "first_after" not in timing:
            timing["first_after"] = time.monotonic()
        runs.append(count)
        if replication == "async" and count == kill_at - lost and "cut" not in done:
            done.add("cut")
            pair.wait_caught_up()
            pair.cut_standby_off()
        if count == kill_at and "kill" not in done:
            done.add("kill")
            before.update(_steps_on(pair.primary_port, pair, saver_kind))
            pair.kill_primary()
            timing["kill"] = time.monotonic()
            threading.Thread(target=promote, daemon=True).start()
        return {"count": count + 1, "log": [count]}

    builder = StateGraph(Counter)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", lambda s: "work" if s["count"] < steps else END, ["work", END])
    config = {"configurable": {"thread_id": "trial"}, "recursion_limit": steps + 10}
    dsn = pair.dsn(DB)
    error = None
    result = None
    with _saver(saver_kind, dsn) as saver:
        graph = builder.compile(checkpointer=saver)
        try:
            result = graph.invoke({"count": 0, "log": []}, config, durability="sync")
        except Exception as exc:  # noqa: BLE001 - what reached the caller is the finding
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:90]}"
    promoted.wait(120)
    lost = len(before - _steps_on(pair.standby_port, pair, saver_kind))
    if error is not None:  # resume from what the server holds, as a caller would
        with _saver(saver_kind, dsn) as saver:
            try:
                result = builder.compile(checkpointer=saver).invoke(None, config, durability="sync")
            except Exception as exc:  # noqa: BLE001
                error += f"; resume: {type(exc).__name__}"
    run_twice = len(runs) - len(set(runs))
    exact = result == {"count": steps, "log": list(range(steps))}
    return {
        "error": error,
        "lost": lost,
        "run_twice": run_twice,
        "exact": exact,
        "kill_to_first_step_s": round(timing["first_after"] - timing["kill"], 2) if "first_after" in timing else None,
        "promotion_to_first_step_s": round(timing["first_after"] - timing["promoted"], 2) if "promoted" in timing else None,
    }


def _steps_on(port: int, pair: ReplicaPair, saver_kind: str) -> set[int]:
    """The steps of the trial thread's checkpoints on one server."""
    table = f"{SCHEMA}.checkpoints" if saver_kind == "ours" else "checkpoints"
    with psycopg.connect(pair.node_dsn(port, DB), autocommit=True) as conn:
        rows = conn.execute(f"SELECT (metadata->>'step')::int FROM {table} WHERE thread_id = 'trial'").fetchall()
    return {r[0] for r in rows if r[0] is not None}


class _saver:
    def __init__(self, kind: str, dsn: str) -> None:
        self.kind, self.dsn = kind, dsn

    def __enter__(self) -> Any:
        self._cm = (
            DurablePostgresSaver.from_conn_string(self.dsn, schema=SCHEMA)
            if self.kind == "ours"
            else PostgresSaver.from_conn_string(self.dsn)
        )
        saver = self._cm.__enter__()
        saver.setup()
        return saver

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--kill-at", type=int, default=100)
    parser.add_argument("--lost", type=int, default=25, help="async: steps the standby misses before the kill")
    parser.add_argument("--replication", choices=["sync", "async", "both"], default="both")
    parser.add_argument("--savers", default="ours,official")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    modes = ["sync", "async"] if args.replication == "both" else [args.replication]
    for replication in modes:
        for kind in args.savers.split(","):
            results = [trial(kind, replication, args.steps, args.kill_at, args.lost) for _ in range(args.trials)]
            for r in results:
                print(f"{replication:5} {kind:8} {r}", flush=True)
            times = [r["kill_to_first_step_s"] for r in results if r["kill_to_first_step_s"] is not None]
            after = [r["promotion_to_first_step_s"] for r in results if r["promotion_to_first_step_s"] is not None]
            errors = sum(r["error"] is not None for r in results)
            print(
                f"== {replication} replication, {kind}: {args.trials} trials, errors to the caller {errors}, "
                f"acknowledged steps lost {[r['lost'] for r in results]}, run twice {[r['run_twice'] for r in results]}, "
                f"exact {sum(r['exact'] for r in results)}/{args.trials}, kill to first step on the new primary "
                f"{(min(times), statistics.median(times), max(times)) if times else '-'} s "
                f"(from the promotion: {(min(after), statistics.median(after), max(after)) if after else '-'} s; min, median, max)",
                flush=True,
            )


if __name__ == "__main__":
    main()
