"""Agent graphs for the action-log tests: real StateGraphs whose model is one of
langchain-core's deterministic fake chat models, so every reply, tool call and tool result
is known in advance and nothing goes to the network.

- `tool_agent`: a model node and a `ToolNode`, looping while the model asks for tools
  (the shape of `create_react_agent`).
- `supervisor`: a router that hands the conversation to one of two sub-agents, each a
  compiled subgraph with its own model (and, for the researcher, a tool).
- `fan_out`: a planner that `Send`s one task per topic to a worker node.
- `approval`: a node that asks a person with `interrupt()` before it acts.
- `failing_tool`: an agent whose tool raises (ToolNode passes the error to the model,
  so the agent recovers), and `crashing_node`, a node that raises out of the graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def search(query: str) -> str:
    """Look a query up."""
    return f"results for {query}"


@tool
def flaky(query: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"service down for {query!r}")


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "args": args, "type": "tool_call"}


def usage(inputs: int, outputs: int) -> dict[str, int]:
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}


def model_node(model: FakeMessagesListChatModel) -> Any:
    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    return agent


def tool_agent_builder(replies: list[AIMessage], tools: list[Any] | None = None) -> StateGraph:
    """model -> tools -> model ... until a reply without tool calls (not compiled)."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", model_node(FakeMessagesListChatModel(responses=replies)))
    graph.add_node("tools", ToolNode(tools or [add, search]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


def tool_agent(checkpointer: Any, replies: list[AIMessage], tools: list[Any] | None = None) -> Any:
    """model -> tools -> model ... until a reply without tool calls."""
    return tool_agent_builder(replies, tools).compile(checkpointer=checkpointer)


def calculator_replies() -> list[AIMessage]:
    """Two turns: 'what is 1+2' (a tool call, then the answer), then 'thanks' (an answer)."""
    return [
        AIMessage("", id="ai-1", tool_calls=[call("add", "call-1", a=1, b=2)], usage_metadata=usage(12, 5)),
        AIMessage("1 + 2 = 3", id="ai-2", usage_metadata=usage(20, 6)),
        AIMessage("You're welcome.", id="ai-3", usage_metadata=usage(30, 4)),
    ]


def supervisor(checkpointer: Any) -> Any:
    """route -> researcher (a subgraph: model, search tool, model) -> route -> writer
    (a subgraph: model) -> END."""

    def sub_agent(replies: list[AIMessage], tools: list[Any] | None) -> Any:
        sub = StateGraph(MessagesState)
        sub.add_node("model", model_node(FakeMessagesListChatModel(responses=replies)))
        sub.add_edge(START, "model")
        if tools:
            sub.add_node("tools", ToolNode(tools))
            sub.add_conditional_edges("model", tools_condition)
            sub.add_edge("tools", "model")
        else:
            sub.add_edge("model", END)
        return sub.compile()

    researcher = sub_agent(
        [
            AIMessage("", id="r-1", tool_calls=[call("search", "call-s", query="tides")]),
            AIMessage("Tides follow the moon.", id="r-2"),
        ],
        [search],
    )
    writer = sub_agent([AIMessage("A short note on tides.", id="w-1")], None)

    def route(state: MessagesState) -> Command[Any]:
        said = [m for m in state["messages"] if isinstance(m, AIMessage)]
        if not said:
            return Command(goto="researcher")
        if len(said) < 3:
            return Command(goto="writer")
        return Command(goto=END)

    graph = StateGraph(MessagesState)
    graph.add_node("route", route, destinations=("researcher", "writer", END))
    graph.add_node("researcher", researcher)
    graph.add_node("writer", writer)
    graph.add_edge(START, "route")
    graph.add_edge("researcher", "route")
    graph.add_edge("writer", "route")
    return graph.compile(checkpointer=checkpointer)


class Topics(TypedDict):
    topics: list[str]
    notes: Annotated[list[str], operator.add]


def fan_out(checkpointer: Any) -> Any:
    """plan Sends one `worker` task per topic; their notes gather in one list."""

    def plan(state: Topics) -> list[Send]:
        return [Send("worker", {"topics": [topic], "notes": []}) for topic in state["topics"]]

    def worker(state: Topics) -> dict[str, list[str]]:
        return {"notes": [f"note on {state['topics'][0]}"]}

    graph = StateGraph(Topics)
    graph.add_node("worker", worker)
    graph.add_conditional_edges(START, plan, ["worker"])
    graph.add_edge("worker", END)
    return graph.compile(checkpointer=checkpointer)


class Order(TypedDict):
    item: str
    status: str


def approval(checkpointer: Any) -> Any:
    """draft -> approve (asks a person with interrupt()) -> END."""

    def draft(state: Order) -> dict[str, str]:
        return {"status": "drafted"}

    def approve(state: Order) -> dict[str, str]:
        answer = interrupt({"question": f"ship {state['item']}?"})
        return {"status": "shipped" if answer == "yes" else "held"}

    graph = StateGraph(Order)
    graph.add_node("draft", draft)
    graph.add_node("approve", approve)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "approve")
    graph.add_edge("approve", END)
    return graph.compile(checkpointer=checkpointer)


def failing_tool(checkpointer: Any) -> Any:
    """The model calls a tool that raises; ToolNode hands the error back as the tool's
    result, and the model answers around it."""
    replies = [
        AIMessage("", id="f-1", tool_calls=[call("flaky", "call-f", query="weather")]),
        AIMessage("The weather service is down.", id="f-2"),
    ]
    return tool_agent(checkpointer, replies, [flaky])


def crashing_node(checkpointer: Any) -> Any:
    """A node that raises out of the graph: the run fails."""

    def broken(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError("the disk is full")

    graph = StateGraph(MessagesState)
    graph.add_node("broken", broken)
    graph.add_edge(START, "broken")
    return graph.compile(checkpointer=checkpointer)


def tool_results(messages: list[BaseMessage]) -> dict[str, str]:
    """tool_call_id -> content of each ToolMessage."""
    return {m.tool_call_id: str(m.content) for m in messages if isinstance(m, ToolMessage)}


def sample_threads(saver: Any) -> dict[str, str]:
    """The sample database of the CLI's tests and README session: a two-turn calculator
    (done), an approval waiting on its interrupt, a tool run that failed, and a supervisor
    team (done). Thread ids by role."""
    from langgraph.types import Command  # noqa: F401 - callers resume order-7 with it

    ids = {"done": "calc-1", "interrupted": "order-7", "error": "flaky-1", "team": "team-1"}
    calc = tool_agent(saver, calculator_replies())
    config = {"configurable": {"thread_id": ids["done"]}, "metadata": {"user": "ana"}}
    calc.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
    calc.invoke({"messages": [("user", "thanks")]}, config, durability="sync")
    approval(saver).invoke(
        {"item": "book"}, {"configurable": {"thread_id": ids["interrupted"]}, "metadata": {"user": "bo"}}, durability="sync"
    )
    try:
        failing_tool(saver).invoke({"messages": [("user", "weather?")]}, {"configurable": {"thread_id": ids["error"]}}, durability="sync")
    except ValueError:
        pass  # the run fails, as planned
    supervisor(saver).invoke(
        {"messages": [("user", "research and write")]}, {"configurable": {"thread_id": ids["team"]}}, durability="sync"
    )
    return ids


# `lgpd replay --graph agents:replay_calculator`: the calculator whose model now answers differently.
replay_calculator = tool_agent_builder([AIMessage("1 + 2 is 3 (replayed).", id="ai-replayed")])
