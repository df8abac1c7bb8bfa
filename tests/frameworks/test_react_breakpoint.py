"""A static breakpoint on LangGraph's prebuilt ReAct agent, and the documented edit made at it:
`create_react_agent(..., interrupt_before=["tools"])` stops before the tool runs; the operator
reads the pending AIMessage, writes back a copy with the same message id and the same tool
call id but other arguments (Oslo becomes Bergen), and resumes with `invoke(None)`, so the
tool runs for the edited call. The saver is replaced between the breakpoint and the edit, and
at the end the run forks from the breakpoint to approve the original call instead.

Why: the edit rewrites a message already in the channel (add_messages replaces it by id), so
our saver must store the rewrite as the thread's state, and its action log must show it as
the human's edit of that message, not as a second tool call of the model."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from corpus import Check, Run
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from psycopg.rows import dict_row
from scripted import ScriptedChatModel, ai, call, human

THREAD = "weather"

# The scenario drives LangGraph's prebuilt agent (its documented breakpoint example, still
# widely used), which LangGraph 1.x marks as moved to `langchain.agents.create_agent`.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: rain, 9 degrees"


def pending_call(snapshot: Any) -> dict[str, Any]:
    last = snapshot.values["messages"][-1]
    assert isinstance(last, AIMessage) and len(last.tool_calls) == 1, last
    return last.tool_calls[0]


async def breakpoint_edit(run: Run) -> None:
    model = ScriptedChatModel(
        label="weather",
        answers=[
            ai("m-1", "", call("get_weather", "c-w", city="Oslo")),
            ai("m-2", "In Bergen it rains."),  # after the edited call
            ai("m-3", "In Oslo it rains."),  # the fork, approving the original call
        ],
    )

    def build(saver: object) -> object:
        return create_react_agent(model, tools=[get_weather], interrupt_before=["tools"], checkpointer=saver)

    run.build(build)
    paused = await run.invoke({"messages": [human("h-1", "what is the weather in Oslo?")]}, THREAD)
    assert [m.id for m in paused["messages"]] == ["h-1", "m-1"]
    assert not any(isinstance(m, ToolMessage) for m in paused["messages"])

    await run.reopen()
    snapshot = await run.state(THREAD)
    assert snapshot.next == ("tools",)
    assert pending_call(snapshot)["args"] == {"city": "Oslo"}

    # The documented edit: the same message (same id), its tool call (same id) retargeted.
    last = snapshot.values["messages"][-1]
    edited = AIMessage(
        content=last.content,
        id=last.id,
        tool_calls=[{**last.tool_calls[0], "args": {"city": "Bergen"}}],
        usage_metadata=last.usage_metadata,
    )
    await run.update(THREAD, {"messages": [edited]})
    after_edit = await run.state(THREAD)
    assert after_edit.next == ("tools",)
    assert [m.id for m in after_edit.values["messages"]] == ["h-1", "m-1"]
    assert pending_call(after_edit) == {**last.tool_calls[0], "args": {"city": "Bergen"}}

    done = await run.invoke(None, THREAD)
    observed = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in observed] == [("c-w", "Bergen: rain, 9 degrees")]
    assert done["messages"][-1].content == "In Bergen it rains."
    assert (await run.state(THREAD)).next == ()

    # Fork from the breakpoint (before the edit): approve the original Oslo call there.
    def at_breakpoint(s: Any) -> bool:
        return s.next == ("tools",) and s.metadata["source"] == "loop" and pending_call(s)["args"] == {"city": "Oslo"}

    forked = await run.fork(THREAD, at_breakpoint)
    observed = [m for m in forked["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in observed] == [("c-w", "Oslo: rain, 9 degrees")]
    assert forked["messages"][-1].content == "In Oslo it rains."
    assert model.calls == 3


def actions(run: Run, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        return list(conn.execute(f"SELECT * FROM {run.schema}.actions WHERE thread_id = %s ORDER BY created_at, task_id", [thread_id]))


def messages(row: dict[str, Any], key: str = "messages") -> list[dict[str, Any]]:
    return list(row["payload"].get(key, []))


async def test_react_breakpoint_retargets_the_pending_tool_call(check: Check) -> None:
    ours = await check(breakpoint_edit)
    rows = actions(ours, THREAD)
    for r in rows:
        print(r["step"], r["agent"], r["action_type"], r["payload"])

    # The edit: a human's, the model's message written back changed, with Bergen's arguments.
    (update,) = [r for r in rows if r["agent"] == "__update__"]
    assert update["action_type"] == "human"
    assert "messages" not in update["payload"], update["payload"]
    (rewritten,) = messages(update, "rewritten")
    assert rewritten["id"] == "m-1"
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in rewritten["tool_calls"]] == [
        ("c-w", "get_weather", '{"city": "Bergen"}')
    ]

    # The tool ran twice: for the edited call, then (in the fork) for the original one.
    observations = [m for r in rows if r["action_type"] == "observation" for m in messages(r)]
    assert [(m["tool_call_id"], m["content"]) for m in observations] == [
        ("c-w", "Bergen: rain, 9 degrees"),
        ("c-w", "Oslo: rain, 9 degrees"),
    ]

    # The model made its tool call once: the edit did not make a second tool_call row.
    carrying = [(r["agent"], r["action_type"]) for r in rows if "m-1" in [m.get("id") for m in messages(r)]]
    assert carrying == [("agent", "tool_call")], carrying
