"""Session fixtures: real PostgreSQL and S3 servers; a fresh schema and key prefix per test."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pg_server import PgServer, start_pg_server
from s3_server import S3Server, start_s3_server

# Let the tests import the package from a plain checkout (no `pip install -e .` needed).
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's server; stopped at the end only if this session started it."""
    server = start_pg_server()
    try:
        yield server
    finally:
        server.stop()  # a no-op for a server given by $LANGGRAPH_PG_DURABLE_TEST_DSN


@pytest.fixture(scope="session")
def pg_dsn(pg_server: PgServer) -> str:
    return pg_server.dsn


@pytest.fixture
def schema_name(pg_dsn: str) -> Iterator[str]:
    """A unique Postgres schema name for the saver under test; dropped afterwards."""
    name = f"lgpd_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The session's S3-compatible server (SeaweedFS ``weed mini``); stopped at the end."""
    server = start_s3_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_prefix() -> str:
    """A unique key prefix in the session bucket, so tests never see each other's objects."""
    return f"t-{uuid.uuid4().hex[:12]}"
