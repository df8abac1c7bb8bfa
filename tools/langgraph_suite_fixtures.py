"""Our savers as the `sync_checkpointer` / `async_checkpointer` of LangGraph's own tests.

`tools/langgraph_suite.py` imports this at the end of the extracted `tests/conftest.py`,
so these fixtures replace LangGraph's (one parameter each: our saver) and every test
that takes them runs against a fresh schema on a real PostgreSQL server.

Environment: `LGPD_SUITE_DSN` (the server), `LGPD_SUITE_POOL` (`docs`: the pool the
official saver's documentation prescribes, `dict_row` and `prepare_threshold=0`;
`tuple`: a plain autocommit pool with psycopg's defaults), `LGPD_SUITE_SERDE`
(`default`: the saver's own strict serializer; `langgraph`: LangGraph's permissive
`JsonPlusSerializer()`, the one the official fixture's saver has), `LGPD_SUITE_ROUTED_WRITES`
(`true`: every write a call of the schema's write functions, as on Citus).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

POOL_KWARGS: dict[str, dict[str, Any]] = {
    "docs": {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    "tuple": {"autocommit": True},
}


def _dsn() -> str:
    return os.environ["LGPD_SUITE_DSN"]


def _pool_kwargs() -> dict[str, Any]:
    flavour = os.environ.get("LGPD_SUITE_POOL", "docs")
    if flavour not in POOL_KWARGS:
        raise RuntimeError(f"LGPD_SUITE_POOL must be one of {sorted(POOL_KWARGS)}, got {flavour!r}")
    return POOL_KWARGS[flavour]


def _serde() -> JsonPlusSerializer | None:
    choice = os.environ.get("LGPD_SUITE_SERDE", "default")
    if choice not in ("default", "langgraph"):
        raise RuntimeError(f"LGPD_SUITE_SERDE must be 'default' or 'langgraph', got {choice!r}")
    return JsonPlusSerializer() if choice == "langgraph" else None


def _schema() -> str:
    return f"lgsuite_{secrets.token_hex(8)}"  # not uuid4: some tests patch it


def _routed() -> bool | None:
    """True: the write functions; None: as the saver finds (statements on this server)."""
    return True if os.environ.get("LGPD_SUITE_ROUTED_WRITES") == "true" else None


def _drop(schema: str) -> None:
    with psycopg.connect(_dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="function", params=["durable"])
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[DurablePostgresSaver]:
    schema = _schema()
    try:
        with ConnectionPool(_dsn(), max_size=10, kwargs=_pool_kwargs()) as pool:
            saver = DurablePostgresSaver(pool, schema=schema, serde=_serde(), routed_writes=_routed())
            saver.setup()
            yield saver
    finally:
        _drop(schema)


@pytest.fixture(scope="function", params=["durable_aio"])
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[AsyncDurablePostgresSaver]:
    schema = _schema()
    try:
        async with AsyncConnectionPool(_dsn(), max_size=10, kwargs=_pool_kwargs(), open=False) as pool:
            saver = AsyncDurablePostgresSaver(pool, schema=schema, serde=_serde(), routed_writes=_routed())
            await saver.setup()
            yield saver
    finally:
        _drop(schema)
