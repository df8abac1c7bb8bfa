"""Errors a caller can catch; each message names the thing at fault."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

SHOWN_CHARS = 120  # of an id or a value quoted in a message

# Names a thing in an error message; a callable is called only when one is raised (a hot
# path builds the callable, a `partial`, not the text: `shown` costs ~1 us a value).
Where = str | Callable[[], str]


def named(where: Where) -> str:
    """The text `where` stands for."""
    return where() if callable(where) else where


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)`, cut to `limit` characters: a message names the culprit without
    repeating a megabyte of it."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


E = TypeVar("E", bound=BaseException)


def caused(error: E, cause: BaseException) -> E:
    """`error` with `cause` as its `__cause__`, for `raise caused(X(...), exc) from exc`:
    the compiled core (mypyc, setup.py) does not carry out the `from exc` itself."""
    error.__cause__ = cause
    return error


class DurableCheckpointError(Exception):
    """Base class of every error raised by langgraph-pg-durable."""


class ConfigError(DurableCheckpointError, ValueError):
    """A RunnableConfig lacks a key the saver needs, or holds an unusable value."""


class SerializationError(DurableCheckpointError, TypeError):
    """A channel value or pending write could not be serialized."""


class DeserializationError(DurableCheckpointError):
    """A stored value, write or item could not be decoded: a wrong encryption key, a type the
    serializer does not allow, or bytes it did not write. Names thread, checkpoint and channel."""


class SchemaVersionError(DurableCheckpointError):
    """The schema and the package's migrations disagree: the database schema was created by a
    newer version of this package, or a migration is missing from this install."""


class DatabaseUnavailableError(DurableCheckpointError):
    """Transient database errors persisted past the retry deadline."""


class HistoryRewoundError(DurableCheckpointError):
    """A put's parent checkpoint, or the checkpoint a task's writes go to, which this saver
    saw committed, is no longer on the server.

    The server's history went back: a failover to a standby that had not received the last
    commits (asynchronous replication), or another process deleted or pruned the thread.
    Nothing was written on top of it. Run the graph again on the thread (input None) to go
    on from the newest checkpoint the server holds, `newest_checkpoint_id` (None: none).
    """

    def __init__(
        self, message: str, *, thread_id: str, checkpoint_ns: str, missing_checkpoint_id: str, newest_checkpoint_id: str | None
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.missing_checkpoint_id = missing_checkpoint_id
        self.newest_checkpoint_id = newest_checkpoint_id


class StatementError(DurableCheckpointError):
    """The database refused a statement with a permanent error, which is not retried.

    `sqlstate` is the server's code; the psycopg error is the `__cause__`.
    """

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class ObjectStoreError(DurableCheckpointError):
    """The object store failed or refused a request (unreachable, bad credentials, no bucket).

    Raised before the row that would reference the object is written, so nothing
    stored points at an object that was not confirmed.
    """


class ObjectIntegrityError(DurableCheckpointError):
    """An offloaded value is missing from the object store, or its bytes do not match its SHA-256."""


class CheckpointIntegrityError(DurableCheckpointError):
    """A stored checkpoint cannot be read back whole: a row it needs is missing or malformed.

    Raised instead of returning a state with a channel missing or a value changed.
    """


class ListIntegrityError(CheckpointIntegrityError):
    """A list stored as deltas cannot be rebuilt: a row of its chain or one of its items is missing."""


class ChannelVersionError(DurableCheckpointError, ValueError):
    """A channel has reached the last version this saver can number (`get_next_version`)."""


class DistributionError(DurableCheckpointError):
    """`distribute()` refused to distribute the schema's tables on Citus: the database has no
    `citus` extension (run `CREATE EXTENSION citus` on the coordinator), or the schema lacks the
    saver's tables or is behind this package (run `setup()` first). Nothing was changed."""


class ThreadHeldError(DurableCheckpointError):
    """Another run holds the thread (one writer per thread: the saver's `fencing`).

    `holder_run_id` names the run that holds it (None: no run does, the thread was deleted),
    `held_since` when it took it, `last_write` when that run last wrote (None: unknown).
    Nothing was written.
    """

    def __init__(self, message: str, *, thread_id: str, holder_run_id: str | None, held_since: object, last_write: object) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.holder_run_id = holder_run_id
        self.held_since = held_since
        self.last_write = last_write


class ThreadTakenError(ThreadHeldError):
    """This run held the thread, and another run has taken it since (policy `takeover`: a
    resume after a crash, a second dispatch of the same job), or the thread was deleted:
    the write was refused instead of forking the thread's history. The run should stop;
    the thread's history goes on from the holder's writes."""


class ThreadBusyError(ThreadHeldError):
    """A new run was refused the thread (policies `reject` and `wait`): another run holds it
    and is live (its row in run_log says `running`, and it wrote within the saver's
    `fencing_window`). Under `wait`, the run waited `fencing_wait` first."""
