"""`lgpd` on a database of many threads: `threads`, `history` and `show` timed side by side
with what a user of the official saver does for the same answer (its API is the only way
in: `list()` every checkpoint to find the threads, `list()` a thread, `get_tuple`), and
`export` of every run. Commands run in the benchmark's process; what a new process adds
(imports) is measured apart.

    python -m benchmarks.cli [--threads 10000] [--reps 5]

Each thread is one run of 21 checkpoints (a question, nine tool calls, an answer), made
once by a real graph on each saver and copied: by `copy_thread` into ours, by SQL into the
official saver's tables.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage
from langgraph.checkpoint.postgres import PostgresSaver

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import main as cli_main

from .env import OURS_SCHEMA, bench_env

_TESTS = str(Path(__file__).resolve().parent.parent / "tests" / "support")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
import agents  # noqa: E402

TOOL_CALLS = 9


def replies() -> list[AIMessage]:
    calls = [AIMessage("", id=f"ai-{i}", tool_calls=[agents.call("add", f"call-{i}", a=i, b=1)]) for i in range(TOOL_CALLS)]
    return [*calls, AIMessage("The sums are done.", id="ai-end")]


def build(bench: Any, threads: int, log: Callable[[str], None]) -> None:
    question = {"messages": [("user", "add one to each of 0..8")]}
    with DurablePostgresSaver.from_conn_string(bench.dsn["ours"], schema=OURS_SCHEMA) as saver:
        agents.tool_agent(saver, replies()).invoke(question, {"configurable": {"thread_id": "t-00000"}}, durability="sync")
        start = time.perf_counter()
        for i in range(1, threads):
            saver.copy_thread("t-00000", f"t-{i:05d}")
        log(f"ours: {threads} threads copied in {time.perf_counter() - start:.1f} s")
    with PostgresSaver.from_conn_string(bench.dsn["official"]) as official:
        agents.tool_agent(official, replies()).invoke(question, {"configurable": {"thread_id": "t-00000"}}, durability="sync")
    with psycopg.connect(bench.dsn["official"], autocommit=True) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position", [table]
                )
            ]
            rest = ", ".join(c for c in columns if c != "thread_id")
            conn.execute(
                f"INSERT INTO {table} (thread_id, {rest}) SELECT 't-' || lpad(g::text, 5, '0'), {rest} "
                f"FROM {table}, generate_series(1, %s) AS g WHERE thread_id = 't-00000'",
                [threads - 1],
            )
    bench.analyze("ours")
    bench.analyze("official")


def lgpd(bench: Any, *args: str) -> float:
    """One lgpd command run in this process (its output discarded); the seconds it took."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        start = time.perf_counter()
        status = cli_main(["--dsn", bench.dsn["ours"], "--schema", OURS_SCHEMA, *args])
        elapsed = time.perf_counter() - start
    if status not in (0, 1):
        raise RuntimeError(f"lgpd {' '.join(args)} exited {status}")
    return elapsed


def process_start() -> float:
    """What starting a `lgpd` process costs before any command runs (`lgpd version`)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "langgraph_pg_durable", "version"], check=True, capture_output=True)
    return time.perf_counter() - start


def timed(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    begun = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - begun:6.1f} s] {message}", file=sys.stderr, flush=True)

    rows = []
    with bench_env() as bench:
        build(bench, args.threads, log)
        middle = f"t-{args.threads // 2:05d}"
        startup = timed(process_start, args.reps)
        with PostgresSaver.from_conn_string(bench.dsn["official"]) as official:

            def official_threads() -> int:
                return len({t.config["configurable"]["thread_id"] for t in official.list(None)})

            log("threads")
            rows.append(
                (
                    "threads (every thread, JSON Lines)",
                    timed(lambda: lgpd(bench, "threads", "-f", "jsonl"), args.reps),
                    timed(official_threads, max(1, args.reps // 2)),
                )
            )
            log("history")
            rows.append(
                (
                    "history of one thread",
                    timed(lambda: lgpd(bench, "history", middle, "-f", "jsonl"), args.reps),
                    timed(lambda: list(official.list({"configurable": {"thread_id": middle}})), args.reps),
                )
            )
            log("show")
            rows.append(
                (
                    "show one step",
                    timed(lambda: lgpd(bench, "show", middle, "--step", "5", "-f", "json"), args.reps),
                    timed(lambda: official.get_tuple({"configurable": {"thread_id": middle}}), args.reps),
                )
            )
        with tempfile.TemporaryDirectory() as scratch:
            log("export")
            export = timed(
                lambda: lgpd(bench, "export", "--as", "openai", "--success-only", "--no-progress", "--out", f"{scratch}/runs.jsonl"), 1
            )
            lines = sum(1 for _ in open(f"{scratch}/runs.jsonl"))
        version = bench.server_version
    print(
        f"lgpd on {args.threads:,} threads of {TOOL_CALLS * 2 + 3} checkpoints (one run each), PostgreSQL {version}, {os.cpu_count()} CPUs;"
    )
    print(f"median of {args.reps} runs, each command run in the benchmark's process, as the official saver's calls are;")
    print(f"starting a `lgpd` process adds {startup:.2f} s (importing LangGraph and its dependencies).\n")
    print("| command | lgpd, s | official saver's API for the same answer, s |")
    print("| --- | --- | --- |")
    for name, ours, theirs in rows:
        print(f"| {name} | {ours:.2f} | {theirs:.2f} |")
    print(f"| export --as openai --success-only, {lines:,} runs | {export:.2f} | — |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
