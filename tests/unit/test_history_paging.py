"""core/history.py without a server: list()'s paging (limit, page sizes, keyset cursor, WHERE
fragments, `before`) and tuples from hand-built `CheckpointColumn` and `Detail` rows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable.core.codec import Codec, dump_json
from langgraph_pg_durable.core.history import FILTERED_FIRST_PAGE, FIRST_PAGE, LARGEST_PAGE, HistoryScan, known_groups, lane_key_columns
from langgraph_pg_durable.core.metadata import dump_metadata
from langgraph_pg_durable.core.offload import ObjectRef
from langgraph_pg_durable.errors import CheckpointIntegrityError, ConfigError, DeserializationError
from langgraph_pg_durable.sql.reads import CheckpointColumn, Detail, Part

CODEC = Codec(JsonPlusSerializer())
TS = "2024-05-01T00:00:00+00:00"


def scan(config: Any = None, *, filter: Any = None, before: Any = None, limit: Any = None) -> HistoryScan:
    return HistoryScan(CODEC, config, filter=filter, before=before, limit=limit)


def body(inline: dict[str, Any] | None = None, versions: dict[str, str] | None = None) -> dict[str, Any]:
    """A checkpoint as stored in its row: no id, scalars inline, the rest named by value_channels."""
    out: dict[str, Any] = {"v": 4, "ts": TS, "channel_versions": versions or {}, "versions_seen": {}, "updated_channels": None}
    if inline:
        out["channel_values"] = CODEC.dump_inline(inline, where="test")
    return out


def checkpoint_row(
    checkpoint_id: str,
    *,
    thread_id: str = "t",
    ns: str = "",
    parent: str | None = None,
    inline: dict[str, Any] | None = None,
    values: dict[str, str] | None = None,
    metadata: dict[Any, Any] | None = None,
) -> tuple[Any, ...]:
    """A row in `CheckpointColumn` order, the jsonb columns as JSON text; `values` channel -> version."""
    values = values or {}
    projection, exact = dump_metadata(CODEC, metadata if metadata is not None else {"source": "loop", "step": 1})
    row: list[Any] = [None] * len(CheckpointColumn.names())
    row[CheckpointColumn.THREAD_ID] = thread_id
    row[CheckpointColumn.CHECKPOINT_NS] = ns
    row[CheckpointColumn.CHECKPOINT_ID] = checkpoint_id
    row[CheckpointColumn.PARENT_CHECKPOINT_ID] = parent
    row[CheckpointColumn.CHECKPOINT] = dump_json(body(inline, {**{c: "00000001.i" for c in inline or {}}, **values}))
    row[CheckpointColumn.METADATA] = projection
    row[CheckpointColumn.METADATA_EXACT] = exact
    row[CheckpointColumn.VALUE_CHANNELS] = list(values)
    row[CheckpointColumn.VALUE_VERSIONS] = list(values.values())
    return tuple(row)


def detail(part: str, **columns: Any) -> tuple[Any, ...]:
    row: list[Any] = [None] * len(Detail.names())
    row[Detail.PART] = part
    for name, value in columns.items():
        row[Detail.position(name)] = value
    return tuple(row)


def value_row(channel: str, version: str, value: Any, *, thread_id: str = "t", ns: str = "") -> tuple[Any, ...]:
    type_, data = CODEC.dump(value, channel=channel, where="test")
    return detail(Part.VALUE, thread_id=thread_id, checkpoint_ns=ns, channel=channel, version=version, type=type_, value=data)


def write_row(
    checkpoint_id: str, task_id: str, channel: str, idx: int, value: Any, *, task_path: str = "", thread_id: str = "t", ns: str = ""
) -> tuple[Any, ...]:
    type_, data = CODEC.dump(value, channel=channel, where="test")
    return detail(
        Part.WRITE,
        thread_id=thread_id,
        checkpoint_ns=ns,
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        task_path=task_path,
        channel=channel,
        idx=idx,
        type=type_,
        value=data,
    )


def rows(count: int, start: int = 10_000) -> list[tuple[Any, ...]]:
    """`count` bare rows of one lane, newest first."""
    return [checkpoint_row(f"c{start - i:06d}") for i in range(count)]


def config(checkpoint_id: str, thread_id: str = "t", ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


# -- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [-1, -100, True, False, "3", 2.0, [1]])
def test_a_limit_that_is_not_a_whole_number_is_refused(limit: object) -> None:
    with pytest.raises(ConfigError, match=r"list\(\) limit must be a whole number >= 0 or None"):
        scan(limit=limit)


def test_a_limit_of_zero_is_done_before_any_page() -> None:
    assert scan(limit=0).done
    assert not scan(limit=1).done
    assert not scan(limit=None).done


@pytest.mark.parametrize("bad", [[("source", "loop")], "source", 1, ("a",)])
def test_a_filter_must_be_a_mapping(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"list\(\) filter must be a mapping"):
        scan(filter=bad)


def test_a_config_without_a_thread_is_refused() -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        scan({"configurable": {"checkpoint_ns": ""}})


# -- page sizes --------------------------------------------------------------------------------


def test_page_sizes_grow_from_8_to_256() -> None:
    history = scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    sizes = []
    start = 100_000
    for _ in range(6):
        size = history.page_params()["page_size"]
        sizes.append(size)
        history.take_page(rows(size, start))
        start -= size
        assert not history.done
    assert sizes == [FIRST_PAGE, 32, 128, LARGEST_PAGE, LARGEST_PAGE, LARGEST_PAGE]
    assert (FIRST_PAGE, LARGEST_PAGE) == (8, 256)


@pytest.mark.parametrize("limit, sizes", [(300, [256, 44]), (20, [20]), (5, [5]), (8, [8]), (9, [9])])
def test_a_limit_is_read_in_as_few_pages_as_the_largest_allows(limit: int, sizes: list[int]) -> None:
    """A limit says how much the caller wants: no small first page, which is for an
    unlimited walk that may be broken off."""
    history = scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, limit=limit)
    seen = []
    start = 100_000
    yielded = 0
    while not history.done:
        size = history.page_params()["page_size"]
        seen.append(size)
        page = history.take_page(rows(size, start))
        start -= size
        yielded += len(history.tuples(page, []))
    assert seen == sizes
    assert yielded == limit
    assert history.remaining == 0


# -- WHERE fragments ---------------------------------------------------------------------------


def test_the_first_page_of_a_lane_a_thread_and_all_threads() -> None:
    assert scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}).page_where() == (
        "WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s"
    )
    assert scan({"configurable": {"thread_id": "t"}}).page_where() == "WHERE thread_id = %(thread_id)s"
    assert scan(None).page_where() == ""
    assert scan({}).page_where() == ""  # an empty config lists every thread


def test_a_single_lane_after_a_cursor() -> None:
    history = scan({"configurable": {"thread_id": "t", "checkpoint_ns": "sub"}})
    assert history.single_lane and history.one_thread
    history.page_params()
    history.take_page([checkpoint_row("c9", ns="sub"), checkpoint_row("c8", ns="sub")])
    assert history.page_where() == (
        "WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s AND checkpoint_id < %(cursor_id)s"
    )
    params = history.page_params()
    assert params["thread_id"] == "t" and params["checkpoint_ns"] == "sub"
    assert params["cursor_id"] == "c8" and params["page_size"] == 32


def test_one_thread_after_a_cursor() -> None:
    history = scan({"configurable": {"thread_id": "t"}})
    assert history.one_thread and not history.single_lane
    history.page_params()
    history.take_page([checkpoint_row("c9", ns="a"), checkpoint_row("c9", ns="")])
    assert history.page_where() == (
        "WHERE thread_id = %(thread_id)s AND checkpoint_id <= %(cursor_id)s AND "
        "(checkpoint_id, checkpoint_ns) < (%(cursor_id)s, %(cursor_ns)s)"
    )
    params = history.page_params()
    assert (params["cursor_id"], params["cursor_ns"]) == ("c9", "")
    assert "checkpoint_ns" not in params


def test_all_threads_after_a_cursor() -> None:
    history = scan(None)
    assert not history.one_thread and not history.single_lane
    history.page_params()
    history.take_page([checkpoint_row("c9", thread_id="u"), checkpoint_row("c7", thread_id="t", ns="x")])
    assert history.page_where() == ("WHERE (checkpoint_id, thread_id, checkpoint_ns) < (%(cursor_id)s, %(cursor_thread)s, %(cursor_ns)s)")
    params = history.page_params()
    assert (params["cursor_id"], params["cursor_thread"], params["cursor_ns"]) == ("c7", "t", "x")


def test_a_filter_and_before_add_their_fragments() -> None:
    history = scan(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        filter={"source": "loop", "step": 2},
        before={"configurable": {"checkpoint_id": "c5"}},
    )
    assert history.page_where() == (
        "WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s AND metadata @> %(filter)s::jsonb "
        "AND checkpoint_id < %(before_id)s"
    )
    params = history.page_params()
    assert params["filter"] == '{"source":"loop","step":2}'
    assert params["before_id"] == "c5"
    assert not history.done


def test_a_filtered_walk_starts_with_a_larger_page() -> None:
    """Its matches are sparse: a first page of 8 left the rest to a second scan of the thread."""
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    assert scan(config).page_params()["page_size"] == FIRST_PAGE
    assert scan(config, filter={"source": "input"}).page_params()["page_size"] == FILTERED_FIRST_PAGE > FIRST_PAGE
    assert scan(config, filter={"source": "input"}, limit=3).page_params()["page_size"] == 3


def test_before_takes_a_top_level_checkpoint_id_as_the_agent_server_passes_it() -> None:
    history = scan({"configurable": {"thread_id": "t"}}, before={"checkpoint_id": "c5"})
    assert history.page_params()["before_id"] == "c5" and not history.done


@pytest.mark.parametrize("before", [{}, {"configurable": {}}, {"configurable": {"thread_id": "t"}}, {"checkpoint_id": ""}])
def test_a_before_naming_no_checkpoint_is_refused_naming_before(before: Any) -> None:
    with pytest.raises(ConfigError, match=r"^before names no checkpoint"):
        scan({"configurable": {"thread_id": "t"}}, before=before)


def test_a_config_with_a_checkpoint_id_reads_that_checkpoint() -> None:
    history = scan(config("c3"))
    assert history.page_where() == (
        "WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s AND checkpoint_id = %(checkpoint_id)s"
    )
    assert history.page_params()["checkpoint_id"] == "c3"


def test_before_a_subgraphs_checkpoint_needs_no_thread() -> None:
    history = scan(None, before={"configurable": {"checkpoint_id": "c5", "checkpoint_ns": "sub:1"}})
    assert history.page_where() == "WHERE checkpoint_id < %(before_id)s"
    assert not history.done


# -- take_page ---------------------------------------------------------------------------------


def test_take_page_advances_the_cursor_to_the_last_row() -> None:
    history = scan(None)
    history.page_params()
    page = history.take_page(rows(8))
    assert [r.checkpoint_id for r in page] == [f"c{10_000 - i:06d}" for i in range(8)]
    assert history.cursor == ("c009993", "t", "")
    assert not history.done


@pytest.mark.parametrize("count", [0, 1, 7])
def test_a_short_page_marks_the_scan_done(count: int) -> None:
    history = scan(None)
    history.page_params()
    history.take_page(rows(3, 50_000))  # fewer than 8: the last page
    assert history.done
    history = scan(None)
    history.page_params()
    history.take_page(rows(count))
    assert history.done
    assert history.cursor == (None if count == 0 else (f"c{10_000 - count + 1:06d}", "t", ""))


def test_an_empty_page_keeps_the_cursor() -> None:
    history = scan(None)
    history.page_params()
    history.take_page(rows(8))
    cursor = history.cursor
    history.page_params()
    assert history.take_page([]) == []
    assert history.cursor == cursor and history.done


# -- tuples ------------------------------------------------------------------------------------


def test_a_page_decodes_to_checkpoint_tuples_with_values_and_pending_writes() -> None:
    history = scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    history.page_params()
    page = history.take_page(
        [
            checkpoint_row(
                "c2",
                parent="c1",
                inline={"step": 3, "flag": True},
                values={"msgs": "00000002.m"},
                metadata={"source": "loop", "step": 3, "user": "ada"},
            ),
            checkpoint_row("c1", inline={"step": 2}, values={"msgs": "00000001.m"}, metadata={"source": "input", "step": -1}),
        ]
    )
    params = history.details_params(page)
    assert sorted(zip(params["v_channels"], params["v_versions"])) == [("msgs", "00000001.m"), ("msgs", "00000002.m")]
    assert list(params["w_checkpoints"]) == ["c2", "c1"]
    details = [
        value_row("msgs", "00000002.m", ["hi", "there"]),
        value_row("msgs", "00000001.m", ["hi"]),
        write_row("c2", "task-b", "msgs", 0, "b0", task_path="~1"),
        write_row("c2", "task-a", "msgs", 1, "a1", task_path="~0"),
        write_row("c2", "task-a", "msgs", 0, "a0", task_path="~0"),
        write_row("c2", "task-a", "__error__", -1, "boom", task_path="~0"),
    ]
    got = history.tuples(page, details)
    assert got == [
        CheckpointTuple(
            config=config("c2"),
            checkpoint={
                "v": 4,
                "ts": TS,
                "id": "c2",
                "versions_seen": {},
                "updated_channels": None,
                "channel_versions": {"step": "00000001.i", "flag": "00000001.i", "msgs": "00000002.m"},
                "channel_values": {"step": 3, "flag": True, "msgs": ["hi", "there"]},
            },
            metadata={"source": "loop", "step": 3, "user": "ada"},
            parent_config=config("c1"),
            pending_writes=[("task-a", "__error__", "boom"), ("task-a", "msgs", "a0"), ("task-a", "msgs", "a1"), ("task-b", "msgs", "b0")],
        ),
        CheckpointTuple(
            config=config("c1"),
            checkpoint={
                "v": 4,
                "ts": TS,
                "id": "c1",
                "versions_seen": {},
                "updated_channels": None,
                "channel_versions": {"step": "00000001.i", "msgs": "00000001.m"},
                "channel_values": {"step": 2, "msgs": ["hi"]},
            },
            metadata={"source": "input", "step": -1},
            parent_config=None,
            pending_writes=[],
        ),
    ]


def test_tuples_honour_the_limit() -> None:
    history = scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, limit=2)
    assert history.page_params()["page_size"] == 2
    page = history.take_page([checkpoint_row("c3", values={"v": "3"}), checkpoint_row("c2", values={"v": "2"})])
    got = history.tuples(page, [value_row("v", "3", "three"), value_row("v", "2", "two"), write_row("c2", "t1", "v", 0, "w")])
    assert [t.checkpoint["channel_values"]["v"] for t in got] == ["three", "two"]
    assert got[1].pending_writes == [("t1", "v", "w")]
    assert history.done and history.remaining == 0


def test_a_limit_reached_inside_a_page_stops_there() -> None:
    history = scan(None, limit=1)
    history.page_params()
    page = history.take_page([checkpoint_row("c3"), checkpoint_row("c2")])  # more rows than the limit
    assert [t.config["configurable"]["checkpoint_id"] for t in history.tuples(page, [])] == ["c3"]
    assert history.done


def test_values_a_page_decoded_are_not_fetched_again_for_the_next() -> None:
    history = scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    history.page_params()
    first = history.take_page([checkpoint_row(f"c{i}", values={"big": "00000002.b"}) for i in range(9, 1, -1)])
    assert list(history.details_params(first)["v_versions"]) == ["00000002.b"]
    history.tuples(first, [value_row("big", "00000002.b", "x" * 1000)])
    history.page_params()
    second = history.take_page([checkpoint_row("c1", values={"big": "00000002.b"}), checkpoint_row("c0", values={"big": "00000001.b"})])
    params = history.details_params(second)
    assert list(zip(params["v_channels"], params["v_versions"])) == [("big", "00000001.b")]
    got = history.tuples(second, [value_row("big", "00000001.b", "older")])
    assert [t.checkpoint["channel_values"]["big"] for t in got] == ["x" * 1000, "older"]


def test_a_value_missing_from_the_details_is_an_integrity_error() -> None:
    history = scan(None)
    history.page_params()
    page = history.take_page([checkpoint_row("c1", values={"msgs": "00000004.m"})])
    with pytest.raises(CheckpointIntegrityError, match=r"thread 't', checkpoint 'c1': channel 'msgs' holds version '00000004.m'"):
        history.tuples(page, [])


def test_undecodable_details_name_what_they_are() -> None:
    history = scan(None)
    history.page_params()
    page = history.take_page([checkpoint_row("c1", values={"msgs": "00000004.m"})])
    bad_value = detail(Part.VALUE, thread_id="t", checkpoint_ns="", channel="msgs", version="00000004.m", type="msgpack", value=b"\xc1")
    with pytest.raises(DeserializationError, match=r"thread 't', channel 'msgs' \(version '00000004.m'\)"):
        history.tuples(page, [bad_value])
    bad_write = detail(
        Part.WRITE,
        thread_id="t",
        checkpoint_ns="",
        checkpoint_id="c1",
        task_id="tk",
        task_path="",
        channel="out",
        idx=0,
        type="msgpack",
        value=b"\xc1",
    )
    history = scan(None)
    history.page_params()
    page = history.take_page([checkpoint_row("c1")])
    with pytest.raises(DeserializationError, match=r"checkpoint 'c1', pending write of task 'tk' to channel 'out'"):
        history.tuples(page, [bad_write])


def test_rows_of_several_threads_get_their_own_values_and_writes() -> None:
    history = scan(None)
    history.page_params()
    page = history.take_page(
        [checkpoint_row("c2", thread_id="u", values={"x": "1"}), checkpoint_row("c1", thread_id="t", ns="n", values={"x": "1"})]
    )
    got = history.tuples(
        page,
        [
            value_row("x", "1", "of u", thread_id="u"),
            value_row("x", "1", "of t", thread_id="t", ns="n"),
            write_row("c1", "k", "x", 0, "w of t", thread_id="t", ns="n"),
        ],
    )
    assert [(t.config["configurable"]["thread_id"], t.checkpoint["channel_values"]["x"], t.pending_writes) for t in got] == [
        ("u", "of u", []),
        ("t", "of t", [("k", "x", "w of t")]),
    ]


def _ids(tuples: Sequence[CheckpointTuple]) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


def test_a_lossy_filter_is_rechecked_on_the_exact_metadata() -> None:
    # Both rows have the jsonb {"s": "a\\u0000"}: SQL matches both, only one holds a NUL.
    with_nul = checkpoint_row("c2", metadata={"s": "a\x00"})
    with_text = checkpoint_row("c1", metadata={"s": "a\\u0000"})
    assert with_nul[CheckpointColumn.METADATA] == with_text[CheckpointColumn.METADATA]
    history = scan(None, filter={"s": "a\x00"}, limit=5)
    assert history.recheck_all
    history.page_params()
    assert _ids(history.tuples(history.take_page([with_nul, with_text]), [])) == ["c2"]
    assert history.remaining == 4  # a row the recheck drops does not count
    history = scan(None, filter={"s": "a\\u0000"})
    assert not history.recheck_all  # the filter is exact, but a row's metadata is not
    history.page_params()
    assert _ids(history.tuples(history.take_page([with_nul, with_text]), [])) == ["c1"]


def test_an_exact_filter_keeps_every_row_with_exact_json() -> None:
    history = scan(None, filter={"source": "loop"})
    history.page_params()
    page = history.take_page([checkpoint_row("c2"), checkpoint_row("c1", metadata={"source": "loop", "d": (1,)})])
    assert _ids(history.tuples(page, [])) == ["c2", "c1"]


def test_the_objects_a_page_references_are_named() -> None:
    history = scan(None)
    history.page_params()
    page = history.take_page([checkpoint_row("c2", values={"big": "7"}), checkpoint_row("c1", values={"big": "7"})])
    sha = "ab" * 32
    ref_row = detail(
        Part.VALUE,
        thread_id="t",
        checkpoint_ns="",
        channel="big",
        version="7",
        type="msgpack",
        object_key=f"objects/ab/{sha}",
        object_sha256=sha,
        object_size=10,
    )
    assert history.references(page, [ref_row, value_row("small", "1", 1)]) == [
        (ObjectRef(f"objects/ab/{sha}", sha, 10), "thread 't', checkpoint 'c2', channel 'big' (version '7')")
    ]


def _split(text: str) -> list[str]:
    """The server's `(string_to_array(text, E'\\x1f'))[2:]`."""
    return text.split("\x1f")[1:] if text else []


@pytest.mark.parametrize(
    "groups",
    [[], [("t", "", "messages", "v1")], [("t", "", "messages", "v1"), ("t", "ns|1", "", "v2"), ("u", "", "files", "v3")]],
    ids=["none", "one-with-empty-namespace", "three"],
)
def test_held_groups_go_as_split_columns_that_read_back_whole(groups: list[tuple[str, str, str, str]]) -> None:
    params = known_groups(groups)
    columns = [_split(params[name]) for name in ("known_threads", "known_namespaces", "known_channels", "known_versions")]
    assert sorted(zip(*columns)) == sorted(groups) and params["known"] == "[]"


def test_held_groups_whose_keys_hold_the_separator_go_as_json() -> None:
    groups = [("t", "", "messages", "v1"), ("t\x1fu", "", "messages", "v2")]
    params = known_groups(groups)
    assert [params[name] for name in ("known_threads", "known_namespaces", "known_channels", "known_versions")] == [""] * 4
    assert sorted(map(tuple, json.loads(params["known"]))) == sorted(groups)


def _columns(params: dict[str, str]) -> list[tuple[str, ...]]:
    return sorted(zip(*(_split(params[name]) for name in ("known_threads", "known_namespaces", "known_channels", "known_versions"))))


@pytest.mark.parametrize("made", [True, False], ids=["columns-made-by-the-cache", "columns-made-by-the-walk"])
def test_seeded_and_fetched_groups_go_together(made: bool) -> None:
    walk = scan({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    seeded = {("messages", "v1"): {0: ("msgpack", b"\x01")}, ("files", "v2"): {0: ("msgpack", b"\x02")}}
    walk.seed(("t", ""), seeded, lane_key_columns(("t", ""), seeded) if made else None)
    walk.item_groups.add(("t", "", "messages", "v3"))  # as a page's details add what they fetched
    params = walk.known_params()
    assert params["known"] == "[]"
    assert _columns(params) == sorted([("t", "", "messages", "v1"), ("t", "", "files", "v2"), ("t", "", "messages", "v3")])
    assert walk.first_params()["known_versions"] == params["known_versions"]


def test_seeded_groups_whose_keys_hold_the_separator_go_as_json_with_the_rest() -> None:
    walk = scan({"configurable": {"thread_id": "t\x1fu", "checkpoint_ns": ""}})
    walk.seed(("t\x1fu", ""), {("messages", "v1"): {0: ("msgpack", b"\x01")}})
    walk.item_groups.add(("t\x1fu", "", "messages", "v2"))
    params = walk.known_params()
    assert params["known_threads"] == ""
    assert sorted(map(tuple, json.loads(params["known"]))) == [("t\x1fu", "", "messages", "v1"), ("t\x1fu", "", "messages", "v2")]


@pytest.mark.parametrize(
    ("config", "options", "together"),
    [
        ({"configurable": {"thread_id": "t"}}, {}, True),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, {"limit": 10}, True),
        ({"configurable": {"thread_id": "t"}}, {"filter": {"k": "v"}}, False),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, {"filter": {"k": "v"}}, True),
        ({"configurable": {"thread_id": "t"}}, {"before": {"configurable": {"checkpoint_id": "b"}}}, False),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}}, {}, False),
        (None, {}, False),
        ({"configurable": {"thread_id": "t"}}, {"limit": 0}, False),
    ],
    ids=["thread", "lane", "filtered-thread", "filtered-lane", "before", "one-checkpoint", "every-thread", "limit-0"],
)
def test_only_a_whole_threads_first_page_comes_with_its_details(config: Any, options: dict[str, Any], together: bool) -> None:
    walk = scan(config, **options)
    assert walk.first_in_one is together
    if together:
        walk.first_params()
        walk.take_page([])  # an empty first page ends the walk
        assert walk.done and not walk.first_in_one
