"""A primary lost mid-run and its standby promoted: what production does to Postgres.

Each test starts its own primary and streaming standby (tests/support/replication.py) and
connects the saver with both hosts and `target_session_attrs=read-write`, as a managed
Postgres is reached. The failover happens inside a graph node, at a known step: the node
SIGKILLs the primary's postmaster, and the standby is promoted once it has seen the
primary go. Then:
- with synchronous replication, the run goes on by itself: no error reaches the caller,
  no acknowledged step is lost, none runs twice, and the final state is exact;
- with asynchronous replication and the standby cut off some steps before the kill (the
  commits the primary acknowledged since are lost by the failover), the saver refuses to
  write on top of the rewound history (HistoryRewoundError, naming the thread, the lost
  checkpoint and the newest one the server holds), and running the thread again with
  input None re-runs the lost steps from there and ends with the exact state.
"""

from __future__ import annotations

import asyncio
import operator
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from checkpoints import first_put, next_put
from langgraph_pg_durable import AsyncDurablePostgresSaver, DatabaseUnavailableError, DurablePostgresSaver, HistoryRewoundError, RetryPolicy
from pg_server import PgServer
from replication import ReplicaPair, start_replica_pair

STEPS = 40
CUT_AT = 12  # async replication: the standby stops streaming when the node runs with this count
KILL_AT = 20  # the node run with this count kills the primary
TIMEOUT = 120.0
DB = "app"
RETRY = RetryPolicy(reconnect_deadline=90.0, attempt_timeout=30.0)


class CounterState(TypedDict):
    count: int
    log: Annotated[list[int], operator.add]


EXPECTED = {"count": STEPS, "log": list(range(STEPS))}


def _pair(synchronous: bool) -> Iterator[ReplicaPair]:
    pair = start_replica_pair(synchronous=synchronous)
    try:
        pair.create_database(DB)
        yield pair
    finally:
        pair.stop()


@pytest.fixture
def synchronous_pair() -> Iterator[ReplicaPair]:
    yield from _pair(synchronous=True)


@pytest.fixture
def asynchronous_pair() -> Iterator[ReplicaPair]:
    yield from _pair(synchronous=False)


class Failover:
    """The failover a node sets off, once: the kill, then the promotion on another thread
    as soon as the standby has lost its primary (the saver meanwhile finds no server)."""

    def __init__(self, pair: ReplicaPair, *, cut_at: int | None = None, before_kill: Callable[[], None] | None = None) -> None:
        self.pair = pair
        self.cut_at = cut_at
        self.before_kill = before_kill
        self.killed_at: float | None = None
        self.promoted = threading.Event()
        self.error: BaseException | None = None
        self._done: set[str] = set()

    def at(self, count: int) -> None:
        """Called by the node with its count, before it returns its update."""
        if count == self.cut_at and "cut" not in self._done:
            self._done.add("cut")
            self.pair.wait_caught_up()  # what came before is on the standby...
            self.pair.cut_standby_off()  # ...and nothing after
        if count == KILL_AT and "kill" not in self._done:
            self._done.add("kill")
            if self.before_kill is not None:
                self.before_kill()
            self.pair.kill_primary()
            self.killed_at = time.monotonic()
            threading.Thread(target=self._promote, name="promote", daemon=True).start()

    def _promote(self) -> None:
        try:
            if self.cut_at is None:  # a standby still streaming notices its primary is gone
                self.pair._until(
                    self.pair.standby_dsn, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)", (), "the standby kept its primary"
                )
            self.pair.promote()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.promoted.set()


def counter_graph(checkpointer: Any, failover: Failover) -> Any:
    def work(state: CounterState) -> dict[str, Any]:
        failover.at(state["count"])
        return {"count": state["count"] + 1, "log": [state["count"]]}

    builder = StateGraph(CounterState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", lambda s: "work" if s["count"] < STEPS else END, ["work", END])
    return builder.compile(checkpointer=checkpointer)


@contextmanager
def one_saver(mode: str, dsn: str, schema: str, failover: Failover) -> Iterator[Callable[[Any, dict], Any]]:
    """A function that invokes the graph, every time on the same saver instance of `mode`
    (sync, or async on an event loop of its own), set up on `dsn`."""
    if mode == "sync":
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema, retry=RETRY) as saver:
            saver.setup()
            graph = counter_graph(saver, failover)
            yield lambda inputs, config: graph.invoke(inputs, config, durability="sync")
        return
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, name="saver-loop", daemon=True)
    runner.start()

    def call(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(TIMEOUT)

    opened = AsyncDurablePostgresSaver.from_conn_string(dsn, schema=schema, retry=RETRY)
    try:
        saver = call(opened.__aenter__())
        try:
            call(saver.setup())
            graph = counter_graph(saver, failover)
            yield lambda inputs, config: call(graph.ainvoke(inputs, config, durability="sync"))
        finally:
            call(opened.__aexit__(None, None, None))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(TIMEOUT)
        loop.close()


def steps_on(dsn: str, schema: str, thread_id: str) -> list[tuple[int, str, Any]]:
    """(step, checkpoint_id, created_at) of the thread's checkpoints on one server, by id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            f'SELECT step, checkpoint_id, created_at FROM "{schema}".checkpoints WHERE thread_id = %s ORDER BY checkpoint_id',
            (thread_id,),
        ).fetchall()


def writes_without_checkpoint(dsn: str, schema: str, thread_id: str) -> dict[str, int]:
    """Rows of the thread's pending writes and action log whose checkpoint is not stored."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            table: conn.execute(
                f'SELECT count(*) FROM "{schema}".{table} w WHERE w.thread_id = %s AND NOT EXISTS ('
                f'SELECT 1 FROM "{schema}".checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns '
                "AND c.checkpoint_id = w.checkpoint_id)",
                (thread_id,),
            ).fetchone()[0]
            for table in ("checkpoint_writes", "action_log")
        }


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_goes_on_by_itself_across_a_failover_with_synchronous_replication(synchronous_pair: ReplicaPair, mode: str) -> None:
    pair, schema, thread_id = synchronous_pair, "lgpd_failover", f"sync-{uuid.uuid4().hex[:8]}"
    failover = Failover(pair)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": STEPS + 10}

    with one_saver(mode, pair.dsn(DB), schema, failover) as invoke:
        result = invoke({"count": 0, "log": []}, config)

    assert failover.error is None and failover.killed_at is not None
    assert result == EXPECTED  # no error reached the caller, and the state is exact
    rows = steps_on(pair.node_dsn(pair.standby_port, DB), schema, thread_id)
    # One checkpoint per step, the input's (-1) to the last: none lost, none written twice.
    assert [step for step, _, _ in rows] == list(range(-1, STEPS + 1))
    with DurablePostgresSaver.from_conn_string(pair.dsn(DB), schema=schema) as fresh:
        assert fresh.get_tuple(config).checkpoint["channel_values"] == EXPECTED
        history = list(fresh.list(config))
    assert len(history) == STEPS + 2 and len({h.config["configurable"]["checkpoint_id"] for h in history}) == STEPS + 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_rewound_history_is_refused_and_the_thread_resumes_from_what_the_server_holds(asynchronous_pair: ReplicaPair, mode: str) -> None:
    pair, schema, thread_id = asynchronous_pair, "lgpd_failover", f"async-{uuid.uuid4().hex[:8]}"
    on_old_primary: list[tuple[int, str, Any]] = []
    failover = Failover(
        pair, cut_at=CUT_AT, before_kill=lambda: on_old_primary.extend(steps_on(pair.node_dsn(pair.primary_port, DB), schema, thread_id))
    )
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": STEPS + 10}

    with one_saver(mode, pair.dsn(DB), schema, failover) as invoke:
        with pytest.raises(HistoryRewoundError) as rewound:
            invoke({"count": 0, "log": []}, config)
        assert failover.promoted.wait(TIMEOUT) and failover.error is None
        survivors = steps_on(pair.node_dsn(pair.standby_port, DB), schema, thread_id)
        orphans = writes_without_checkpoint(pair.node_dsn(pair.standby_port, DB), schema, thread_id)
        # The recovery the error advises, on the same saver instance: run the thread again.
        result = invoke(None, config)

    error = rewound.value
    assert orphans == {"checkpoint_writes": 0, "action_log": 0}  # nothing written on top of the rewound history
    acknowledged = {cid: step for step, cid, _ in on_old_primary}
    # The server holds the steps up to the cut: the node that cut the standby off ran from
    # the checkpoint of step CUT_AT (count CUT_AT), whose own writes came after the cut.
    assert [step for step, _, _ in survivors] == list(range(-1, CUT_AT + 1))
    assert error.thread_id == thread_id and error.checkpoint_ns == ""
    assert error.newest_checkpoint_id == survivors[-1][1]
    # The primary had acknowledged the steps after the cut up to the kill: the failover lost them.
    assert sorted(step for cid, step in acknowledged.items() if cid not in {c for _, c, _ in survivors}) == list(
        range(CUT_AT + 1, KILL_AT + 1)
    )
    # The missing parent is one of those or a later one (a backend of the killed postmaster
    # can still commit a step before it notices): gone from the server, newer than what it holds.
    assert error.missing_checkpoint_id not in {c for _, c, _ in survivors} and error.missing_checkpoint_id > error.newest_checkpoint_id
    assert thread_id in str(error) and error.missing_checkpoint_id in str(error) and error.newest_checkpoint_id in str(error)

    assert result == EXPECTED
    rows = steps_on(pair.node_dsn(pair.standby_port, DB), schema, thread_id)
    assert [step for step, _, _ in rows] == list(range(-1, STEPS + 1))  # the lost steps ran again, once each
    assert not {cid for _, cid, _ in rows[CUT_AT + 2 :]} & set(acknowledged)  # nothing of the lost branch


def test_a_commit_whose_replication_wait_is_cancelled_is_not_taken_for_acknowledged(synchronous_pair: ReplicaPair) -> None:
    """The server commits locally, warns that replication was not confirmed, and answers as
    if it had: the saver sends the put again, its commit waiting for the standby, and
    returns only once the standby confirms."""
    pair, schema = synchronous_pair, "lgpd_failover"
    primary = pair.node_dsn(pair.primary_port, DB)
    outcome: dict[str, Any] = {}
    with DurablePostgresSaver.from_conn_string(pair.dsn(DB), schema=schema, retry=RETRY, min_size=1, max_size=1) as saver:
        saver.setup()
        first = first_put(saver, "t", {"a": 1})
        pair.cut_standby_off()  # from now on a commit waits for a standby that is not there
        version = saver.get_next_version(None, None)

        def put() -> None:
            try:
                outcome["config"] = next_put(saver, first, {"a": 2}, {"a": version}, {"a": version}, step=0)
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome["error"] = exc

        putter = threading.Thread(target=put, name="put", daemon=True)
        putter.start()
        waiting = _wait_for_sync_rep(primary, putter, seen=set())
        with psycopg.connect(primary, autocommit=True) as conn:
            assert conn.execute("SELECT pg_cancel_backend(%s)", (waiting[0],)).fetchone()[0]
        # The warning's commit was not taken for an answer: the put is sent again and waits anew.
        _wait_for_sync_rep(primary, putter, seen={waiting})
        assert putter.is_alive() and not outcome
        pair.reconnect_standby()
        putter.join(TIMEOUT)
        assert not putter.is_alive() and "error" not in outcome, outcome.get("error")
        assert saver.get_tuple(outcome["config"]).checkpoint["channel_values"] == {"a": 2}


def _wait_for_sync_rep(dsn: str, putter: threading.Thread, seen: set[tuple[int, Any]]) -> tuple[int, Any]:
    """(pid, transaction start) of a commit waiting for the synchronous standby, other than
    those `seen`; fails if the put ends first."""
    deadline = time.monotonic() + TIMEOUT
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute("SELECT pid, xact_start FROM pg_stat_activity WHERE wait_event = 'SyncRep'").fetchall()
            fresh = [tuple(row) for row in rows if tuple(row) not in seen]
            if fresh:
                return fresh[0]
            assert putter.is_alive(), "the put returned: a commit the server did not confirm was taken for acknowledged"
            assert time.monotonic() < deadline, "no commit waits for the standby"
            time.sleep(0.02)  # poll interval of a state check, not a guess at a duration


def test_a_server_that_stops_answering_is_given_up_after_the_attempt_timeout(pg_server: PgServer, schema_name: str) -> None:
    """A backend frozen with SIGSTOP (its kernel still acknowledges every packet, as a hung
    host behind a live network can): the attempt's timeout closes the connection and the put
    goes through on a new one."""
    retry = RetryPolicy(attempt_timeout=1.0, reconnect_deadline=60.0)
    with DurablePostgresSaver.from_conn_string(pg_server.dsn, schema=schema_name, retry=retry, min_size=1, max_size=1) as saver:
        saver.setup()
        with saver.conn.connection() as conn:
            frozen = conn.info.backend_pid
        try:
            os.kill(frozen, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            pytest.skip("the test server's backends are not processes of this machine")
        try:
            config = first_put(saver, "t", {"a": 1})
        finally:
            os.kill(frozen, signal.SIGCONT)
        with saver.conn.connection() as conn:
            assert conn.info.backend_pid != frozen
        assert saver.get_tuple(config).checkpoint["channel_values"] == {"a": 1}


def test_a_server_turned_read_only_is_retried_and_left_once_writable(pg_server: PgServer) -> None:
    """A demoted primary answers writes with SQLSTATE 25006: the saver retries (it is a
    lost server, not a refused statement), and drains its pool, whose every connection is
    on the read-only server; once the server is writable again (here the database's default
    turned back), the same saver writes on."""
    name = f"lgpd_ro_{uuid.uuid4().hex[:8]}"
    dsn = pg_server.create_database(name)

    def read_only(on: bool) -> None:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SET default_transaction_read_only = off")
            admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = {"on" if on else "off"}')

    with DurablePostgresSaver.from_conn_string(dsn, min_size=2, max_size=2) as saver:
        saver.setup()
        first = first_put(saver, "t", {"a": 1})
        read_only(True)
        with psycopg.connect(dsn, autocommit=True) as admin:  # as on a demoted server: every session
            # ends (the pool's, and the one the saver keeps between calls), and new ones start read-only
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        saver.retry = RetryPolicy(reconnect_deadline=1.0, initial_backoff=0.05, max_backoff=0.2)
        version = saver.get_next_version(None, None)
        with pytest.raises(DatabaseUnavailableError, match="read-only"):
            next_put(saver, first, {"a": 2}, {"a": version}, {"a": version}, step=0)
        read_only(False)
        saver.retry = RetryPolicy(reconnect_deadline=60.0)
        second = next_put(saver, first, {"a": 2}, {"a": version}, {"a": version}, step=0)
        assert saver.get_tuple(second).checkpoint["channel_values"] == {"a": 2}
