"""Workload 5: network round trips and statements per super-step and per saver call.

Each Postgres saver runs on one connection through a counting TCP proxy (the tests'
RoundTripProxy, which also learns here to count the statements the client sends).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

from . import graphs
from .env import OFFICIAL_CONN, OURS_SCHEMA, Bench, RoundTripProxy

CALLS = ("put", "put_writes", "get_tuple", "list")
READS = 3  # get_state calls after the run: get_tuple of a thread that has state
# Untyped messages a client may send before its StartupMessage (protocol request codes).
_PRE_STARTUP = {80877102, 80877103, 80877104}  # CancelRequest, SSLRequest, GSSENCRequest
# Sync, Flush, Terminate: they close or end a flight, they never ask anything new.
_TRAILERS = frozenset(b"SHX")


class _Frontend:
    """Reads the client's byte stream as protocol messages, without buffering their bodies."""

    def __init__(self) -> None:
        self.header = bytearray()
        self.skip = 0  # body bytes of the current message still to come
        self.started = False  # past the untyped startup messages

    def feed(self, data: bytes) -> list[int]:
        """The type bytes of the messages that begin in `data`."""
        types, view, pos = [], memoryview(data), 0
        while pos < len(view):
            if self.skip:
                taken = min(self.skip, len(view) - pos)
                self.skip -= taken
                pos += taken
                continue
            need = 5 if self.started else 8
            taken = min(need - len(self.header), len(view) - pos)
            self.header += view[pos : pos + taken]
            pos += taken
            if len(self.header) < need:
                break
            if self.started:  # 1-byte type, int32 length counting itself
                types.append(self.header[0])
                self.skip = int.from_bytes(self.header[1:5], "big") - 4
            else:  # int32 length counting itself, int32 request code
                self.skip = int.from_bytes(self.header[:4], "big") - 8
                self.started = int.from_bytes(self.header[4:8], "big") not in _PRE_STARTUP
            self.header.clear()
        return types


class _Tap:
    """A socket that reports what it receives before handing it on."""

    def __init__(self, sock: Any, received: Callable[[bytes], None]) -> None:
        self.sock, self.received = sock, received

    def recv(self, size: int) -> bytes:
        data = self.sock.recv(size)
        self.received(data)
        return data

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)


class WireCounter(RoundTripProxy):
    """RoundTripProxy that reads the protocol: it counts statements, and round trips by request.

    RoundTripProxy counts every client send after server bytes as a new flight. When a
    result is larger than the server's 8 KB output buffer, the server starts answering
    before psycopg's trailing Sync or Flush reaches it, and the thread relaying those
    trailers can lose the race with the one relaying the answer; the flight is then
    split over two calls (0 and 2). Here a round trip starts only with a message that
    asks something (not Sync, Flush, Terminate) sent after the server last answered,
    which the client must have waited for. One connection at a time is enough here.
    """

    def __init__(self, dsn: str) -> None:
        self.requests = self.statements = 0
        self._answered = True
        super().__init__(dsn)

    def _pump(self, src: Any, dst: Any, from_client: bool) -> None:
        if from_client:
            frontend = _Frontend()
            src = _Tap(src, lambda data: self._client_sent(frontend.feed(data)))
        else:
            src = _Tap(src, self._server_sent)
        super()._pump(src, dst, from_client)

    def _client_sent(self, types: list[int]) -> None:
        with self._lock:
            self.statements += sum(t in b"EQ" for t in types)  # Execute (extended) or Query (simple)
            if self._answered and any(t not in _TRAILERS for t in types):
                self.requests += 1
                self._answered = False

    def _server_sent(self, data: bytes) -> None:
        if data:
            with self._lock:
                self._answered = True

    def counts(self) -> tuple[int, int, int]:
        """Round trips, statements, and RoundTripProxy's raw count of client flights."""
        with self._lock:
            return self.requests, self.statements, self.round_trips


def _record(log: dict[str, list], proxy: WireCounter, name: str, before: tuple[int, ...]) -> None:
    log[name].append(tuple(a - b for a, b in zip(proxy.counts(), before)))


def _count_sync(saver: Any, proxy: WireCounter, log: dict[str, list]) -> None:
    """Wrap the saver's calls; a lock keeps each call's count its own."""
    lock = threading.Lock()
    for name in CALLS:
        inner = getattr(saver, name)

        # (wraps: LangGraph passes put_writes a task_path only if its signature names one.)
        @functools.wraps(inner)
        def wrapped(*args: Any, _inner: Callable = inner, _name: str = name, **kwargs: Any) -> Any:
            with lock:
                before = proxy.counts()
                result = _inner(*args, **kwargs)
                if _name == "list":
                    result = list(result)
                _record(log, proxy, _name, before)
                return result

        setattr(saver, name, wrapped)


def _count_async(saver: Any, proxy: WireCounter, log: dict[str, list]) -> None:
    lock = asyncio.Lock()
    for name in ("put", "put_writes", "get_tuple"):
        inner = getattr(saver, "a" + name)

        @functools.wraps(inner)
        async def wrapped(*args: Any, _inner: Callable = inner, _name: str = name, **kwargs: Any) -> Any:
            async with lock:
                before = proxy.counts()
                result = await _inner(*args, **kwargs)
                _record(log, proxy, _name, before)
                return result

        setattr(saver, "a" + name, wrapped)


def _summary(log: dict[str, list], total: tuple[int, ...], steps: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "round_trips_per_step": total[0] / steps,
        "statements_per_step": total[1] / steps,
        "raw_proxy_flights_per_step": total[2] / steps,
    }
    for name, counts in log.items():
        if counts:
            trips, statements, flights = zip(*counts)
            out[name] = {
                "calls": len(counts),
                "round_trips": sorted(set(trips)),
                "statements": sorted(set(statements)),
                "raw_proxy_flights": sorted(set(flights)),
            }
    return out


def run(bench: Bench, steps: int) -> dict[str, Any]:
    out = {}
    for kind in ("official", "ours"):
        proxy = WireCounter(bench.dsn[kind])
        try:
            out[f"{kind} sync"] = _sync(kind, proxy, steps)
            out[f"{kind} async"] = asyncio.run(_async(kind, proxy, steps))
        finally:
            proxy.close()
    return out


def _sync(kind: str, proxy: WireCounter, steps: int) -> dict[str, Any]:
    options = OFFICIAL_CONN if kind == "official" else {"autocommit": True}
    with psycopg.connect(proxy.dsn, **options) as conn:
        saver = PostgresSaver(conn) if kind == "official" else DurablePostgresSaver(conn, schema=OURS_SCHEMA)
        log: dict[str, list] = {name: [] for name in CALLS}
        _count_sync(saver, proxy, log)
        app = graphs.growing(saver, steps)
        config = {"configurable": {"thread_id": f"w5-{kind}-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
        before = proxy.counts()
        app.invoke({"items": [], "step": 0}, config, durability="sync")
        total = tuple(a - b for a, b in zip(proxy.counts(), before))
        for _ in range(READS):
            app.get_state(config)
        return _summary(log, total, steps)


async def _async(kind: str, proxy: WireCounter, steps: int) -> dict[str, Any]:
    options = OFFICIAL_CONN if kind == "official" else {"autocommit": True}
    async with await psycopg.AsyncConnection.connect(proxy.dsn, **options) as conn:
        saver = AsyncPostgresSaver(conn) if kind == "official" else AsyncDurablePostgresSaver(conn, schema=OURS_SCHEMA)
        log: dict[str, list] = {name: [] for name in CALLS}
        _count_async(saver, proxy, log)
        app = graphs.growing(saver, steps)
        config = {"configurable": {"thread_id": f"w5a-{kind}-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
        before = proxy.counts()
        await app.ainvoke({"items": [], "step": 0}, config, durability="sync")
        total = tuple(a - b for a, b in zip(proxy.counts(), before))
        for _ in range(READS):
            await app.aget_state(config)
        return _summary(log, total, steps)
