"""Retry of transient database errors: which errors, how long, how often.

Every statement the savers send is idempotent (ON CONFLICT inserts, deletes, reads),
so re-sending one after a lost connection or a serialization failure is safe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from .errors import DatabaseUnavailableError, StatementError


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered exponential backoff; `deadline` seconds caps the whole call."""

    deadline: float = 30.0
    max_attempts: int = 10
    initial_backoff: float = 0.05
    max_backoff: float = 2.0

    def delays(self) -> Iterator[float]:
        """Delays before attempts 2, 3, ...: full jitter under a doubling ceiling."""
        ceiling = self.initial_backoff
        for _ in range(self.max_attempts - 1):
            yield random.uniform(ceiling / 2, ceiling)
            ceiling = min(ceiling * 2, self.max_backoff)


NO_RETRY = RetryPolicy(max_attempts=1)


# SQLSTATEs worth another attempt: a lost serialization race or deadlock, a server shutting
# down or starting (57P01-57P03), too many connections. Class 08 (connection exceptions)
# and errors with no SQLSTATE (the connection was lost or refused) too.
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "57P01", "57P02", "57P03", "53300"})


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: a lost or refused connection, a restart, a lost race. Anything
    else (a statement the server refuses, a cancel, a closed pool) goes to the caller at once."""
    if isinstance(exc, PoolClosed):  # the caller's doing: waiting out the deadline helps nobody
        return False
    if isinstance(exc, PoolTimeout):  # no connection in time: the server is away or saturated
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith("08") or state in TRANSIENT_SQLSTATES


class Attempts:
    """Sans-I/O bookkeeping of one call's attempts; the shells sleep and re-send."""

    def __init__(self, policy: RetryPolicy, operation: str) -> None:
        self.policy = policy
        self.operation = operation
        self.started = time.monotonic()
        self.count = 0
        self._delays = policy.delays()

    def next_delay(self, exc: BaseException) -> float:
        """The pause before the next attempt, or raises when `exc` should reach the caller."""
        self.count += 1
        if not is_transient(exc):
            if isinstance(exc, psycopg.Error) and exc.sqlstate is not None:
                raise StatementError(
                    f"{self.operation} failed: the database refused it with SQLSTATE {exc.sqlstate} "
                    f"({type(exc).__name__}: {_summary(exc)}); not retried",
                    exc.sqlstate,
                ) from exc
            raise exc
        delay = next(self._delays, None)
        elapsed = time.monotonic() - self.started
        if delay is None or elapsed + delay > self.policy.deadline:
            raise DatabaseUnavailableError(
                f"{self.operation} failed after {self.count} attempt(s) over {elapsed:.1f}s "
                f"of transient database errors; last: {type(exc).__name__}: {_summary(exc)}".rstrip()
            ) from exc
        return delay


def _summary(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's message, cut to `limit` characters."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= limit else f"{first[:limit]}... ({len(first):,} characters)"
