"""A put's parameters cover every placeholder of the statement it is sent with, and a plain
put (no list in the delta layout, nothing offloaded) builds none of the list and object
parameters only `sql.writes.put` reads; which writes share a packed row, and what a write
too large to store is called."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable import wire
from langgraph_pg_durable.core.codec import Codec
from langgraph_pg_durable.core.actions import NULL_TASK_ID, describe
from langgraph_pg_durable.core.encode import put_params, put_writes_params
from langgraph_pg_durable.core.lists import ListPolicy
from langgraph_pg_durable.core.offload import Placement
from langgraph_pg_durable.errors import SerializationError
from langgraph_pg_durable.memory import ListMemory
from langgraph_pg_durable.sql.statements import Statements

STATEMENTS = Statements("lgpd_test")
LIST_ONLY = {"base_item_channels", "list_chains", "item_channels", "item_values", "object_keys", "item_object_keys"}


def _put(values: dict[str, Any], placement: Placement) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {channel: "00001.0" for channel in values}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    metadata = {"source": "loop", "step": 1}
    versions = dict(checkpoint["channel_versions"])
    return put_params(Codec(JsonPlusSerializer()), config, checkpoint, metadata, versions, placement, ListPolicy(), ListMemory())


@pytest.mark.parametrize("log", [True, False])
def test_a_plain_put_sends_every_name_its_statement_reads_and_no_list_parameter(log: bool) -> None:
    built = _put({"step": 3, "notes": {"a": "b" * 200}}, Placement(enabled=False))
    assert built.plain and not built.item_groups
    names = wire.convert(STATEMENTS.put[(True, log, True, True)]).names
    assert set(names) - {"fence"} <= built.params.keys()  # the fence: added by SaverCore._fencing
    assert not LIST_ONLY & built.params.keys()


BASES = {"base_channels", "base_versions"}


@pytest.mark.parametrize("log", [True, False])
@pytest.mark.parametrize("values", [True, False])
def test_a_plain_put_without_bases_checks_its_parent_and_token_and_nothing_one_by_one(log: bool, values: bool) -> None:
    checked = set(wire.convert(STATEMENTS.put[(True, log, values, True)]).names)
    unchecked = set(wire.convert(STATEMENTS.put[(True, log, values, False)]).names)
    assert checked - unchecked == BASES
    assert {"check_parent", "fence", "thread_id", "checkpoint_ns"} <= unchecked
    assert not unchecked - checked


def test_a_put_whose_parent_stands_for_every_carried_value_sends_no_base() -> None:
    """The saver saw the parent committed with the versions the put carries over: nothing to
    check one by one (the statement without the branch); a value of another version is."""
    values = {"step": 3, "notes": {"a": "b" * 200}, "kept": ["x"] * 3}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {channel: "00002.0" for channel in values}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "parent"}}
    metadata = {"source": "loop", "step": 2}
    codec, lists = Codec(JsonPlusSerializer()), ListPolicy(min_bytes=1 << 20)
    memory = ListMemory()
    memory.holds("t", "", "parent", {"kept": "00002.0"})
    built = put_params(codec, config, checkpoint, metadata, {"notes": "00002.0"}, Placement(enabled=False), lists, memory)
    assert built.plain and built.params["check_parent"] == "parent"
    assert list(built.params["base_channels"]) == []
    memory.holds("t", "", "parent", {"kept": "00001.0"})
    built = put_params(codec, config, checkpoint, metadata, {"notes": "00002.0"}, Placement(enabled=False), lists, memory)
    assert list(zip(built.params["base_channels"], built.params["base_versions"])) == [("kept", "00002.0")]


@pytest.mark.parametrize("log", [True, False])
def test_a_list_or_offloaded_put_sends_every_name_of_the_full_statement(log: bool) -> None:
    listed = _put({"items": [f"item {i} " * 40 for i in range(40)]}, Placement(enabled=False))
    offloaded = _put({"blob": "x" * 5000}, Placement(enabled=True, threshold=1024, prefix="p"))
    for built in (listed, offloaded):
        assert not built.plain
        names = wire.convert(STATEMENTS.put[(False, log, True, True)]).names
        assert set(names) - {"fence"} <= built.params.keys()  # the fence: added by SaverCore._fencing
    assert listed.states and listed.item_groups  # the list's items, for the item cache
    assert offloaded.uploads and offloaded.params["object_keys"] == [offloaded.uploads[0].ref.key]


def _writes(writes: list[tuple[str, Any]], task_id: str = "task-1", placement: Placement | None = None) -> Any:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
    placement = placement or Placement(enabled=False)
    return put_writes_params(Codec(JsonPlusSerializer()), config, writes, task_id, "", placement, ListPolicy(), ListMemory())


def test_a_tasks_plain_writes_share_one_packed_row_and_the_rest_do_not() -> None:
    packed = _writes([("messages", ["hi"]), ("step", 2)])
    assert packed.packed is not None and packed.packed["packed_idx"] == 1 and packed.packed["packed_channel"] == "messages"
    assert not packed.replace
    special = _writes([("__error__", "boom"), ("step", 2)])  # a special channel: each write replaced alone
    assert special.packed is None and not special.replace
    assert _writes([("__error__", "boom")]).replace
    assert _writes([("messages", ["hi"])], task_id=NULL_TASK_ID).packed is None  # the caller's writes grow
    offloaded = _writes([("blob", "x" * 5000)], placement=Placement(enabled=True, threshold=1024, prefix="p"))
    assert offloaded.packed is None and offloaded.uploads


def test_a_write_too_large_for_a_row_names_its_task_and_channel() -> None:
    with pytest.raises(SerializationError) as raised:
        _writes([("step", 1), ("notes", "x" * 200)], placement=Placement(enabled=False, max_inline=100))
    message = str(raised.value)
    assert "task 'task-1'" in message and "write to channel 'notes'" in message and "checkpoint 'c1'" in message


def test_a_tasks_writes_handed_over_as_lists_are_taken_as_pairs() -> None:
    # LangGraph's task cache hands put_writes the writes it restored as [channel, value] lists.
    pairs: list[tuple[str, Any]] = [("messages", ["hi"]), ("step", 2), ("__error__", "boom")]
    as_lists: list[Any] = [list(pair) for pair in pairs]
    assert _writes(as_lists).params == _writes(pairs).params
    described = [describe(w, checkpoint_ns="", task_id="task-1", task_path="~0") for w in (as_lists, pairs)]
    assert described[0] == described[1] and described[0].action_type == "error"
