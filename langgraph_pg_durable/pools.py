"""The connection pools `from_conn_string` builds, made for a server that can fail over.

Two things differ from psycopg_pool's defaults, both about a primary lost and a standby
promoted in its place:
- every wait is bounded: the connection string gets a `connect_timeout`, TCP keepalives
  and a `tcp_user_timeout` unless it sets them, so a host that went silent (no reset) is
  given up in seconds rather than after the kernel's minutes;
- a lost connection is replaced by attempts at most `RECONNECT_EVERY` apart, each trying
  the connection string's hosts in turn, where psycopg_pool doubles its wait after each
  failure (1, 2, 4 ... 64 s): a standby promoted 40 s after the loss would otherwise be
  found up to a minute later.
"""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

RECONNECT_EVERY = 1.0  # seconds between two attempts to replace a lost connection, at most

# What `from_conn_string` adds to a connection string that does not set it.
CONNECTION_DEFAULTS = {
    # Seconds per host: a host that does not answer is given up, the next one tried.
    "connect_timeout": "10",
    # A connection idle while its server went away is found dead in 10 + 3 x 5 s.
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    # Milliseconds a request may stay unacknowledged before the connection is dropped.
    "tcp_user_timeout": "30000",
}


def with_connection_defaults(conn_string: str) -> str:
    """`conn_string` with CONNECTION_DEFAULTS for the settings it leaves out (a URI or
    key=value string alike; what it sets is kept)."""
    given = conninfo_to_dict(conn_string)
    missing = {k: v for k, v in CONNECTION_DEFAULTS.items() if k not in given}
    return make_conninfo(conn_string, **missing) if missing else conn_string


class _SteadyAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnection backoff from a quarter second (a promotion takes about
    that), its delay capped at RECONNECT_EVERY."""

    INITIAL_DELAY = 0.25

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_EVERY)


class _Waiting:
    """How many callers wait for one of the pool's connections."""

    def waiting(self) -> int:
        """`get_stats()["requests_waiting"]` without copying the pool's counters, as
        `get_stats` does (~11 k instructions; the saver asks at each call it could keep its
        connection for the next: spare.py)."""
        queue = getattr(self, "_waiting", None)  # psycopg_pool's queue of waiting callers
        if queue is None:
            return int(self.get_stats().get("requests_waiting", 0))  # type: ignore[attr-defined]
        return len(queue)


class FailoverPool(_Waiting, ConnectionPool):
    """A ConnectionPool that replaces lost connections steadily (see the module)."""

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _SteadyAttempt(timeout=self.reconnect_timeout), growing)


class AsyncFailoverPool(_Waiting, AsyncConnectionPool):
    """The asyncio twin of FailoverPool."""

    async def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        await super()._add_connection(attempt or _SteadyAttempt(timeout=self.reconnect_timeout), growing)


def drain(pool: Any) -> Any:
    """The call that closes every idle connection of `pool` and opens new ones (psycopg_pool's
    `drain`, else `check`): after a server turned read-only, each may point at it."""
    return pool.drain() if hasattr(pool, "drain") else pool.check()
