"""Chunked: the sequence list states keep per item, grown and cut by sharing chunks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
