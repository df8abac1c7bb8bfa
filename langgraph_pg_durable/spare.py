"""The connection a saver's last call left idle, kept for its next call.

Through psycopg_pool a call costs a getconn and a putconn: its lock, statistics, checks
and lifetime bookkeeping, ~55 k instructions a step of two calls (4-5 % of a step's client
work, `tools/step_instructions.py`). A saver on its own pool keeps the connection its call
left idle for the next call instead, for at most `hold_for` seconds from when it came out
of the pool; then it goes back, so the pool's lifetime and health rules still apply at that
pace. At most one connection waits here, and none while a caller waits for one of the
pool's (a call that finds none here goes to the pool as before).

Only for the saver's own pool (`from_conn_string`) of at least two connections: one kept
here is one the pool cannot hand out, so a pool of one would leave its other callers
waiting for a connection nobody uses, and a pool the caller shares with other code would
lose one to a saver that went quiet. Both shells use it; nothing here does I/O.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from psycopg import pq

HOLD_FOR = 5.0  # seconds a connection may go from call to call before it goes back to the pool
_IDLE = pq.TransactionStatus.IDLE


class Spare:
    """At most one idle connection, with when it came out of the pool (see the module)."""

    def __init__(self, *, enabled: bool = False, hold_for: float = HOLD_FOR) -> None:
        self.enabled = enabled
        self.hold_for = hold_for
        self._kept: tuple[Any, float] | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_own_pool(cls, max_size: int) -> Spare:
        """The spare of a saver on a pool it built with `max_size` connections at most."""
        return cls(enabled=max_size >= 2)

    def take(self) -> tuple[Any, float] | None:
        """The kept connection and when it left the pool, now the caller's; None if none is kept."""
        if self._kept is None:  # most calls of a busy saver find one; a quiet one, none
            return None
        with self._lock:
            kept, self._kept = self._kept, None
        return kept

    def keep(self, conn: Any, since: float, pool: Any) -> bool:
        """Keep `conn` (out of `pool` since `since`, `time.monotonic()`), which a call just
        used without error, for the next call (`pool`: a pools.FailoverPool, or its async twin,
        which says how many callers wait for a connection): False when it is not kept (off, one kept
        already, held `hold_for` already, closed, not idle, or a caller is waiting for one of
        the pool's connections: it gets this one), and the caller gives it back."""
        if not self.enabled or self._kept is not None or time.monotonic() - since > self.hold_for:
            return False
        if conn.pgconn.transaction_status != _IDLE:  # (a closed connection's is UNKNOWN)
            return False
        if pool.waiting():
            return False
        with self._lock:
            if self._kept is not None:
                return False
            self._kept = (conn, since)
        return True

    def release(self) -> Any | None:
        """The kept connection, no longer kept, for the caller to give back to the pool (a
        failover's drain, the pool's close); None if none is kept."""
        kept = self.take()
        return None if kept is None else kept[0]
