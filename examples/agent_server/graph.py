"""A small agent for the Agent Server: a model node, one tool, and a person's approval.

`agent` asks the model; when the model calls a tool, `approve` pauses the run with
`interrupt()` until a person answers (resume with "yes" to run the calls, anything else to
refuse them), then `tools` runs them and the model reports the result. The model is
scripted, so the example needs no network and no API key: it answers from the conversation
alone, the same way in every server process, before and after a restart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

WEATHER = {"oslo": "rain, 7 C", "bergen": "drizzle, 9 C", "lisbon": "sunny, 21 C"}


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER.get(city.lower(), f"no report for {city}")


def scripted_answer(messages: Sequence[BaseMessage]) -> AIMessage:
    """What the scripted model says: a get_weather call when the user asks for the weather
    in a city ("weather in Oslo?"), the tool's answer once it has one, else a hint."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        if last.status == "error":
            return AIMessage(f"I did not look it up ({last.content}).")
        return AIMessage(f"The weather: {last.content}.")
    asked = re.search(r"weather in ([A-Za-z]+)", str(last.content), re.IGNORECASE)
    if isinstance(last, HumanMessage) and asked:
        call = {"id": f"call-{len(messages)}", "name": "get_weather", "args": {"city": asked.group(1)}, "type": "tool_call"}
        return AIMessage("", tool_calls=[call])
    return AIMessage("Ask me about the weather in a city.")


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers with `scripted_answer`; `bind_tools` returns it unchanged."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=scripted_answer(messages))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


MODEL = ScriptedChatModel().bind_tools([get_weather])


def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
    return {"messages": [MODEL.invoke(state["messages"])]}


def approve(state: MessagesState) -> Command[Literal["tools", "agent"]]:
    """Pause until a person approves the model's tool calls."""
    calls = state["messages"][-1].tool_calls  # type: ignore[attr-defined]
    decision = interrupt({"question": "Run these tool calls?", "tool_calls": calls})
    if decision == "yes":
        return Command(goto="tools")
    refused = [ToolMessage(f"refused: {decision}", tool_call_id=c["id"], name=c["name"], status="error") for c in calls]
    return Command(goto="agent", update={"messages": refused})


def route(state: MessagesState) -> Literal["approve", "__end__"]:
    last = state["messages"][-1]
    return "approve" if isinstance(last, AIMessage) and last.tool_calls else END


builder = StateGraph(MessagesState)
builder.add_node("agent", agent)
builder.add_node("approve", approve)
builder.add_node("tools", ToolNode([get_weather]))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", route)
builder.add_edge("tools", "agent")
# No checkpointer here: the server compiles the graph with the one langgraph.json names.
graph = builder.compile()
