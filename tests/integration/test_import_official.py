"""Threads written by the official `langgraph-checkpoint-postgres` saver import into ours
and read back equal (states, metadata, pending writes, subgraphs, an interrupt, a failed
run); a second import imports nothing twice; an import killed half-way, run again,
completes. Both the Python API and `lgpd import-official`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql
from psycopg.rows import dict_row
from typer.testing import CliRunner

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app
from langgraph_pg_durable.importer import import_official


@pytest.fixture
def official(pg_dsn: str) -> Iterator[str]:
    """A schema holding the official saver's tables, with the sample threads in them."""
    name = f"official_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        agents.sample_threads(saver)
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def ours(pg_dsn: str, schema_name: str) -> Iterator[DurablePostgresSaver]:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def test_every_thread_imports_and_reads_back_equal(pg_dsn: str, official: str, ours: DurablePostgresSaver) -> None:
    report = import_official(pg_dsn, ours, source_schema=official)
    assert sorted(report.imported) == ["calc-1", "flaky-1", "order-7", "team-1"] and report.mismatches == []
    assert report.checkpoints > 20 and report.writes > 0
    # Read back through our saver: the interrupt is pending, the subgraphs are there.
    waiting = ours.get_tuple({"configurable": {"thread_id": "order-7"}})
    assert waiting is not None and any(w[1] == "__interrupt__" for w in waiting.pending_writes)
    assert {s.checkpoint_ns.split(":")[0] for s in ours.list_steps("team-1")} == {"", "researcher", "writer"}
    # The log and run ids were filled: the runs and their statuses are as if written here.
    assert {t.thread_id: t.status for t in ours.list_threads()} == {
        "calc-1": "done",
        "flaky-1": "error",
        "order-7": "interrupted",
        "team-1": "done",
    }
    assert len(list(ours.list_runs("calc-1"))) == 2
    again = import_official(pg_dsn, ours, source_schema=official)
    assert again.imported == [] and sorted(again.skipped) == sorted(report.imported) and again.checkpoints == 0


def test_an_import_killed_half_way_completes_when_run_again(
    pg_dsn: str, official: str, ours: DurablePostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    real = DurablePostgresSaver.put_writes

    def dying(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt  # killed mid-thread
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DurablePostgresSaver, "put_writes", dying)
    with pytest.raises(KeyboardInterrupt):
        import_official(pg_dsn, ours, source_schema=official)
    monkeypatch.setattr(DurablePostgresSaver, "put_writes", real)
    report = import_official(pg_dsn, ours, source_schema=official)
    assert report.mismatches == [] and "calc-1" in report.imported  # the thread cut short is imported whole
    assert import_official(pg_dsn, ours, source_schema=official).imported == []


def test_lgpd_import_official(pg_dsn: str, official: str, schema_name: str, ours: DurablePostgresSaver) -> None:
    run = CliRunner().invoke(
        app,
        [
            "--dsn",
            pg_dsn,
            "--schema",
            schema_name,
            "import-official",
            "--from-dsn",
            pg_dsn,
            "--from-schema",
            official,
            "--thread",
            "calc-1",
        ],
    )
    assert run.exit_code == 0, run.output
    assert "imported 1 threads" in run.stdout and "verified: every imported thread reads back equal" in run.stdout
    assert [t.thread_id for t in ours.list_threads()] == ["calc-1"]
    missing = CliRunner().invoke(
        app, ["--dsn", pg_dsn, "--schema", schema_name, "import-official", "--from-dsn", pg_dsn, "--from-schema", "nope"]
    )
    assert missing.exit_code == 2 and "schema 'nope' of the source has no official checkpoints table" in missing.output


def test_lgpd_import_official_into_a_database_with_no_schema_yet_creates_it(pg_dsn: str, official: str, schema_name: str) -> None:
    fresh = f"{schema_name}_new"
    try:
        run = CliRunner().invoke(
            app,
            ["--dsn", pg_dsn, "--schema", fresh, "import-official", "--from-dsn", pg_dsn, "--from-schema", official, "--thread", "calc-1"],
        )
        assert run.exit_code == 0, run.output
        assert "verified: every imported thread reads back equal" in run.stdout
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=fresh) as saver:
            assert [t.thread_id for t in saver.list_threads()] == ["calc-1"]
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(fresh)))
