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
from psycopg import errors as pg_errors
from psycopg_pool import PoolClosed

from .errors import DatabaseUnavailableError


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


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: a lost or refused connection, a restart, a lost race."""
    if isinstance(exc, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)):
        return True
    # OperationalError covers connection loss, admin shutdown, "cannot connect now",
    # too many connections, and the pool's timeout while the server is away. A closed
    # pool is the caller's doing and stays closed: waiting out the deadline helps nobody.
    return isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, (pg_errors.QueryCanceled, PoolClosed)
    )


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
            raise exc
        delay = next(self._delays, None)
        elapsed = time.monotonic() - self.started
        if delay is None or elapsed + delay > self.policy.deadline:
            raise DatabaseUnavailableError(
                f"{self.operation} failed after {self.count} attempt(s) over {elapsed:.1f}s "
                f"of transient database errors; last: {type(exc).__name__}: {exc}".rstrip()
            ) from exc
        return delay
