"""Durability with a real standby (a primary and a streaming standby, synchronous, started by
the tests): diagnose() lists the standby and says which server is in recovery; and the
`synchronous_commit` option is proven by what a commit waits for. The database the savers
use defaults to synchronous_commit=off, so a commit that waits does so because of the option:

- with the standby's replay paused, a remote_apply commit waits until it resumes (and the
  step is then readable on the standby), while 'on' and the default do not;
- with the standby cut off, an 'on' commit waits until it is back, while the default does not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from checkpoints import first_put
from langgraph.checkpoint.base import empty_checkpoint
from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from replication import ReplicaPair, start_replica_pair

DATABASE = "lgpd"
SCHEMA = "lgpd_durability"
WAIT = 30.0  # seconds for a state the servers reach on their own
# A commit that waits for its standby does so in this wait event (pg_stat_activity).
SYNC_REP = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
CRASH = "the server acknowledges commits a crash can lose"
FSYNC_OFF = "fsync is off: " + CRASH  # as on every test server


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicaPair]:
    pair = start_replica_pair(synchronous=True)
    try:
        pair.create_database(DATABASE)
        with psycopg.connect(pair.primary_dsn, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {DATABASE} SET synchronous_commit = off")
        with DurablePostgresSaver.from_conn_string(pair.node_dsn(pair.primary_port, DATABASE), schema=SCHEMA) as saver:
            saver.setup()
        pair.wait_caught_up()
        yield pair
    finally:
        pair.stop()


def primary(pair: ReplicaPair) -> str:
    return pair.node_dsn(pair.primary_port, DATABASE)


def standby(pair: ReplicaPair) -> str:
    return pair.node_dsn(pair.standby_port, DATABASE)


def waiting_commits(pair: ReplicaPair) -> int:
    with psycopg.connect(pair.primary_dsn, autocommit=True) as conn:
        return int(conn.execute(SYNC_REP).fetchone()[0])  # type: ignore[index]


def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {WAIT:.0f}s")
        time.sleep(0.05)


def checkpoints_on(dsn: str, thread_id: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {SCHEMA}.checkpoints WHERE thread_id = %s", [thread_id]).fetchone()[0])  # type: ignore[index]


def test_diagnose_lists_the_synchronous_standby_and_the_standby_is_in_recovery(pair: ReplicaPair) -> None:
    with DurablePostgresSaver.from_conn_string(primary(pair), schema=SCHEMA) as saver:
        assert saver.diagnose()["durability"].problems == (FSYNC_OFF, "synchronous_commit is off: " + CRASH)
    with DurablePostgresSaver.from_conn_string(primary(pair), schema=SCHEMA, synchronous_commit="on") as saver:
        saver.setup()
        on_primary = saver.diagnose()["durability"]
    assert saver.durability is not None and saver.durability.problems == on_primary.problems == (FSYNC_OFF,)
    assert on_primary.in_recovery is False and on_primary.synchronous_standby_names == "*"
    (one,) = on_primary.standbys
    assert (one.application_name, one.state, one.sync_state) == ("walreceiver", "streaming", "sync")
    assert one.replay_lag is None or one.replay_lag >= 0
    assert on_primary.notes == (
        "synchronous_commit is off for this role, but the saver's commits run with on",
        "replication is synchronous: a commit waits for 1 standby (on)",
    )
    with DurablePostgresSaver.from_conn_string(standby(pair), schema=SCHEMA) as saver:
        on_standby = saver.diagnose()["durability"]
    assert on_standby.in_recovery is True and on_standby.standbys == ()
    assert on_standby.problems[-1] == (
        "the server is a standby (in recovery): it refuses writes; connect to the primary (target_session_attrs=read-write)"
    )


def test_a_role_without_pg_read_all_stats_sees_the_standby_by_name(pair: ReplicaPair) -> None:
    with psycopg.connect(primary(pair), autocommit=True) as conn:
        conn.execute("CREATE ROLE lgpd_plain LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO lgpd_plain")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO lgpd_plain")
    with psycopg.connect(primary(pair).replace("user=postgres", "user=lgpd_plain")) as conn:
        report = DurablePostgresSaver(conn, schema=SCHEMA, synchronous_commit="on").diagnose()["durability"]
    assert [(s.application_name, s.state, s.sync_state, s.replay_lag) for s in report.standbys] == [("walreceiver", None, None, None)]
    assert report.problems == (FSYNC_OFF,)  # hidden is not missing
    assert any("pg_read_all_stats" in note for note in report.notes)


def test_remote_apply_commits_wait_for_the_standby_to_replay(pair: ReplicaPair) -> None:
    with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        until(lambda: conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone() == ("paused",), "replay did not pause")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        for option in (None, "on"):  # the database's off, and the standby's flush: neither waits for replay
            with DurablePostgresSaver.from_conn_string(primary(pair), schema=SCHEMA, synchronous_commit=option) as saver:
                pool.submit(first_put, saver, f"quick-{option}", {"a": 1}).result(timeout=WAIT)
        with DurablePostgresSaver.from_conn_string(primary(pair), schema=SCHEMA, synchronous_commit="remote_apply") as saver:
            put = pool.submit(first_put, saver, "applied", {"a": 1})
            until(lambda: waiting_commits(pair) == 1, "the remote_apply commit did not wait for the standby")
            assert not put.done() and checkpoints_on(standby(pair), "applied") == 0
            with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
                conn.execute("SELECT pg_wal_replay_resume()")
            put.result(timeout=WAIT)
            # remote_apply: acknowledged once the standby replayed it, so readable there already.
            assert checkpoints_on(standby(pair), "applied") == 1
    finally:
        with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
        pool.shutdown(wait=False, cancel_futures=True)


async def test_commits_hang_without_their_synchronous_standby_and_diagnose_says_so(pair: ReplicaPair) -> None:
    hang = (
        "synchronous_standby_names is '*' (1 synchronous standby needed) but 0 are connected as sync or quorum: "
        "commits hang until one connects"
    )
    await asyncio.to_thread(pair.cut_standby_off)
    cut_off = True
    try:
        async with AsyncDurablePostgresSaver.from_conn_string(primary(pair), schema=SCHEMA) as saver:
            report = (await saver.adiagnose())["durability"]
            assert hang not in report.problems  # the database's synchronous_commit=off waits for no standby
            await asyncio.wait_for(_put(saver, "unwaited"), WAIT)
        async with await psycopg.AsyncConnection.connect(primary(pair), autocommit=True) as conn:
            saver = AsyncDurablePostgresSaver(conn, schema=SCHEMA, synchronous_commit="on")
            report = (await saver.adiagnose())["durability"]
            assert report.problems == (FSYNC_OFF, hang)
            put = asyncio.create_task(_put(saver, "waited"))
            deadline = time.monotonic() + WAIT
            while await asyncio.to_thread(waiting_commits, pair) != 1:
                assert time.monotonic() < deadline, "the 'on' commit did not wait for the standby"
                await asyncio.sleep(0.05)
            assert not put.done()
            await asyncio.to_thread(pair.reconnect_standby)
            cut_off = False
            await asyncio.wait_for(put, WAIT)
    finally:
        if cut_off:
            await asyncio.to_thread(pair.reconnect_standby)
    assert checkpoints_on(primary(pair), "waited") == checkpoints_on(primary(pair), "unwaited") == 1


async def _put(saver: AsyncDurablePostgresSaver, thread_id: str) -> None:
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None)
    checkpoint["channel_values"], checkpoint["channel_versions"] = {"a": 1}, {"a": version}
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    await saver.aput(config, checkpoint, {"source": "input", "step": -1}, {"a": version})
