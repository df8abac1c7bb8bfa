# Generated from langgraph_pg_durable/aio.py by tools/async_to_sync.py: do not edit.
"""DurablePostgresSaver: the synchronous shell. It sends Queries; it decides nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
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
from psycopg import Connection, errors, pq
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool

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
from .pools import FailoverPool, drain, with_connection_defaults
from .spare import Spare
from .inflight import WritesInFlight, in_flight_key
from .memory import DEFAULT_ITEM_CACHE_BYTES
from .store import DEFAULT_CACHE_BYTES, DEFAULT_REUSE_WINDOW
from .objects import ObjectStorage
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


class DurablePostgresSaver(SaverCore):
    """A LangGraph checkpointer on PostgreSQL, for `graph.invoke` / `graph.stream`.

    Give it a psycopg `ConnectionPool` (calls then run in parallel, one pooled
    connection each) or a single `Connection` (calls are serialized on it).
    """

    _object_storage = ObjectStorage

    def __init__(
        self,
        conn: Connection | ConnectionPool,
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
        self._writes_in_flight = WritesInFlight()
        self._spare = Spare()  # off: from_conn_string turns it on for the pool it builds
        self.conn = conn
        self.is_pool = isinstance(conn, ConnectionPool)
        # A single connection runs one statement at a time; a pool needs no lock.
        self._lock = threading.Lock()
        self._queues = [threading.Lock() for _ in range(THREAD_QUEUES)]  # (see THREAD_QUEUES)

    @classmethod
    @contextmanager
    def from_conn_string(
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
    ) -> Iterator[DurablePostgresSaver]:
        """A saver on its own connection pool, closed on exit.

        `prepare_threshold=None` turns server-side prepared statements off, as PgBouncer
        in transaction mode requires.
        """
        savers: list[DurablePostgresSaver] = []

        def configure(conn: Connection) -> None:
            if savers:
                savers[0]._configure(conn)

        pool = FailoverPool(
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
            pool.open(wait=True, timeout=timeout)
            yield saver
        finally:
            spare = savers[0]._spare.release() if savers else None
            if spare is not None:
                pool.putconn(spare)
            pool.close()

    # -- I/O ------------------------------------------------------------------------

    @contextmanager
    def _connection(self, timeout: float | None = None) -> Iterator[Connection]:
        """A connection of the pool (waiting at most `timeout`, else the pool's own), or the saver's one."""
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection(timeout=timeout) as conn:
                yield conn
        else:
            with self._lock:
                yield self.conn

    def _run(self, plan: Plan[T]) -> T:
        """Carry out an operation of several statements (see core.Plan)."""
        try:
            step = next(plan)
            while True:
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    step = plan.send(None)
                else:
                    step = plan.send(self._execute(step))
        except StopIteration as finished:
            return cast(T, finished.value)

    def _execute(self, query: Query[T]) -> T:
        """Send the statement (one round trip; with objects to store, see _send_with_uploads),
        transient errors retried, then fetch and verify the objects its rows reference."""
        started = time.monotonic()
        attempts: Attempts | None = None  # made at the first failure: most calls succeed at once
        confirm = False  # after a commit the server did not confirm as replicated
        pool = self.conn if isinstance(self.conn, ConnectionPool) else None
        slot = self._queue_of(query)
        # A writer of one thread waits for the saver's other flight of it here, each attempt
        # (not through a retry's pause), before it takes a connection (see THREAD_QUEUES).
        queue = self._queues[slot] if slot is not None else _NOT_QUEUED
        while True:
            try:
                with queue:
                    if pool is None:
                        with self._connection() as conn:
                            fetched = self._attempt(conn, query, confirm)
                    else:
                        # getconn/putconn rather than the pool's connection(): an attempt leaves
                        # its connection idle (in autocommit, or after its own transaction), so
                        # the commit that connection() makes on the way out has nothing to do (a
                        # tenth of a step's instructions with the pool's other bookkeeping).
                        # The connection the last call left idle, if the saver keeps one (spare.py).
                        kept = self._spare.take()
                        if kept is None:
                            conn, since = pool.getconn(timeout=self._pool_wait(started)), time.monotonic()
                        else:
                            conn, since = kept
                        done = False
                        try:
                            fetched = self._attempt(conn, query, confirm)
                            done = True
                        finally:
                            if not (done and self._spare.keep(conn, since, pool)):
                                _give_back(pool, conn)
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
                        _give_back(pool, spare)
                    if isinstance(exc, errors.ReadOnlySqlTransaction):
                        drain(pool)  # every idle connection may be on the demoted server
                    else:
                        pool.check()  # drop the other dead connections
                time.sleep(delay)
        if query.references is None:  # a write, most reads: no object to fetch
            return query.decode(fetched)
        wanted = self._wanted_objects(query, fetched)
        payloads = self.objects.fetch_all(wanted) if wanted else {}  # type: ignore[union-attr]
        return query.decode(self._attach_objects(query, fetched, payloads))

    def _attempt(self, conn: Connection, query: Query[Any], confirm: bool) -> list[Any]:
        """One attempt at `query` on `conn` (see `_execute`)."""
        if query.uploads:
            return self._send_with_uploads(conn, query, confirm=confirm)
        return self._send(conn, query, confirm=confirm)

    def _pool_wait(self, started: float) -> float | None:
        """How long an attempt may wait for a pooled connection: the pool's own timeout, cut
        to what is left of the deadline of the call started at `started`."""
        if not isinstance(self.conn, ConnectionPool):
            return None
        return max(0.1, min(self.conn.timeout, time_left(self.retry, started)))

    def _send(self, conn: Connection, query: Query[Any], *, confirm: bool = False) -> list[Any]:
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
            with conn.lock:
                try:
                    return conn.wait(wire.exchange(conn, statements, timeout))
                except errors.InvalidSqlStatementName:
                    # The session lost the statements we prepared (DISCARD ALL, a pooler):
                    # wire forgot them; prepare them again, once.
                    return conn.wait(wire.exchange(conn, statements, timeout))
        with conn.cursor(binary=True, row_factory=tuple_row) as cur:
            with conn.pipeline():
                if conn.autocommit:
                    for statement, params in [*self._confirming(confirm), *self._preamble(query)]:
                        conn.execute(statement, params)
                    cur.execute(query.sql, query.params)
                else:
                    with conn.transaction():
                        for statement, params in [*self._confirming(confirm), *self._preamble(query)]:
                            conn.execute(statement, params)
                        cur.execute(query.sql, query.params)
            # Leaving the pipeline synced it: the results are here.
            return cur.fetchall() if has_rows(cur) else []

    def _configure(self, conn: Connection) -> None:
        """Ready a new connection of the saver's own pool: work_mem raised to at least
        COLD_READ_WORK_MEM and the prepared statements planned generically (GENERIC_PLANS),
        neither where the connection says otherwise already, nor behind PgBouncer in
        transaction mode (where a session setting would reach other clients); then the
        warm-up. Best effort."""
        if conn.prepare_threshold is not None:
            for setting in (RAISE_WORK_MEM, GENERIC_PLANS):
                try:
                    conn.execute(setting)
                except errors.Error:
                    pass
        self._warm_up(conn)

    def _warm_up(self, conn: Connection) -> None:
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
            conn.execute("SET lock_timeout = '100ms'")
            try:
                # Six runs each: on a connection left to plan_cache_mode `auto` (see
                # GENERIC_PLANS), the server's plan cache then has its generic plan too.
                conn.wait(wire.exchange(conn, self._warm_up_statements() * 6, self.retry.attempt_timeout))
            finally:
                conn.execute("RESET lock_timeout")
        except errors.Error:
            pass

    def _send_with_uploads(self, conn: Connection, query: Query[Any], *, confirm: bool = False) -> list[Any]:
        """Send the statement while the objects it references upload, and commit only once
        every one is confirmed. The transaction holds gc's lock shared from before the first
        upload to the commit: gc() (which holds it exclusively while it checks references and
        deletes) never runs between an upload and the row that references it.

        On an idle autocommit connection, flights through `wire`: the begin with the locks,
        the statement alongside the uploads, the commit; when every object was confirmed
        recently (a checkpoint referencing the value its task's write just stored), the
        statement goes with the locks and the commit follows."""
        objects: ObjectStorage | None = self.objects
        assert objects is not None
        locks: list[tuple[str, Mapping[str, Any]]] = [
            *self._confirming(confirm),
            (self.sql.GC_SHARE, {"gc_key": self._gc_key}),
            *self._preamble(query),
        ]
        timeout = self.retry.attempt_timeout
        if not wire.usable(conn):
            with conn.transaction(), conn.cursor(binary=True, row_factory=tuple_row) as cur:
                for statement, params in locks:
                    cur.execute(statement, params)

                def send_by_cursor() -> list[Any]:
                    cur.execute(query.sql, query.params)
                    return cur.fetchall() if has_rows(cur) else []

                return objects.store_alongside(query.uploads, send_by_cursor)  # claimed under gc's lock

        def send() -> list[Any]:
            return conn.wait(wire.exchange(conn, [(query.sql, query.params)], timeout))

        def transaction() -> list[Any]:
            try:
                if objects.confirmed(query.uploads):  # likely nothing to upload: the statement goes with the locks
                    fetched = conn.wait(wire.exchange(conn, [("BEGIN", {}), *locks, (query.sql, query.params)], timeout))
                    objects.store_all(query.uploads)  # claimed under gc's lock: uploads any no longer confirmed
                else:
                    conn.wait(wire.exchange(conn, [("BEGIN", {}), *locks], timeout))
                    fetched = objects.store_alongside(query.uploads, send)  # claimed under gc's lock
                conn.wait(wire.exchange(conn, [("COMMIT", {})], timeout))
            except BaseException:
                if not conn.broken and not wire.usable(conn):  # the transaction is still open
                    try:
                        conn.wait(wire.exchange(conn, [("ROLLBACK", {})]))
                    except Exception:  # the first error is the one to raise; a pool drops the connection
                        pass
                raise
            return fetched

        with conn.lock:
            try:
                return transaction()
            except errors.InvalidSqlStatementName:
                # The session lost the statements we prepared (see _send): prepare them again, once.
                return transaction()

    # -- schema -----------------------------------------------------------------------

    def schema_version(self) -> int | None:
        """The migration the schema is at (`setup()` brings it to the package's); None when
        the schema holds no saver tables. A role without CREATE can ask."""
        with self._connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(schema_sql.ledger_exists_sql(), {"schema": self.schema})
            if not (cur.fetchone())[0]:  # type: ignore[index]
                return None
            cur.execute(schema_sql.current_version_sql(quote_schema(self.schema)))
            return int((cur.fetchone())[0])  # type: ignore[index]

    def diagnose(self, *, top: int = 5) -> dict[str, Any]:
        """What `lgpd doctor` shows: the server and its durability settings (`durability`:
        whether it is a primary or in recovery, its standbys, what can lose or hang a commit),
        the schema's version against this package's, extensions, each table's and index's
        size, the `top` oldest and largest threads, and whether the object store answers."""
        quoted = quote_schema(self.schema)
        out: dict[str, Any] = {"schema": self.schema, "package_schema_version": len(schema_sql.migrations())}
        out["schema_version"] = self.schema_version()
        with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(doctor_sql.SERVER)
            out["server"] = cur.fetchone()
            cur.execute(doctor_sql.SETTINGS)
            out["settings"] = {r["name"]: r["setting"] for r in cur.fetchall()}
            out["durability"] = self._read_durability(conn)
            cur.execute(doctor_sql.EXTENSIONS)
            out["extensions"] = {r["extname"]: r["extversion"] for r in cur.fetchall()}
            cur.execute(doctor_sql.RELATIONS, {"schema": self.schema})
            out["relations"] = cur.fetchall()
            if out["schema_version"]:
                for key, statement in (("oldest_threads", doctor_sql.oldest_threads), ("largest_threads", doctor_sql.largest_threads)):
                    cur.execute(statement(quoted), {"top": top})
                    out[key] = cur.fetchall()
        out["object_store"] = self.objects.probe(self.placement.prefix) if self.objects is not None else None
        return out

    def _read_durability(self, conn: Connection) -> Durability:
        """The server's durability settings, as this saver's commits meet them: one statement
        (in a transaction of its own on a connection not in autocommit: none is left open)."""
        with conn.cursor(row_factory=tuple_row) as cur:
            if conn.autocommit:
                cur.execute(durability_sql.READ)
            else:
                with conn.transaction():
                    cur.execute(durability_sql.READ)
            row = cur.fetchone()
        assert row is not None
        return durability_report(row, self.synchronous_commit)

    def setup(self) -> None:
        """Create or upgrade the schema; safe to call from many processes at once. Then read
        the server's durability settings into `self.durability` and log them (logger
        "langgraph_pg_durable"): a WARNING when the server acknowledges commits that a crash
        or a failover can lose, or commits would hang; INFO otherwise."""
        quoted = quote_schema(self.schema)
        # Asked here, so that the first write need not ask (nothing is sent when routed_writes was given).
        self._run(self._routing_plan(f"setup of schema {shown(self.schema)}"))

        def migrate(conn: Connection) -> None:
            # Scripts of several statements are never prepared (the server refuses that),
            # whatever prepare_threshold the connection has: prepare=False sends them as
            # one simple query.
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                # A schema already current needs no DDL, so an app role with USAGE and DML
                # only (no CREATE) can call setup(): read the ledger before anything else.
                cur.execute(schema_sql.ledger_exists_sql(), {"schema": self.schema})
                if (cur.fetchone())[0]:  # type: ignore[index]
                    cur.execute(schema_sql.current_version_sql(quoted))
                    if not schema_sql.pending(self.schema, (cur.fetchone())[0]):  # type: ignore[index]
                        return
                cur.execute(schema_sql.lock_sql(self.schema))
                cur.execute(schema_sql.bootstrap_sql(quoted), prepare=False)
                cur.execute(schema_sql.current_version_sql(quoted))
                current = (cur.fetchone())[0]  # type: ignore[index]
                for migration in schema_sql.pending(self.schema, current):
                    for statement in migration.statements(self.schema):
                        cur.execute(statement, prepare=False)
                    cur.execute(schema_sql.record_sql(quoted), (migration.version, migration.name))

        attempts = Attempts(self.retry, f"setup of schema {shown(self.schema)}")
        while True:
            try:
                with self._connection() as conn:
                    migrate(conn)
                    # Best effort, after the migrations: a role or a server that refuses the read still gets setup().
                    try:
                        report = self._read_durability(conn)
                    except errors.Error as exc:
                        logger.info("durability settings of the server not read (%s: %s)", type(exc).__name__, exc)
                        return
                break
            except Exception as exc:
                time.sleep(attempts.next_delay(exc))
        self.durability = report
        logger.log(logging.WARNING if report.problems else logging.INFO, "schema %s: %s", self.schema, report.message())

    def distribute(self) -> tuple[str, ...]:
        """Distribute the schema's tables on Citus by thread_id, co-located, and make the
        migrations ledger a reference table (the statements of `sql/distribute.py`), in one
        transaction, on the coordinator, after `setup()`. DistributionError, nothing changed,
        without the citus extension or the saver's tables. Returns the tables it distributed;
        those Citus already had are skipped, so it can run again after an upgrade's setup()."""
        quoted = quote_schema(self.schema)
        steps = distribute_sql.steps(self.schema)

        def run(conn: Connection) -> tuple[str, ...]:
            # A refusal raised in the transaction rolls it back: nothing is changed.
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                cur.execute(distribute_sql.CITUS_EXTENSION)
                database, citus_version = cur.fetchone()  # type: ignore[misc]
                distribute_sql.require_citus(self.schema, database, citus_version)
                # setup()'s lock: no migration runs while the tables are distributed.
                cur.execute(schema_sql.lock_sql(self.schema))
                cur.execute(schema_sql.ledger_exists_sql(), {"schema": self.schema})
                version = None
                if (cur.fetchone())[0]:  # type: ignore[index]
                    cur.execute(schema_sql.current_version_sql(quoted))
                    version = (cur.fetchone())[0]  # type: ignore[index]
                distribute_sql.require_schema(self.schema, version)
                cur.execute(distribute_sql.SEQUENTIAL)
                done = []
                for step in steps:
                    cur.execute(step.sql)
                    if cur.fetchall():
                        done.append(step.table)
                return tuple(done)

        attempts = Attempts(self.retry, f"distribution of schema {shown(self.schema)}")
        while True:
            try:
                with self._connection() as conn:
                    done = run(conn)
                break
            except Exception as exc:
                time.sleep(attempts.next_delay(exc))
        if not self._routing_chosen:
            self.routed_writes = True  # this saver's writes now go to the workers as calls
        return done

    # -- BaseCheckpointSaver -------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (the thread's latest without a checkpoint_id) and its
        pending writes, read in one round trip; None if there is none. A run's first read of
        a thread takes the thread first (one writer per thread, README "Exactly once"): in
        the same flight under `takeover`, a statement before it under `reject` and `wait`."""
        return self._run(self._get_tuple_plan(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, matching `filter` (metadata containment) and older than
        `before`; streamed page by page, so the first arrives before the rest are read."""
        scan = self._history_scan(config, filter, before, limit)
        if scan.first_in_one:  # a thread's first page comes with its details
            for item in self._execute(self._first_page_query(scan)):
                yield item
        while not scan.done:
            page = self._execute(self._page_query(scan))
            if not page:
                return
            for item in self._execute(self._details_query(scan, page)):
                yield item

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
        """Runs (the `runs` view), newest first: of one thread, with one status (done,
        interrupted, error, running), started in [since, until); streamed page by page.
        `before`: the (started_at, run_id) of the last run of a page of one thread's runs,
        for the next page."""
        scan = RunScan(thread_id=thread_id, status=status, since=since, until=until, limit=limit, before=before)
        while not scan.done:
            for record in self._execute(self._runs_page_query(scan)):
                yield record

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
            for record in self._execute(self._actions_page_query(scan)):
                yield record

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
            for record in self._execute(self._steps_page_query(scan)):
                yield record

    def step_neighbours(self, thread_id: str, step: int) -> tuple[int | None, int | None]:
        """The root-namespace step numbers just before and just after `step` in the thread
        (None: there is none), for a reader's previous / next links: one indexed query."""
        return self._execute(self._step_neighbours_query(thread_id, step))

    def find_effect(self, key: EffectKey, config: RunnableConfig | None = None) -> tuple[bool, Any]:
        """(True, the result) of a call `once()` recorded under `key`, or (False, None); with
        the task's `config`, a ThreadTakenError when its run lost the thread and nothing is
        recorded (the call is not to be made)."""
        return self._run(self._find_effect_plan(key, config))

    def record_effect(self, key: EffectKey, config: RunnableConfig, result: Any) -> Any:
        """Record what a call returned, committed before this returns; the result recorded
        under `key` first, when another run of the task got there before (then that one)."""
        return self._effect_recorded(key, self._execute(self._record_effect_query(key, config, result)), result)

    def actions_from(self, thread_id: str, *, checkpoint_ns: str, checkpoint_id: str, limit: int) -> Sequence[ActionRecord]:
        """The action rows of a namespace at `checkpoint_id` and at the checkpoints after it,
        in checkpoint order, at most `limit`: what made a step (its parent's rows) and what
        answered it, read in one indexed query, whatever the thread's length."""
        return self._execute(self._actions_from_query(thread_id, checkpoint_ns, checkpoint_id, limit))

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
        """Threads in thread_id order, each summarised from its checkpoint rows and its last
        run (no value is read): whose last run has `status`, that ran `run_id`, with a
        checkpoint whose metadata contains `metadata`, last active in [since, until); from the
        thread after `after` (a page's last, for the next page)."""
        scan = ThreadScan(status=status, run_id=run_id, metadata=metadata, since=since, until=until, limit=limit, after=after)
        while not scan.done:
            for record in self._execute(self._threads_page_query(scan)):
                yield record

    def put(
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
        done = self._may_use_offers(checkpoint, new_versions) and self._writes_in_flight.wait(in_flight_key(key))
        return self._run(
            self._put_plan(config, key, checkpoint, metadata, new_versions, parent_writes_done=done, waiting_sends=waiting)
        )

    def put_writes(
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
            self._run(self._put_writes_plan(config, key, writes, task_id, task_path, self._write_bases(key, writes)))
        finally:
            self._writes_in_flight.end(in_flight)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """The writes and seed value each DeltaChannel replays, read along the parent chain in a
        few statements rather than one get_tuple per ancestor."""
        return self._run(self._delta_history_plan(config, channels))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value, list item and write of a thread, in one statement."""
        self._execute(self._delete_threads_query([thread_id]))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, except the ones a surviving DeltaChannel
        checkpoint replays (kept so that it still restores)."""
        self._run(self._delete_for_runs_plan(run_ids))

    def backfill_actions(self, *, thread_ids: Sequence[str] | None = None, batch_size: int = 100) -> int:
        """Fill the action log (and run ids) of threads written without it: before migration
        0007, or with `action_log=False`. Threads are taken `batch_size` at a time, each
        written in one statement, so an interrupted backfill resumes where it stopped (a
        thread that has its log is skipped). Returns how many threads it filled."""
        return self._run(self._backfill_plan(thread_ids, batch_size))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's rows to a thread that has none yet (ConfigError, nothing copied, if it has)."""
        self._execute(self._copy_thread_query(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest` also keeps the ancestors whose writes a kept DeltaChannel
        checkpoint replays (up to the one holding the channel's value)."""
        self._run(self._prune_plan(thread_ids, strategy))

    def gc(self, *, grace_period: timedelta = timedelta(hours=1), dry_run: bool = False) -> int:
        """Delete the objects no row references that were last written over `grace_period` ago.

        An object a row of any thread references is never deleted; the grace period spares
        uploads whose rows are not committed yet. Returns how many objects were deleted
        (with `dry_run`, how many would be: nothing is deleted).
        """
        cutoff = self._gc_cutoff(grace_period)
        objects = self.objects
        assert objects is not None
        candidates = objects.list_garbage_candidates(self.placement.prefix, cutoff)
        if not candidates:
            return 0
        # From the reference check to the last delete, gc holds its lock exclusively: a put
        # storing objects holds it shared from its first upload to its commit, so no object
        # is deleted between a put's upload and the row that references it.
        with self._connection() as conn:
            self._gc_lock(conn, self.sql.GC_LOCK)
            try:
                unreferenced: list[str] = []
                for start in range(0, len(candidates), GC_BATCH):
                    batch = candidates[start : start + GC_BATCH]
                    query = self._referenced_objects_query(batch)
                    held = query.decode(self._send(conn, query))
                    unreferenced += [key for key in batch if key not in held]
                # A put may have rewritten an unreferenced object since the listing, to reference it again.
                doomed = objects.still_old(unreferenced, cutoff)
                if not dry_run:
                    objects.delete(doomed)
            finally:
                self._gc_lock(conn, self.sql.GC_UNLOCK)
        return len(doomed)

    def _gc_lock(self, conn: Connection, statement: str) -> None:
        """Take or release gc's session lock (a savepoint when the caller's transaction is open)."""
        with conn.transaction():
            conn.execute(statement, {"gc_key": self._gc_key})



# A statement no writer of one thread sends waits in no queue (see THREAD_QUEUES).
_NOT_QUEUED = nullcontext()


def _give_back(pool: ConnectionPool, conn: Connection) -> None:
    """Return `conn` to `pool`, rolled back first when an attempt failed inside a transaction
    (as the pool's connection() would; putconn alone rolls back too, with a warning)."""
    if not conn.closed and conn.pgconn.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        try:
            conn.rollback()
        except Exception:  # broken: putconn sees it and replaces the connection
            pass
    pool.putconn(conn)
