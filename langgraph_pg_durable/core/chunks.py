"""Chunked: an immutable sequence that grows by sharing, for what the saver keeps per list item.

A list state keeps a value per item (where it is stored, its digest, the object it was
made of), and each put makes the next state from the last: as tuples, appending one item
to a 100,000-item list copied all three (and every copy took a reference to each element,
a cache miss apiece). Kept in chunks, a longer sequence made by `extended`, or a shorter
one by `prefix`, shares every full chunk: one item appended copies one chunk at most.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

CHUNK = 1024  # items per chunk; every chunk but the last holds exactly this many


class Chunked(Sequence[T], Generic[T]):
    """An immutable sequence of `CHUNK`-item tuples (the last may hold fewer)."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, chunks: tuple[tuple[T, ...], ...] = (), length: int = 0) -> None:
        self._chunks = chunks
        self._len = length

    @classmethod
    def of(cls, items: Iterable[T]) -> Chunked[T]:
        """`items` in chunks (shared as they are when already a Chunked)."""
        if isinstance(items, Chunked):
            return items
        flat = tuple(items)
        return cls(tuple(flat[i : i + CHUNK] for i in range(0, len(flat), CHUNK)), len(flat))

    def extended(self, items: Iterable[T]) -> Chunked[T]:
        """This sequence with `items` after it; its full chunks shared."""
        more = tuple(items)
        if not more:
            return self
        chunks = list(self._chunks)
        tail = more
        if chunks and len(chunks[-1]) < CHUNK:
            tail = chunks.pop() + more
        chunks.extend(tail[i : i + CHUNK] for i in range(0, len(tail), CHUNK))
        return Chunked(tuple(chunks), self._len + len(more))

    def prefix(self, n: int) -> Chunked[T]:
        """The first `n` items; the full chunks among them shared."""
        n = max(0, min(n, self._len))
        if n == self._len:
            return self
        full, rest = divmod(n, CHUNK)
        chunks = self._chunks[:full] + ((self._chunks[full][:rest],) if rest else ())
        return Chunked(chunks, n)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[T]:
        return itertools.chain.from_iterable(self._chunks)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("Chunked index out of range")
        return self._chunks[index // CHUNK][index % CHUNK]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunked):
            return self._len == other._len and (self._chunks == other._chunks or tuple(self) == tuple(other))
        if isinstance(other, tuple):
            return self._len == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Chunked({len(self)} items)"


def as_chunked(items: Sequence[T]) -> Chunked[T]:
    """`items` as a Chunked (itself when it is one)."""
    return items if isinstance(items, Chunked) else Chunked.of(items)
