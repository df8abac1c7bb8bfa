"""One list version's items as a cold read fetched them: whole runs kept as the bytes they
came in, until an item is asked for by its idx.

A cold read of a long list gets its items in runs of up to 256 (sql.reads.get_tuple): a
run's items' bytes end to end, and each one's idx and length. Cutting every run into one
bytes object and one (type, bytes) tuple per item, into a dict by idx, took a third of
the client's time of a cold read of 100,000 items, and the rebuilt list then joined
those bytes together again for one msgpack decode. An ItemGroup keeps the runs whole:
`spans` hands a list's segment over as the runs' bytes, and the dict by idx is made only
when something asks for an item by its idx (the item cache, a write's items, a later
append's digests).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from itertools import accumulate, repeat

from .codec import StoredItem


class ItemGroup(MutableMapping[int, StoredItem]):
    """The items of one version by idx: whole runs (`add_run`) and items set one by one."""

    __slots__ = ("_runs", "_uncut", "_items", "_loose", "nbytes")

    def __init__(self) -> None:
        self._runs: list[tuple[str, bytes, tuple[int, ...], tuple[int, ...]]] = []  # (type, bytes, idxs, sizes)
        self._uncut: list[tuple[str, bytes, tuple[int, ...], tuple[int, ...]]] = []  # the runs not yet in _items
        self._items: dict[int, StoredItem] = {}  # items set one by one, and the runs' once cut (the later wins)
        self._loose = False  # whether an item was set or deleted one by one
        self.nbytes = 0  # the stored bytes of every item (the item cache weighs a group by them)

    def add_run(self, type_: str, data: bytes, idxs: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        """A run of items of one stored type: `data` is their bytes end to end, `sizes` how
        long each is (they add up to `len(data)`), `idxs` where each goes (no idx in two
        runs: sql.reads cuts a version's items into runs by idx)."""
        run = (type_, data, idxs, sizes)
        self._runs.append(run)
        self._uncut.append(run)  # (runs are added by the read that fetched them, before the group is shared)
        self.nbytes += len(data)

    def spans(self, start: int, count: int) -> list[tuple[str, bytes, int]] | None:
        """Items `start` to `start + count - 1` as (type, bytes, how many items) pieces, in
        order, each a whole run's bytes: when they are exactly whole runs of consecutive
        idxs, and no item was set one by one. Else None: the caller takes them by idx."""
        if self._loose:
            return None
        pieces: list[tuple[str, bytes, int]] = []
        end = start + count
        at = start
        for type_, data, idxs, _ in sorted(self._runs, key=_first_idx):
            first, n = idxs[0], len(idxs)
            if first + n <= at or first >= end:
                continue
            if first != at or first + n > end or idxs != tuple(range(first, first + n)):
                return None
            pieces.append((type_, data, n))
            at += n
        return pieces if at == end else None

    def _all(self) -> dict[int, StoredItem]:
        """Every item by idx, the runs cut on first use. The item cache shares a group
        between threads, and a pure module takes no lock: the dict is built whole, then
        published, then the runs marked cut, so a reader that finds nothing left to cut
        finds every item (two first readers may both cut: the same items either way)."""
        uncut = self._uncut
        if uncut:
            items = dict(self._items)
            for type_, data, idxs, sizes in uncut:
                ends = list(accumulate(sizes))
                starts = [0, *ends[:-1]]
                items.update(zip(idxs, zip(repeat(type_), map(data.__getitem__, map(slice, starts, ends)))))
            self._items = items
            self._uncut = []
        return self._items

    def __getitem__(self, idx: int) -> StoredItem:
        return self._all()[idx]

    def __setitem__(self, idx: int, item: StoredItem) -> None:
        items = self._all()
        old = items.get(idx)
        self.nbytes += len(item[1]) - (len(old[1]) if old is not None else 0)
        items[idx] = item
        self._loose = True

    def __delitem__(self, idx: int) -> None:
        self.nbytes -= len(self._all().pop(idx)[1])
        self._loose = True

    def __iter__(self) -> Iterator[int]:
        return iter(self._all())

    def __len__(self) -> int:
        if self._loose or not self._uncut:
            return len(self._all())
        return sum(len(run[2]) for run in self._runs)  # no idx in two runs


def _first_idx(run: tuple[str, bytes, tuple[int, ...], tuple[int, ...]]) -> int:
    return run[2][0]
