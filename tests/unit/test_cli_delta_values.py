"""`cli.delta_values`: which channels a checkpoint rebuilds, and how their history folds."""

from __future__ import annotations

from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Overwrite

from langgraph_pg_durable.cli.delta_values import delta_channels, rebuilt


def test_only_the_counted_channels_the_checkpoint_does_not_hold_are_rebuilt() -> None:
    meta = {"counters_since_delta_snapshot": {"messages": [2, 3], "files": [1, 1]}}
    assert delta_channels({"files": _DeltaSnapshot({})}, meta) == ["messages"]
    assert delta_channels({}, {"step": 1}) == []


def test_messages_fold_by_id_with_stable_ids_for_messages_that_had_none() -> None:
    history = {
        "seed": _DeltaSnapshot([AIMessage("old", id="a")]),
        "writes": [
            ("t1", "messages", [("user", "hi"), AIMessage("bye", id="b")]),
            ("t2", "messages", [AIMessage("new", id="a"), RemoveMessage(id="b")]),
        ],
    }
    present, value = rebuilt(history)
    assert present and [m.content for m in value] == ["new", "hi"]
    assert rebuilt(history)[1][1].id == value[1].id  # the same id on every read


def test_dicts_merge_with_none_deleting_and_an_overwrite_resets() -> None:
    writes = [("t1", "files", {"/a": "1", "/b": "2"}), ("t2", "files", {"/a": None}), ("t3", "files", {"/c": "3"})]
    assert rebuilt({"writes": writes}) == (True, {"/b": "2", "/c": "3"})
    reset = [("t0", "files", {"/x": "0"}), ("t1", "files", Overwrite({"/y": "1"})), ("t2", "files", {"/z": "2"})]
    assert rebuilt({"writes": reset}) == (True, {"/y": "1", "/z": "2"})
    assert rebuilt({"writes": [("t", "notes", ["a"]), ("u", "notes", ["b"])], "seed": ["s"]}) == (True, ["s", "a", "b"])
    assert rebuilt({}) == (False, None)
