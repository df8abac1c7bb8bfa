"""The `lgpd` commands that write: prune by age (and its dry run), gc of unreferenced
objects (and its dry run), backfill of threads written without the action log."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app


def lgpd(pg_dsn: str, schema: str, *args: str, store: str | None = None) -> Any:
    extra = ["--object-store", store] if store else []
    return CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", schema, *extra, *args])


def _age(pg_dsn: str, schema: str, thread_id: str, days: int) -> None:
    """Make a thread look idle for `days` (its rows' times moved back)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.checkpoints SET created_at = created_at - make_interval(days => %s) WHERE thread_id = %s").format(
                sql.Identifier(schema)
            ),
            [days, thread_id],
        )


def _count(pg_dsn: str, schema: str, thread_id: str) -> int:
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.checkpoints WHERE thread_id = %s").format(sql.Identifier(schema))
        row = conn.execute(query, [thread_id]).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def aged(pg_dsn: str, schema_name: str) -> dict[str, str]:
    """Two threads idle 40 days (one of them with a list in the delta layout), one active."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        calc = agents.tool_agent(saver, agents.calculator_replies())
        calc.invoke({"messages": [("user", "what is 1+2?")]}, {"configurable": {"thread_id": "old-calc"}}, durability="sync")
        agents.approval(saver).invoke({"item": "a"}, {"configurable": {"thread_id": "old-order"}}, durability="sync")
        agents.approval(saver).invoke({"item": "b"}, {"configurable": {"thread_id": "new-order"}}, durability="sync")
    _age(pg_dsn, schema_name, "old-calc", 40)
    _age(pg_dsn, schema_name, "old-order", 40)
    return {"old": "old-calc", "other_old": "old-order", "new": "new-order"}


def test_prune_dry_run_lists_and_changes_nothing(pg_dsn: str, schema_name: str, aged: dict[str, str]) -> None:
    before = {t: _count(pg_dsn, schema_name, t) for t in aged.values()}
    result = lgpd(pg_dsn, schema_name, "prune", "--older-than", "30d", "--delete", "--dry-run", "-f", "jsonl")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["thread_id"] for line in result.stdout.splitlines()] == ["old-calc", "old-order"]
    assert "nothing was changed" in result.output
    assert {t: _count(pg_dsn, schema_name, t) for t in aged.values()} == before


def test_prune_keep_latest_then_delete_by_age(pg_dsn: str, schema_name: str, aged: dict[str, str]) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as reader:
        state = reader.get_tuple({"configurable": {"thread_id": "old-calc"}})
        assert state is not None
        want = state.checkpoint["channel_values"]
    kept = lgpd(pg_dsn, schema_name, "prune", "--older-than", "30d", "--keep-latest", "--thread", "old-calc", "--no-progress")
    assert kept.exit_code == 0 and "pruned 1 threads (keep_latest)" in kept.stdout, kept.output
    assert _count(pg_dsn, schema_name, "old-calc") == 1
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as reader:  # a cold reader: rows alone
        latest = reader.get_tuple({"configurable": {"thread_id": "old-calc"}})
        assert latest is not None and latest.checkpoint["channel_values"] == want
    gone = lgpd(pg_dsn, schema_name, "prune", "--older-than", "30d", "--delete")
    assert gone.exit_code == 0 and "pruned 2 threads (delete)" in gone.stdout
    assert [_count(pg_dsn, schema_name, t) for t in ("old-calc", "old-order", "new-order")] == [0, 0, 3]


def test_prune_needs_a_strategy(pg_dsn: str, schema_name: str, aged: dict[str, str]) -> None:
    result = lgpd(pg_dsn, schema_name, "prune", "--older-than", "30d")
    assert result.exit_code == 2 and "exactly one of --keep-latest and --delete" in result.output
    assert _count(pg_dsn, schema_name, "old-calc") > 1


def test_gc_dry_run_then_gc(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    store = (tmp_path / "objects").as_uri()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, object_store=store) as saver:
        saver.setup()
        agents.approval(saver).invoke({"item": "x" * (2 << 20)}, {"configurable": {"thread_id": "big"}}, durability="sync")
        saver.delete_thread("big")
    two_hours_ago = time.time() - 7200
    for path in (tmp_path / "objects").rglob("*"):
        os.utime(path, (two_hours_ago, two_hours_ago))  # uploaded long before the grace period
    dry = lgpd(pg_dsn, schema_name, "gc", "--grace", "1h", "--dry-run", store=store)
    assert dry.exit_code == 0 and dry.stdout.endswith("unreferenced objects would be deleted (dry run)\n"), dry.output
    doomed = int(dry.stdout.split()[0])
    assert doomed >= 1 and lgpd(pg_dsn, schema_name, "gc", "--grace", "1h", "--dry-run", store=store).stdout == dry.stdout  # nothing went
    assert lgpd(pg_dsn, schema_name, "gc", "--grace", "1h", store=store).stdout.startswith(f"{doomed} unreferenced objects deleted")
    assert lgpd(pg_dsn, schema_name, "gc", "--grace", "1h", store=store).stdout.startswith("0 unreferenced")
    too_short = lgpd(pg_dsn, schema_name, "gc", "--grace", "10s", store=store)
    assert too_short.exit_code == 2 and "object_reuse_window" in too_short.output
    no_store = lgpd(pg_dsn, schema_name, "gc")
    assert no_store.exit_code == 2 and "no object_store configured" in no_store.output


def test_backfill_fills_threads_written_without_the_log(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, action_log=False) as saver:
        saver.setup()
        agents.sample_threads(saver)
    assert json.loads(lgpd(pg_dsn, schema_name, "runs", "-f", "json").stdout) == []
    filled = lgpd(pg_dsn, schema_name, "backfill", "--batch", "2")
    assert filled.exit_code == 0 and "filled the log of 4 of 4 threads" in filled.stdout, filled.output
    statuses = {t["thread_id"]: t["status"] for t in json.loads(lgpd(pg_dsn, schema_name, "threads", "-f", "json").stdout)}
    assert statuses == {"calc-1": "done", "order-7": "interrupted", "flaky-1": "error", "team-1": "done"}
    again = lgpd(pg_dsn, schema_name, "backfill")
    assert "filled the log of 0 of 4 threads" in again.stdout


def test_doctor_reports_the_server_the_schema_and_what_needs_doing(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        agents.sample_threads(saver)
    store = (tmp_path / "objects").as_uri()
    result = lgpd(pg_dsn, schema_name, "doctor", "--top", "2", "-f", "json", store=store)
    found = json.loads(result.stdout)
    assert found["schema_version"] == found["package_schema_version"] and found["object_store"] == "reachable"
    assert {r["relname"] for r in found["relations"]} >= {"checkpoints", "action_log", "checkpoints_pkey"}
    assert [t["thread_id"] for t in found["largest_threads"]] == ["team-1", "calc-1"] and len(found["oldest_threads"]) == 2
    with psycopg.connect(pg_dsn) as conn:
        fsync = conn.execute("SHOW fsync").fetchone()[0]  # type: ignore[index]
    assert found["settings"]["fsync"] == fsync
    assert ("fsync is off: the server acknowledges commits a crash can lose" in found["problems"]) == (fsync == "off")
    assert result.exit_code == (1 if found["problems"] else 0)
    empty = lgpd(pg_dsn, schema_name + "_none", "doctor", "-f", "json")
    assert empty.exit_code == 1 and any("has no saver tables" in p for p in json.loads(empty.stdout)["problems"])
