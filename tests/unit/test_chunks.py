"""Chunked: the sequence list states keep per item, grown and cut by sharing chunks."""

from __future__ import annotations

import hashlib
import operator
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langgraph_pg_durable.core import identity
from langgraph_pg_durable.core.chunks import CHUNK, Chunked, as_chunked


@given(st.lists(st.integers(), max_size=3 * CHUNK), st.lists(st.lists(st.integers(), max_size=CHUNK + 5), max_size=4), st.data())
def test_it_reads_as_the_tuple_it_stands_for(first: list[int], appends: list[list[int]], data: st.DataObject) -> None:
    seq, expected = Chunked.of(first), tuple(first)
    for more in appends:
        seq, expected = seq.extended(more), expected + tuple(more)
        cut = data.draw(st.integers(0, len(expected) + 2))
        assert seq.prefix(cut) == expected[:cut] and len(seq.prefix(cut)) == len(expected[:cut])
    assert seq == expected and tuple(seq) == expected and len(seq) == len(expected)
    assert all(seq[i] == expected[i] and seq[-i - 1] == expected[-i - 1] for i in range(len(expected)))
    assert all(len(chunk) == CHUNK for chunk in seq._chunks[:-1])  # only the last is short


def test_growing_by_one_item_shares_every_full_chunk() -> None:
    long = Chunked.of(range(100 * CHUNK + 7))
    grown = long.extended(["new"])
    assert all(a is b for a, b in zip(grown._chunks[:100], long._chunks[:100]))
    assert grown[-1] == "new" and len(grown) == len(long) + 1
    assert long.prefix(50 * CHUNK)._chunks[0] is long._chunks[0]


def test_out_of_range_is_an_index_error() -> None:
    with pytest.raises(IndexError):
        Chunked.of([1, 2])[2]
    assert as_chunked((1, 2)) == (1, 2) and as_chunked(Chunked.of([1])) == Chunked.of((1,))


@given(st.lists(st.tuples(st.integers(0, 20), st.lists(st.integers(), max_size=CHUNK // 3)), max_size=12))
def test_every_version_reads_the_same_however_later_ones_grow_or_fork(steps: list[tuple[int, list[int]]]) -> None:
    """Each step extends one of the versions made so far (the newest, or an older one: a
    fork); whatever the others appended to a shared last chunk, every version still reads
    as the tuple it was made as."""
    versions: list[tuple[Chunked[int], tuple[int, ...]]] = [(Chunked.of(range(5)), tuple(range(5)))]
    for pick, more in steps:
        seq, expected = versions[pick % len(versions)]
        versions.append((seq.extended(more), expected + tuple(more)))
        for made, want in versions:
            assert tuple(made) == want and len(made) == len(want) and made == want
            assert all(made[i] == want[i] for i in range(0, len(want), 97))


def test_growing_the_newest_version_appends_in_place_and_a_fork_copies() -> None:
    first = Chunked.of([1, 2, 3])
    second = first.extended([4])
    assert second._chunks is first._chunks  # nothing copied: the shared last chunk grew
    third = second.extended([5])
    fork = second.extended([6])  # second's last chunk already holds 5, which is not second's
    assert fork._chunks is not second._chunks
    assert (tuple(first), tuple(second), tuple(third), tuple(fork)) == ((1, 2, 3), (1, 2, 3, 4), (1, 2, 3, 4, 5), (1, 2, 3, 4, 6))
    assert first.prefix(2) == (1, 2) and third.prefix(4) == second


def test_an_append_that_another_beat_to_the_shared_chunk_copies_instead() -> None:
    """The interleaving forced: a sequence saw its shared last chunk at its own length, and
    another sequence's append landed before its own (as a thread switch between the check
    and the append would do). Its items landed past the other's: it must not claim them."""
    from langgraph_pg_durable.core.chunks import _appended

    base = Chunked.of([1, 2])
    tail = base._chunks[-1]
    assert isinstance(tail, list)
    other = Chunked(base._chunks, 3)
    tail.append("other's")  # the other sequence's append, after this one's check
    assert not _appended(tail, 2, ("mine",))  # landed at 3, after the other's item
    grown = base.extended(["mine"])  # what extended does then: a copy
    assert tuple(grown) == (1, 2, "mine") and tuple(other) == (1, 2, "other's") and tuple(base) == (1, 2)
    assert _appended([1, 2], 2, ("x",))


def _equal_copy(item: str) -> str:
    """An object equal to `item` and not it."""
    copy = (item + ".")[:-1]
    assert copy == item and copy is not item
    return copy


@given(
    st.integers(0, 3 * CHUNK + 40),
    st.integers(0, 3),
    st.sampled_from(["same", "equal copy", "other", "shorter", "longer"]),
    st.data(),
)
def test_same_head_is_identity_item_for_item(size: int, forks: int, change: str, data: st.DataObject) -> None:
    """Whatever the sizes, the chunk boundaries, the shared last chunk that other sequences
    appended to, `same_head` answers as `map(operator.is_)` would: an equal copy of an item
    in place of it is a change."""
    items = [f"item {i}" for i in range(size)]
    seq = Chunked.of(items)
    for n in range(forks):  # longer sequences append to the shared last chunk; seq reads its own length
        seq.extended([f"fork {n}"])
    value = [*items, "appended"]
    if change == "equal copy" and items:
        i = data.draw(st.integers(0, size - 1))
        value[i] = _equal_copy(value[i])
    elif change == "other" and items:
        value[data.draw(st.integers(0, size - 1))] = "other"
    elif change == "shorter":
        value = value[: data.draw(st.integers(0, size))]
    elif change == "longer":
        value = [*value, *(f"more {i}" for i in range(data.draw(st.integers(0, 5))))]
    expected = all(map(operator.is_, value, seq))
    assert seq.same_head(value) is expected
    assert seq.same_head(tuple(value)) is expected  # not a list: item by item
    if identity.SAME_ITEMS is not None:  # and through the slices the build without _heads reads
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(identity, "SAME_ITEMS", None)
            assert seq.same_head(value) is expected


def test_same_head_without_the_pointer_layout_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    items = [f"item {i}" for i in range(2 * CHUNK + 3)]
    seq = Chunked.of(items)
    changed = [*items]
    changed[CHUNK + 1] = _equal_copy(changed[CHUNK + 1])
    fast = (seq.same_head([*items, "x"]), seq.same_head(changed))
    monkeypatch.setattr(identity, "FAST", False)
    monkeypatch.setattr(identity, "SAME_ITEMS", None)
    assert (seq.same_head([*items, "x"]), seq.same_head(changed)) == fast == (True, False)


def test_this_interpreter_reads_pointer_arrays() -> None:
    """CPython lays tuples and lists out as identity.py reads them (else the fast path would
    be off everywhere, silently)."""
    assert identity.FAST
    items = (object(), object())
    assert identity.pointers(items) == identity.own_list_pointers(list(items)) == struct.pack("2P", *map(id, items))
    assert identity.own_list_pointers([]) == b""


@pytest.fixture
def heads() -> Any:
    return pytest.importorskip("langgraph_pg_durable.core._heads", reason="the build did not compile core/_heads.c")


def test_same_items_compares_addresses_within_bounds(heads: Any) -> None:
    """`_heads.same_items(value, start, mine, count)`: value[start:start + count] against
    mine[:count] by identity; a range past either end is not the same (no read past an
    array); an empty range is; anything but a list or tuple is a TypeError."""
    items = [object() for _ in range(5)]
    mine = tuple(items)
    assert heads.same_items(items, 0, mine, 5) and heads.same_items(items, 2, mine[2:], 3) and heads.same_items(items, 1, items[1:], 2)
    assert not heads.same_items(items, 1, mine, 4)  # shifted by one
    assert not heads.same_items(items, 0, mine, 6) and not heads.same_items(items, 3, mine, 3)  # past an end
    assert not heads.same_items(items, -1, mine, 1) and not heads.same_items(items, 0, mine, -1)
    assert heads.same_items([], 0, (), 0) and heads.same_items(items, 5, (), 0)
    copy = [*items]
    copy[3] = object()
    assert not heads.same_items(copy, 0, mine, 5) and heads.same_items(copy, 0, mine, 3)
    with pytest.raises(TypeError, match="not str"):
        heads.same_items(items, 0, "abc", 1)
    with pytest.raises(TypeError):
        heads.same_items(items, 0, mine)


def test_the_compiled_same_items_is_built_from_its_source(heads: Any) -> None:
    """The build writes the digest of core/_heads.c into the module: an edited C source in a
    checkout that was not built again fails here rather than running the old code."""
    source = Path(identity.__file__).with_name("_heads.c")
    if not source.exists():
        pytest.skip("an install without the C source")
    assert heads.SOURCE_SHA256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert identity.SAME_ITEMS is heads.same_items
