"""The put_writes calls under way whose items the next checkpoint's put may use.

LangGraph sends a step's pending writes and the next checkpoint's put from different
threads (or tasks). A write to a list channel stores its items for that put to use;
a put that waits for its parent's writes to finish uses them instead of storing the
items again. The wait is bounded: past it the put stores its own copy.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .core.keys import CheckpointKey

Key = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint_id of the writes' checkpoint
DEFAULT_WAIT = 1.0  # seconds a put waits for its parent's writes


def in_flight_key(key: CheckpointKey) -> Key:
    """The checkpoint a put extends, or put_writes writes to (the put waits for those)."""
    return key.thread_id, key.checkpoint_ns, key.checkpoint_id or ""


class WritesInFlight:
    """For a sync saver: writes under way by checkpoint, and a bounded wait for them.

    A count per checkpoint, and a gate per checkpoint a put waits at, not one condition for
    all: the end of one thread's writes wakes the put waiting for them alone (with one
    condition, every waiting put of every thread woke at each end, and each wake-up asked
    for the GIL). The gate is a bare lock, made held by the first put that waits and
    released by the last write's end: a `threading.Event` (a condition over a lock, in
    Python) cost ~3 us to make and to set, a lock 0.05; and most writes end before the
    next put looks, so most never need one (a put_writes is a lock and a count, twice)."""

    def __init__(self, wait: float = DEFAULT_WAIT) -> None:
        self.max_wait = wait
        self._count: dict[Key, int] = {}
        self._gates: dict[Key, Any] = {}  # a held lock per checkpoint a put waits at
        self._lock = threading.Lock()

    def begin(self, key: Key) -> None:
        with self._lock:
            self._count[key] = self._count.get(key, 0) + 1

    def end(self, key: Key) -> None:
        with self._lock:
            left = self._count[key] - 1
            if left > 0:
                self._count[key] = left
                return
            del self._count[key]
            gate = self._gates.pop(key, None)
        if gate is not None:
            gate.release()  # (outside the lock: the put it wakes takes the lock next)

    def wait(self, key: Key) -> bool:
        """Whether no writes of `key` are under way, waiting a bounded time for them."""
        deadline = time.monotonic() + self.max_wait
        while True:
            with self._lock:
                if key not in self._count:
                    return True
                gate = self._gates.get(key)
                if gate is None:
                    gate = self._gates[key] = threading.Lock()
                    gate.acquire()
            if not gate.acquire(timeout=max(deadline - time.monotonic(), 0)):
                return False
            gate.release()  # open again for any other put waiting at it


class AsyncWritesInFlight:
    """The async twin: writes under way on one event loop (an event made only for a put that waits)."""

    def __init__(self, wait: float = DEFAULT_WAIT) -> None:
        self.max_wait = wait
        self._count: dict[Key, int] = {}
        self._done: dict[Key, asyncio.Event] = {}

    def begin(self, key: Key) -> None:
        self._count[key] = self._count.get(key, 0) + 1

    def end(self, key: Key) -> None:
        left = self._count[key] - 1
        if left > 0:
            self._count[key] = left
            return
        del self._count[key]
        done = self._done.pop(key, None)
        if done is not None:
            done.set()

    async def wait(self, key: Key) -> bool:
        """Whether no writes of `key` are under way, waiting a bounded time for them."""
        deadline = time.monotonic() + self.max_wait
        while key in self._count:
            done = self._done.get(key)
            if done is None:
                done = self._done[key] = asyncio.Event()
            try:
                await asyncio.wait_for(done.wait(), max(deadline - time.monotonic(), 0))
            except asyncio.TimeoutError:
                return False
        return True
