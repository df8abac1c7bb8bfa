"""Chunked: an immutable sequence that grows by sharing, for what the saver keeps per list item.

A list state keeps a value per item (where it is stored, its digest, the object it was
made of), and each put makes the next state from the last: as tuples, appending one item
to a 100,000-item list copied all three (and every copy took a reference to each element,
a cache miss apiece). Kept in chunks, a longer sequence made by `extended`, or a shorter
one by `prefix`, shares every full chunk; and the last, short chunk is a list the longer
sequence appends to in place (each sequence reads only its own length of it), so a list
growing by an item a step copies nothing (copying that chunk, up to 1,023 items, four times
a put, was a tenth of a plain list's step). Extending an older sequence again (a fork)
finds the list longer than its own length, and copies it. No lock: the append is one
list operation, and the appender then checks that its items are the ones right after its
sequence (another thread's append in between put them further on: it copies instead, and
the items it left there are past every sequence's length, read by none).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

from . import identity

T = TypeVar("T")

CHUNK = 1024  # items per chunk; every chunk but the last holds exactly this many
# From this many items `same_head` compares pointer arrays (below, `map(operator.is_)` is as fast).
SAME_HEAD_FAST_FROM = 128


class Chunked(Sequence[T], Generic[T]):
    """An immutable sequence of `CHUNK`-item chunks (the last may hold fewer, and may be a
    list that longer sequences made from this one have appended to: see the module)."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, chunks: tuple[Sequence[T], ...] = (), length: int = 0) -> None:
        self._chunks = chunks
        self._len = length

    @classmethod
    def of(cls, items: Iterable[T]) -> Chunked[T]:
        """`items` in chunks (shared as they are when already a Chunked)."""
        if isinstance(items, Chunked):
            return items
        flat = tuple(items)
        return cls(_chunked(flat), len(flat))

    def _visible(self) -> int:
        """How many items of the last chunk are this sequence's."""
        return self._len - (len(self._chunks) - 1) * CHUNK

    def extended(self, items: Iterable[T]) -> Chunked[T]:
        """This sequence with `items` after it; its full chunks shared, and its short last
        chunk extended in place when no longer sequence has extended it yet."""
        more = tuple(items)
        if not more:
            return self
        chunks = self._chunks
        if not chunks:
            return Chunked(_chunked(more), len(more))
        last, visible = chunks[-1], self._visible()
        if type(last) is list and visible + len(more) <= CHUNK and len(last) == visible and _appended(last, visible, more):
            return Chunked(chunks, self._len + len(more))
        if visible < CHUNK:  # the short last chunk, as far as it is this sequence's, and the new items
            return Chunked(chunks[:-1] + _chunked((*last[:visible], *more)), self._len + len(more))
        return Chunked(chunks + _chunked(more), self._len + len(more))

    def prefix(self, n: int) -> Chunked[T]:
        """The first `n` items; the full chunks among them shared."""
        n = max(0, min(n, self._len))
        if n == self._len:
            return self
        full, rest = divmod(n, CHUNK)
        chunks = self._chunks[:full] + ((tuple(self._chunks[full][:rest]),) if rest else ())
        return Chunked(chunks, n)

    def same_head(self, value: Sequence[Any]) -> bool:
        """Whether `value` begins with these very objects (`is`, item for item), as far as
        the shorter of the two goes. A long list is compared a chunk at a time at memcmp
        speed (see identity.py): in C where the build made `identity.SAME_ITEMS`, touching
        no item; else a slice of it, which no other thread can reach, against the chunk,
        2-3x faster than `map(operator.is_)` from a thousand items on."""
        n = min(self._len, len(value))
        if n < SAME_HEAD_FAST_FROM or type(value) is not list or not identity.FAST:
            return all(map(operator.is_, value, self))
        same_items = identity.SAME_ITEMS
        at = 0
        for chunk in self._chunks:
            if at >= n:
                break
            take = min(len(chunk), n - at)
            if same_items is not None and (type(chunk) is tuple or type(chunk) is list):
                if not same_items(value, at, chunk, take):
                    return False
                at += take
                continue
            if type(chunk) is tuple:
                mine = identity.pointers(chunk)[: take * identity.WORD]
            elif type(chunk) is list:  # the short last chunk, which longer sequences append to: a slice of it
                mine = identity.own_list_pointers(chunk[:take])
            else:
                return all(map(operator.is_, value, self))
            if identity.own_list_pointers(value[at : at + take]) != mine:
                return False
            at += take
        return True

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[T]:
        chunks = self._chunks
        if not chunks or len(chunks[-1]) == self._visible():
            return itertools.chain.from_iterable(chunks)
        return itertools.chain(itertools.chain.from_iterable(chunks[:-1]), itertools.islice(chunks[-1], self._visible()))

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


def _appended(tail: list[T], at: int, more: tuple[T, ...]) -> bool:
    """Append `more` to a shared last chunk seen `at` items long, and whether they landed
    right there (another sequence's append since then puts them further on: see the module)."""
    tail.extend(more)
    return all(map(operator.is_, tail[at : at + len(more)], more))


def _chunked(flat: Sequence[T]) -> tuple[Sequence[T], ...]:
    """`flat` cut in CHUNK-item tuples, the last one, when short, a list (to be appended to)."""
    pieces: list[Sequence[T]] = [tuple(flat[i : i + CHUNK]) for i in range(0, len(flat), CHUNK)]
    if pieces and len(pieces[-1]) < CHUNK:
        pieces[-1] = list(pieces[-1])
    return tuple(pieces)


def as_chunked(items: Sequence[T]) -> Chunked[T]:
    """`items` as a Chunked (itself when it is one)."""
    return items if isinstance(items, Chunked) else Chunked.of(items)


Segment = tuple[str, int, int]  # a list's run of items: version whose items these are, first idx, count
Location = tuple[str, int]  # where an item is stored: version, idx


class SegmentLocations(Chunked[Location]):
    """Where each item of a list is stored, kept as the list's segments until something
    asks for the items' locations one by one (a put that extends the list, a rebuild from
    the item cache): a list state a read makes costs no (version, idx) tuple per item
    unless it is extended. W3's cold read made 200 of them (64 us), the scale run's cold
    read of 100,000 items 100,000. Here rather than in core.lists, which is compiled: it
    makes Chunked's `_chunks` slot on first read through `__getattr__`, which a compiled
    class cannot."""

    __slots__ = ("_segments",)

    def __init__(self, segments: Sequence[Segment]) -> None:  # (Chunked's _chunks stays unset)
        self._segments = tuple(segments)
        self._len = sum(segment[2] for segment in self._segments)

    def __getattr__(self, name: str) -> Any:
        """Chunked's `_chunks`, made from the segments the first time a method reads them
        (a slot read before it is set comes here). Two threads may both make them: the same
        chunks either way."""
        if name != "_chunks":
            raise AttributeError(name)
        runs = (zip(itertools.repeat(v, count), range(start, start + count)) for v, start, count in self._segments)
        flat = itertools.chain.from_iterable(runs)
        chunks = self._chunks = Chunked.of(flat)._chunks
        return chunks

    def versions(self) -> frozenset[str]:
        """The versions whose items the list uses, from its segments."""
        return frozenset(segment[0] for segment in self._segments)

    def segments(self) -> tuple[Segment, ...]:
        """The runs of items the locations were made from."""
        return self._segments
