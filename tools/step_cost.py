"""Where one durable step's cost goes, for one workload of the benchmark's decomposition.

    .venv/bin/python tools/step_cost.py --saver ours --style plain --workload words [--steps 200]

Runs the workload (benchmarks/decomposition.py) as the benchmark does, on a server started
like the benchmark's: once on emptied tables, then again at once on the plans that run
made. Prints, per step:
- the thread CPU spent inside the saver's put and put_writes (steadier than the process CPU
  the decomposition reports, which varies by a third from run to run on a small VM) and
  the server time of each statement (`pg_stat_statements`, execution and planning), in
  the second run;
- the WAL of each relation (`pg_walinspect` over the first run's LSN range);
- the bytes of each relation of the saver's database (TOAST included) after the first run,
  beside what each held emptied (a table's first pages and an index's metapage are paid
  once per database, not per step), and for ours what its action log adds to the rows.
The figures to compare a change by; `--saver official --style delta` gives the bar.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import decomposition  # noqa: E402
from benchmarks.env import OURS_NO_LOG, OURS_SCHEMA, Bench, bench_env  # noqa: E402

STATEMENTS = """
SELECT calls, total_exec_time + total_plan_time, total_plan_time, wal_bytes, left(regexp_replace(query, '\\s+', ' ', 'g'), %s)
FROM pg_stat_statements WHERE dbid = %s ORDER BY 2 DESC LIMIT 12"""
WAL = """
SELECT split_part(split_part(block_ref, 'rel ', 2), ' ', 1) AS relation, resource_manager, sum(record_length), count(*)
FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20"""
SIZES = """
SELECT coalesce(o.relname || ' (TOAST' || CASE WHEN c.relkind = 'i' THEN ' index)' ELSE ')' END, c.relname),
       pg_relation_size(c.oid) + pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index x ON x.indexrelid = c.oid
LEFT JOIN pg_class o ON o.reltoastrelid IN (c.oid, x.indrelid) AND n.nspname = 'pg_toast'
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND c.relkind IN ('r', 'i', 't')
  AND (n.nspname <> 'pg_toast' OR o.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace))"""
# What the action log adds to a packed writes row (its payload and its four columns) and
# the rows of its own table (actions no packed row holds).
LOG_BYTES = """
SELECT coalesce(sum(pg_column_size(payload)), 0),
       coalesce(sum(pg_column_size(run_id) + pg_column_size(step) + pg_column_size(agent) + pg_column_size(action_type)), 0),
       (SELECT coalesce(sum(pg_column_size(a.*)), 0) FROM {schema}.action_log a)
FROM {schema}.checkpoint_writes"""


def timed_calls(saver: Any, spent: Counter[str]) -> None:
    """Add the thread CPU of each put and put_writes to `spent`, by call."""
    for name in ("put", "put_writes"):
        call = getattr(saver, name)

        # (wraps: LangGraph passes put_writes a task_path only if its signature names one.)
        @functools.wraps(call)
        def run(*args: Any, _call: Any = call, _name: str = name, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return _call(*args, **kwargs)
            finally:
                spent[_name] += time.thread_time() - start

        setattr(saver, name, run)


def report(bench: Bench, saver_kind: str, style: str, workload: str, steps: int) -> None:
    with decomposition.ServerMeter(bench.server.dsn) as meter:
        meter.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        with bench.saver(saver_kind) as make:
            saver = make()
            build = decomposition.WORKLOADS[workload]
            decomposition.run_once(bench, meter, saver, saver_kind, build, style == "delta", decomposition.WARMUP_STEPS)
            bench.truncate(saver_kind)
            app = build.build(saver, steps, style == "delta")
            dsn = bench.dsn[saver_kind]
            with psycopg.connect(dsn, autocommit=True) as conn:
                empty = dict(conn.execute(SIZES).fetchall())
            # The first run, on emptied tables: its WAL and bytes stand alone.
            started = meter.start(dsn)
            app.invoke(build.inputs, decomposition.run_config(saver_kind, steps), durability="sync")
            end_lsn = meter.conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            first_server, wal = meter.stop(started)
            assert end_lsn is not None
            with psycopg.connect(dsn, autocommit=True) as conn:
                sizes = conn.execute(SIZES + " ORDER BY 2 DESC, 1").fetchall()
                log = conn.execute(LOG_BYTES.format(schema=OURS_SCHEMA)).fetchone() if saver_kind != "official" else None
            # The second, at once: time and statements on the plans the first made.
            spent: Counter[str] = Counter()
            timed_calls(saver, spent)
            second = meter.start(dsn)
            app.invoke(build.inputs, decomposition.run_config(saver_kind, steps), durability="sync")
            server, _ = meter.stop(second)
        print(f"{saver_kind}, {style}, {build.title}: {steps} steps")
        print(f"  thread CPU in the saver's calls: {sum(spent.values()) / steps * 1e3:.3f} ms/step", end="")
        print(" (" + ", ".join(f"{k} {v / steps * 1e3:.3f}" for k, v in spent.items()) + ")")
        print(f"  server {_ms(server, steps)} ms/step (on emptied tables, every plan made again: {_ms(first_server, steps)})")
        print(f"  WAL {wal / steps:,.0f} B/step (on emptied tables)")
        print("  statements (us/step, plan us/step, WAL B/step, calls):")
        for calls, total, plan, wal_bytes, text in meter.conn.execute(STATEMENTS, (120, started.dbid)).fetchall():
            print(f"    {total / steps * 1e3:7.1f} {plan / steps * 1e3:6.1f} {float(wal_bytes) / steps:7.0f} {calls:5d}  {text}")
        with psycopg.connect(dsn, autocommit=True) as conn:
            names = dict(conn.execute("SELECT pg_relation_filenode(oid)::text, relname FROM pg_class WHERE relfilenode <> 0").fetchall())
        print("  WAL by relation, first run (B/step, records/step):")
        for relation, manager, length, count in meter.conn.execute(WAL, (started.lsn, end_lsn[0])).fetchall():
            name = names.get(relation.rsplit("/", 1)[-1], relation) if relation else "(none)"
            print(f"    {length / steps:7.0f} {count / steps:5.2f}  {name} ({manager})")
        print("  bytes by relation after the first run, and of them the emptied relation's (paid once per database):")
        for name, size in sizes:
            if size:
                print(f"    {size:>10,} {empty.get(name, 0):>8,}  {name}")
        total, before = sum(size for _, size in sizes), sum(empty.values())
        print(f"    {total:>10,} {before:>8,}  all {len(sizes)} relations ({(total - before) / steps:,.0f} B/step added)")
        if log is not None:
            payload, columns, own_table = log
            print(
                f"  the action log: payload {payload / steps:,.0f} B/step, its columns {columns / steps:,.0f} B/step, "
                f"action_log rows {own_table / steps:,.0f} B/step"
            )


def _ms(seconds: float | None, steps: int) -> str:
    return f"{seconds / steps * 1e3:.3f}" if seconds is not None else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saver", choices=("ours", OURS_NO_LOG, "official"), default="ours")
    parser.add_argument("--style", choices=decomposition.STYLES, default="plain")
    parser.add_argument("--workload", choices=sorted(decomposition.WORKLOADS), default="words")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    with bench_env() as bench:
        report(bench, args.saver, args.style, args.workload, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
