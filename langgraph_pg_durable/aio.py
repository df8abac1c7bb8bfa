# async:
"""AsyncDurablePostgresSaver: the asyncio shell. It sends Queries; it decides nothing.

`saver.py`, the sync shell, is generated from this file (`python tools/async_to_sync.py`).
"""
# end
# sync:
# """DurablePostgresSaver: the synchronous shell. It sends Queries; it decides nothing."""
# end

from __future__ import annotations

# async:
import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext

# end
# sync:
# import threading
# from collections.abc import Iterable, Iterator, Mapping, Sequence
# from contextlib import contextmanager, nullcontext
# end
import logging
import time
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection, errors, pq
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from .adapters import has_rows
from .core.durability import Durability, durability_report
from .core.effects import EffectKey
from .core.lists import DEFAULT_MIN_BYTES, DEFAULT_SNAPSHOT_EVERY
from .core.logs import ActionRecord, ActionScan, RunRecord, RunScan
from .core.steps import StepRecord, StepScan
from .core.threads import ThreadRecord, ThreadScan
from .core.offload import DEFAULT_THRESHOLD
from .core.plan import Pause, Plan, Query
from .core.fencing import DEFAULT_POLICY, DEFAULT_WAIT, DEFAULT_WINDOW
from .core.keys import parse_config
from .core.safe_serde import AllowedType
from .errors import DatabaseUnavailableError, named, shown
from .pools import AsyncFailoverPool, drain, with_connection_defaults
from .spare import Spare
from .inflight import AsyncWritesInFlight, in_flight_key
from .memory import DEFAULT_ITEM_CACHE_BYTES
from .store import DEFAULT_CACHE_BYTES, DEFAULT_REUSE_WINDOW
from .objects_async import AsyncObjectStorage
from .ops import GC_BATCH, THREAD_QUEUES, SaverCore
from .retry import Attempts, RetryPolicy, is_server_lost, time_left
from .sql import distribute as distribute_sql
from .sql import doctor as doctor_sql
from .sql import durability as durability_sql
from .sql import schema as schema_sql
from .sql.schema import DEFAULT_SCHEMA, quote_schema
from .sql.reads import GENERIC_PLANS, RAISE_WORK_MEM
from . import wire

T = TypeVar("T")
logger = logging.getLogger("langgraph_pg_durable")


class AsyncDurablePostgresSaver(SaverCore):
    # async:
    """A LangGraph checkpointer on PostgreSQL, for `graph.ainvoke` / `graph.astream`.

    Give it a psycopg `AsyncConnectionPool` (calls run in parallel) or a single
    `AsyncConnection` (calls are serialized on it). Its sync methods work from
    other threads while its event loop runs, as LangGraph's sync APIs need.
    """

    # end
    # sync:
    # """A LangGraph checkpointer on PostgreSQL, for `graph.invoke` / `graph.stream`.
    #
    # Give it a psycopg `ConnectionPool` (calls then run in parallel, one pooled
    # connection each) or a single `Connection` (calls are serialized on it).
    # """
    # end

    _object_storage = AsyncObjectStorage

    def __init__(
        self,
        conn: AsyncConnection | AsyncConnectionPool,
        *,
        schema: str = DEFAULT_SCHEMA,
        serde: SerializerProtocol | None = None,
        retry: RetryPolicy | None = None,
        object_store: Any = None,
        object_store_options: Mapping[str, Any] | None = None,
        offload_threshold: int = DEFAULT_THRESHOLD,
        object_prefix: str | None = None,
        object_cache_bytes: int = DEFAULT_CACHE_BYTES,
        object_reuse_window: timedelta = DEFAULT_REUSE_WINDOW,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
        list_min_bytes: int = DEFAULT_MIN_BYTES,
        list_cache_bytes: int = DEFAULT_ITEM_CACHE_BYTES,
        allowed_types: Iterable[AllowedType] = (),
        accept_plaintext: bool = False,
        action_log: bool = True,
        synchronous_commit: str | None = None,
        routed_writes: bool | None = None,
        fencing: str = DEFAULT_POLICY,
        fencing_window: timedelta = DEFAULT_WINDOW,
        fencing_wait: timedelta = DEFAULT_WAIT,
    ) -> None:
        """A saver on `conn`; every keyword is described in `SaverCore.__init__` (ops.py)."""
        super().__init__(
            schema=schema,
            serde=serde,
            retry=retry,
            object_store=object_store,
            object_store_options=object_store_options,
            offload_threshold=offload_threshold,
            object_prefix=object_prefix,
            object_cache_bytes=object_cache_bytes,
            object_reuse_window=object_reuse_window,
            snapshot_every=snapshot_every,
            list_min_bytes=list_min_bytes,
            list_cache_bytes=list_cache_bytes,
            allowed_types=allowed_types,
            accept_plaintext=accept_plaintext,
            action_log=action_log,
            synchronous_commit=synchronous_commit,
            routed_writes=routed_writes,
            fencing=fencing,
            fencing_window=fencing_window,
            fencing_wait=fencing_wait,
        )
        self._writes_in_flight = AsyncWritesInFlight()
        self._spare = Spare()  # off: from_conn_string turns it on for the pool it builds
        self.conn = conn
        self.is_pool = isinstance(conn, AsyncConnectionPool)
        # A single connection runs one statement at a time; a pool needs no lock.
        self._lock = asyncio.Lock()
        self._queues = [asyncio.Lock() for _ in range(THREAD_QUEUES)]  # (see THREAD_QUEUES)
        # async:
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        # end

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        serde: SerializerProtocol | None = None,
        retry: RetryPolicy | None = None,
        min_size: int = 1,
        max_size: int = 10,
        prepare_threshold: int | None = 5,
        timeout: float = 30.0,
        object_store: Any = None,
        object_store_options: Mapping[str, Any] | None = None,
        offload_threshold: int = DEFAULT_THRESHOLD,
        object_prefix: str | None = None,
        object_cache_bytes: int = DEFAULT_CACHE_BYTES,
        object_reuse_window: timedelta = DEFAULT_REUSE_WINDOW,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
        list_min_bytes: int = DEFAULT_MIN_BYTES,
        list_cache_bytes: int = DEFAULT_ITEM_CACHE_BYTES,
        allowed_types: Iterable[AllowedType] = (),
        accept_plaintext: bool = False,
        action_log: bool = True,
        synchronous_commit: str | None = None,
        routed_writes: bool | None = None,
        fencing: str = DEFAULT_POLICY,
        fencing_window: timedelta = DEFAULT_WINDOW,
        fencing_wait: timedelta = DEFAULT_WAIT,
    ) -> AsyncIterator[AsyncDurablePostgresSaver]:
        """A saver on its own connection pool, closed on exit.

        `prepare_threshold=None` turns server-side prepared statements off, as PgBouncer
        in transaction mode requires.
        """
        savers: list[AsyncDurablePostgresSaver] = []

        async def configure(conn: AsyncConnection) -> None:
            if savers:
                await savers[0]._configure(conn)

        pool = AsyncFailoverPool(
            with_connection_defaults(conn_string),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True, "prepare_threshold": prepare_threshold},
            configure=configure,
            open=False,
            name="langgraph-pg-durable",
        )
        try:
            saver = cls(
                pool,
                schema=schema,
                serde=serde,
                retry=retry,
                object_store=object_store,
                object_store_options=object_store_options,
                offload_threshold=offload_threshold,
                object_prefix=object_prefix,
                object_cache_bytes=object_cache_bytes,
                object_reuse_window=object_reuse_window,
                snapshot_every=snapshot_every,
                list_min_bytes=list_min_bytes,
                list_cache_bytes=list_cache_bytes,
                allowed_types=allowed_types,
                accept_plaintext=accept_plaintext,
                action_log=action_log,
                synchronous_commit=synchronous_commit,
                routed_writes=routed_writes,
                fencing=fencing,
                fencing_window=fencing_window,
                fencing_wait=fencing_wait,
            )
            saver._spare = Spare.for_own_pool(max_size)
            savers.append(saver)
            await pool.open(wait=True, timeout=timeout)
            yield saver
        finally:
            spare = savers[0]._spare.release() if savers else None
            if spare is not None:
                await pool.putconn(spare)
            await pool.close()

    # -- I/O ------------------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self, timeout: float | None = None) -> AsyncIterator[AsyncConnection]:
        """A connection of the pool (waiting at most `timeout`, else the pool's own), or the saver's one."""
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection(timeout=timeout) as conn:
                yield conn
        else:
            async with self._lock:
                yield self.conn

    async def _run(self, plan: Plan[T]) -> T:
        """Carry out an operation of several statements (see core.Plan)."""
        try:
            step = next(plan)
            while True:
                if isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                    step = plan.send(None)
                else:
                    step = plan.send(await self._execute(step))
        except StopIteration as finished:
            return cast(T, finished.value)

    async def _execute(self, query: Query[T]) -> T:
        """Send the statement (one round trip; with objects to store, see _send_with_uploads),
        transient errors retried, then fetch and verify the objects its rows reference."""
        started = time.monotonic()
        attempts: Attempts | None = None  # made at the first failure: most calls succeed at once
        confirm = False  # after a commit the server did not confirm as replicated
        pool = self.conn if isinstance(self.conn, AsyncConnectionPool) else None
        slot = self._queue_of(query)
        # A writer of one thread waits for the saver's other flight of it here, each attempt
        # (not through a retry's pause), before it takes a connection (see THREAD_QUEUES).
        queue = self._queues[slot] if slot is not None else _NOT_QUEUED
        while True:
            try:
                async with queue:
                    if pool is None:
                        async with self._connection() as conn:
                            fetched = await self._attempt(conn, query, confirm)
                    else:
                        # getconn/putconn rather than the pool's connection(): an attempt leaves
                        # its connection idle (in autocommit, or after its own transaction), so
                        # the commit that connection() makes on the way out has nothing to do (a
                        # tenth of a step's instructions with the pool's other bookkeeping).
                        # The connection the last call left idle, if the saver keeps one (spare.py).
                        kept = self._spare.take()
                        if kept is None:
                            conn, since = await pool.getconn(timeout=self._pool_wait(started)), time.monotonic()
                        else:
                            conn, since = kept
                        done = False
                        try:
                            fetched = await self._attempt(conn, query, confirm)
                            done = True
                        finally:
                            if not (done and self._spare.keep(conn, since, pool)):
                                await _give_back(pool, conn)
                break
            except Exception as exc:
                if pool is None and self.conn.closed:
                    raise DatabaseUnavailableError(
                        f"{named(query.operation)} failed: the saver's connection is closed "
                        f"({type(exc).__name__}: {exc}); give the saver a pool to survive reconnects"
                    ) from exc
                attempts = attempts or Attempts(self.retry, query.operation, started=started)
                delay = attempts.next_delay(exc)
                confirm = confirm or isinstance(exc, wire.CommitNotConfirmed)
                if pool is not None and is_server_lost(exc):
                    spare = self._spare.release()
                    if spare is not None:  # it may be on the lost or demoted server too
                        await _give_back(pool, spare)
                    if isinstance(exc, errors.ReadOnlySqlTransaction):
                        await drain(pool)  # every idle connection may be on the demoted server
                    else:
                        await pool.check()  # drop the other dead connections
                await asyncio.sleep(delay)
        if query.references is None:  # a write, most reads: no object to fetch
            return query.decode(fetched)
        wanted = self._wanted_objects(query, fetched)
        payloads = await self.objects.fetch_all(wanted) if wanted else {}  # type: ignore[union-attr]
        return query.decode(self._attach_objects(query, fetched, payloads))

    async def _attempt(self, conn: AsyncConnection, query: Query[Any], confirm: bool) -> list[Any]:
        """One attempt at `query` on `conn` (see `_execute`)."""
        if query.uploads:
            return await self._send_with_uploads(conn, query, confirm=confirm)
        return await self._send(conn, query, confirm=confirm)

    def _pool_wait(self, started: float) -> float | None:
        """How long an attempt may wait for a pooled connection: the pool's own timeout, cut
        to what is left of the deadline of the call started at `started`."""
        if not isinstance(self.conn, AsyncConnectionPool):
            return None
        return max(0.1, min(self.conn.timeout, time_left(self.retry, started)))

    async def _send(self, conn: AsyncConnection, query: Query[Any], *, confirm: bool = False) -> list[Any]:
        """One flight on an autocommit connection (through `wire` when it is idle): the
        prepare goes with the statement.

        The cursor reads tuples whatever row factory the caller's connection has (a pool
        built for the official saver has `dict_row`): every decoder reads by position.
        A statement with writer locks follows the statement that takes them, in the same
        flight: the statements of a pipeline before its sync share one implicit transaction,
        which holds the locks to its end, and the second one's snapshot follows the wait.
        """
        if wire.usable(conn):
            statements = self._flight(query, confirm)
            timeout = self.retry.attempt_timeout
            async with conn.lock:
                try:
                    return await conn.wait(wire.exchange(conn, statements, timeout))
                except errors.InvalidSqlStatementName:
                    # The session lost the statements we prepared (DISCARD ALL, a pooler):
                    # wire forgot them; prepare them again, once.
                    return await conn.wait(wire.exchange(conn, statements, timeout))
        async with conn.cursor(binary=True, row_factory=tuple_row) as cur:
            async with conn.pipeline():
                if conn.autocommit:
                    for statement, params in [*self._confirming(confirm), *self._preamble(query)]:
                        await conn.execute(statement, params)
                    await cur.execute(query.sql, query.params)
                else:
                    async with conn.transaction():
                        for statement, params in [*self._confirming(confirm), *self._preamble(query)]:
                            await conn.execute(statement, params)
                        await cur.execute(query.sql, query.params)
            # Leaving the pipeline synced it: the results are here.
            return await cur.fetchall() if has_rows(cur) else []

    async def _configure(self, conn: AsyncConnection) -> None:
        """Ready a new connection of the saver's own pool: work_mem raised to at least
        COLD_READ_WORK_MEM and the prepared statements planned generically (GENERIC_PLANS),
        neither where the connection says otherwise already, nor behind PgBouncer in
        transaction mode (where a session setting would reach other clients); then the
        warm-up. Best effort."""
        if conn.prepare_threshold is not None:
            for setting in (RAISE_WORK_MEM, GENERIC_PLANS):
                try:
                    await conn.execute(setting)
                except errors.Error:
                    pass
        await self._warm_up(conn)

    async def _warm_up(self, conn: AsyncConnection) -> None:
        """Run the reads a new saver's first calls make on a new connection of the saver's
        own pool, before the pool hands it out (see SaverCore._warm_up_statements): the
        server parses and plans them, and loads their catalogs, here rather than in the
        caller's first read (~10 ms on a new server session). Best effort: before setup()
        there is nothing to read, and past a lock held on a table it waits 100 ms at
        most; either way the connection is handed out as it is."""
        if not wire.usable(conn) or conn.prepare_threshold is None:
            return
        try:
            # Never held up by a lock (a migration's, a LOCK TABLE): the pool would stall.
            await conn.execute("SET lock_timeout = '100ms'")
            try:
                # Six runs each: on a connection left to plan_cache_mode `auto` (see
                # GENERIC_PLANS), the server's plan cache then has its generic plan too.
                await conn.wait(wire.exchange(conn, self._warm_up_statements() * 6, self.retry.attempt_timeout))
            finally:
                await conn.execute("RESET lock_timeout")
        except errors.Error:
            pass

    async def _send_with_uploads(self, conn: AsyncConnection, query: Query[Any], *, confirm: bool = False) -> list[Any]:
        """Send the statement while the objects it references upload, and commit only once
        every one is confirmed. The transaction holds gc's lock shared from before the first
        upload to the commit: gc() (which holds it exclusively while it checks references and
        deletes) never runs between an upload and the row that references it.

        On an idle autocommit connection, flights through `wire`: the begin with the locks,
        the statement alongside the uploads, the commit; when every object was confirmed
        recently (a checkpoint referencing the value its task's write just stored), the
        statement goes with the locks and the commit follows."""
        objects: AsyncObjectStorage | None = self.objects
        assert objects is not None
        locks: list[tuple[str, Mapping[str, Any]]] = [
            *self._confirming(confirm),
            (self.sql.GC_SHARE, {"gc_key": self._gc_key}),
            *self._preamble(query),
        ]
        timeout = self.retry.attempt_timeout
        if not wire.usable(conn):
            async with conn.transaction(), conn.cursor(binary=True, row_factory=tuple_row) as cur:
                for statement, params in locks:
                    await cur.execute(statement, params)

                async def send_by_cursor() -> list[Any]:
                    await cur.execute(query.sql, query.params)
                    return await cur.fetchall() if has_rows(cur) else []

                return await objects.store_alongside(query.uploads, send_by_cursor)  # claimed under gc's lock

        async def send() -> list[Any]:
            return await conn.wait(wire.exchange(conn, [(query.sql, query.params)], timeout))

        async def transaction() -> list[Any]:
            try:
                if objects.confirmed(query.uploads):  # likely nothing to upload: the statement goes with the locks
                    fetched = await conn.wait(wire.exchange(conn, [("BEGIN", {}), *locks, (query.sql, query.params)], timeout))
                    await objects.store_all(query.uploads)  # claimed under gc's lock: uploads any no longer confirmed
                else:
                    await conn.wait(wire.exchange(conn, [("BEGIN", {}), *locks], timeout))
                    fetched = await objects.store_alongside(query.uploads, send)  # claimed under gc's lock
                await conn.wait(wire.exchange(conn, [("COMMIT", {})], timeout))
            except BaseException:
                if not conn.broken and not wire.usable(conn):  # the transaction is still open
                    try:
                        await conn.wait(wire.exchange(conn, [("ROLLBACK", {})]))
                    except Exception:  # the first error is the one to raise; a pool drops the connection
                        pass
                raise
            return fetched

        async with conn.lock:
            try:
                return await transaction()
            except errors.InvalidSqlStatementName:
                # The session lost the statements we prepared (see _send): prepare them again, once.
                return await transaction()

    # -- schema -----------------------------------------------------------------------

    async def aschema_version(self) -> int | None:
        """The migration the schema is at (`setup()` brings it to the package's); None when
        the schema holds no saver tables. A role without CREATE can ask."""
        async with self._connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            await cur.execute(schema_sql.ledger_exists_sql(), {"schema": self.schema})
            if not (await cur.fetchone())[0]:  # type: ignore[index]
                return None
            await cur.execute(schema_sql.current_version_sql(quote_schema(self.schema)))
            return int((await cur.fetchone())[0])  # type: ignore[index]

    async def adiagnose(self, *, top: int = 5) -> dict[str, Any]:
        """What `lgpd doctor` shows: the server and its durability settings (`durability`:
        whether it is a primary or in recovery, its standbys, what can lose or hang a commit),
        the schema's version against this package's, extensions, each table's and index's
        size, the `top` oldest and largest threads, and whether the object store answers."""
        quoted = quote_schema(self.schema)
        out: dict[str, Any] = {"schema": self.schema, "package_schema_version": len(schema_sql.migrations())}
        out["schema_version"] = await self.aschema_version()
        async with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(doctor_sql.SERVER)
            out["server"] = await cur.fetchone()
            await cur.execute(doctor_sql.SETTINGS)
            out["settings"] = {r["name"]: r["setting"] for r in await cur.fetchall()}
            out["durability"] = await self._read_durability(conn)
            await cur.execute(doctor_sql.EXTENSIONS)
            out["extensions"] = {r["extname"]: r["extversion"] for r in await cur.fetchall()}
            await cur.execute(doctor_sql.RELATIONS, {"schema": self.schema})
            out["relations"] = await cur.fetchall()
            if out["schema_version"]:
                for key, statement in (("oldest_threads", doctor_sql.oldest_threads), ("largest_threads", doctor_sql.largest_threads)):
                    await cur.execute(statement(quoted), {"top": top})
                    out[key] = await cur.fetchall()
        out["object_store"] = await self.objects.probe(self.placement.prefix) if self.objects is not None else None
        return out

    async def _read_durability(self, conn: AsyncConnection) -> Durability:
        """The server's durability settings, as this saver's commits meet them: one statement
        (in a transaction of its own on a connection not in autocommit: none is left open)."""
        async with conn.cursor(row_factory=tuple_row) as cur:
            if conn.autocommit:
                await cur.execute(durability_sql.READ)
            else:
                async with conn.transaction():
                    await cur.execute(durability_sql.READ)
            row = await cur.fetchone()
        assert row is not None
        return durability_report(row, self.synchronous_commit)

    async def setup(self) -> None:
        """Create or upgrade the schema; safe to call from many processes at once. Then read
        the server's durability settings into `self.durability` and log them (logger
        "langgraph_pg_durable"): a WARNING when the server acknowledges commits that a crash
        or a failover can lose, or commits would hang; INFO otherwise."""
        quoted = quote_schema(self.schema)
        # Asked here, so that the first write need not ask (nothing is sent when routed_writes was given).
        await self._run(self._routing_plan(f"setup of schema {shown(self.schema)}"))

        async def migrate(conn: AsyncConnection) -> None:
            # Scripts of several statements are never prepared (the server refuses that),
            # whatever prepare_threshold the connection has: prepare=False sends them as
            # one simple query.
            async with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                # A schema already current needs no DDL, so an app role with USAGE and DML
                # only (no CREATE) can call setup(): read the ledger before anything else.
                await cur.execute(schema_sql.ledger_exists_sql(), {"schema": self.schema})
                if (await cur.fetchone())[0]:  # type: ignore[index]
                    await cur.execute(schema_sql.current_version_sql(quoted))
                    if not schema_sql.pending(self.schema, (await cur.fetchone())[0]):  # type: ignore[index]
                        return
                await cur.execute(schema_sql.lock_sql(self.schema))
                await cur.execute(schema_sql.bootstrap_sql(quoted), prepare=False)
                await cur.execute(schema_sql.current_version_sql(quoted))
                current = (await cur.fetchone())[0]  # type: ignore[index]
                for migration in schema_sql.pending(self.schema, current):
                    for statement in migration.statements(self.schema):
                        await cur.execute(statement, prepare=False)
                    await cur.execute(schema_sql.record_sql(quoted), (migration.version, migration.name))

        attempts = Attempts(self.retry, f"setup of schema {shown(self.schema)}")
        while True:
            try:
                async with self._connection() as conn:
                    await migrate(conn)
                    # Best effort, after the migrations: a role or a server that refuses the read still gets setup().
                    try:
                        report = await self._read_durability(conn)
                    except errors.Error as exc:
                        logger.info("durability settings of the server not read (%s: %s)", type(exc).__name__, exc)
                        return
                break
            except Exception as exc:
                await asyncio.sleep(attempts.next_delay(exc))
        self.durability = report
        logger.log(logging.WARNING if report.problems else logging.INFO, "schema %s: %s", self.schema, report.message())

    async def adistribute(self) -> tuple[str, ...]:
        """Distribute the schema's tables on Citus by thread_id, co-located, and make the
        migrations ledger a reference table (the statements of `sql/distribute.py`), in one
        transaction, on the coordinator, after `setup()`. DistributionError, nothing changed,
        without the citus extension or the saver's tables. Returns the tables it distributed;
        those Citus already had are skipped, so it can run again after an upgrade's setup()."""
        quoted = quote_schema(self.schema)
        steps = distribute_sql.steps(self.schema)

        async def run(conn: AsyncConnection) -> tuple[str, ...]:
            # A refusal raised in the transaction rolls it back: nothing is changed.
            async with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(distribute_sql.CITUS_EXTENSION)
                database, citus_version = await cur.fetchone()  # type: ignore[misc]
                distribute_sql.require_citus(self.schema, database, citus_version)
                # setup()'s lock: no migration runs while the tables are distributed.
                await cur.execute(schema_sql.lock_sql(self.schema))
                await cur.execute(schema_sql.ledger_exists_sql(), {"schema": self.schema})
                version = None
                if (await cur.fetchone())[0]:  # type: ignore[index]
                    await cur.execute(schema_sql.current_version_sql(quoted))
                    version = (await cur.fetchone())[0]  # type: ignore[index]
                distribute_sql.require_schema(self.schema, version)
                await cur.execute(distribute_sql.SEQUENTIAL)
                done = []
                for step in steps:
                    await cur.execute(step.sql)
                    if await cur.fetchall():
                        done.append(step.table)
                return tuple(done)

        attempts = Attempts(self.retry, f"distribution of schema {shown(self.schema)}")
        while True:
            try:
                async with self._connection() as conn:
                    done = await run(conn)
                break
            except Exception as exc:
                await asyncio.sleep(attempts.next_delay(exc))
        if not self._routing_chosen:
            self.routed_writes = True  # this saver's writes now go to the workers as calls
        return done

    # -- BaseCheckpointSaver -------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (the thread's latest without a checkpoint_id) and its
        pending writes, read in one round trip; None if there is none. A run's first read of
        a thread takes the thread first (one writer per thread, README "Exactly once"): in
        the same flight under `takeover`, a statement before it under `reject` and `wait`."""
        return await self._run(self._get_tuple_plan(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first, matching `filter` (metadata containment) and older than
        `before`; streamed page by page, so the first arrives before the rest are read."""
        scan = self._history_scan(config, filter, before, limit)
        if scan.first_in_one:  # a thread's first page comes with its details
            for item in await self._execute(self._first_page_query(scan)):
                yield item
        while not scan.done:
            page = await self._execute(self._page_query(scan))
            if not page:
                return
            for item in await self._execute(self._details_query(scan, page)):
                yield item

    async def alist_runs(
        self,
        thread_id: str | None = None,
        *,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> AsyncIterator[RunRecord]:
        """Runs (the `runs` view), newest first: of one thread, with one status (done,
        interrupted, error, running), started in [since, until); streamed page by page.
        `before`: the (started_at, run_id) of the last run of a page of one thread's runs,
        for the next page."""
        scan = RunScan(thread_id=thread_id, status=status, since=since, until=until, limit=limit, before=before)
        while not scan.done:
            for record in await self._execute(self._runs_page_query(scan)):
                yield record

    async def alist_actions(
        self,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        agent: str | None = None,
        action_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        contains: str | None = None,
    ) -> AsyncIterator[ActionRecord]:
        """Actions (the `actions` view), oldest first, matching every filter given
        (committed in [since, until); `contains`: text in the payload's JSON, any case);
        streamed page by page."""
        scan = ActionScan(
            thread_id=thread_id,
            run_id=run_id,
            agent=agent,
            action_type=action_type,
            since=since,
            until=until,
            limit=limit,
            contains=contains,
        )
        while not scan.done:
            for record in await self._execute(self._actions_page_query(scan)):
                yield record

    async def alist_steps(
        self,
        thread_id: str,
        *,
        checkpoint_ns: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        step: int | None = None,
        checkpoint_id: str | None = None,
        checkpoint_prefix: str | None = None,
        run_prefix: str | None = None,
    ) -> AsyncIterator[StepRecord]:
        """A thread's checkpoints, newest first (one namespace, or all), each with the tasks
        that made it and those that ran from it, read from rows alone: no value is decoded.
        Only those with the `step` number, the `checkpoint_id`, or an id beginning
        `checkpoint_prefix` or `run_prefix`, when given (a step number in the root namespace
        and a whole checkpoint id are found by an index, whatever the thread's length)."""
        scan = StepScan(
            thread_id,
            checkpoint_ns=checkpoint_ns,
            before=before,
            limit=limit,
            step=step,
            checkpoint_id=checkpoint_id,
            checkpoint_prefix=checkpoint_prefix,
            run_prefix=run_prefix,
        )
        while not scan.done:
            for record in await self._execute(self._steps_page_query(scan)):
                yield record

    async def astep_neighbours(self, thread_id: str, step: int) -> tuple[int | None, int | None]:
        """The root-namespace step numbers just before and just after `step` in the thread
        (None: there is none), for a reader's previous / next links: one indexed query."""
        return await self._execute(self._step_neighbours_query(thread_id, step))

    async def afind_effect(self, key: EffectKey, config: RunnableConfig | None = None) -> tuple[bool, Any]:
        """(True, the result) of a call `once()` recorded under `key`, or (False, None); with
        the task's `config`, a ThreadTakenError when its run lost the thread and nothing is
        recorded (the call is not to be made)."""
        return await self._run(self._find_effect_plan(key, config))

    async def arecord_effect(self, key: EffectKey, config: RunnableConfig, result: Any) -> Any:
        """Record what a call returned, committed before this returns; the result recorded
        under `key` first, when another run of the task got there before (then that one)."""
        return self._effect_recorded(key, await self._execute(self._record_effect_query(key, config, result)), result)

    async def aactions_from(self, thread_id: str, *, checkpoint_ns: str, checkpoint_id: str, limit: int) -> Sequence[ActionRecord]:
        """The action rows of a namespace at `checkpoint_id` and at the checkpoints after it,
        in checkpoint order, at most `limit`: what made a step (its parent's rows) and what
        answered it, read in one indexed query, whatever the thread's length."""
        return await self._execute(self._actions_from_query(thread_id, checkpoint_ns, checkpoint_id, limit))

    async def alist_threads(
        self,
        *,
        status: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[ThreadRecord]:
        """Threads in thread_id order, each summarised from its checkpoint rows and its last
        run (no value is read): whose last run has `status`, that ran `run_id`, with a
        checkpoint whose metadata contains `metadata`, last active in [since, until); from the
        thread after `after` (a page's last, for the next page)."""
        scan = ThreadScan(status=status, run_id=run_id, metadata=metadata, since=since, until=until, limit=limit, after=after)
        while not scan.done:
            for record in await self._execute(self._threads_page_query(scan)):
                yield record

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel values it changed (`new_versions`) in one
        statement; idempotent, so a retried put never duplicates a step."""
        # Noted before waiting for the parent's writes: the checkpoint's tasks may be done
        # by then, and their action rows need its step and the node of each of its Sends.
        key = parse_config(config)
        waiting = self._note_put(key, checkpoint, metadata)
        # Only a list value can use a pending write's items: a put of none (a step that
        # replaced a 2 MB value) runs alongside its parent's writes instead of after them.
        done = self._may_use_offers(checkpoint, new_versions) and await self._writes_in_flight.wait(in_flight_key(key))
        return await self._run(
            self._put_plan(config, key, checkpoint, metadata, new_versions, parent_writes_done=done, waiting_sends=waiting)
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes to the checkpoint `config` names; a retry or re-run
        keeps the first write at each index, as the official saver does."""
        # Under way from the start: the child's put, sent from another thread, waits for
        # these writes, whose list items it may use (see inflight.py). Every task's writes,
        # not only those that store items: a chat's action rows are then stored step by step.
        key = parse_config(config, need_checkpoint_id=True)
        in_flight = in_flight_key(key)
        self._writes_in_flight.begin(in_flight)
        try:
            await self._run(self._put_writes_plan(config, key, writes, task_id, task_path, self._write_bases(key, writes)))
        finally:
            self._writes_in_flight.end(in_flight)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """The writes and seed value each DeltaChannel replays, read along the parent chain in a
        few statements rather than one get_tuple per ancestor."""
        return await self._run(self._delta_history_plan(config, channels))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value, list item and write of a thread, in one statement."""
        await self._execute(self._delete_threads_query([thread_id]))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, except the ones a surviving DeltaChannel
        checkpoint replays (kept so that it still restores)."""
        await self._run(self._delete_for_runs_plan(run_ids))

    async def abackfill_actions(self, *, thread_ids: Sequence[str] | None = None, batch_size: int = 100) -> int:
        """Fill the action log (and run ids) of threads written without it: before migration
        0007, or with `action_log=False`. Threads are taken `batch_size` at a time, each
        written in one statement, so an interrupted backfill resumes where it stopped (a
        thread that has its log is skipped). Returns how many threads it filled."""
        return await self._run(self._backfill_plan(thread_ids, batch_size))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's rows to a thread that has none yet (ConfigError, nothing copied, if it has)."""
        await self._execute(self._copy_thread_query(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest` also keeps the ancestors whose writes a kept DeltaChannel
        checkpoint replays (up to the one holding the channel's value)."""
        await self._run(self._prune_plan(thread_ids, strategy))

    async def agc(self, *, grace_period: timedelta = timedelta(hours=1), dry_run: bool = False) -> int:
        """Delete the objects no row references that were last written over `grace_period` ago.

        An object a row of any thread references is never deleted; the grace period spares
        uploads whose rows are not committed yet. Returns how many objects were deleted
        (with `dry_run`, how many would be: nothing is deleted).
        """
        cutoff = self._gc_cutoff(grace_period)
        objects = self.objects
        assert objects is not None
        candidates = await objects.list_garbage_candidates(self.placement.prefix, cutoff)
        if not candidates:
            return 0
        # From the reference check to the last delete, gc holds its lock exclusively: a put
        # storing objects holds it shared from its first upload to its commit, so no object
        # is deleted between a put's upload and the row that references it.
        async with self._connection() as conn:
            await self._gc_lock(conn, self.sql.GC_LOCK)
            try:
                unreferenced: list[str] = []
                for start in range(0, len(candidates), GC_BATCH):
                    batch = candidates[start : start + GC_BATCH]
                    query = self._referenced_objects_query(batch)
                    held = query.decode(await self._send(conn, query))
                    unreferenced += [key for key in batch if key not in held]
                # A put may have rewritten an unreferenced object since the listing, to reference it again.
                doomed = await objects.still_old(unreferenced, cutoff)
                if not dry_run:
                    await objects.delete(doomed)
            finally:
                await self._gc_lock(conn, self.sql.GC_UNLOCK)
        return len(doomed)

    async def _gc_lock(self, conn: AsyncConnection, statement: str) -> None:
        """Take or release gc's session lock (a savepoint when the caller's transaction is open)."""
        async with conn.transaction():
            await conn.execute(statement, {"gc_key": self._gc_key})

    # async:
    # -- BaseCheckpointSaver, sync: run on the saver's loop from another thread ---------------

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            coro.close()
            raise RuntimeError(
                "AsyncDurablePostgresSaver's sync methods must be called from a thread other "
                "than its event loop's; use the async methods (aget_tuple, alist, ...) there, "
                "or DurablePostgresSaver for sync code"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`aget_tuple`, from a thread other than the saver's event loop."""
        return self._on_loop(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """`alist`, from a thread other than the saver's event loop (pages are still streamed)."""
        scan = self._history_scan(config, filter, before, limit)
        while not scan.done:
            page = self._on_loop(self._execute(self._page_query(scan)))
            if not page:
                return
            yield from self._on_loop(self._execute(self._details_query(scan, page)))

    def list_runs(
        self,
        thread_id: str | None = None,
        *,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> Iterator[RunRecord]:
        """`alist_runs`, from a thread other than the saver's event loop (pages are still streamed)."""
        scan = RunScan(thread_id=thread_id, status=status, since=since, until=until, limit=limit, before=before)
        while not scan.done:
            yield from self._on_loop(self._execute(self._runs_page_query(scan)))

    def list_actions(
        self,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        agent: str | None = None,
        action_type: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        contains: str | None = None,
    ) -> Iterator[ActionRecord]:
        """`alist_actions`, from a thread other than the saver's event loop (pages are still streamed)."""
        scan = ActionScan(
            thread_id=thread_id,
            run_id=run_id,
            agent=agent,
            action_type=action_type,
            since=since,
            until=until,
            limit=limit,
            contains=contains,
        )
        while not scan.done:
            yield from self._on_loop(self._execute(self._actions_page_query(scan)))

    def list_steps(
        self,
        thread_id: str,
        *,
        checkpoint_ns: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        step: int | None = None,
        checkpoint_id: str | None = None,
        checkpoint_prefix: str | None = None,
        run_prefix: str | None = None,
    ) -> Iterator[StepRecord]:
        """`alist_steps`, from a thread other than the saver's event loop (pages are still streamed)."""
        scan = StepScan(
            thread_id,
            checkpoint_ns=checkpoint_ns,
            before=before,
            limit=limit,
            step=step,
            checkpoint_id=checkpoint_id,
            checkpoint_prefix=checkpoint_prefix,
            run_prefix=run_prefix,
        )
        while not scan.done:
            yield from self._on_loop(self._execute(self._steps_page_query(scan)))

    def step_neighbours(self, thread_id: str, step: int) -> tuple[int | None, int | None]:
        """`astep_neighbours`, from a thread other than the saver's event loop."""
        return self._on_loop(self._execute(self._step_neighbours_query(thread_id, step)))

    def find_effect(self, key: EffectKey, config: RunnableConfig | None = None) -> tuple[bool, Any]:
        """`afind_effect`, from a thread other than the saver's event loop."""
        return self._on_loop(self._run(self._find_effect_plan(key, config)))

    def record_effect(self, key: EffectKey, config: RunnableConfig, result: Any) -> Any:
        """`arecord_effect`, from a thread other than the saver's event loop."""
        return self._effect_recorded(key, self._on_loop(self._execute(self._record_effect_query(key, config, result))), result)

    def actions_from(self, thread_id: str, *, checkpoint_ns: str, checkpoint_id: str, limit: int) -> Sequence[ActionRecord]:
        """`aactions_from`, from a thread other than the saver's event loop."""
        return self._on_loop(self._execute(self._actions_from_query(thread_id, checkpoint_ns, checkpoint_id, limit)))

    def list_threads(
        self,
        *,
        status: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Iterator[ThreadRecord]:
        """`alist_threads`, from a thread other than the saver's event loop (pages are still streamed)."""
        scan = ThreadScan(status=status, run_id=run_id, metadata=metadata, since=since, until=until, limit=limit, after=after)
        while not scan.done:
            yield from self._on_loop(self._execute(self._threads_page_query(scan)))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`aput`, from a thread other than the saver's event loop."""
        return self._on_loop(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`aput_writes`, from a thread other than the saver's event loop."""
        return self._on_loop(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """`adelete_thread`, from a thread other than the saver's event loop."""
        return self._on_loop(self.adelete_thread(thread_id))

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """`aget_delta_channel_history`, from a thread other than the saver's event loop."""
        return self._on_loop(self.aget_delta_channel_history(config=config, channels=channels))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """`adelete_for_runs`, from a thread other than the saver's event loop."""
        return self._on_loop(self.adelete_for_runs(run_ids))

    def backfill_actions(self, *, thread_ids: Sequence[str] | None = None, batch_size: int = 100) -> int:
        """`abackfill_actions`, from a thread other than the saver's event loop."""
        return self._on_loop(self.abackfill_actions(thread_ids=thread_ids, batch_size=batch_size))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """`acopy_thread`, from a thread other than the saver's event loop."""
        return self._on_loop(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`aprune`, from a thread other than the saver's event loop."""
        return self._on_loop(self.aprune(thread_ids, strategy=strategy))

    def gc(self, *, grace_period: timedelta = timedelta(hours=1), dry_run: bool = False) -> int:
        """`agc`, from a thread other than the saver's event loop."""
        return self._on_loop(self.agc(grace_period=grace_period, dry_run=dry_run))

    # end


# A statement no writer of one thread sends waits in no queue (see THREAD_QUEUES).
_NOT_QUEUED = nullcontext()


async def _give_back(pool: AsyncConnectionPool, conn: AsyncConnection) -> None:
    """Return `conn` to `pool`, rolled back first when an attempt failed inside a transaction
    (as the pool's connection() would; putconn alone rolls back too, with a warning)."""
    if not conn.closed and conn.pgconn.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        try:
            await conn.rollback()
        except Exception:  # broken: putconn sees it and replaces the connection
            pass
    await pool.putconn(conn)
