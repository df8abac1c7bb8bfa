"""Session fixtures shared by every layer: real PostgreSQL and S3 servers, each started only
when a test first asks for it, and a fresh schema and key prefix per test.

Layers: `unit/` (no server), `integration/` (real Postgres and S3), `chaos/` (crashes,
restarts, lost connections), `migration/` (setup() and the schema). Helpers shared by the
layers live in `support/`, put on sys.path here so every layer imports them by name.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

# Let the tests import the package from a plain checkout (no `pip install -e .` needed), and
# the helpers in support/ as top-level modules (`from pg_server import ...`) from any layer.
_TESTS = Path(__file__).resolve().parent
for _path in (str(_TESTS.parent), str(_TESTS / "support")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from pg_server import PgServer, start_pg_server  # noqa: E402
from s3_server import S3Server, start_s3_server  # noqa: E402


WRITE_PATHS = ("statements", "routed")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "both_write_paths: run the test with each write path: the write statements, and the write functions "
        "(routed_writes=True, as on Citus), on plain PostgreSQL",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("both_write_paths") is not None:
        metafunc.parametrize("write_path", WRITE_PATHS, indirect=True)


@pytest.fixture(autouse=True)
def write_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The write path of every saver the test makes (unless it chooses): `routed` sends each
    write as a call of the schema's write functions, as a saver on distributed tables does."""
    from langgraph_pg_durable.ops import SaverCore

    path = getattr(request, "param", "statements")
    monkeypatch.setattr(SaverCore, "routed_writes_default", path == "routed" or None)
    return path


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
