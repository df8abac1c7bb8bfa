"""The test servers and the embedded default really work: connect, crash-restart, persist."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from langgraph_pg_durable import embedded
from pg_server import PgServer

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_session_server_answers(pg_server: PgServer) -> None:
    with psycopg.connect(pg_server.dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_restart_immediate_crashes_and_recovers(pg_server: PgServer) -> None:
    if not pg_server.can_restart:
        pytest.skip(f"a {pg_server.kind!r} server cannot be restarted by tests")
    table = sql.Identifier(f"lgpd_restart_{uuid.uuid4().hex[:8]}")
    old = psycopg.connect(pg_server.dsn, autocommit=True)
    try:
        started = old.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
        old.execute(sql.SQL("CREATE TABLE {} (v int)").format(table))
        old.execute(sql.SQL("INSERT INTO {} VALUES (42)").format(table))

        pg_server.restart_immediate()

        with pytest.raises(psycopg.OperationalError):
            old.execute("SELECT 1")
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0] > started
            # A commit acknowledged before the crash survives it (fsync=off notwithstanding).
            assert conn.execute(sql.SQL("SELECT v FROM {}").format(table)).fetchall() == [(42,)]
            conn.execute(sql.SQL("DROP TABLE {}").format(table))
    finally:
        old.close()


def test_create_database(pg_server: PgServer) -> None:
    name = f"lgpd_db_{uuid.uuid4().hex[:8]}"
    dsn = pg_server.create_database(name)
    try:
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (name,)
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def test_schema_name_is_fresh(schema_name: str, pg_dsn: str) -> None:
    assert schema_name.startswith("lgpd_test_")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema_name)))


def _start_embedded_in_new_process(data_dir: Path) -> str:
    """Run start_embedded in a child process that then exits, as a user's script would."""
    code = "import sys; from langgraph_pg_durable.embedded import start_embedded; print(start_embedded(sys.argv[1]))"
    path = [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    argv = [sys.executable, "-c", code, str(data_dir)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def _start_time(dsn: str) -> object:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]


def test_start_embedded_outlives_its_process_and_keeps_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "my project" / "pgdata"  # a space, as in many home directories
    try:
        dsn = _start_embedded_in_new_process(data_dir)
        assert dsn.startswith("postgresql://")
        # The first process has exited; its server is still up.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (v text)")
            conn.execute("INSERT INTO kept VALUES ('first run')")
        first_start = _start_time(dsn)

        # A second run reuses the running server rather than starting another.
        dsn = _start_embedded_in_new_process(data_dir)
        assert _start_time(dsn) == first_start
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT v FROM kept").fetchall() == [("first run",)]

        # After a stop, the next run starts a new server on the same data.
        assert embedded.stop_embedded(data_dir) is True
        dsn = embedded.start_embedded(data_dir)
        assert _start_time(dsn) != first_start
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT v FROM kept").fetchall() == [("first run",)]
    finally:
        embedded.stop_embedded(data_dir)
    assert embedded.stop_embedded(data_dir) is False
