"""Multi-agent frameworks: langgraph-swarm (alice hands the user to bob, who keeps them) and
langgraph-supervisor (a supervisor sends work to a math expert, then to a writer). Each
agent is a subgraph that returns the whole conversation. On our savers as on
InMemorySaver: turns, resume on a new saver, history, an `update_state` edit, a fork.

Both run with `durability="sync"`: test_action_log.py reads their rows, and which messages a
subgraph's input row counts as handed is exact only when its parent's checkpoint reached the
saver before the subgraph started (under "async" LangGraph sends it from another thread)."""

from __future__ import annotations

from corpus import Check, Run
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from langgraph_supervisor import create_supervisor
from langgraph_swarm import create_handoff_tool, create_swarm
from scripted import ScriptedChatModel, ai, call, human

SYNC = {"durability": "sync"}  # see the module's docstring


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def said(messages: list[object]) -> list[str]:
    """What the agents said, without the frameworks' own handoff notes."""
    return [str(m.content) for m in messages if isinstance(m, AIMessage) and m.content and not str(m.content).startswith("Transferring")]


async def swarm(run: Run) -> None:
    alice_model = ScriptedChatModel(
        label="alice",
        answers=[
            ai("al-1", "", call("transfer_to_bob", "c-h")),
            ai("al-2", "Alice again: 2 + 2 = 4."),  # after the edit that makes her active
            ai("al-3", "Alice answers herself."),  # the fork
        ],
    )
    bob_model = ScriptedChatModel(label="bob", answers=[ai("b-1", "Arr, Bob here."), ai("b-2", "Arr, still Bob.")])

    def build(saver: object) -> object:
        alice = create_agent(alice_model, tools=[add, create_handoff_tool(agent_name="bob")], name="alice")
        bob = create_agent(bob_model, tools=[create_handoff_tool(agent_name="alice")], name="bob")
        return create_swarm([alice, bob], default_active_agent="alice").compile(checkpointer=saver)

    run.build(build)
    first = await run.invoke({"messages": [human("h-1", "let me talk to bob")]}, "swarm", **SYNC)
    assert first["active_agent"] == "bob" and said(first["messages"]) == ["Arr, Bob here."]

    await run.reopen()
    second = await run.invoke({"messages": [human("h-2", "are you there?")]}, "swarm", **SYNC)
    assert said(second["messages"])[-1] == "Arr, still Bob."

    await run.update("swarm", {"active_agent": "alice"})
    third = await run.invoke({"messages": [human("h-3", "what is 2 + 2?")]}, "swarm", **SYNC)
    assert third["active_agent"] == "alice" and said(third["messages"])[-1] == "Alice again: 2 + 2 = 4."

    forked = await run.fork("swarm", lambda s: s.metadata["source"] == "input" and s.metadata["step"] == -1, **SYNC)
    assert said(forked["messages"]) == ["Alice answers herself."]
    assert (alice_model.calls, bob_model.calls) == (3, 2)


async def test_swarm_hands_off(check: Check) -> None:
    await check(swarm)


async def supervisor(run: Run) -> None:
    boss = ScriptedChatModel(
        label="supervisor",
        answers=[
            ai("s-1", "", call("transfer_to_math_expert", "c-m")),
            ai("s-2", "", call("transfer_to_writer", "c-w")),
            ai("s-3", "Done: the sum is 3, and it is written up."),
            ai("s-4", "Done again."),  # the fork
        ],
    )
    math = ScriptedChatModel(label="math_expert", answers=[ai("x-1", "", call("add", "c-a", a=1, b=2)), ai("x-2", "1 + 2 = 3.")])
    writer = ScriptedChatModel(label="writer", answers=[ai("w-1", "Three, in words."), ai("w-2", "Three, once more.")])

    def build(saver: object) -> object:
        agents = [
            create_react_agent(math, tools=[add], name="math_expert", prompt="You add."),
            create_react_agent(writer, tools=[], name="writer", prompt="You write."),
        ]
        return create_supervisor(agents, model=boss, prompt="You route.").compile(checkpointer=saver)

    run.build(build)
    done = await run.invoke({"messages": [human("h-1", "add 1 and 2, then write it up")]}, "team", **SYNC)
    assert said(done["messages"]) == ["1 + 2 = 3.", "Three, in words.", "Done: the sum is 3, and it is written up."]

    await run.reopen()
    await run.update("team", {"messages": [human("h-2", "(a note from the operator)")]})
    assert (await run.state("team")).values["messages"][-1].id == "h-2"

    forked = await run.fork("team", lambda s: s.next == ("writer",), **SYNC)
    assert said(forked["messages"])[-2:] == ["Three, once more.", "Done again."]
    assert (boss.calls, math.calls, writer.calls) == (4, 2, 2)


async def test_supervisor_routes_to_two_agents(check: Check) -> None:
    await check(supervisor)
