"""The delta layout of list channels, server-free: random histories put through the saver's
own plans into an in-memory RowStore restore exactly, read warm (the writer's memory and
item cache in play) and cold (a new saver on the same rows)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from rowstore import RowStoreSaver

from langgraph_pg_durable.core.codec import COMPRESSED, Codec, unpacked
from langgraph_pg_durable.core.encode import inline_item_groups
from langgraph_pg_durable.core import lists as list_layout
from langgraph_pg_durable.core.chunks import Chunked
from langgraph_pg_durable.core.lists import (
    ListState,
    SegmentLocations,
    _joined,
    _segments,
    pick,
    pick_segments,
    plan,
    restore,
    segments_of,
    stored,
)
from langgraph_pg_durable.core.offload import Placement
from langgraph_pg_durable.errors import HistoryRewoundError, ListIntegrityError

ITEMS = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, width=32),
    st.tuples(st.integers(0, 3), st.text(max_size=3)),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)
OPS = st.one_of(
    st.tuples(st.just("append"), st.lists(ITEMS, max_size=4)),
    st.tuples(st.just("edit"), st.integers(0, 50), ITEMS),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("reverse")),
    st.tuples(st.just("not a list"), st.text(max_size=5)),
    st.tuples(st.just("fork"), st.integers(0, 50)),
    st.tuples(st.just("write"), st.lists(ITEMS, min_size=1, max_size=3), st.booleans()),
    st.tuples(st.just("mutate"), st.integers(0, 3)),  # a dict item changed in place, then put again
)


def _next(value: Any, op: tuple) -> Any:
    current = list(value) if isinstance(value, list) else []
    if op[0] == "append":
        return current + list(op[1])
    if op[0] == "edit" and current:
        current[op[1] % len(current)] = op[2]
    elif op[0] == "remove" and current:
        del current[op[1] % len(current)]
    elif op[0] == "reverse":
        return current[::-1]
    elif op[0] == "not a list":
        return op[1]
    elif op[0] == "mutate":
        for item in current:
            if type(item) is dict:
                item["m"] = op[1]
                break
    return current


class History:
    """Checkpoints of one channel put as LangGraph does, with what each must restore."""

    def __init__(self, saver: RowStoreSaver) -> None:
        self.saver = saver
        self.expected: dict[str, Any] = {}
        self.writes: dict[str, list[tuple[str, str, Any]]] = {}
        self.order: list[tuple[dict, Any, Any]] = []  # (config, checkpoint, value)
        self.head: tuple[dict, Any, Any] = ({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), [])

    def put(self, value: Any) -> None:
        config, previous, _ = self.head
        checkpoint = create_checkpoint(previous, None, len(self.order))
        version = self.saver.get_next_version(previous["channel_versions"].get("items"), None)
        checkpoint["channel_values"], checkpoint["channel_versions"] = {"items": value}, {"items": version}
        next_config = self.saver.put(config, checkpoint, {"step": len(self.order)}, {"items": version})
        self.expected[checkpoint["id"]] = _as_stored(self.saver, value)  # as put: an item may change in place later
        self.head = (next_config, checkpoint, value)
        self.order.append(self.head)

    def write(self, items: list, single: bool) -> None:
        """A task's pending write to the head, then the child holding the list with it appended."""
        value = items[0] if single else items
        task = f"task-{len(self.order)}"
        self.saver.put_writes(self.head[0], [("items", value)], task)
        self.writes.setdefault(self.head[1]["id"], []).append((task, "items", _as_stored(self.saver, value)))
        base = self.head[2] if isinstance(self.head[2], list) else []
        self.put(base + items[:1] if single else base + items)


def _as_stored(saver: RowStoreSaver, value: Any) -> Any:
    return saver.serde.loads_typed(saver.serde.dumps_typed(value))


def _check(reader: RowStoreSaver, history: History) -> None:
    for checkpoint_id, value in history.expected.items():
        got = reader.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
        assert got is not None
        assert got.checkpoint["channel_values"]["items"] == value, checkpoint_id
        want = list(history.writes.get(checkpoint_id, []))
        want.sort(key=lambda w: w[0])  # LangGraph's order: by task (path, then id), then index
        assert got.pending_writes == want, checkpoint_id


@settings(max_examples=120, deadline=None)
@given(ops=st.lists(OPS, min_size=1, max_size=25), snapshot_every=st.sampled_from([1, 2, 3, 5, 16]), min_bytes=st.sampled_from([0, 40]))
def test_random_histories_restore_exactly_warm_and_cold(ops: list, snapshot_every: int, min_bytes: int) -> None:
    saver = RowStoreSaver(snapshot_every=snapshot_every, list_min_bytes=min_bytes)
    history = History(saver)
    value: Any = []
    history.put(value)
    for op in ops:
        if op[0] == "fork":  # the next put continues from an older checkpoint, as update_state does
            history.head = history.order[op[1] % len(history.order)]
            value = history.head[2]
        elif op[0] == "write":
            history.write(op[1], op[2])
            value = history.head[2]
        else:
            value = _next(value, op)
            history.put(value)
    _check(saver, history)  # warm: the writer's list memory and item cache are used
    cold = RowStoreSaver(snapshot_every=snapshot_every, list_min_bytes=min_bytes)
    cold.store = saver.store
    _check(cold, history)
    if snapshot_every > 1 and min_bytes == 0:
        chains = [v["list_chain"] for v in saver.store.values.values() if v["list_chain"] is not None]
        assert all(len(chain) < snapshot_every for chain in chains)


def test_a_growing_list_stores_each_item_once_and_snapshots_every_n() -> None:
    saver = RowStoreSaver(snapshot_every=8, list_min_bytes=0)
    history = History(saver)
    value: list[str] = []
    for step in range(40):
        value = value + [f"item {step} " + "x" * 100]
        history.put(value)
    assert len(saver.store.items) == 40  # not 1 + 2 + ... + 40
    snapshots = [v for v in saver.store.values.values() if v["list_chain"] == []]
    assert len(snapshots) == 5  # versions 1, 9, 17, 25, 33
    _check(saver, history)


def test_pending_writes_store_their_items_once_and_the_delta_reuses_them() -> None:
    saver = RowStoreSaver(snapshot_every=8, list_min_bytes=0)
    history = History(saver)
    history.put(["seed"])
    for step in range(12):
        history.write([f"w{step}:{k}" for k in range(1 + step % 2)], single=step % 3 == 2)
    appended = 1 + sum(len(v) if isinstance(v, list) else 1 for ws in history.writes.values() for _, _, v in ws)
    assert len(saver.store.items) == appended
    _check(saver, history)


def _two_checkpoints() -> tuple[RowStoreSaver, History, str, str]:
    """A saver that put two checkpoints of a list; the ids of the first and the second."""
    saver = RowStoreSaver(snapshot_every=8, list_min_bytes=0)
    history = History(saver)
    history.put(["a"])
    history.put(["a", "b"])
    first, second = (config["configurable"]["checkpoint_id"] for config, _, _ in history.order)
    return saver, history, first, second


def test_a_put_whose_parent_is_gone_raises_history_rewound_and_writes_nothing() -> None:
    """The missing-bases guard: a delta whose parent (seen committed) and chain are gone from
    the server writes nothing; the plan asks whether the parent is there, and raises
    HistoryRewoundError naming it and the newest checkpoint the server holds. The saver
    forgets the lane's lists: the next put, from the newest checkpoint, is a snapshot."""
    saver, history, survivor, lost = _two_checkpoints()
    lost_version = history.order[-1][1]["channel_versions"]["items"]
    del saver.store.values[("t", "", "items", lost_version)]
    del saver.store.checkpoints[("t", "", lost)]
    stored_before = (dict(saver.store.checkpoints), dict(saver.store.values), dict(saver.store.items))
    saver.sent.clear()
    with pytest.raises(HistoryRewoundError) as rewound:
        history.put(["a", "b", "c"])
    assert saver.sent == ["put", "parent_status"]
    error = rewound.value
    assert (error.thread_id, error.checkpoint_ns, error.missing_checkpoint_id, error.newest_checkpoint_id) == ("t", "", lost, survivor)
    assert repr(lost) in str(error) and repr(survivor) in str(error) and "'t'" in str(error)
    assert (saver.store.checkpoints, saver.store.values, saver.store.items) == stored_before  # nothing written
    assert saver.memory.recent("t", "") == []


@pytest.mark.parametrize("single", [True, False])  # a packed row, then the rows of a re-run task
def test_writes_to_a_checkpoint_that_is_gone_raise_history_rewound_and_write_nothing(single: bool) -> None:
    saver, history, survivor, lost = _two_checkpoints()
    if not single:  # the task has a row already: its writes go a row each
        saver.put_writes(history.head[0], [("items", ["c"])], "task-again")
    del saver.store.checkpoints[("t", "", lost)]
    stored_before = (dict(saver.store.writes), dict(saver.store.items))
    saver.sent.clear()
    with pytest.raises(HistoryRewoundError) as rewound:
        saver.put_writes(history.head[0], [("items", ["c"]), ("other", 1)], "task-again")
    assert saver.sent[-1] == "parent_status"
    error = rewound.value
    assert (error.missing_checkpoint_id, error.newest_checkpoint_id) == (lost, survivor)
    assert "put_writes of task 'task-again'" in str(error) and "its checkpoint" in str(error)
    assert (saver.store.writes, saver.store.items) == stored_before


def test_a_put_after_this_savers_own_delete_is_a_snapshot() -> None:
    """A delta whose parent and chain this saver deleted meanwhile (a delete keeps what a
    surviving checkpoint holds, so the parent goes with them): the delete made the saver
    forget the thread, so the put relies on nothing and goes as a snapshot, in one statement."""
    saver = RowStoreSaver(snapshot_every=8, list_min_bytes=0)
    history = History(saver)
    history.put(["a"])
    saver.sent.clear()
    history.put(["a", "b"])
    assert saver.sent == ["put"]  # a delta on the first version, in one statement
    first_version = history.order[0][1]["channel_versions"]["items"]
    del saver.store.values[("t", "", "items", first_version)]
    del saver.store.checkpoints[("t", "", history.order[-1][0]["configurable"]["checkpoint_id"])]
    saver.memory.forget_threads(["t"])  # as this saver's own delete does
    saver.sent.clear()
    history.put(["a", "b", "c"])
    assert saver.sent == ["put"]
    newest = saver.store.values[("t", "", "items", history.order[-1][1]["channel_versions"]["items"])]
    assert newest["list_chain"] == []  # a snapshot, relying on no other row
    cold = RowStoreSaver()
    cold.store = saver.store
    latest = cold.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None and latest.checkpoint["channel_values"]["items"] == ["a", "b", "c"]


# -- the pure layout functions, without the saver --------------------------------------------


def test_a_delta_names_its_chain_and_only_the_new_items() -> None:
    codec, placement = Codec(RowStoreSaver().serde), Placement(enabled=False)
    first = plan(codec, channel="c", version="v1", value=["a", "b"], base=None, snapshot_every=4, placement=placement, where="w")
    second = plan(
        codec, channel="c", version="v2", value=["a", "b", "c"], base=first.state, snapshot_every=4, placement=placement, where="w"
    )
    assert first.chain == () and [i.idx for i in first.items] == [0, 1]
    assert second.chain == ("v1",) and [(i.version, i.idx) for i in second.items] == [("v2", 0)]
    assert second.needs == ("v1",)
    rows = {
        ("c", "v1"): stored(first.chain, first.value, first.item_versions),
        ("c", "v2"): stored(second.chain, second.value, second.item_versions),
    }
    raw = {("c", i.version): {} for i in first.items + second.items}
    for i in first.items + second.items:
        raw[("c", i.version)][i.idx] = (i.type, i.data)
    out = restore(codec, wanted=[("c", "v2")], rows=rows, raw_items=raw, where=lambda ch, v: f"{ch}@{v}")
    value, state = out[("c", "v2")]
    assert value == ["a", "b", "c"]
    assert isinstance(state, ListState) and state.locations == (("v1", 0), ("v1", 1), ("v2", 0))
    assert state.digests == second.state.digests  # a state read back extends like the writer's own


def test_a_walk_builds_each_older_list_as_a_slice_of_the_newer_one_and_refuses_a_missing_item() -> None:
    codec, placement = Codec(RowStoreSaver().serde), Placement(enabled=False)
    states: list[Any] = []
    rows, raw = {}, {}
    value: list[Any] = []
    for n in range(4):
        value = [*value, {"n": n}]
        planned = plan(
            codec,
            channel="c",
            version=f"v{n}",
            value=value,
            base=states[-1] if states else None,
            snapshot_every=8,
            placement=placement,
            where="w",
        )
        states.append(planned.state)
        rows[("c", f"v{n}")] = stored(planned.chain, planned.value, planned.item_versions)
        for i in planned.items:
            raw.setdefault(("c", i.version), {})[i.idx] = (i.type, i.data)
    named: list[tuple[str, str]] = []
    decoded: dict[str, dict[Any, Any]] = {}
    wanted = [("c", f"v{n}") for n in (3, 2, 1, 0)]  # newest first, as a walk reads them
    out = restore(codec, wanted=wanted, rows=rows, raw_items=raw, where=lambda ch, v: named.append((ch, v)) or f"{ch}@{v}", decoded=decoded)
    lists = [out[key][0] for key in wanted]
    assert lists == [[{"n": i} for i in range(n)] for n in (4, 3, 2, 1)]
    assert lists[1][0] is lists[0][0] and lists[1] is not lists[0]  # one decode per item, a list of its own
    assert named == []  # no error, so no name built
    del raw[("c", "v0")][0]
    with pytest.raises(ListIntegrityError, match=r"^c@v3: .*'v0'"):  # named, once it is needed
        restore(codec, wanted=[("c", "v3")], rows=rows, raw_items=raw, where=lambda ch, v: f"{ch}@{v}", decoded={})


def test_a_list_row_that_names_more_items_than_stored_is_refused_before_allocating() -> None:
    row = stored((), b'{"n": [1000000000]}', ["v1"])
    try:
        segments_of("v1", {"v1": row}, where="thread 't'", available={"v1": 2})
    except ListIntegrityError as exc:
        assert "1,000,000,000" in str(exc) or "999,999,999" in str(exc)
        assert "thread 't'" in str(exc)
    else:
        raise AssertionError("a segment past the stored items was accepted")


def test_an_item_changed_in_place_is_seen_by_the_fast_check_as_by_its_mark() -> None:
    """The check every append makes of a list's older items (`_unchanged`, compared in place)
    says what comparing a fresh `item_mark` says, for every kind of item and change."""
    from langchain_core.messages import AIMessage
    from pydantic import BaseModel, ConfigDict

    from langgraph_pg_durable.core.lists import _same_mark, _unchanged, item_mark

    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int = 1

    class Slotted:
        __slots__ = ("x",)

    def changes() -> list[tuple[Any, Any]]:
        message, edited, renamed = AIMessage("hi", id="m1"), AIMessage("hi", id="m2"), AIMessage("hi", id="m3")
        d, grown, swapped, nested = {"a": 1, "b": [1]}, {"a": 1}, {"a": 1}, {"a": {"x": 1}}
        items, loose = [1, "x"], Loose(extra_field=[1])
        cases: list[tuple[Any, Any]] = []
        for item, change in (
            (message, lambda: None),
            (edited, lambda: setattr(edited, "content", "bye")),
            (renamed, lambda: renamed.__dict__.update(brand_new=1)),
            (d, lambda: None),
            (grown, lambda: grown.update(c=3)),
            (swapped, lambda: (swapped.pop("a"), swapped.update(z=1))),
            (nested, lambda: nested["a"].update(x=2)),  # deep: neither sees it, as documented
            (items, lambda: items.append(3)),
            (loose, lambda: setattr(loose, "extra_field", [2])),
            ("text", lambda: None),
            (7, lambda: None),
            ((1, 2), lambda: None),
            (Slotted(), lambda: None),
        ):
            mark = item_mark(item)
            change()
            cases.append((item, mark))
        return cases

    results = [(_unchanged(item, mark), _same_mark(item_mark(item), mark)) for item, mark in changes()]
    assert [fast for fast, _ in results] == [slow for _, slow in results]
    assert [fast for fast, _ in results] == [True, False, False, True, False, False, True, False, False, True, True, True, False]


class _Plain:
    """An object whose fields live in a plain __dict__, as a message's do."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _cases_for_all_unchanged() -> list[tuple[Any, Any]]:
    """(item, mark taken before a change) pairs: unchanged messages and objects, and every
    change the check must see, including one no item-by-item walk of the flattened
    fields could tell (a field moved from one item to the next)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from pydantic import BaseModel, ConfigDict

    from langgraph_pg_durable.core.lists import item_mark

    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int = 1

    shared = object()
    first, second = _Plain(x=1, y=shared), _Plain(z=2)
    edited, grown_extra = AIMessage("hi", id="e"), Loose()
    before = [
        (HumanMessage("a", id="h"), lambda: None),
        (AIMessage("b", id="a"), lambda: None),
        (_Plain(k=[1]), lambda: None),
        (edited, lambda: setattr(edited, "content", "bye")),
        (grown_extra, lambda: setattr(grown_extra, "more", 1)),
        (first, lambda: first.__dict__.pop("y")),
        (second, lambda: (second.__dict__.clear(), second.__dict__.update(y=shared, z=2))),
        ({"role": "user"}, lambda: None),
        ("text", lambda: None),
    ]
    cases = [(item, item_mark(item)) for item, _ in before]
    for _, change in before:
        change()
    return cases


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_whole_list_check_says_what_the_item_by_item_check_says(data: st.DataObject) -> None:
    """`_all_unchanged` (every field of a list of messages compared at once) agrees with
    `_unchanged` item by item, whatever the items, their order and their changes."""
    from langgraph_pg_durable.core.lists import _all_unchanged, _unchanged

    pool = _cases_for_all_unchanged()
    picked = data.draw(st.lists(st.sampled_from(range(len(pool))), max_size=8))
    items, marks = [pool[i][0] for i in picked], [pool[i][1] for i in picked]
    assert _all_unchanged(items, marks) == all(map(_unchanged, items, marks))


def test_the_whole_list_check_sees_a_field_moved_to_the_next_item() -> None:
    from langgraph_pg_durable.core.lists import _all_unchanged

    pool = _cases_for_all_unchanged()
    moved = [pool[5], pool[6]]  # `first` lost y, `second` gained it: the same fields end to end
    assert not _all_unchanged([i for i, _ in moved], [m for _, m in moved])
    unchanged = pool[:3]
    assert _all_unchanged([i for i, _ in unchanged], [m for _, m in unchanged])


def _segments_item_by_item(locations: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """Runs of consecutive items of one version, found one item at a time (the oracle)."""
    out: list[list[Any]] = []
    for version, idx in locations:
        if out and out[-1][0] == version and out[-1][1] + out[-1][2] == idx:
            out[-1][2] += 1
        else:
            out.append([version, idx, 1])
    return [(v, s, c) for v, s, c in out]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["v1", "v2", "~w"]), st.integers(min_value=0, max_value=6)), max_size=40))
def test_segments_are_the_runs_of_consecutive_items_of_one_version(locations: list[tuple[str, int]]) -> None:
    """Grouped by version at C speed, split where idxs do not run on: the same runs as a
    look at each item finds, gaps, repeats and idxs going back included."""
    assert _segments(locations) == _segments_item_by_item(locations)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["v1", "v2", "~w"]), st.integers(min_value=0, max_value=6)), max_size=40), st.data())
def test_segments_joined_are_the_segments_of_the_locations_end_to_end(locations: list[tuple[str, int]], data: st.DataObject) -> None:
    """A state's segments are its base's with the put's own after them, the two runs that
    meet merged when one runs on into the other: as if the whole list were walked."""
    cut = data.draw(st.integers(0, len(locations)))
    head, tail = locations[:cut], locations[cut:]
    assert list(_joined(Chunked.of(_segments(head)), _segments(tail))) == _segments(locations)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.integers(1, 3), st.just("edit")), min_size=1, max_size=30), st.integers(2, 5), st.sampled_from([0, 8, 1024]))
def test_each_state_knows_the_segments_of_its_whole_list(steps: list[Any], snapshot_every: int, keep_from: int) -> None:
    """Through deltas, snapshots of appends and snapshots after an edit, a state's segments
    are those of its locations, and a snapshot's row names them, whether the states keep
    them (a list longer than KEEP_SEGMENTS_FROM) or find them when asked."""
    codec, placement = Codec(RowStoreSaver().serde), Placement(enabled=False)
    base, value = None, []
    kept, list_layout.KEEP_SEGMENTS_FROM = list_layout.KEEP_SEGMENTS_FROM, keep_from
    try:
        for n, step in enumerate(steps):
            value = [*value, *(f"item {n}.{i}" for i in range(step))] if step != "edit" else [f"edited {n}", *value[1:]]
            row = plan(
                codec,
                channel="items",
                version=f"v{n}",
                value=value,
                base=base,
                snapshot_every=snapshot_every,
                placement=placement,
                where="t",
            )
            if not row.chain:
                assert stored((), row.value, row.item_versions).segments == tuple(_segments(row.state.locations))
            base = row.state
            assert (base._segments is not None) == (len(value) > keep_from)
            assert list(base.segments) == _segments(base.locations)
    finally:
        list_layout.KEEP_SEGMENTS_FROM = kept


def test_a_snapshot_of_appends_keeps_every_item_where_it_is_stored() -> None:
    """A chain full of appends ends in a snapshot that stores only the new item: the
    base's items keep their locations, and its segments name the whole list."""
    codec, placement = Codec(RowStoreSaver().serde), Placement(enabled=False)
    base = None
    value: list[Any] = []
    for step in range(4):
        value = [*value, f"item {step}"]
        row = plan(codec, channel="items", version=f"v{step}", value=value, base=base, snapshot_every=3, placement=placement, where="test")
        base = row.state
    assert row.chain == () and [item.idx for item in row.items] == [0]
    assert list(row.state.locations) == [("v0", 0), ("v1", 0), ("v2", 0), ("v3", 0)]


@pytest.mark.parametrize("counts", [[1, True], [1, -1], [1, 2.0], [1, "2"], [None]])
def test_a_list_row_whose_counts_are_not_whole_numbers_is_refused(counts: list[Any]) -> None:
    """A count sizes what a read looks for: a row holding anything but whole numbers >= 0
    (a bool, a negative, a float, a string) is refused, naming the list."""
    body = json.dumps({"n": counts}).encode()
    with pytest.raises(ListIntegrityError, match=r"list 'items'.*not whole numbers >= 0"):
        stored((), body, [f"v{i}" for i in range(len(counts))], where="list 'items'")


def test_a_list_row_of_counts_reads_as_one_segment_per_version() -> None:
    assert stored(("v0",), b'{"n":[2,0,1]}', ["v1", "v2", "v3"]).segments == (("v1", 0, 2), ("v2", 0, 0), ("v3", 0, 1))


@pytest.mark.parametrize(
    ("segments", "named"),
    [
        ([("v1", 0, 2), ("v2", 1, 1)], "item 1 of version 'v2'"),
        ([("v1", 0, 3)], "item 2 of version 'v1'"),
        ([("v3", 0, 1)], "item 0 of version 'v3'"),
    ],
    ids=["one-item-segment", "longer-segment", "version-not-held"],
)
def test_picking_segments_names_the_first_missing_item(segments: list[tuple[str, int, int]], named: str) -> None:
    groups = {"v1": {0: "a", 1: "b"}, "v2": {0: "c"}}
    by_location = {(version, idx): item for version, group in groups.items() for idx, item in group.items()}
    with pytest.raises(ListIntegrityError, match=rf"^the list: {named} is missing$"):
        pick_segments(groups, segments, where="the list")
    with pytest.raises(ListIntegrityError, match=rf"^the list: {named} is missing$"):
        pick(by_location, segments, where="the list")
    whole = [("v1", 1, 1), ("v2", 0, 1), ("v1", 0, 2)]
    assert pick_segments(groups, whole, where="the list") == pick(by_location, whole, where="the list") == ["b", "c", "a", "b"]


def _built(locations: SegmentLocations) -> bool:
    """Whether the per-item locations were made (Chunked's slot read past SegmentLocations)."""
    try:
        Chunked._chunks.__get__(locations)  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize(
    "segments",
    [[], [("v1", 0, 1)], [("v2", 3, 2), ("v1", 0, 3), ("v3", 0, 1)], [("v1", 0, 1500), ("v2", 0, 700)]],
    ids=["empty", "one", "out-of-order", "past-a-chunk"],
)
def test_segment_locations_read_as_the_locations_they_stand_for(segments: list[tuple[str, int, int]]) -> None:
    eager = tuple((v, idx) for v, start, count in segments for idx in range(start, start + count))
    lazy = SegmentLocations(segments)
    assert len(lazy) == len(eager) and lazy.versions() == frozenset(v for v, _, _ in segments)
    assert not _built(lazy)  # its length and versions come from the segments
    assert tuple(lazy) == eager and lazy == Chunked.of(eager) and _built(lazy)
    assert tuple(lazy.extended([("v9", 0)])) == (*eager, ("v9", 0))
    if eager:
        assert lazy[-1] == eager[-1] and lazy[len(eager) // 2] == eager[len(eager) // 2]


def test_the_item_cache_gets_a_written_item_as_serialized_not_as_stored() -> None:
    """A put's item groups (what the item cache holds) are the items as the serializer made
    them, where its rows hold them compressed: the cache is not handed bytes to inflate again."""
    codec, placement = Codec(RowStoreSaver().serde), Placement(enabled=False)
    long_text = "words that compress " * 200
    row = plan(codec, channel="c", version="v1", value=["short", long_text], base=None, snapshot_every=4, placement=placement, where="w")
    short, long = row.items
    assert short.type == short.unpacked[0] and short.data == short.unpacked[1]  # under 1 KiB: stored as serialized
    assert long.type.endswith(COMPRESSED) and (long.type, long.data) != long.unpacked
    assert unpacked(long.type, long.data) == long.unpacked
    groups = inline_item_groups(row.items)
    assert groups == {("c", "v1"): {0: short.unpacked, 1: long.unpacked}}
    assert codec.load_items(list(groups[("c", "v1")].values()), where="w") == ["short", long_text]


def test_a_group_with_an_offloaded_item_is_not_handed_to_the_item_cache() -> None:
    codec = Codec(RowStoreSaver().serde)
    big = Placement(enabled=True, threshold=64, prefix="p")
    row = plan(codec, channel="c", version="v1", value=["x" * 100, "y"], base=None, snapshot_every=4, placement=big, where="w")
    assert [i.data is None for i in row.items] == [True, False]
    assert inline_item_groups(row.items) == {}


def test_an_appended_item_a_pending_write_stored_is_not_serialized_again_unless_it_changed() -> None:
    """A plain list's step: the task's write stored the new item (write_items), and the
    put finds that very object at the list's end. Unchanged since, the put takes the
    write's digest and item and serializes nothing; changed in place since, it is
    serialized, stored as the put's own item, and reads back changed."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_pg_durable.core.lists import write_items

    dumped: list[Any] = []

    class Counting(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            dumped.append(obj)
            return super().dumps_typed(obj)

    codec, placement = Codec(Counting()), Placement(enabled=False)
    base = plan(codec, channel="c", version="v1", value=["a", "b"], base=None, snapshot_every=4, placement=placement, where="w")
    for changed in (False, True):
        item = {"text": "new", "n": 1}
        written = write_items(codec, channel="c", value=[item], identity="cp\x00task\x000", placement=placement, where="w")
        offered = dict(written.offered)
        objects = {id(obj): (obj, mark, digest) for obj, mark, digest in written.objects}
        if changed:
            item["n"] = 2  # a reducer (or the node) changed it after the write was stored
        dumped.clear()
        row = plan(
            codec,
            channel="c",
            version="v2",
            value=["a", "b", item],
            base=base.state,
            snapshot_every=4,
            placement=placement,
            where="w",
            offered=offered,
            offered_objects=objects,
        )
        assert dumped == ([item] if changed else [])
        assert [(i.version, i.idx) for i in row.items] == ([("v2", 0)] if changed else [])
        rows = {
            ("c", "v1"): stored(base.chain, base.value, base.item_versions),
            ("c", "v2"): stored(row.chain, row.value, row.item_versions),
        }
        raw: dict[Any, dict[int, Any]] = {("c", "v1"): {i.idx: (i.type, i.data) for i in base.items}}
        raw[("c", written.key)] = {i.idx: (i.type, i.data) for i in written.items}
        raw.setdefault(("c", "v2"), {}).update({i.idx: (i.type, i.data) for i in row.items})
        out = restore(codec, wanted=[("c", "v2")], rows=rows, raw_items=raw, where=lambda ch, v: f"{ch}@{v}")
        assert out[("c", "v2")][0] == ["a", "b", {"text": "new", "n": 2 if changed else 1}]
