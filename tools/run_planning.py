"""What the server spends planning a run's statements, beside running them, on both savers.

    .venv/bin/python tools/run_planning.py [--workload chat] [--style delta] [--rounds 3] [--steps 200] [--unprepared]

Runs a workload of the benchmark's decomposition (benchmarks/decomposition.py) as the
benchmark does: each run on a thread of its own, after the saver's tables were emptied by
TRUNCATE (which the benchmark does so that a run's bytes stand alone, and which leaves
every plan the server cached of a statement on those tables to be made again), on a saver
that has run the workload before. The official saver's graph keeps its list in a
`DeltaChannel`; ours in the `--style` given. Per run it prints, from `pg_stat_statements`:
how many plans the server made, their time and the execution time, a step; and for the
last run of each saver, each statement that was planned, with its plans, their time and
its calls. A statement's plan is made once per server session and then kept until
something invalidates it (a TRUNCATE, an ANALYZE, a schema change): the benchmark's runs
pay it every 200 steps, a saver serving steady traffic far more rarely, and one behind
PgBouncer in transaction mode (`prepare_threshold=None`, no prepared statements) at every
statement. `--unprepared` opens both savers that way (ours by `from_conn_string(...,
prepare_threshold=None)`, the official saver on a connection with `prepare_threshold=None`)
to show what that costs.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import decomposition  # noqa: E402
from benchmarks.env import OURS_SCHEMA, Bench, bench_env  # noqa: E402
from langgraph_pg_durable import DurablePostgresSaver  # noqa: E402

TOTALS = "SELECT sum(plans), sum(total_plan_time), sum(total_exec_time) FROM pg_stat_statements WHERE dbid = %s"
PLANNED = """
SELECT plans, total_plan_time, calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
FROM pg_stat_statements WHERE dbid = %s AND plans > 0 ORDER BY total_plan_time DESC"""


@contextmanager
def _saver(bench: Bench, kind: str, unprepared: bool) -> Iterator[BaseCheckpointSaver]:
    """`kind`'s saver as the benchmark opens it, or without server-side prepared statements."""
    if not unprepared:
        with bench.saver(kind) as make:
            yield make()
    elif kind == "ours":
        with DurablePostgresSaver.from_conn_string(bench.dsn[kind], schema=OURS_SCHEMA, prepare_threshold=None) as saver:
            yield saver
    else:
        with psycopg.connect(bench.dsn[kind], autocommit=True, prepare_threshold=None, row_factory=dict_row) as conn:
            yield PostgresSaver(conn)


def runs(bench: Bench, meter: decomposition.ServerMeter, kind: str, delta: bool, args: argparse.Namespace) -> list[str]:
    """`args.rounds` runs of the workload on `kind`'s saver, each after a TRUNCATE."""
    workload = decomposition.WORKLOADS[args.workload]
    prepared = ", no prepared statements" if args.unprepared else ""
    lines = [f"{kind}, {'DeltaChannel' if delta else 'plain list'}{prepared}, {workload.title}:"]
    with _saver(bench, kind, args.unprepared) as saver:
        # A run before the measured ones: the saver's pool and statements exist already.
        decomposition.run_once(bench, meter, saver, kind, workload, delta, decomposition.WARMUP_STEPS)
        planned: list[Any] = []
        for _ in range(args.rounds):
            bench.truncate(kind)
            app = workload.build(saver, args.steps, delta)
            config = {"configurable": {"thread_id": f"planning-{uuid.uuid4().hex[:8]}"}, "recursion_limit": args.steps + 10}
            started = meter.start(bench.dsn[kind])
            app.invoke(workload.inputs, config, durability="sync")
            plans, plan_ms, exec_ms = meter.conn.execute(TOTALS, (started.dbid,)).fetchone() or (0, 0.0, 0.0)
            planned = meter.conn.execute(PLANNED, (started.dbid,)).fetchall()
            lines.append(
                f"    {int(plans or 0)} plans, planning {(plan_ms or 0.0) / args.steps * 1e3:5.1f} us a step, "
                f"execution {(exec_ms or 0.0) / args.steps * 1e3:6.1f} us a step"
            )
    lines.append("    planned in the last run:")
    for plans, plan_ms, calls, text in planned:
        lines.append(f"      {plans} plan(s) {plan_ms:6.3f} ms, {calls:4d} calls  {text}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=sorted(decomposition.WORKLOADS), default="chat")
    parser.add_argument("--style", choices=("plain", "delta"), default="delta")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--unprepared", action="store_true", help="both savers without server-side prepared statements")
    args = parser.parse_args()
    with bench_env() as bench:
        with decomposition.ServerMeter(bench.server.dsn) as meter:
            if not meter.statements:
                raise SystemExit("the server has no pg_stat_statements: no planning time to show")
            print("\n".join(runs(bench, meter, "official", True, args)))
            print("\n".join(runs(bench, meter, "ours", args.style == "delta", args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
