"""ItemGroup: a version's fetched items, whole runs kept as their bytes until an item is
asked for by its idx, and handed to a list's decode as those bytes (`spans`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from langgraph_pg_durable.core.item_group import ItemGroup


def _run(group: ItemGroup, first: int, items: list[bytes], type_: str = "msgpack") -> None:
    group.add_run(type_, b"".join(items), tuple(range(first, first + len(items))), tuple(map(len, items)))


_ITEMS = st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(runs=st.lists(_ITEMS, min_size=1, max_size=4), loose=st.dictionaries(st.integers(0, 30), st.binary(max_size=4), max_size=3))
def test_a_group_reads_as_the_dict_of_its_items(runs: list[list[bytes]], loose: dict[int, bytes]) -> None:
    """By idx, a group is the dict its runs cut into, then its items set one by one (the
    later wins), whatever is asked first; its weight is its items' bytes."""
    group, expected = ItemGroup(), {}
    first = 0
    for items in runs:
        _run(group, first, items)
        expected.update({first + i: ("msgpack", item) for i, item in enumerate(items)})
        first += len(items) + 1  # a gap between runs: an idx no run holds
    assert len(group) == len(expected)  # counted from the runs, before any is cut
    for idx, data in loose.items():
        group[idx] = ("pickle", data)
        expected[idx] = ("pickle", data)
    assert dict(group) == expected and len(group) == len(expected)
    assert group.nbytes == sum(len(data) for _, data in expected.values())


def test_spans_are_whole_runs_of_consecutive_items_or_nothing() -> None:
    group = ItemGroup()
    _run(group, 256, [b"c", b"d"])
    _run(group, 0, [b"a", b"b"])
    assert group.spans(0, 2) == [("msgpack", b"ab", 2)]
    assert group.spans(256, 2) == [("msgpack", b"cd", 2)]
    assert group.spans(0, 1) is None  # part of a run: its bytes are not cut
    assert group.spans(0, 258) is None  # a gap between the runs
    assert group.spans(2, 2) is None  # no items there
    assert group[257] == ("msgpack", b"d")  # asked by idx: cut now
    assert group.spans(256, 2) == [("msgpack", b"cd", 2)]  # still whole runs
    group[1] = ("msgpack", b"x")
    assert group.spans(0, 2) is None  # an item set one by one: taken by idx from then on
    assert group[1] == ("msgpack", b"x") and group[0] == ("msgpack", b"a")


def test_consecutive_runs_span_together_and_a_run_out_of_order_does_not() -> None:
    group = ItemGroup()
    _run(group, 0, [b"a", b"b"])
    _run(group, 2, [b"c"])
    assert group.spans(0, 3) == [("msgpack", b"ab", 2), ("msgpack", b"c", 1)]
    shuffled = ItemGroup()
    shuffled.add_run("msgpack", b"ba", (1, 0), (1, 1))  # its items not in idx order
    assert shuffled.spans(0, 2) is None and dict(shuffled) == {0: ("msgpack", b"a"), 1: ("msgpack", b"b")}
