"""The hot path's statements straight through libpq, for both shells.

A put or put_writes is one flight of two statements (the writer locks, then the write).
Through psycopg's cursor and pipeline objects that flight costs ~0.4 ms of client CPU,
more than the rest of the put; here it is a prepared statement per query text and
parameter types, its parameters dumped as psycopg's Transformer would dump them
(`core.params` for the types the saver sends, the Transformer for any other), sent in one libpq
pipeline and read back with psycopg's generators: about half as much.

`exchange` is a psycopg generator (it yields waits, never blocks): the sync shell runs it
with `conn.wait`, the async one with `await conn.wait`. Only a connection that is idle
in autocommit takes this path; any other is the caller's to drive the usual way.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import errors, pq
from psycopg.abc import PQGen
from psycopg.adapt import PyFormat, Transformer
from psycopg.waiting import Ready, Wait

from .core.params import dumped

_WAIT_R, _WAIT_RW, _READY_R = Wait.R, Wait.RW, Ready.R
_PLACEHOLDER = re.compile(rb"%\((\w+)\)([sb])|%%|%")
_FORMATS = {b"s": PyFormat.AUTO, b"b": PyFormat.BINARY}
# A statement we prepared that the session no longer knows (DISCARD ALL, DEALLOCATE, a
# pooler that moved us to another server session): forget them all and prepare again.
_GONE = "26000"
# The server function that warns when a commit's wait for its synchronous standby was cut
# short: committed locally, perhaps not replicated. Named the same in every server locale.
_SYNC_REP_WAIT = "SyncRepWaitForLSN"


class FlightTimeout(errors.OperationalError):
    """A flight outlasted its attempt's timeout: the connection was closed (the server may
    still have run its statements: every one is idempotent, the caller sends them again)."""


class CommitNotConfirmed(errors.OperationalError):
    """The server committed the flight's transaction but warned that its wait for the
    synchronous standby was cancelled: not acknowledged, so the caller sends it again."""


@dataclass(frozen=True)
class Converted:
    """A query text with `%(name)s` / `%(name)b` placeholders as `$n` text, its parameters' names and formats."""

    text: bytes
    names: tuple[str, ...]
    formats: tuple[PyFormat, ...]
    auto: tuple[bool, ...]  # whether each is `%(name)s` (for `params.dumped`)


_converted: dict[str, Converted] = {}


def convert(query: str) -> Converted:
    """`query` in PostgreSQL's numbered form (each name once, in order of first use); cached by text."""
    done = _converted.get(query)
    if done is not None:
        return done
    names: list[str] = []
    formats: list[PyFormat] = []

    def number(match: re.Match[bytes]) -> bytes:
        if match.group(0) == b"%%":
            return b"%"
        if match.group(1) is None:
            raise ValueError(f"only %(name)s and %(name)b placeholders are supported: {query[:80]!r}")
        name, fmt = match.group(1).decode(), _FORMATS[match.group(2)]
        if name in names:
            if formats[names.index(name)] != fmt:
                raise ValueError(f"parameter {name!r} is used both as %({name})s and %({name})b")
            return b"$%d" % (names.index(name) + 1)
        names.append(name)
        formats.append(fmt)
        return b"$%d" % len(names)

    text = _PLACEHOLDER.sub(number, query.encode())
    done = Converted(text, tuple(names), tuple(formats), tuple(fmt is PyFormat.AUTO for fmt in formats))
    _converted[query] = done
    return done


@dataclass
class _Prepared:
    """The statements prepared on one server session, by (text, parameter types)."""

    backend_pid: int
    names: dict[tuple[bytes, tuple[int, ...]], bytes] = field(default_factory=dict)


_sessions: weakref.WeakKeyDictionary[Any, _Prepared] = weakref.WeakKeyDictionary()
_serial = iter(range(1, 1 << 62))


def usable(conn: Any) -> bool:
    """Whether `conn` can take this path: autocommit, idle, not in a pipeline of its own."""
    pgconn = conn.pgconn
    return bool(
        conn.autocommit and pgconn.transaction_status == pq.TransactionStatus.IDLE and pgconn.pipeline_status == pq.PipelineStatus.OFF
    )


def _session(conn: Any) -> _Prepared:
    pid = conn.pgconn.backend_pid
    prepared = _sessions.get(conn)
    if prepared is None or prepared.backend_pid != pid:
        prepared = _sessions[conn] = _Prepared(pid)
    return prepared


def forget(conn: Any) -> None:
    """Drop what we know of `conn`'s prepared statements (after the session lost them)."""
    _sessions.pop(conn, None)


def _expire(pgconn: Any, deadline: float | None) -> None:
    """Past `deadline` (time.monotonic), close the connection and raise FlightTimeout. The
    shells' waits resume a flight at least every 0.1 s, so it is looked at that often."""
    if deadline is not None and time.monotonic() >= deadline:
        pgconn.finish()
        raise FlightTimeout("no answer from the server within the attempt's timeout: the connection was closed")


def _sent(pgconn: Any, deadline: float | None) -> PQGen[None]:
    """Flush what libpq holds of the flight (most flights leave at the first flush, without
    a wait); while the server does not take it all, read what it sends meanwhile."""
    while pgconn.flush():
        ready = yield _WAIT_RW
        _expire(pgconn, deadline)
        if ready & _READY_R:
            pgconn.consume_input()


def _results(pgconn: Any, commands: int, deadline: float | None) -> PQGen[list[pq.abc.PGresult]]:
    """The results of `commands` pipelined commands, then their sync, read off `pgconn`.

    psycopg's fetch generators let go of the GIL around each libpq call (is-busy, consume,
    get-result: a dozen times a flight); under a sync saver's threads each let-go is a
    hand-over of the GIL, and taking it back a context switch. Here only the is-busy check
    lets go (get-result does not block once it says no), about half as many a flight.
    The deadline is looked at on each wake-up, here rather than in a generator around this
    one (a frame more at each of a flight's waits)."""
    results: list[pq.abc.PGresult] = []
    ended = 0  # commands whose results ended (libpq marks each end with a None)
    while True:
        if pgconn.is_busy():
            ready = yield _WAIT_R
            _expire(pgconn, deadline)
            if ready:
                pgconn.consume_input()
            continue
        result = pgconn.get_result()
        if result is None:
            ended += 1
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            if ended != commands:
                raise errors.InternalError(f"the pipeline's sync came after {ended} of {commands} commands' results")
            return results
        results.append(result)


def exchange(conn: Any, statements: Sequence[tuple[str, Mapping[str, Any]]], timeout: float | None = None) -> PQGen[list[tuple[Any, ...]]]:
    """Send `statements` in one flight, as one implicit transaction (an error in one rolls
    back those before it), and return the rows of the last; raises the first error.
    Past `timeout` seconds the connection is closed (FlightTimeout); a commit whose wait for
    a synchronous standby was cancelled raises CommitNotConfirmed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    cut_short: list[str] = []

    def watch(diagnostic: errors.Diagnostic) -> None:
        if diagnostic.source_function == _SYNC_REP_WAIT:
            cut_short.append(diagnostic.message_primary or "")

    pgconn = conn.pgconn
    tx = Transformer.from_context(conn)
    # psycopg's prepare_threshold=None: no server-side prepared statements (PgBouncer in
    # transaction mode moves a client between server sessions); each goes unnamed.
    prepared = _session(conn) if conn.prepare_threshold is not None else None
    # (The server's own name for it, read off libpq: `conn.info.encoding` makes an object.)
    utf8 = pgconn.parameter_status(b"client_encoding") == b"UTF8"
    sent: list[tuple[bytes, bool]] = []  # (name, whether a Parse went before it)
    conn.add_notice_handler(watch)
    pgconn.enter_pipeline_mode()
    try:
        for query, params in statements:
            converted = convert(query)
            given = [params[name] for name in converted.names]
            fast = dumped(given, converted.auto) if utf8 else None
            if fast is None:
                values = tx.dump_sequence(given, converted.formats)
                types, formats = tuple(tx.types or ()), [int(f) for f in tx.formats or ()]
            else:
                values, types, formats = fast
            if prepared is None:
                pgconn.send_query_params(converted.text, values, types, formats, pq.Format.BINARY)
                sent.append((b"", False))
                continue
            key = (converted.text, types)
            name = prepared.names.get(key)
            fresh = name is None
            if name is None:
                name = b"lgpd_%d" % next(_serial)
                pgconn.send_prepare(name, converted.text, param_types=types)
            pgconn.send_query_prepared(name, values, param_formats=formats, result_format=pq.Format.BINARY)
            sent.append((name, fresh))
            if fresh:
                prepared.names[key] = name
        pgconn.pipeline_sync()
        yield from _sent(pgconn, deadline)
        error: errors.Error | None = None
        last: pq.abc.PGresult | None = None
        for result in (yield from _results(pgconn, sum(2 if fresh else 1 for _, fresh in sent), deadline)):
            if result.status == pq.ExecStatus.FATAL_ERROR and error is None:
                error = errors.error_from_result(result, encoding=conn.info.encoding)
            last = result
    finally:
        conn.remove_notice_handler(watch)
        if pgconn.status == pq.ConnStatus.OK and pgconn.pipeline_status != pq.PipelineStatus.OFF:
            pgconn.exit_pipeline_mode()
    if error is not None:
        if error.sqlstate == _GONE or any(fresh for _, fresh in sent):
            # A Parse that failed (or statements the session lost) leaves names we cannot trust.
            forget(conn)
        raise error
    if cut_short:
        raise CommitNotConfirmed(
            f"the server committed but did not confirm replication to its synchronous standby ({cut_short[0]}); sending it again"
        )
    if last is None or last.status != pq.ExecStatus.TUPLES_OK:
        return []
    tx.set_pgresult(last)
    return tx.load_rows(0, last.ntuples, tuple)
