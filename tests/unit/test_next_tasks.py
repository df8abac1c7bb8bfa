"""`has_next_tasks` (which decides a run's done / running status) against LangGraph's own
answer: for every root checkpoint of real graphs run on an InMemorySaver, it says a task
is left exactly when `get_state(...).next` is not empty. The graphs cover joins
(`add_edge([a, b], c)`), Sends, subgraphs, interrupts and a node that raises."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

import agents
from langgraph_pg_durable.core.runs import has_next_tasks


class Trip(TypedDict):
    log: Annotated[list[str], operator.add]
    approved: bool


def trip(checkpointer: Any) -> Any:
    """The quickstart's shape: two parallel steps, a join, an interrupt, a last step."""
    graph = StateGraph(Trip)
    graph.add_node("search", lambda s: {"log": ["search"]})
    graph.add_node("weather", lambda s: {"log": ["weather"]})
    graph.add_node("ask", lambda s: {"approved": interrupt("book?") == "yes"})
    graph.add_node("book", lambda s: {"log": ["booked"]})
    graph.add_edge(START, "search")
    graph.add_edge(START, "weather")
    graph.add_edge(["search", "weather"], "ask")
    graph.add_edge("ask", "book")
    graph.add_edge("book", END)
    return graph.compile(checkpointer=checkpointer)


def _runs(name: str, saver: Any) -> tuple[Any, dict[str, Any]]:
    config: dict[str, Any] = {"configurable": {"thread_id": name}}
    if name == "trip":
        graph = trip(saver)
        graph.invoke({"log": [], "approved": False}, config)
        graph.invoke(Command(resume="yes"), config)
    elif name == "calculator":
        graph = agents.tool_agent(saver, agents.calculator_replies())
        graph.invoke({"messages": [("user", "what is 1+2?")]}, config)
        graph.invoke({"messages": [("user", "thanks")]}, config)
    elif name == "supervisor":
        graph = agents.supervisor(saver)
        graph.invoke({"messages": [("user", "research and write")]}, config)
    elif name == "fan_out":
        graph = agents.fan_out(saver)
        graph.invoke({"topics": ["a", "b", "c"], "notes": []}, config)
    elif name == "approval":
        graph = agents.approval(saver)
        graph.invoke({"item": "book"}, config)
    else:
        graph = agents.crashing_node(saver)
        with pytest.raises(RuntimeError):
            graph.invoke({"messages": [("user", "hi")]}, config)
    return graph, config


@pytest.mark.parametrize("name", ["trip", "calculator", "supervisor", "fan_out", "approval", "crashing"])
def test_has_next_tasks_agrees_with_langgraph_at_every_root_checkpoint(name: str) -> None:
    saver = InMemorySaver()
    graph, config = _runs(name, saver)
    checked = 0
    for t in saver.list(config):
        if t.config["configurable"].get("checkpoint_ns"):
            continue
        snapshot = graph.get_state(t.config)
        assert has_next_tasks(t.checkpoint) == bool(snapshot.next), (name, t.metadata, snapshot.next)
        checked += 1
    assert checked >= 2
