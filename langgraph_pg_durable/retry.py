"""Retry of transient database errors: which errors, how long, how often.

Every statement the savers send is idempotent (ON CONFLICT inserts, deletes, reads),
so re-sending one after a lost connection or a serialization failure is safe.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from .errors import DatabaseUnavailableError, StatementError, Where, named


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered exponential backoff.

    - deadline: seconds a call may spend retrying a lost race (serialization failure,
      deadlock) or a saturated server (too many connections), in at most `max_attempts`.
    - reconnect_deadline: seconds a call may spend getting past a lost server (a lost or
      refused connection, a restart, a failover: the old primary gone or read-only, the
      standby not yet promoted), however many attempts that takes; each attempt connects
      anew, to the hosts of the connection string in turn. The default outlasts a managed
      failover (60-120 s).
    - attempt_timeout: seconds one attempt's statements may take on the wire before the
      saver gives the connection up and tries again (a server that hangs without closing
      the connection); None waits as long as the server does.
    """

    deadline: float = 30.0
    max_attempts: int = 10
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    reconnect_deadline: float = 150.0
    attempt_timeout: float | None = 60.0

    def delays(self) -> Iterator[float]:
        """Delays before attempts 2, 3, ... up to `max_attempts`: the first of `reconnect_delays`."""
        return itertools.islice(self.reconnect_delays(), max(self.max_attempts - 1, 0))

    def reconnect_delays(self) -> Iterator[float]:
        """Delays between attempts: full jitter under a doubling ceiling, never exhausted (after
        a lost server `reconnect_deadline` ends them), so a promoted standby is found within
        `max_backoff` of its promotion."""
        ceiling = self.initial_backoff
        while True:
            yield random.uniform(ceiling / 2, ceiling)
            ceiling = min(ceiling * 2, self.max_backoff)


NO_RETRY = RetryPolicy(max_attempts=1, reconnect_deadline=0.0)


# SQLSTATEs worth another attempt: a lost serialization race or deadlock, too many connections.
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "53300"})
# A lost server: shutting down or starting (57P01-57P03), read-only (25006: a demoted
# primary, a standby not promoted yet). Class 08 (connection exceptions) and errors with
# no SQLSTATE (the connection was lost or refused) too.
SERVER_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25006"})


def is_server_lost(exc: BaseException) -> bool:
    """Errors of a server gone, going or not writable: retried until `reconnect_deadline`,
    each attempt on a new connection."""
    if isinstance(exc, PoolTimeout):  # no connection in time: the server is away (or saturated)
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith("08") or state in SERVER_LOST_SQLSTATES


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: a lost or refused connection, a restart, a failover, a lost
    race. Anything else (a statement the server refuses, a cancel, a closed pool) goes to
    the caller at once."""
    if isinstance(exc, PoolClosed):  # the caller's doing: waiting out the deadline helps nobody
        return False
    if is_server_lost(exc):
        return True
    return isinstance(exc, psycopg.Error) and exc.sqlstate in TRANSIENT_SQLSTATES


def time_left(policy: RetryPolicy, started: float) -> float:
    """Seconds left of a call started at `started` (`time.monotonic()`) before the longer of
    `policy`'s two deadlines."""
    return max(0.0, max(policy.deadline, policy.reconnect_deadline) - (time.monotonic() - started))


class Attempts:
    """Sans-I/O bookkeeping of one call's attempts; the shells sleep and re-send."""

    def __init__(self, policy: RetryPolicy, operation: Where, *, started: float | None = None) -> None:
        self.policy = policy
        self.operation = operation
        self.started = time.monotonic() if started is None else started  # the call's start, `time.monotonic()`
        self.count = 0
        # Made at the first failure: most calls succeed at once.
        self._delays: Iterator[float] | None = None
        self._reconnects: Iterator[float] | None = None

    def next_delay(self, exc: BaseException) -> float:
        """The pause before the next attempt, or raises when `exc` should reach the caller."""
        self.count += 1
        if not is_transient(exc):
            if isinstance(exc, psycopg.Error) and exc.sqlstate is not None:
                raise StatementError(
                    f"{named(self.operation)} failed: the database refused it with SQLSTATE {exc.sqlstate} "
                    f"({type(exc).__name__}: {_summary(exc)}); not retried",
                    exc.sqlstate,
                ) from exc
            raise exc
        lost = is_server_lost(exc)
        if self._delays is None or self._reconnects is None:
            self._delays, self._reconnects = self.policy.delays(), self.policy.reconnect_delays()
        delay = next(self._reconnects) if lost else next(self._delays, None)
        deadline = self.policy.reconnect_deadline if lost else self.policy.deadline
        elapsed = time.monotonic() - self.started
        if delay is None or elapsed + delay > deadline:
            raise DatabaseUnavailableError(
                f"{named(self.operation)} failed after {self.count} attempt(s) over {elapsed:.1f}s "
                f"of transient database errors; last: {type(exc).__name__}: {_summary(exc)}".rstrip()
            ) from exc
        return delay


def _summary(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's message, cut to `limit` characters."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= limit else f"{first[:limit]}... ({len(first):,} characters)"
