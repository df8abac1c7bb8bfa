"""The action log's pure parts: agent names, action types, readable payloads, run ids and
whether a checkpoint leaves work to do. No server."""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage, convert_to_openai_messages
from langgraph.types import Interrupt, Send

from langgraph_pg_durable.core.actions import (
    KNOWN,
    MARKER,
    NULL_TASK_ID,
    STATE_HEAD_CHARS,
    STATE_VALUE_BYTES,
    SendToName,
    agent_name,
    as_messages,
    _openai_text_message,
    is_subgraph_input,
    describe,
    held_message_ids,
    message_json,
    readable,
    send_index,
)
from langgraph_pg_durable.core.codec import dump_json
from langgraph_pg_durable.core.runs import has_next_tasks, invocation_of, new_run_id
from langgraph_pg_durable.memory import CheckpointNotes, MessageMemory, RunRegistry

PULL, PUSH = "~__pregel_pull, ", "~__pregel_push, "


def payload(writes: list[tuple[str, object]], **kw: object) -> tuple[str, dict]:
    options = {"checkpoint_ns": "", "task_id": "t1", "task_path": PULL + "node", **kw}
    action = describe(writes, **options)  # type: ignore[arg-type]
    return action.action_type, json.loads(action.payload)


def test_agents_are_named_by_node_subgraph_path_and_send_target() -> None:
    assert agent_name("", "t", PULL + "tools", None) == "tools"
    assert agent_name("researcher:1f2e|search:99", "t", PULL + "tools", None) == "researcher/search/tools"
    assert agent_name("", "t", PUSH + "0000000001, 0000000000", ("a", "b")) == "b"
    assert agent_name("", "t", PUSH + "0000000005", ("a",)) == "__send__"  # not known: said so
    assert agent_name("", "t", PUSH + "~__pregel_pull, entry, 0000000002, True", None) == "__task__"
    assert agent_name("sub:1", NULL_TASK_ID, "", None) == "sub/__input__"
    assert agent_name("", "t", "", None) == "__unknown__"


def test_an_update_state_edit_is_a_human_edit_by_update_whatever_it_wrote() -> None:
    # LangGraph gives update_state's writes the task path (INTERRUPT, i) and does not pass its as_node on.
    ai_call = AIMessage("", tool_calls=[{"id": "c", "name": "f", "args": {"city": "Oslo"}}])
    edit = describe([("messages", [ai_call])], checkpoint_ns="", task_id="t9", task_path="~__interrupt__, 0000000000")
    assert (edit.agent, edit.action_type) == ("__update__", "human")
    assert agent_name("sub:1", "t9", "~__interrupt__, 0000000000", None) == "sub/__update__"


def test_the_most_specific_kind_wins() -> None:
    ai_call = AIMessage("", tool_calls=[{"id": "c", "name": "f", "args": {}}])
    assert payload([("messages", [AIMessage("hi")])])[0] == "llm_call"
    assert payload([("messages", [ai_call])])[0] == "tool_call"
    assert payload([("messages", [AIMessage("hi"), ai_call])])[0] == "tool_call"
    assert payload([("messages", [ToolMessage("3", tool_call_id="c")])])[0] == "observation"
    assert payload([("__error__", ValueError("x")), ("messages", [ai_call])])[0] == "error"
    assert payload([("__interrupt__", [Interrupt(value="ok?", id="i")])])[0] == "interrupt"
    assert payload([("branch:to:next", None)])[0] == "decision"
    assert payload([("count", 3)])[0] == "decision"
    assert payload([("__resume__", "yes")], task_id=NULL_TASK_ID, task_path="")[0] == "human"
    # The graph's input is the human's; a subgraph's input is what its parent handed in.
    assert payload([("messages", [("user", "hi")])], task_path=PULL + "__start__")[0] == "human"
    assert payload([("messages", [AIMessage("hi")])], task_path=PULL + "__start__", checkpoint_ns="sub:1")[0] == "decision"


def test_messages_take_the_openai_shape_with_langchains_extras() -> None:
    reply = AIMessage(
        "",
        id="m1",
        tool_calls=[{"id": "c1", "name": "add", "args": {"a": 1}}],
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        response_metadata={"model_name": "fake"},
    )
    _, out = payload([("messages", [reply]), ("branch:to:tools", None)])
    (message,) = out["messages"]
    assert message["role"] == "assistant"
    assert message["tool_calls"] == [{"type": "function", "id": "c1", "function": {"name": "add", "arguments": '{"a": 1}'}}]
    assert (message["id"], message["usage_metadata"]["total_tokens"], message["response_metadata"]) == ("m1", 3, {"model_name": "fake"})
    assert out["goto"] == ["tools"]
    # Message-like forms the reducer accepts: (role, text), role dicts, a bare str to `messages`.
    _, out = payload([("messages", [("user", "hi"), {"role": "assistant", "content": "yo"}])])
    assert out["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    _, out = payload([("messages", "plain")])
    assert out["messages"] == [{"role": "user", "content": "plain"}]
    _, out = payload([("note", "plain")])  # a str elsewhere is state, not a message
    assert out == {"state": {"note": "plain"}}
    _, out = payload([("messages", [HumanMessage("a", id="h"), RemoveMessage(id="h")])])
    assert out["messages"][0] == {"role": "user", "content": "a", "id": "h"}
    assert out["messages"][1]["id"] == "h"  # shown even though the converter has no shape for it


def test_values_without_a_json_form_are_markers_never_cut_silently() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        when: datetime.date

    class Opaque:
        pass

    _, out = payload(
        [
            ("blob", b"\x00" * 10),
            ("point", Point(1, datetime.date(2026, 12, 1))),
            ("thing", Opaque()),
            ("huge", 2**80),
            ("nan", float("nan")),
            ("text", "a\x00b\ud800c"),
            ("id", uuid.UUID(int=1)),
            ("big", "x" * 50),
        ],
        offloaded={7: ("objects/ab", 5 << 20)},
    )
    state = out["state"]
    assert state["blob"] == {MARKER: "bytes", "size": 10}
    assert state["point"] == {"x": 1, "when": "2026-12-01"}
    assert state["thing"] == {MARKER: "object", "type": f"{__name__}.{Opaque.__qualname__}"}
    assert state["huge"] == str(2**80) and state["nan"] == "nan"
    assert state["text"] == "a\ufffdb\ufffdc"  # jsonb holds neither NUL nor a lone surrogate
    assert state["id"] == "00000000-0000-0000-0000-000000000001"
    assert state["big"] == {MARKER: "offloaded", "size": 5 << 20, "object_key": "objects/ab"}
    nested: object = "bottom"
    for _ in range(100):
        nested = [nested]
    assert MARKER in json.dumps(readable(nested))


def test_a_large_state_write_is_shown_by_its_size_and_head_while_messages_stay_whole() -> None:
    long_item = "words " * 200  # 1,200 characters: W1's item, a file's text, a long note
    todos = [{"content": f"step {i}", "status": "pending"} for i in range(5)]  # small: kept as it is
    reply = AIMessage("z" * 5_000, id="m1")
    _, out = payload([("items", [long_item]), ("todos", todos), ("messages", [reply]), ("flag", True)])
    shown = out["state"]["items"]
    text = json.dumps([long_item], separators=(",", ":"))
    assert shown == {MARKER: "value", "size": len(text), "head": text[:STATE_HEAD_CHARS]}
    assert out["state"]["todos"] == todos and out["state"]["flag"] is True
    assert out["messages"][0]["content"] == "z" * 5_000  # a model's reply is what the log is read for
    # The bound is on the bytes of the JSON: 300 three-byte characters pass it in 300 characters.
    _, out = payload([("note", "€" * 300)])
    assert out["state"]["note"][MARKER] == "value" and out["state"]["note"]["size"] == 902
    _, out = payload([("note", "x" * (STATE_VALUE_BYTES - 2))])
    assert out["state"]["note"] == "x" * (STATE_VALUE_BYTES - 2)  # its JSON is exactly the bound
    # The head is the first characters whole, wherever the JSON's bytes would split one.
    for char in ("é", "€", "😀"):
        _, out = payload([("note", char * 400)])
        text = json.dumps(char * 400, ensure_ascii=False)
        assert out["state"]["note"] == {MARKER: "value", "size": len(text.encode()), "head": text[:STATE_HEAD_CHARS]}
    # Numbers stay numbers up to what jsonb holds as one, and past it become text.
    _, out = payload([("top", 2**63 - 1), ("bottom", -(2**63)), ("over", 2**63), ("under", -(2**63) - 1)])
    assert out["state"] == {"top": 2**63 - 1, "bottom": -(2**63), "over": str(2**63), "under": str(-(2**63) - 1)}


def test_a_tool_nodes_send_names_the_state_it_hands_the_tool_and_does_not_copy_it() -> None:
    conversation = {"messages": [AIMessage("x" * 10_000, id=str(i)) for i in range(20)], "remaining_steps": 5}
    call = {"name": "search", "args": {"q": "oslo"}, "id": "c1", "type": "tool_call"}
    arg = {"__type": "tool_call_with_context", "tool_call": call, "state": conversation}
    _, out = payload([("__pregel_tasks", Send("tools", arg))])
    assert out["sends"] == [
        {
            "node": "tools",
            "arg": {
                "__type": "tool_call_with_context",
                "tool_call": call,
                "state": {MARKER: "state", "channels": ["messages", "remaining_steps"]},
            },
        }
    ]


def test_errors_interrupts_sends_and_repeated_channels_keep_everything() -> None:
    try:
        raise KeyError("missing")
    except KeyError as exc:
        error = exc
    _, out = payload([("__error__", error)])
    assert out["error"]["type"] == "KeyError" and "Traceback" in out["error"]["traceback"]
    _, out = payload([("__interrupt__", (Interrupt(value={"q": 1}, id="i1"),))])
    assert out["interrupts"] == [{"id": "i1", "value": {"q": 1}}]
    _, out = payload([("__pregel_tasks", Send("worker", {"topic": "a"}))])
    assert out["sends"] == [{"node": "worker", "arg": {"topic": "a"}}]
    _, out = payload([("notes", "a"), ("notes", "b"), ("notes", "c")])
    assert out == {"state": {"notes": ["a", "b", "c"]}, "repeated": ["notes"]}
    _, out = payload([("__no_writes__", None)])
    assert out == {}


def test_under_encryption_the_payload_is_a_marker_and_the_kind_stays() -> None:
    action = describe([("messages", [AIMessage("secret")])], checkpoint_ns="", task_id="t", task_path=PULL + "agent", encrypted=True)
    assert (action.agent, action.action_type, json.loads(action.payload)) == ("agent", "llm_call", {MARKER: "encrypted"})


def test_an_interrupt_and_the_later_result_of_a_task_are_keyed_apart() -> None:
    asked = describe([("__interrupt__", [])], checkpoint_ns="", task_id="t", task_path=PULL + "a")
    done = describe([("x", 1)], checkpoint_ns="", task_id="t", task_path=PULL + "a")
    assert (asked.idx, done.idx) == (-3, 0)


def test_run_ids_are_uuid7_and_sort_by_time() -> None:
    ids = [new_run_id() for _ in range(50)]
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert len(set(ids)) == 50
    assert sorted(ids)[0][:8] == ids[0][:8]  # the leading bits are the time in ms


def test_an_invocation_is_its_runtimes_control_and_keeps_one_id() -> None:
    control = object()
    config = {"configurable": {"__pregel_runtime": SimpleNamespace(control=control)}}
    assert invocation_of(config) is control
    assert invocation_of({"configurable": {}}) is None
    assert invocation_of({}) is None
    registry = RunRegistry(max_runs=2)
    first = registry.run_id(control, new_run_id)
    assert registry.run_id(control, new_run_id) == first
    others = [object(), object(), object()]
    for other in others:
        registry.run_id(other, new_run_id)
    assert registry.run_id(control, lambda: "renamed") == "renamed"  # evicted: a new id


def test_a_checkpoint_leaves_work_while_a_trigger_holds_an_unseen_value() -> None:
    done = {
        "channel_values": {"messages": []},
        "channel_versions": {"__start__": "2", "messages": "5", "branch:to:agent": "5"},
        "versions_seen": {"__start__": {"__start__": "1"}, "agent": {"branch:to:agent": "4"}},
    }
    assert not has_next_tasks(done)  # branch:to:agent was consumed: no value, though newer
    pending = {**done, "channel_values": {"messages": [], "branch:to:agent": None}}
    assert has_next_tasks(pending)
    never_ran = {**done, "channel_values": {"branch:to:tools": None}, "channel_versions": {"branch:to:tools": "3"}}
    assert has_next_tasks(never_ran)
    fresh_input = {"channel_values": {"__start__": {"x": 1}}, "channel_versions": {"__start__": "1"}, "versions_seen": {}}
    assert has_next_tasks(fresh_input)
    assert has_next_tasks({"channel_values": {"__pregel_tasks": [Send("w", {})]}, "channel_versions": {}, "versions_seen": {}})
    mixed = {**pending, "channel_versions": {"branch:to:agent": 5}}  # versions of another type
    assert not has_next_tasks(mixed)


def test_a_stored_error_repr_reads_back_as_its_type_and_message() -> None:
    _, out = payload([("__error__", "ValueError(\"service down for 'weather'\")")])
    assert out["error"] == {"type": "ValueError", "message": "service down for 'weather'"}
    _, out = payload([("__error__", "mod.sub.Boom(3, 'x')")])
    assert out["error"] == {"type": "Boom", "message": "3, 'x'"}  # not one string: as written, never evaluated
    _, out = payload([("__error__", "__import__('os').system('x')")])
    assert out["error"]["message"] == "'os').system('x'"


def test_log_scans_page_by_keyset_and_refuse_bad_filters() -> None:
    import pytest

    from langgraph_pg_durable import ConfigError
    from langgraph_pg_durable.core.paging import FIRST_PAGE
    from langgraph_pg_durable.core.logs import ActionScan, RunScan

    scan = RunScan(thread_id="t", status="error", limit=FIRST_PAGE + 3)
    assert scan.page_where() == "thread_id = %(thread_id)s AND status = %(status)s"
    assert scan.page_params()["page"] == FIRST_PAGE
    when = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
    rows = [("t", f"r{i}", when, when, 1, "error", ["a"], 15, False) for i in range(FIRST_PAGE)]
    assert [r.run_id for r in scan.take_page(rows)][:2] == ["r0", "r1"]
    assert not scan.done and "(started_at, thread_id, run_id) <" in scan.page_where()
    assert scan.page_params()["page"] == 3  # what the limit leaves
    scan.take_page(rows[:3])
    assert scan.done
    naive = ActionScan(since=datetime.datetime(2026, 1, 1), run_id="r")
    assert naive.page_params()["since"].tzinfo is datetime.timezone.utc
    assert "nullif(a.run_id, '') = %(run_id)s" in naive.page_where()
    for bad in ({"status": "ok"}, {"limit": -1}, {"since": "today"}, {"thread_id": 1.5}):
        with pytest.raises(ConfigError):
            RunScan(**bad)
    with pytest.raises(ConfigError, match="action_type 'tool'"):
        ActionScan(action_type="tool")


def test_a_backfill_gives_an_interrupt_to_its_run_and_the_resume_to_the_next() -> None:
    from langgraph_pg_durable.core.backfill import CheckpointFacts, Decoded, WriteFacts, thread_backfill

    t0 = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)

    def at(seconds: int) -> datetime.datetime:
        return t0 + datetime.timedelta(seconds=seconds)

    asked = CheckpointFacts("", "c1", None, "run-1", 1, "loop", at(0))
    answered = CheckpointFacts("", "c2", "c1", "run-2", 2, "loop", at(20))
    writes = [
        WriteFacts("", "c1", "task-a", -3, PULL + "approve", False, None, None, at(1)),
        WriteFacts("", "c1", NULL_TASK_ID, -4, "", False, None, None, at(10)),
        WriteFacts("", "c1", "task-a", -4, PULL + "approve", False, None, None, at(11)),
        WriteFacts("", "c1", "task-a", 0, PULL + "approve", False, None, None, at(11)),
    ]
    pending = [
        ("task-a", "__interrupt__", [Interrupt(value="ok?", id="i")]),
        (NULL_TASK_ID, "__resume__", "yes"),
        ("task-a", "__resume__", ["yes"]),
        ("task-a", "status", "shipped"),
    ]
    empty = {"channel_values": {}, "channel_versions": {}, "versions_seen": {}}
    built = thread_backfill(
        [asked, answered], writes, {("", "c1"): Decoded(empty, pending), ("", "c2"): Decoded(empty, [])}, encrypted=False
    )
    rows = [(a.run_id, a.step, a.action.agent, a.action.action_type, a.action.idx) for a in built.actions]
    assert rows == [
        ("run-1", 2, "approve", "interrupt", -3),
        ("run-2", 2, "__input__", "human", -4),
        ("run-2", 2, "approve", "decision", -4),
    ]
    assert json.loads(built.actions[2].action.payload) == {"resume": ["yes"], "state": {"status": "shipped"}}
    runs = {r.run_id: (r.status, r.agents, r.first_step, r.last_step) for r in built.runs}
    assert runs == {"run-1": ("interrupted", ["approve"], 1, 1), "run-2": ("done", ["__input__", "approve"], 2, 2)}
    assert built.run_ids == {}  # both checkpoints had run ids


def test_the_log_options_refuse_bad_values_by_name() -> None:
    import pytest

    from langgraph_pg_durable import ConfigError
    from rowstore import RowStoreSaver

    with pytest.raises(ConfigError, match="action_log must be True or False, got 'yes'"):
        RowStoreSaver(action_log="yes")
    with pytest.raises(ConfigError, match="batch_size must be a whole number >= 1, got 0"):
        next(RowStoreSaver()._backfill_plan(None, 0))
    with pytest.raises(ConfigError, match="thread_id"):
        next(RowStoreSaver()._backfill_plan([3.5], 10))


def test_a_task_is_typed_and_shown_by_what_is_new_in_its_writes() -> None:
    call = AIMessage("", id="m1", tool_calls=[{"id": "c", "name": "f", "args": {"city": "Oslo"}}])
    edited = AIMessage("", id="m1", tool_calls=[{"id": "c", "name": "f", "args": {"city": "Bergen"}}])
    reply = AIMessage("done", id="m2")
    # Written back unchanged (a review that approved): counted, not shown, not a second call.
    kind, body = payload([("messages", [call])], prior_messages={"m1": call})
    assert (kind, body) == ("decision", {"unchanged": 1})
    # Written back changed (an edit): shown as rewritten; still not typed by it.
    kind, body = payload([("messages", [edited])], prior_messages={"m1": call})
    assert kind == "decision" and json.loads(body["rewritten"][0]["tool_calls"][0]["function"]["arguments"]) == {"city": "Bergen"}
    # An agent returning the conversation with its reply: typed and shown by the reply alone.
    hello = HumanMessage("hi", id="h")
    kind, body = payload([("messages", [hello, call, reply])], prior_messages={"h": hello, "m1": call})
    assert kind == "llm_call" and [m["id"] for m in body["messages"]] == ["m2"] and body["unchanged"] == 2
    # A message without an id is new, as is everything when nothing is known.
    assert payload([("messages", [AIMessage("x")])], prior_messages={"m1": call})[0] == "llm_call"
    assert payload([("messages", [call])])[0] == "tool_call"


def test_a_rejected_or_failed_tool_result_says_error() -> None:
    kind, body = payload([("messages", [ToolMessage("User rejected the call", tool_call_id="c", status="error")])])
    assert kind == "observation" and body["messages"][0]["status"] == "error"
    assert "status" not in payload([("messages", [ToolMessage("3", tool_call_id="c")])])[1]["messages"][0]


def test_the_message_memory_knows_what_a_checkpoint_held_and_what_earlier_writes_held() -> None:
    memory = MessageMemory()
    first, second, third = "1f0-a", "1f0-b", "1f0-c"  # checkpoint ids sort by time
    a, b = AIMessage("a", id="a"), AIMessage("b", id="b")
    memory.hold("t", "", second, frozenset({"a"}), {"a": a})
    memory.wrote("t", "", first, {"b": b})
    # Held by the checkpoint the task ran from, or written at an earlier checkpoint: prior.
    assert memory.prior("t", "", second, ["a", "b", "c"]) == {"a": a, "b": b}
    # Written at the same checkpoint (the task's own writes sent again, a sibling's): new.
    assert memory.prior("t", "", first, ["b"]) == {}
    # A late write at an earlier checkpoint does not make an id prior to its first writer.
    memory.wrote("t", "", third, {"c": a})
    memory.wrote("t", "", second, {"c": a})
    assert memory.prior("t", "", second, ["c"]) == {} and memory.prior("t", "", third, ["c"]) == {"c": a}
    # In a subgraph, what the parent's checkpoint held counts as handed, not new.
    assert memory.prior("t", "sub:1", "1f1-x", ["a"], {"": second}) == {"a": a}
    memory.forget_threads(["t"])
    assert memory.prior("t", "", second, ["a", "b"]) == {}


def test_a_subgraph_input_counts_what_any_graph_of_the_thread_made_before_it() -> None:
    # Under durability="async" an agent subgraph's reply can be known only from the agent's
    # own lane when the next subgraph starts: the parent's checkpoint and the parent task's
    # writes that carry it come from other threads, in either order.
    memory = MessageMemory()
    reply = AIMessage("s-1", id="s-1")
    memory.wrote("t", "supervisor:1", "1f0-a", {"s-1": reply})
    memory.hold("t", "other:1", "1f0-b", frozenset({"o"}), {"o": AIMessage("o", id="o")})
    parents = {"": "1f0-c"}  # not known yet
    # Handed to the next subgraph: not its work, whichever graph of the thread made it.
    assert memory.prior("t", "math:1", "1f0-d", ["s-1", "o", "new"], parents, handed=True) == {"s-1": reply, "o": AIMessage("o", id="o")}
    # Written by a task of the subgraph itself, the same id is what its own lanes say: new.
    assert memory.prior("t", "math:1", "1f0-d", ["s-1"], parents) == {}
    # Made after the subgraph's input checkpoint, or in another thread: new.
    memory.wrote("t", "late:1", "1f0-e", {"l": reply})
    memory.wrote("u", "supervisor:1", "1f0-a", {"u": reply})
    assert memory.prior("t", "math:1", "1f0-d", ["l", "u"], parents, handed=True) == {}
    assert is_subgraph_input("math:1", PULL + "__start__") and not is_subgraph_input("", PULL + "__start__")
    assert not is_subgraph_input("math:1", PULL + "agent")


def test_the_message_memory_keeps_ids_longer_than_messages() -> None:
    # A long chat's messages are kept for the last few checkpoints only; their ids for many.
    memory = MessageMemory(max_checkpoints=8, max_objects=2)
    old = AIMessage("old", id="o")
    memory.hold("t", "", "1f0-a", frozenset({"o"}), lambda: {"o": old})
    for n in range(3):  # three more checkpoints push its messages out, not its ids
        memory.hold("t", "", f"1f0-b{n}", frozenset({f"m{n}"}), {f"m{n}": AIMessage("m", id=f"m{n}")})
    assert memory.held("t", "", "1f0-a") is None and memory.held_ids("t", "", "1f0-a") == {"o"}
    (prior,) = memory.prior("t", "", "1f0-a", ["o"]).values()
    assert prior is KNOWN  # known, its content not kept: counted as written back unchanged
    assert payload([("messages", [AIMessage("old, edited", id="o")])], prior_messages={"o": prior}) == ("decision", {"unchanged": 1})
    asked: list[str] = []
    memory.hold("t", "", "1f0-c", frozenset({"x"}), lambda: asked.append("found") or {"x": old})  # type: ignore[func-returns-value]
    assert asked == [] and memory.held("t", "", "1f0-c") == {"x": old} and asked == ["found"]  # found when asked, once
    memory.held("t", "", "1f0-c")
    assert asked == ["found"]


def test_the_ids_a_checkpoint_holds_are_the_text_ids_of_its_message_lists() -> None:
    no_id = AIMessage("not given one yet")
    odd = AIMessage("odd")
    object.__setattr__(odd, "id", 7)  # not text: never taken as an id
    values = {
        "messages": [HumanMessage("a", id="a"), no_id, AIMessage("b", id="b")],
        "other": [AIMessage("c", id="c"), odd, AIMessage("a", id="a")],
        "words": ["a", "d"],  # not messages
        "step": 3,
    }
    assert held_message_ids(values) == {"a", "b", "c"}
    assert held_message_ids({"messages": [HumanMessage("a", id="a")]}) == {"a"} and held_message_ids({"step": 1}) == frozenset()


def test_a_task_writing_only_new_messages_makes_no_map_of_the_conversation() -> None:
    # A put of a plain list of messages carries the whole chat: its messages are found by id
    # only when a task writes back one the checkpoint held, not at every step's new reply.
    memory = MessageMemory()
    asked: list[str] = []
    chat = {f"m{n}": AIMessage(str(n), id=f"m{n}") for n in range(50)}
    memory.hold("t", "", "1f0-a", frozenset(chat), lambda: asked.append("found") or chat)  # type: ignore[func-returns-value]
    memory.hold("u", "", "1f0-a", frozenset(chat), lambda: asked.append("u") or chat)  # type: ignore[func-returns-value]
    assert memory.prior("t", "", "1f0-a", ["new"]) == {} and asked == []
    assert memory.prior("t", "sub:1", "1f0-z", ["new"], {"": "1f0-a"}, handed=True) == {} and asked == []
    assert memory.prior("t", "", "1f0-a", ["new", "m3"]) == {"m3": chat["m3"]} and asked == ["found"]


def test_a_send_row_stored_before_its_checkpoint_is_named_once_by_whichever_comes_second() -> None:
    assert send_index(PUSH + "0000000002, False") == 2 and send_index(PULL + "tools") is None
    assert send_index(PUSH + "~__pregel_pull, entry, 0000000002, True") is None  # a functional-API task
    row = SendToName("task", 0, "run", "researcher/__send__", 1)
    assert row.named(("a", "tools")) == "researcher/tools" and row.named(("a",)) is None
    notes = CheckpointNotes()
    assert notes.later("t", "", "c1", row) is None  # kept: the put names it
    assert notes.note("t", "", "c1", 3, ("a", "tools"), take=True) == [row]
    assert notes.note("t", "", "c1", 3, ("a", "tools"), take=True) == []  # taken once
    assert notes.later("t", "", "c1", row) == ("a", "tools")  # noted first: named by its own put_writes
    notes.later("t", "", "c2", row)
    assert notes.note("t", "", "c2", 3, ()) == []  # a read notes without taking: the rows wait for the put
    assert notes.note("t", "", "c2", 3, (), take=True) == [row]


_TEXT = st.text(max_size=40)
_KWARGS = st.dictionaries(
    st.sampled_from(["refusal", "__openai_role__", "other"]), st.one_of(st.text(max_size=10), st.integers(), st.none()), max_size=3
)
_TOOL_CALLS = st.lists(
    st.builds(
        lambda name, n: {"name": name, "args": {"n": n}, "id": f"call-{n}", "type": "tool_call"},
        st.text(min_size=1, max_size=8),
        st.integers(),
    ),
    max_size=2,
)
_MESSAGES = st.one_of(
    st.builds(HumanMessage, content=_TEXT, name=st.none() | _TEXT, id=st.none() | _TEXT, additional_kwargs=_KWARGS),
    st.builds(AIMessage, content=_TEXT, name=st.none() | _TEXT, additional_kwargs=_KWARGS, tool_calls=_TOOL_CALLS),
    st.builds(ToolMessage, content=_TEXT, tool_call_id=_TEXT, name=st.none() | _TEXT, additional_kwargs=_KWARGS),
    st.builds(SystemMessage, content=_TEXT, name=st.none() | _TEXT, additional_kwargs=_KWARGS),
    st.builds(HumanMessage, content=st.lists(st.builds(lambda t: {"type": "text", "text": t}, _TEXT), max_size=2)),
)


@settings(max_examples=400, deadline=None)
@given(_MESSAGES)
def test_a_text_message_takes_the_shape_langchains_converter_gives_it(message: Any) -> None:
    """message_json's own conversion of LangChain's common text messages (the converter's
    general walk was the action log's largest cost) is exactly the converter's: a message
    it does not take (tool calls, content blocks, a role that is not text) goes to the
    converter, and one the converter refuses is refused by both."""
    try:
        expected: Any = convert_to_openai_messages([message])[0]
    except Exception as exc:  # noqa: BLE001 - whatever the converter raises, ours must not answer
        expected = type(exc)
    ours = _openai_text_message(message)
    if ours is not None:
        assert ours == expected and list(ours) == list(expected)  # the same keys, in the same order
    assert json.loads(dump_json(message_json(message))) == json.loads(dump_json(_expected_json(message, expected)))


def _expected_json(message: Any, converted: Any) -> Any:
    """message_json as written before its own conversion: the converter's shape, then the extras."""
    if isinstance(converted, type):
        converted = {"type": message.type, "content": readable(message.content)}
    out = readable(converted)
    if message.id is not None:
        out["id"] = message.id
    for extra in ("usage_metadata", "response_metadata"):
        found = getattr(message, extra, None)
        if found:
            out[extra] = readable(found)
    return out


def test_a_node_tasks_agent_is_the_same_however_often_it_is_asked() -> None:
    # (A node task's agent is kept by namespace, path and label: each call gives what the first did.)
    for _ in range(2):
        assert agent_name("tools:1", "t", PULL + "model", None, "researcher") == "tools/researcher/model"
        assert agent_name("tools:1", "t", PULL + "model", None) == "tools/model"
        assert agent_name("researcher:2", "t", PULL + "model", None, "researcher") == "researcher/model"
        assert agent_name("", NULL_TASK_ID, PULL + "model", None) == "__input__"  # the caller's writes, whatever the path


def test_writes_that_cannot_be_messages_are_told_apart_at_once() -> None:
    import enum

    class Color(str, enum.Enum):
        RED = "red"

    for value in (3, 2.5, True, None, b"x", ["a", "b"], [1, 2], [None], [Color.RED], ["hi", AIMessage("x")]):
        assert as_messages("messages", value) is None, value
    assert as_messages("messages", "hi") == [("human", "hi")]
    assert as_messages("notes", "hi") is None
    assert as_messages("messages", [("user", "hi"), ("ai", "hello")]) == [("user", "hi"), ("ai", "hello")]
    reply = AIMessage("hello")
    assert as_messages("messages", [reply]) == [reply]
    # A state channel whose name starts as LangGraph's own do is still shown as state.
    assert payload([("__mine", 3), ("branch:to:next", None)])[1] == {"state": {"__mine": 3}, "goto": ["next"]}


def test_a_root_tasks_prior_messages_are_found_as_through_every_source() -> None:
    # The one-source path of a root graph's task finds what the general one does.
    memory = MessageMemory()
    memory.hold("t", "", "c2", frozenset({"m1"}), lambda: {"m1": HumanMessage("hi", id="m1")})
    memory.wrote("t", "", "c1", {"m2": AIMessage("yo", id="m2")})
    memory.wrote("t", "", "c3", {"m4": AIMessage("later", id="m4")})
    got = memory.prior("t", "", "c2", ["m1", "m2", "m3", "m4"])
    assert got == memory.prior("t", "", "c2", ["m1", "m2", "m3", "m4"], {"": "c2"})  # (the general path)
    assert set(got) == {"m1", "m2"}  # held by the checkpoint, written before it; m3 new, m4 written after
    assert got["m1"] == HumanMessage("hi", id="m1")
    assert memory.prior("t", "", "c1", ["m1", "m2"]) == {}  # (c1 holds no ids; m2 was written to c1, not before it)
