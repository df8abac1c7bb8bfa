"""The cost of a durable step, taken apart: client CPU, server time, WAL and table bytes.

Three workloads (a list that grows 1 KB of words a step, one that grows 1 KB of base64
random bytes, an `add_messages` chat of one ~300-character message a step), each with
its list declared plainly and in LangGraph's `DeltaChannel` (deepagents' reducer for the
chat), on InMemorySaver, the official saver and ours (action log on). Per step:

- client CPU: `time.process_time` over the run (every thread of the process, the pool's
  too), less InMemorySaver's on the same graph: what the saver adds to the client;
- client instructions: the same, counted by valgrind's callgrind on one more run of each
  (`instructions.py`): the client's work without this VM's clock in it;
- server time: `pg_stat_statements` execution and planning time of the saver's database;
- WAL: `pg_current_wal_lsn()` before and after (the server does nothing else meanwhile);
- table bytes: `pg_total_relation_size` of every table of the saver, after the run; and
  what the run added to the emptied tables (the schema's empty relations, a page or two
  for each table and index, are paid once per database, not per step).

Each measured run is two invokes on new threads (`run_once`): WAL and bytes from the first,
on tables emptied by TRUNCATE; client CPU and server time from the second, right after it,
whose statements run on the plans the server made during the first. TRUNCATE drops every
plan the server cached of a statement on the tables, which a saver on steady traffic keeps
for its connection's life; the first run's server time, every plan made again, is
reported beside (`first_run_server_ms`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from . import graphs, instructions
from .env import Bench
from .stats import alternate, percentile

SAVERS = ("memory", "official", "ours")
STYLES = ("plain", "delta")  # the list declared with its reducer, or in a DeltaChannel
WARMUP_STEPS = 8  # past psycopg's prepare threshold (5)


@dataclass(frozen=True)
class Workload:
    title: str
    build: Callable[[BaseCheckpointSaver, int, bool], CompiledStateGraph]
    inputs: dict


def _growing(content: str) -> Callable[[BaseCheckpointSaver, int, bool], CompiledStateGraph]:
    def build(saver: BaseCheckpointSaver, steps: int, delta: bool) -> CompiledStateGraph:
        return (graphs.growing_delta if delta else graphs.growing)(saver, steps, content=content)

    return build


WORKLOADS = {
    "words": Workload("list grows 1 KB of words", _growing("words"), {"items": [], "step": 0}),
    "random": Workload("list grows 1 KB of base64 random bytes", _growing("random"), {"items": [], "step": 0}),
    "chat": Workload("`add_messages` chat, one ~300-character message a step", graphs.chat, {"messages": [], "step": 0}),
}


class Mark(NamedTuple):
    """Where a measured run began: its database's oid (None: InMemorySaver's) and the WAL position."""

    dbid: int | None
    lsn: str


class ServerMeter:
    """What a saver's statements cost the server: pg_stat_statements' time for its
    database, and the WAL the cluster wrote, between `start` and `stop`."""

    def __init__(self, admin_dsn: str) -> None:
        self.conn = psycopg.connect(admin_dsn, autocommit=True)
        try:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self.conn.execute("SELECT count(*) FROM pg_stat_statements")
            self.statements = True
        except psycopg.Error:  # a server without the library preloaded: no server time
            self.statements = False

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ServerMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dbid(self, dsn: str) -> int:
        name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        row = self.conn.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()
        assert row is not None, name
        return int(row[0])

    def start(self, dsn: str | None) -> Mark:
        dbid = self._dbid(dsn) if dsn else None
        if dbid is not None and self.statements:
            self.conn.execute("SELECT pg_stat_statements_reset(0, %s, 0)", (dbid,))
        lsn = self.conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert lsn is not None
        return Mark(dbid, lsn[0])

    def stop(self, started: Mark) -> tuple[float | None, int]:
        dbid, lsn = started
        wal = self.conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::int8", (lsn,)).fetchone()
        assert wal is not None
        seconds = None
        if dbid is not None and self.statements:
            row = self.conn.execute(
                "SELECT coalesce(sum(total_exec_time + total_plan_time), 0) FROM pg_stat_statements WHERE dbid = %s", (dbid,)
            ).fetchone()
            assert row is not None
            seconds = float(row[0]) / 1e3
        return seconds, int(wal[0])


def run(bench: Bench, steps: int, reps: int) -> dict[str, Any]:
    """Every workload in both styles on every saver, `reps` alternating rounds; medians.
    Then each saver's client instructions on each workload and style (`instructions`: one
    count each, with one hash seed: the same to ~0.2 % from run to run), unless this machine cannot
    count them."""
    with ServerMeter(bench.server.dsn) as meter, ExitStack() as stack:
        savers = {kind: stack.enter_context(bench.saver(kind)) for kind in SAVERS}
        variants = [(kind, style) for kind in SAVERS for style in STYLES]
        out: dict[str, Any] = {"steps": steps, "reps": reps, "server_time": meter.statements, "workloads": {}}
        all_runs = {}
        for name, workload in WORKLOADS.items():

            def one(variant: tuple[str, str], rep: int, workload: Workload = workload, n: int = steps) -> dict[str, Any]:
                kind, style = variant
                return run_once(bench, meter, savers[kind](), kind, workload, style == "delta", n)

            for variant in variants:
                one(variant, -1, n=WARMUP_STEPS)
            all_runs[name] = alternate(variants, reps, one)
    counts = count_instructions(bench, steps)
    out["instructions_missing"] = instructions.missing()
    for name, workload in WORKLOADS.items():
        out["workloads"][name] = {"title": workload.title, "cells": _cells(all_runs[name], steps, counts.get(name, {}))}
    return out


def count_instructions(bench: Bench, steps: int) -> dict[str, dict[tuple[str, str], int]]:
    """Each saver's client instructions of one `steps`-step run, by workload and then
    (saver, style); empty when this machine cannot count them (`instructions.missing`)."""
    if instructions.missing():
        return {}
    runs = [(name, style) for name in WORKLOADS for style in STYLES]
    counts: dict[str, dict[tuple[str, str], int]] = {name: {} for name in WORKLOADS}
    for kind in SAVERS:
        for (name, style), total in zip(runs, instructions.count(bench.spec(kind), [(n, s == "delta") for n, s in runs], steps)):
            counts[name][(kind, style)] = total
    return counts


def run_once(bench: Bench, meter: ServerMeter, saver: BaseCheckpointSaver, kind: str, workload: Workload, delta: bool, steps: int) -> dict:
    """Two runs of `workload`, each on a fresh thread, and their raw figures.

    The first runs on emptied tables: its WAL and the bytes the tables hold after it stand
    alone. TRUNCATE invalidates every plan the server cached of a statement on the tables,
    so that run also pays a plan of each statement again (its server time is kept as
    `first_server_seconds`). The second runs right after it, on the same tables and
    connections: client CPU and server time as a saver on steady traffic spends them."""
    bench.truncate(kind)
    empty = bench.db_bytes(kind)
    app = workload.build(saver, steps, delta)
    dsn = bench.dsn.get(kind)
    first_cpu, first_server, wal = _measured_invoke(meter, app, workload, kind, dsn, steps)
    db_bytes = bench.db_bytes(kind)
    added = None if db_bytes is None or empty is None else db_bytes - empty
    cpu, server, _ = _measured_invoke(meter, app, workload, kind, dsn, steps)
    return {
        "cpu_seconds": cpu,
        "server_seconds": server,
        "first_cpu_seconds": first_cpu,
        "first_server_seconds": first_server,
        "wal_bytes": wal if dsn else None,
        "db_bytes": db_bytes,
        "added_bytes": added,
    }


def run_config(kind: str, steps: int) -> dict[str, Any]:
    """The config of one measured run: a new thread, room for its steps."""
    return {"configurable": {"thread_id": f"cost-{kind}-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}


def _measured_invoke(
    meter: ServerMeter, app: CompiledStateGraph, workload: Workload, kind: str, dsn: str | None, steps: int
) -> tuple[float, float | None, int]:
    """One invoke of the workload on a new thread: its process CPU, server time and WAL."""
    config = run_config(kind, steps)
    started = meter.start(dsn)
    cpu = time.process_time()
    app.invoke(workload.inputs, config, durability="sync")
    cpu = time.process_time() - cpu
    server, wal = meter.stop(started)
    final = app.get_state(config).values["step"]
    if final != steps:
        raise AssertionError(f"cost on {kind}: {final} steps, want {steps}")
    return cpu, server, wal


def _cells(runs: dict[tuple[str, str], list[dict]], steps: int, counts: dict[tuple[str, str], int]) -> dict[str, dict[str, Any]]:
    """Per saver and style (`official_delta`, ...): medians per step, CPU and instructions
    above InMemorySaver's (instructions None where not counted)."""

    def median(kind: str, style: str, key: str) -> float | None:
        values = [run[key] for run in runs[(kind, style)] if run[key] is not None]
        return percentile(values, 50) if values else None

    cells = {}
    for kind in ("official", "ours"):
        for style in STYLES:
            cpu, base = median(kind, style, "cpu_seconds"), median("memory", style, "cpu_seconds")
            server, wal = median(kind, style, "server_seconds"), median(kind, style, "wal_bytes")
            first_server = median(kind, style, "first_server_seconds")
            assert cpu is not None and base is not None and wal is not None
            counted, counted_base = counts.get((kind, style)), counts.get(("memory", style))
            cells[kind if style == "plain" else f"{kind}_delta"] = {
                "client_cpu_ms": (cpu - base) / steps * 1e3,
                "client_instructions": None if counted is None or counted_base is None else (counted - counted_base) / steps,
                "server_ms": None if server is None else server / steps * 1e3,
                "first_run_server_ms": None if first_server is None else first_server / steps * 1e3,
                "wal_bytes": wal / steps,
                "table_bytes": median(kind, style, "db_bytes"),
                "table_bytes_added": median(kind, style, "added_bytes"),
                "memory_cpu_ms": base / steps * 1e3,
                "memory_instructions": None if counted_base is None else counted_base / steps,
            }
    return cells
