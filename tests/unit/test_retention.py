"""core/delta_history.py without a server: which doomed checkpoints a surviving DeltaChannel
checkpoint replays (`replay_ancestors`), and the parent-chain walk of get_delta_channel_history
(`DeltaWalk`), checked against LangGraph's default walk over an InMemorySaver."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable.core.codec import Codec, dump_json, is_inline
from langgraph_pg_durable.core.decode import CheckpointRow
from langgraph_pg_durable.core.delta_history import DeltaWalk, replay_ancestors
from langgraph_pg_durable.core.history import HistoryScan
from langgraph_pg_durable.core.metadata import dump_metadata
from langgraph_pg_durable.sql.reads import CheckpointColumn, Detail, Part

CODEC = Codec(JsonPlusSerializer())
TS = "2024-05-01T00:00:00+00:00"


class TooManySteps(Exception):
    pass


# -- replay_ancestors -------------------------------------------------------------------------

LaneRow = tuple[str, str, str, "str | None", bool, list[str], Any]


def lane(*rows: tuple[str, str | None, bool, list[str], Any], thread_id: str = "t", ns: str = "") -> list[LaneRow]:
    """(checkpoint_id, parent, doomed, held channels, counters) rows of one lane."""
    return [(thread_id, ns, cid, parent, doomed, held, counters) for cid, parent, doomed, held, counters in rows]


def ids(keep: set[tuple[str, str, str]]) -> set[str]:
    return {cid for _, _, cid in keep}


def test_a_survivor_keeps_its_doomed_ancestors_up_to_the_one_holding_the_channel() -> None:
    rows = lane(
        ("c0", None, True, ["x"], None),
        ("c1", "c0", True, ["x"], None),  # the nearest holding x: kept, its parent is not
        ("c2", "c1", True, [], None),
        ("c3", "c2", True, ["other"], None),
        ("s", "c3", False, [], {"x": 3}),
    )
    assert replay_ancestors(rows) == {("t", "", "c3"), ("t", "", "c2"), ("t", "", "c1")}


def test_a_survivor_without_counters_keeps_nothing() -> None:
    for counters in (None, [], "x", 3):
        rows = lane(("c1", None, True, ["x"], None), ("c2", "c1", True, [], None), ("s", "c2", False, [], counters))
        assert replay_ancestors(rows) == set()


def test_empty_counters_keep_nothing() -> None:
    rows = lane(("c1", None, True, ["x"], None), ("s", "c1", False, [], {}))
    assert replay_ancestors(rows) == set()


def test_a_channel_the_survivor_holds_itself_keeps_nothing() -> None:
    rows = lane(("c1", None, True, ["x"], None), ("c2", "c1", True, [], None), ("s", "c2", False, ["x"], {"x": 1}))
    assert replay_ancestors(rows) == set()


def test_a_doomed_checkpoint_with_counters_keeps_nothing() -> None:
    rows = lane(("c1", None, True, ["x"], None), ("c2", "c1", True, [], {"x": 2}))
    assert replay_ancestors(rows) == set()


def test_survivors_on_the_path_are_walked_through_not_kept() -> None:
    rows = lane(
        ("c1", None, True, ["x"], None),
        ("k", "c1", False, [], None),  # survives anyway
        ("c2", "k", True, [], None),
        ("s", "c2", False, [], {"x": 2}),
    )
    assert ids(replay_ancestors(rows)) == {"c2", "c1"}


def test_each_channel_walks_to_its_own_holder() -> None:
    rows = lane(
        ("c0", None, True, ["x", "y"], None),
        ("c1", "c0", True, ["y"], None),
        ("c2", "c1", True, ["x"], None),
        ("c3", "c2", True, [], None),
        ("s", "c3", False, [], {"x": 1, "y": 2}),
    )
    assert ids(replay_ancestors(rows)) == {"c3", "c2", "c1"}  # y's holder c1 is the farthest needed


def test_a_channel_no_ancestor_holds_keeps_the_chain_to_its_root() -> None:
    rows = lane(("c1", None, True, [], None), ("c2", "c1", True, [], None), ("s", "c2", False, [], {"x": 1}))
    assert ids(replay_ancestors(rows)) == {"c1", "c2"}


def test_two_lanes_do_not_mix() -> None:
    root = lane(("c1", None, True, ["x"], None), ("c2", "c1", True, [], None), ("c3", "c2", True, [], None))
    # The same ids in a subgraph namespace, and in another thread: their survivor reaches only its own lane.
    sub = lane(("c1", None, True, ["x"], None), ("c2", "c1", True, ["x"], None), ("s", "c2", False, [], {"x": 1}), ns="sub")
    other = lane(("c2", None, True, ["x"], None), ("c3", "c2", True, [], None), thread_id="u")
    assert replay_ancestors([*root, *sub, *other]) == {("t", "sub", "c2")}


def test_a_chain_with_a_missing_link_stops() -> None:
    rows = lane(
        ("c0", None, True, ["x"], None),
        ("c2", "c1", True, [], None),  # c1 is not among the rows
        ("c3", "c2", True, [], None),
        ("s", "c3", False, [], {"x": 1}),
    )
    assert ids(replay_ancestors(rows)) == {"c3", "c2"}


def test_two_survivors_keep_the_union() -> None:
    rows = lane(
        ("c1", None, True, ["x"], None),
        ("c2", "c1", True, [], None),
        ("s1", "c2", False, [], {"x": 1}),
        ("c3", "c1", True, ["y"], None),
        ("s2", "c3", False, [], {"y": 1}),
    )
    assert ids(replay_ancestors(rows)) == {"c2", "c1", "c3"}


class Held(list):  # type: ignore[type-arg]
    """A row's held channels that fails loudly once walked too often (instead of hanging the suite)."""

    visits = 0

    def __iter__(self) -> Any:
        Held.visits += 1
        if Held.visits > 1000:
            raise TooManySteps("walked the same ancestors more than 1,000 times: the parent chain loops")
        return super().__iter__()


def test_a_parent_cycle_ends_the_walk() -> None:
    Held.visits = 0
    rows = lane(("c1", "c1", True, Held(), None), ("s", "c1", False, [], {"x": 1}))
    assert ids(replay_ancestors(rows)) == {"c1"}


# -- DeltaWalk on hand-built rows ---------------------------------------------------------------


def row(
    checkpoint_id: str,
    parent: str | None,
    *,
    inline: Mapping[str, Any] | None = None,
    values: Mapping[str, str] | None = None,
    ns: str = "",
) -> CheckpointRow:
    """A CheckpointRow from a `CheckpointColumn` tuple; `values` channel -> version of its value rows."""
    values = dict(values or {})
    body: dict[str, Any] = {
        "v": 4,
        "ts": TS,
        "versions_seen": {},
        "updated_channels": None,
        "channel_versions": {**{c: f"{checkpoint_id}.{c}" for c in inline or {}}, **values},
    }
    if inline:
        body["channel_values"] = CODEC.dump_inline(inline, where="test")
    projection, exact = dump_metadata(CODEC, {"source": "loop", "step": 1})
    cells: list[Any] = [None] * len(CheckpointColumn.names())
    cells[CheckpointColumn.THREAD_ID] = "t"
    cells[CheckpointColumn.CHECKPOINT_NS] = ns
    cells[CheckpointColumn.CHECKPOINT_ID] = checkpoint_id
    cells[CheckpointColumn.PARENT_CHECKPOINT_ID] = parent
    cells[CheckpointColumn.CHECKPOINT] = dump_json(body)
    cells[CheckpointColumn.METADATA] = projection
    cells[CheckpointColumn.METADATA_EXACT] = exact
    cells[CheckpointColumn.VALUE_CHANNELS] = list(values)
    cells[CheckpointColumn.VALUE_VERSIONS] = list(values.values())
    return CheckpointRow.from_row(tuple(cells))


def detail(part: str, **columns: Any) -> tuple[Any, ...]:
    cells: list[Any] = [None] * len(Detail.names())
    cells[Detail.PART] = part
    for name, value in columns.items():
        cells[Detail.position(name)] = value
    return tuple(cells)


def value_detail(channel: str, version: str, value: Any, ns: str = "") -> tuple[Any, ...]:
    type_, data = CODEC.dump(value, channel=channel, where="test")
    return detail(Part.VALUE, thread_id="t", checkpoint_ns=ns, channel=channel, version=version, type=type_, value=data)


def write_detail(checkpoint_id: str, task_id: str, task_path: str, channel: str, idx: int, value: Any, ns: str = "") -> tuple[Any, ...]:
    type_, data = CODEC.dump(value, channel=channel, where="test")
    return detail(
        Part.WRITE,
        thread_id="t",
        checkpoint_ns=ns,
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        task_path=task_path,
        channel=channel,
        idx=idx,
        type=type_,
        value=data,
    )


def target_config(checkpoint_id: str | None, ns: str = "") -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


# The lane: c1 <- c2 <- c3 <- c4 (the target), and a fork f3 of c2. c1 holds "a" in a values row,
# c2 holds "b" inline, nothing holds "c"; c3 holds "z", which no one asks for.
C1 = row("c1", None, values={"a": "c1.a"})
C2 = row("c2", "c1", inline={"b": 2})
F3 = row("c3f", "c2", values={"a": "c3f.a"})
C3 = row("c3", "c2", values={"z": "c3.z"})
C4 = row("c4", "c3")
LANE_DETAILS = [
    value_detail("a", "c1.a", ["a at c1"]),
    value_detail("a", "c3f.a", ["a at the fork"]),
    value_detail("z", "c3.z", ["z"]),
    write_detail("c1", "t1", "~0", "a", 0, "a1"),
    write_detail("c1", "t1", "~0", "b", 1, "b1"),
    write_detail("c1", "t1", "~0", "c", 2, "c1"),
    write_detail("c2", "t2", "~1", "a", 0, "a2 late"),
    write_detail("c2", "t1", "~0", "a", 0, "a2 early"),
    write_detail("c2", "t1", "~0", "c", 1, "c2"),
    write_detail("c3", "t3", "~0", "b", 0, "b3"),
    write_detail("c3", "t3", "~0", "c", 1, "c3"),
    write_detail("c3f", "tf", "~0", "a", 0, "on the fork"),
    write_detail("c4", "t4", "~0", "a", 0, "the target's own"),
]


def started(channels: Sequence[str], target: CheckpointRow = C4) -> DeltaWalk:
    walk = DeltaWalk(CODEC, target_config(target.checkpoint_id), channels)
    assert walk.needs_rows()
    assert walk.scan.page_params()["page_size"] == 1  # the target row alone
    assert "checkpoint_id = %(checkpoint_id)s" in walk.scan.page_where()
    walk.take([target])
    return walk


def answer(details: Sequence[tuple[Any, ...]], params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """What `page_details` returns for the walk's parameters: the named values, the path's writes."""
    values = set(zip(params["v_threads"], params["v_namespaces"], params["v_channels"], params["v_versions"]))
    checkpoints = set(zip(params["w_threads"], params["w_namespaces"], params["w_checkpoints"]))
    out = []
    for d in details:
        if d[Detail.PART] == Part.VALUE and (d[Detail.THREAD_ID], d[Detail.CHECKPOINT_NS], d[Detail.CHANNEL], d[Detail.VERSION]) in values:
            out.append(d)
        elif d[Detail.PART] == Part.WRITE and (d[Detail.THREAD_ID], d[Detail.CHECKPOINT_NS], d[Detail.CHECKPOINT_ID]) in checkpoints:
            out.append(d)
    return out


def test_the_target_row_starts_the_walk_at_its_parent() -> None:
    walk = started(["a"])
    assert walk.started and not walk.finished
    assert walk.next_id == "c3"
    assert walk.path == []
    assert walk.needs_rows()
    assert walk.scan.page_where() == (
        "WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s AND checkpoint_id < %(before_id)s"
    )
    assert walk.scan.page_params()["before_id"] == "c4"


def test_the_walk_follows_parent_ids_across_pages() -> None:
    walk = started(["a", "b", "c"])
    walk.take([C3, F3])  # the fork is on the page, not on the path
    assert [r.checkpoint_id for r in walk.path] == ["c3"]
    assert walk.next_id == "c2" and walk.needs_rows()
    walk.take([C2, C1])
    assert [r.checkpoint_id for r in walk.path] == ["c3", "c2", "c1"]
    assert {c: r.checkpoint_id for c, r in walk.seeds.items()} == {"b": "c2", "a": "c1"}
    assert walk.remaining == {"c"}
    assert walk.next_id is None
    assert not walk.needs_rows()  # the chain ended


def test_the_walk_stops_once_every_channel_has_a_seed() -> None:
    walk = started(["b"])
    walk.take([C3, F3, C2, C1])
    assert [r.checkpoint_id for r in walk.path] == ["c3", "c2"]
    assert {c: r.checkpoint_id for c, r in walk.seeds.items()} == {"b": "c2"}
    assert walk.next_id == "c1"
    assert not walk.needs_rows()


def test_a_missing_target_finishes_at_once() -> None:
    walk = DeltaWalk(CODEC, target_config("nope"), ["a"])
    walk.take([])
    assert walk.finished and not walk.needs_rows()
    assert walk.result([]) == {"a": {"writes": []}}


def test_a_root_target_needs_no_more_rows() -> None:
    walk = started(["a"], target=C1)
    assert walk.next_id is None and not walk.needs_rows()
    assert walk.result([]) == {"a": {"writes": []}}


def test_a_short_page_ends_the_walk_with_a_missing_link() -> None:
    walk = started(["a"])
    walk.scan.page_params()
    walk.take(walk.scan.take_page([]))  # no older row at all
    assert walk.finished and not walk.needs_rows()
    assert walk.path == []


def test_a_config_without_an_id_walks_from_the_lanes_latest() -> None:
    walk = DeltaWalk(CODEC, target_config(None), ["a"])
    assert walk.scan.page_where() == "WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s"
    assert walk.scan.page_params()["page_size"] == 1


def test_details_params_list_only_seed_values_and_the_paths_writes() -> None:
    walk = started(["a", "b", "c"])
    walk.take([C3, F3, C2, C1])
    params = walk.details_params()
    assert list(zip(params["v_channels"], params["v_versions"])) == [("a", "c1.a")]  # b is inline; z not asked for
    assert list(params["v_threads"]) == ["t"] and list(params["v_namespaces"]) == [""]
    assert list(params["w_checkpoints"]) == ["c3", "c2", "c1"]
    assert list(params["w_threads"]) == ["t"] * 3
    assert params["known"] == "[]" and params["known_versions"] == ""
    assert walk.scan.required == {"c1": {"a"}}


def test_result_gives_seeds_and_writes_in_langgraphs_order() -> None:
    walk = started(["a", "b", "c", "never"])
    walk.take([C3, F3, C2, C1])
    tuples = walk.scan.tuples(walk.path, answer(LANE_DETAILS, walk.details_params()))
    assert [t.checkpoint["id"] for t in tuples] == ["c3", "c2", "c1"]
    assert "z" not in tuples[0].checkpoint["channel_values"]  # not required: not fetched, no integrity error
    result = walk.result(tuples)
    assert result == {
        # oldest checkpoint first; within one, in writes_sort_key order (task_path, task_id, idx)
        "a": {"seed": ["a at c1"], "writes": [("t1", "a", "a1"), ("t1", "a", "a2 early"), ("t2", "a", "a2 late")]},
        "b": {"seed": 2, "writes": [("t3", "b", "b3")]},  # c2's seed: c1's write to b is not replayed
        "c": {"writes": [("t1", "c", "c1"), ("t1", "c", "c2"), ("t3", "c", "c3")]},
        "never": {"writes": []},
    }


def test_result_matches_langgraphs_default_walk() -> None:
    saver = InMemorySaver()
    spec = [
        Node("c1", None, {"a": ["a at c1"]}, [("t1", "~0", [("a", "a1"), ("b", "b1"), ("c", "c1")])]),
        Node("c2", "c1", {"b": 2}, [("t2", "~1", [("a", "a2 late")]), ("t1", "~0", [("a", "a2 early"), ("c", "c2")])]),
        Node("c3", "c2", {"z": ["z"]}, [("t3", "~0", [("b", "b3"), ("c", "c3")])]),
        Node("c3f", "c2", {"a": ["a at the fork"]}, [("tf", "~0", [("a", "on the fork")])]),
        Node("c4", "c3", {}, [("t4", "~0", [("a", "the target's own")])]),
    ]
    store(saver, spec)
    channels = ["a", "b", "c", "never"]
    expected = BaseCheckpointSaver.get_delta_channel_history(saver, config=target_config("c4"), channels=channels)
    assert run_walk(spec, "c4", channels) == expected


def test_a_parent_cycle_ends_the_delta_walk() -> None:
    # c1's parent is c2 and c2's is c1, read a page apart: the second page closes the circle.
    walk = started(["a"], target=row("c3", "c1"))
    walk.take([row("c1", "c2")])
    walk.take([row("c2", "c1")])
    assert [r.checkpoint_id for r in walk.path] == ["c1", "c2"]
    walk.take([row("c0", None)])  # a later page does not walk the circle again
    assert [r.checkpoint_id for r in walk.path] == ["c1", "c2"]


def test_a_checkpoint_that_is_its_own_parent_ends_the_delta_walk() -> None:
    walk = started(["a"], target=row("c2", "c1"))
    walk.take([row("c1", "c1")])
    assert [r.checkpoint_id for r in walk.path] == ["c1"]


# -- against LangGraph's default get_delta_channel_history ---------------------------------------


@dataclass
class Node:
    checkpoint_id: str
    parent: str | None
    held: dict[str, Any]  # channel -> value (a scalar stays inline in our row)
    tasks: list[tuple[str, str, list[tuple[str, Any]]]]  # (task_id, task_path, writes)


def store(saver: InMemorySaver, spec: Sequence[Node]) -> None:
    for node in spec:
        versions = {c: f"{node.checkpoint_id}.{c}" for c in node.held}
        checkpoint = {
            "v": 4,
            "id": node.checkpoint_id,
            "ts": TS,
            "channel_values": dict(node.held),
            "channel_versions": versions,
            "versions_seen": {},
            "updated_channels": None,
        }
        saver.put(target_config(node.parent), checkpoint, {"source": "loop", "step": 1}, versions)  # type: ignore[arg-type]
        for task_id, task_path, writes in node.tasks:
            saver.put_writes(target_config(node.checkpoint_id), writes, task_id, task_path)


def run_walk(spec: Sequence[Node], target: str | None, channels: Sequence[str], ns: str = "") -> dict[str, Any]:
    """Drive a DeltaWalk as ops._delta_history_plan does, answering its statements from `spec`."""
    rows = {
        n.checkpoint_id: row(
            n.checkpoint_id,
            n.parent,
            ns=ns,
            inline={c: v for c, v in n.held.items() if is_inline(v)},
            values={c: f"{n.checkpoint_id}.{c}" for c, v in n.held.items() if not is_inline(v)},
        )
        for n in spec
    }
    details = [value_detail(c, f"{n.checkpoint_id}.{c}", v, ns) for n in spec for c, v in n.held.items() if not is_inline(v)]
    details += [
        write_detail(n.checkpoint_id, task_id, task_path, c, idx, v, ns)
        for n in spec
        for task_id, task_path, writes in n.tasks
        for idx, (c, v) in enumerate(writes)
    ]
    walk = DeltaWalk(CODEC, target_config(target, ns), channels)
    statements = 0
    while walk.needs_rows():
        statements += 1
        assert statements < 100
        walk.take(page(walk.scan, rows))
    tuples = walk.scan.tuples(walk.path, answer(details, walk.details_params())) if walk.path else []
    return walk.result(tuples)


def page(scan: HistoryScan, rows: Mapping[str, CheckpointRow]) -> list[CheckpointRow]:
    """`list_page` over one lane: newest first, after the cursor, below `before`, `page_size` rows."""
    assert scan.single_lane
    params = scan.page_params()
    where = scan.page_where()
    ordered = sorted(rows, reverse=True)
    if "checkpoint_id = %(checkpoint_id)s" in where:
        ordered = [c for c in ordered if c == params["checkpoint_id"]]
    if "before_id" in params:
        ordered = [c for c in ordered if c < params["before_id"]]
    if "cursor_id" in params:
        ordered = [c for c in ordered if c < params["cursor_id"]]
    cells = [rows[c] for c in ordered[: params["page_size"]]]
    # take_page expects CheckpointColumn tuples: give it back the rows' own cells.
    return scan.take_page(
        [
            (
                r.thread_id,
                r.checkpoint_ns,
                r.checkpoint_id,
                r.parent_checkpoint_id,
                dump_json(r.body),
                dump_json(r.metadata),
                r.metadata_exact,
                r.value_channels,
                r.value_versions,
            )
            for r in cells
        ]
    )


CHANNELS = ["a", "b", "c", "d"]
_VALUES = st.one_of(st.integers(-5, 5), st.lists(st.integers(0, 9), max_size=3), st.text(max_size=3))


@st.composite
def histories(draw: Any) -> tuple[list[Node], str | None, list[str]]:
    count = draw(st.integers(1, 30))  # past one page of older rows (8) now and then
    spec = []
    for i in range(count):
        pick = draw(st.integers(0, 9))
        # Mostly a chain, with forks and a few extra roots.
        parent = None if i == 0 or pick == 0 else f"c{i - 1:03d}" if pick > 4 else f"c{draw(st.integers(0, i - 1)):03d}"
        held = draw(st.dictionaries(st.sampled_from(CHANNELS), _VALUES, max_size=2)) if draw(st.integers(0, 3)) == 0 else {}
        tasks = []
        for t in range(draw(st.integers(0, 3))):
            writes = draw(st.lists(st.tuples(st.sampled_from(CHANNELS), _VALUES), min_size=1, max_size=3))
            tasks.append((f"task{draw(st.integers(0, 3))}-{t}", draw(st.sampled_from(["~0", "~1", "~0.a"])), writes))
        spec.append(Node(f"c{i:03d}", parent, held, tasks))
    choice = draw(st.integers(0, 9))
    # Mostly one of the newest: their chains are the long ones.
    target = None if choice == 0 else "missing" if choice == 1 else f"c{count - 1 - draw(st.integers(0, min(3, count - 1))):03d}"
    channels = draw(st.lists(st.sampled_from(CHANNELS), min_size=1, max_size=4, unique=True))
    return spec, target, channels


@settings(max_examples=40, deadline=None)
@given(histories())
def test_the_walk_answers_as_langgraphs_default_does(history: tuple[list[Node], str | None, list[str]]) -> None:
    spec, target, channels = history
    saver = InMemorySaver()
    store(saver, spec)
    expected = BaseCheckpointSaver.get_delta_channel_history(saver, config=target_config(target), channels=channels)
    assert run_walk(spec, target, channels) == expected


def test_a_subgraph_namespace_walks_its_own_lane() -> None:
    spec = [Node("c1", None, {"a": [1]}, [("t", "~0", [("a", 2)])]), Node("c2", "c1", {}, [])]
    saver = InMemorySaver()
    for node in spec:
        versions = {c: f"{node.checkpoint_id}.{c}" for c in node.held}
        checkpoint = {
            "v": 4,
            "id": node.checkpoint_id,
            "ts": TS,
            "channel_values": dict(node.held),
            "channel_versions": versions,
            "versions_seen": {},
            "updated_channels": None,
        }
        saver.put(target_config(node.parent, "sub"), checkpoint, {}, versions)  # type: ignore[arg-type]
        for task_id, task_path, writes in node.tasks:
            saver.put_writes(target_config(node.checkpoint_id, "sub"), writes, task_id, task_path)
    expected = BaseCheckpointSaver.get_delta_channel_history(saver, config=target_config("c2", "sub"), channels=["a"])
    assert run_walk(spec, "c2", ["a"], ns="sub") == expected == {"a": {"seed": [1], "writes": [("t", "a", 2)]}}
