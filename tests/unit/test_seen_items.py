"""A put recognises the items its list's previous version was made of by identity (and
their top-level fields), and serializes only the rest; an item changed in place is
serialized again, so what is stored always matches the list as put."""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable.core.codec import Codec
from langgraph_pg_durable.core.lists import ListState, Seen, item_mark, plan
from langgraph_pg_durable.core.offload import Placement
from langgraph_pg_durable.memory import ListMemory


class CountingSerializer(JsonPlusSerializer):
    """Counts the values it serializes."""

    def __init__(self) -> None:
        super().__init__()
        self.dumped: list[Any] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dumped.append(obj)
        return super().dumps_typed(obj)


def _put(codec: Codec, version: str, value: list, base: ListState | None) -> Any:
    placement = Placement(enabled=False)
    return plan(codec, channel="c", version=version, value=value, base=base, snapshot_every=16, placement=placement, where="w")


def _fresh_digests(value: list) -> tuple[bytes, ...]:
    return Codec(JsonPlusSerializer()).dump_items(value, channel="c", where="w")[0]


def test_an_append_serializes_only_the_new_items() -> None:
    serde = CountingSerializer()
    codec = Codec(serde)
    items = [f"item {i} " * 20 for i in range(50)]
    first = _put(codec, "v1", items, None)
    serde.dumped.clear()
    grown = [*items, "new"]
    second = _put(codec, "v2", grown, first.state)
    assert serde.dumped == ["new"]
    assert second.chain == ("v1",) and [i.idx for i in second.items] == [0]
    assert second.state.digests == _fresh_digests(grown)


def test_messages_unchanged_are_recognised_and_one_changed_in_place_is_serialized_again() -> None:
    serde = CountingSerializer()
    codec = Codec(serde)
    messages = [HumanMessage("hi", id="1"), AIMessage("hello", id="2"), HumanMessage("and?", id="3")]
    first = _put(codec, "v1", list(messages), None)
    serde.dumped.clear()
    second = _put(codec, "v2", [*messages, AIMessage("more", id="4")], first.state)
    assert [m.id for m in serde.dumped] == ["4"]

    messages[1].content = "edited in place"  # the same object, a field reassigned
    serde.dumped.clear()
    value = [*messages, second.state.seen.objects[3]]  # type: ignore[union-attr]
    third = _put(codec, "v3", value, second.state)
    assert [m.id for m in serde.dumped] == ["2", "3", "4"]  # from the changed item on
    assert third.chain == ()  # not an append: a snapshot, reusing the unchanged first item
    assert third.state.digests == _fresh_digests(value)
    assert [(i.version, i.idx) for i in third.items] == [("v3", 0)]


def test_an_equal_but_new_object_is_serialized_and_still_found_stored() -> None:
    serde = CountingSerializer()
    codec = Codec(serde)
    first = _put(codec, "v1", ["a" * 30, "b" * 30], None)
    serde.dumped.clear()
    copy = "".join(["a"] * 30)  # equal, another object
    second = _put(codec, "v2", [copy, first.state.seen.objects[1], "c"], first.state)  # type: ignore[union-attr]
    assert len(serde.dumped) == 3
    assert second.chain == ("v1",) and len(second.items) == 1  # its digest matched: not stored again


def test_marks_see_top_level_changes_of_dicts_lists_and_objects() -> None:
    d: dict[str, Any] = {"k": 1}
    mark = item_mark(d)
    d["k"] = 2
    assert Seen((d,), (mark,), 0).unchanged_prefix([d]) == 0
    inner: list[Any] = [1, 2]
    lst: list[Any] = [inner]
    seen = Seen.of([lst], 0)
    assert seen.unchanged_prefix([lst]) == 1
    lst.append(3)
    assert seen.unchanged_prefix([lst]) == 0
    assert item_mark("text") is None and item_mark((1, "a")) is None
    assert Seen.of(["a", 1, None], 0).marks is None  # frozen items: identity alone


def test_an_object_without_fields_is_never_taken_as_unchanged() -> None:
    class Slotted:
        __slots__ = ("x",)

        def __init__(self) -> None:
            self.x = 1

    item = Slotted()
    assert Seen.of([item], 0).unchanged_prefix([item]) == 0


def test_memory_keeps_the_objects_of_each_lists_newest_state_within_its_budget() -> None:
    codec = Codec(JsonPlusSerializer())
    first = _put(codec, "v1", [os.urandom(400).hex() for _ in range(3)], None)
    second = _put(codec, "v2", [*first.state.seen.objects, os.urandom(400).hex()], first.state)  # type: ignore[union-attr]
    other = _put(codec, "v1", [os.urandom(400).hex()], None)
    weights = [row.state.seen.weight for row in (first, second, other)]  # type: ignore[union-attr]
    assert weights[1] > weights[0] > 0
    memory = ListMemory(max_seen_bytes=weights[1] + weights[2] - 1)
    memory.remember("t", "", "c", first.state)
    memory.remember("t", "", "c", second.state)
    assert first.state.seen is None and second.state.seen is not None  # the earlier state let go
    assert memory.seen_bytes == weights[1]
    memory.remember("u", "", "c", other.state)
    assert second.state.seen is None and other.state.seen is not None  # past the budget: oldest first
    assert memory.seen_bytes == weights[2]
