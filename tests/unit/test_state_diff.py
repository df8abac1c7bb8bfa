"""The state diff without a server: messages matched by id, other channels by JSON path,
and a patch that, applied to the first state's JSON, gives the second's exactly."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_pg_durable.cli.state_diff import as_json, diff_states, patch, pointer


def apply(document: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 add / remove / replace, enough to check our patches."""
    doc = copy.deepcopy(document)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last: Any = int(parts[-1]) if isinstance(parent, list) else parts[-1]
        if op["op"] == "remove":
            del parent[last]
        elif op["op"] == "add" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(op["value"]))
        else:
            parent[last] = copy.deepcopy(op["value"])
    return doc


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["a", "b", "c/d", "e~f"]), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(before=JSON, after=JSON)
def test_the_patch_turns_one_document_into_the_other(before: Any, after: Any) -> None:
    assert apply(before, patch(before, after)) == after
    assert patch(after, after) == []


def test_messages_are_matched_by_id() -> None:
    hi, answer = HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")
    before = {"messages": [hi, answer], "step": 1}
    after = {"messages": [hi, AIMessage("hello there", id="a1"), ToolMessage("42", tool_call_id="c1", id="t1")], "step": 2}
    found = diff_states(before, after)
    changes = found.messages["messages"]
    assert [m["content"] for m in changes.added] == ["42"] and changes.removed == []
    assert [(b["content"], a["content"]) for b, a in changes.edited] == [("hello", "hello there")]
    assert found.changes == [{"path": "/step", "change": "changed", "before": 1, "after": 2}]
    assert apply(as_json(before), found.patch) == as_json(after)
    removed = diff_states(after, {"messages": [hi], "step": 2}).messages["messages"]
    assert {m["id"] for m in removed.removed} == {"a1", "t1"}


def test_equal_states_have_no_difference() -> None:
    state = {"messages": [HumanMessage("hi", id="h1")], "plan": {"steps": ["a", "b"]}}
    assert not diff_states(state, copy.deepcopy(state))


def test_nested_channels_are_compared_by_path() -> None:
    found = diff_states({"plan": {"steps": ["a"], "owner": "ana"}}, {"plan": {"steps": ["a", "b"]}, "new": True})
    assert {c["path"]: c["change"] for c in found.changes} == {"/plan/steps": "changed", "/plan/owner": "removed", "/new": "added"}
    assert pointer(("a/b", "c~d", 0)) == "/a~1b/c~0d/0"
