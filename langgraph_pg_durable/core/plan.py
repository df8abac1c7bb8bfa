"""What the core hands a shell: one statement to send (`Query`), or an operation of several
(`Plan`), each with how to read the rows that come back."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import Where, named
from .offload import ObjectRef, RefColumns, Upload

T = TypeVar("T")


def _no_rows(_rows: Sequence[Any]) -> None:
    return None


@dataclass(slots=True, eq=False)
class Query(Generic[T]):
    """One statement to send, what it is for (for errors), and how to read its rows.

    `uploads` are stored and confirmed before the statement is sent; `references`
    names the objects its rows point to (kept where `ref_columns` says), fetched and
    verified before `decode`.

    Not changed once made (a write's fencing token goes in its params before), though not
    frozen: a frozen dataclass sets each of its ten fields through `object.__setattr__`
    (1.2 us a Query against 0.25, and a step makes four).
    """

    operation: Where  # what the statement is for, in an error (a `partial` on the hot paths)
    sql: str
    params: Mapping[str, Any]
    decode: Callable[[Sequence[Any]], T] = _no_rows  # type: ignore[assignment]
    uploads: Sequence[Upload] = ()
    references: Callable[[Sequence[Any]], list[tuple[ObjectRef, str]]] | None = None
    ref_columns: RefColumns | None = None
    # Payloads the previous statement of the same call fetched (list() pages): kept
    # across pages so that a value and the write that produced it cost one GET.
    memo: dict[str, bytes] | None = None
    # Writer locks (sorted advisory keys, one per thread) the shell takes in the statement's
    # transaction, before it: writers and deleters of a thread never interleave.
    locks: Sequence[int] = ()
    # Statements sent after the locks and before this one, in its transaction, their rows
    # not read (a run's take of the thread with its first read or write, see sql/fencing.py).
    before: Sequence[tuple[str, Mapping[str, Any]]] = ()

    def __post_init__(self) -> None:
        if (self.references is None) != (self.ref_columns is None):
            raise TypeError(f"{named(self.operation)}: a Query that references objects says where its rows keep them (ref_columns)")


@dataclass(frozen=True)
class Pause:
    """A pause of an operation between two statements (`wait` for a thread's holder): the
    sync saver sleeps, the async one awaits, and the plan is sent None."""

    seconds: float


# An operation of several statements, written once for both savers: a generator that
# yields each Query (or a Pause), is sent its decoded result, and returns the operation's
# result. The sync saver drives it with _execute, the async one with await _execute.
Plan = Generator["Query[Any] | Pause", Any, T]
