"""The connection a saver keeps between calls (spare.py): when it is kept, when it goes
back to the pool (pure: no server)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from psycopg import pq

from langgraph_pg_durable.spare import Spare


def connection(status: pq.TransactionStatus = pq.TransactionStatus.IDLE, *, closed: bool = False) -> SimpleNamespace:
    """What Spare reads of a connection: its transaction status (libpq's of a closed one,
    whose PGconn is gone, is UNKNOWN)."""
    return SimpleNamespace(closed=closed, pgconn=SimpleNamespace(transaction_status=pq.TransactionStatus.UNKNOWN if closed else status))


def pool(waiting: int = 0) -> SimpleNamespace:
    """What Spare reads of a pool: how many callers wait for one of its connections."""
    return SimpleNamespace(waiting=lambda: waiting)


IDLE_POOL = pool()


def test_an_own_pool_of_two_or_more_keeps_one_a_pool_of_one_none() -> None:
    conn, since = connection(), time.monotonic()
    assert not Spare.for_own_pool(1).keep(conn, since, IDLE_POOL)
    assert not Spare().keep(conn, since, IDLE_POOL)  # a caller's pool or connection
    spare = Spare.for_own_pool(2)
    assert spare.keep(conn, since, IDLE_POOL)
    assert spare.take() == (conn, since)
    assert spare.take() is None  # handed out once


def test_at_most_one_is_kept() -> None:
    spare = Spare.for_own_pool(10)
    first, second = connection(), connection()
    assert spare.keep(first, time.monotonic(), IDLE_POOL)
    assert not spare.keep(second, time.monotonic(), IDLE_POOL)  # the caller gives it back to the pool
    assert spare.release() is first and spare.release() is None


def test_a_connection_out_of_the_pool_too_long_goes_back() -> None:
    spare = Spare(enabled=True, hold_for=5.0)
    assert not spare.keep(connection(), time.monotonic() - 6.0, IDLE_POOL)
    since = time.monotonic() - 4.0
    assert spare.keep(connection(), since, IDLE_POOL)
    assert spare.take()[1] == since  # the time it left the pool travels with it, not the time it was kept


def test_a_caller_waiting_for_the_pool_gets_it() -> None:
    spare = Spare.for_own_pool(2)
    assert not spare.keep(connection(), time.monotonic(), pool(waiting=1))
    assert spare.take() is None


def test_a_closed_or_busy_connection_is_not_kept() -> None:
    spare = Spare.for_own_pool(4)
    now = time.monotonic()
    assert not spare.keep(connection(closed=True), now, IDLE_POOL)
    assert not spare.keep(connection(pq.TransactionStatus.INTRANS), now, IDLE_POOL)
    assert not spare.keep(connection(pq.TransactionStatus.INERROR), now, IDLE_POOL)
    assert spare.take() is None
