"""langmem: `SummarizationNode` (langmem.short_term), unchanged, before a `call_model` node, in the
StateGraph langmem's docs show: `messages` plus `context: dict[str, Any]`, where the node keeps
its `RunningSummary` (a dataclass of langmem's, holding a set of message ids), and the
`summarized_messages` the model is given. Token budgets are small (`max_tokens=40`,
`max_summary_tokens=10`, langchain-core's approximate counter) so that the third turn is
summarized; a scripted model writes the summaries, another one answers.

Why: the summary is state a conversation depends on across runs. After a reopen (a new saver
object) the RunningSummary must read back as langmem's class, set and all, with no option:
the next turn is given the stored summary instead of the summarized messages, and the one
after extends it (the summarizer is prompted with the stored text). Then an `update_state`
that writes a RunningSummary, and a fork that reruns the summarization from its checkpoint.
The action log's rows of the thread hold no error.
"""

from __future__ import annotations

from typing import Any

import psycopg
from corpus import Check, Run
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph import START, MessagesState, StateGraph
from langmem.short_term import RunningSummary, SummarizationNode
from psycopg.rows import dict_row
from scripted import ScriptedChatModel, ai, human
from typing_extensions import TypedDict

FIRST = "Bob introduced himself and asked for poems about cats and dogs."
SECOND = "Bob, who likes poems about cats and dogs, asked for his name."


class State(MessagesState):
    context: dict[str, Any]


class LLMInputState(TypedDict):
    summarized_messages: list[AnyMessage]
    context: dict[str, Any]


def running_summary(values: dict[str, Any]) -> RunningSummary:
    summary = values["context"]["running_summary"]
    assert type(summary) is RunningSummary, type(summary)  # langmem's class, not its fields as a dict
    return summary


def ids(*names: str) -> set[str]:
    return set(names)


async def summarized_chat(run: Run) -> None:
    summarizer = ScriptedChatModel(
        label="summarizer",
        answers=[
            ai("s-1", FIRST),  # turn 3
            ai("s-2", SECOND),  # turn 5, extending the stored summary
            ai("s-3", SECOND + " Again."),  # the fork
        ],
    )
    chat = ScriptedChatModel(label="chat", answers=[ai(f"a-{n}", f"Answer {n}, a short one.") for n in range(1, 7)])

    def build(saver: object) -> object:
        def call_model(state: LLMInputState) -> dict[str, Any]:
            return {"messages": [chat.invoke(state["summarized_messages"])]}

        async def acall_model(state: LLMInputState) -> dict[str, Any]:
            return {"messages": [await chat.ainvoke(state["summarized_messages"])]}

        summarize = SummarizationNode(model=summarizer, max_tokens=40, max_summary_tokens=10, token_counter=count_tokens_approximately)
        builder = StateGraph(State)
        builder.add_node("summarize", summarize)
        builder.add_node("call_model", acall_model if run.mode == "async" else call_model)
        builder.add_edge(START, "summarize")
        builder.add_edge("summarize", "call_model")
        return builder.compile(checkpointer=saver)

    run.build(build)
    texts = ["hi, my name is bob", "write a short poem about cats", "now do the same but for dogs", "what's my name?", "and my pets?"]
    turns = iter(enumerate(texts, 1))

    async def turn() -> dict[str, Any]:
        n, text = next(turns)
        values = await run.invoke({"messages": [human(f"h-{n}", text)]}, "chat")
        assert values["messages"][-1].id == f"a-{n}"
        return values

    for _ in range(2):
        assert "running_summary" not in (await turn()).get("context", {})
    third = await turn()
    assert running_summary(third) == RunningSummary(FIRST, ids("h-1", "a-1", "h-2", "a-2"), "a-2")

    await run.reopen()
    stored = (await run.state("chat")).values
    assert running_summary(stored) == RunningSummary(FIRST, ids("h-1", "a-1", "h-2", "a-2"), "a-2")

    await turn()  # the model is given the stored summary, not the messages it summarized
    given = chat.prompts[-1]
    assert isinstance(given[0], SystemMessage) and FIRST in str(given[0].content)
    assert [m.id for m in given[1:]] == ["h-3", "a-3", "h-4"]
    fifth = await turn()  # the stored summary is extended
    assert FIRST in str(summarizer.prompts[-1][-1].content)
    assert running_summary(fifth) == RunningSummary(SECOND, ids("h-1", "a-1", "h-2", "a-2", "h-3", "a-3", "h-4", "a-4"), "a-4")

    edited = RunningSummary("Bob likes cats, dogs and poems.", ids("h-1", "a-1", "h-2", "a-2", "h-3", "a-3", "h-4", "a-4"), "a-4")
    await run.update("chat", {"context": {"running_summary": edited}})
    assert running_summary((await run.state("chat")).values) == edited

    forked = await run.fork("chat", lambda s: s.next == ("summarize",))  # turn 5 again, from its checkpoint
    assert forked["messages"][-1].id == "a-6"
    assert running_summary(forked).summary == SECOND + " Again."
    assert (summarizer.calls, chat.calls) == (3, 6)


def actions(run: Run, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        return list(conn.execute(f"SELECT * FROM {run.schema}.actions WHERE thread_id = %s ORDER BY created_at, task_id", [thread_id]))


async def test_langmem_running_summary_survives_a_reopen(check: Check) -> None:
    ours = await check(summarized_chat)
    rows = actions(ours, "chat")
    assert rows and not [r for r in rows if r["action_type"] == "error"], [(r["agent"], r["action_type"]) for r in rows]
    assert {"summarize", "call_model"} <= {r["agent"] for r in rows}
