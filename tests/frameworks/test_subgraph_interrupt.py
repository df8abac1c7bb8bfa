"""An interrupt inside a subgraph: a parent StateGraph runs a compiled subgraph as one of its
nodes (`add_node("review", subgraph)`), and the subgraph's inner node `ask` calls
`interrupt(...)` after its node `draft` asked a (scripted) chat model for a draft. The parent
pauses inside the subgraph; `get_state(subgraphs=True)` shows the subgraph task's own state;
the saver is replaced; `Command(resume=...)` resumes the subgraph where it stopped (its
`draft` is not run again), and the parent finishes. Then an `update_state` on the parent,
and a fork from the parent's checkpoint of the pause (LangGraph runs the subgraph afresh
there, in a new namespace: it drafts again and pauses again), answered the other way.

Why: the pause lives in two namespaces at once, the parent's checkpoint (its pending
`review` task and the interrupt) and the subgraph's own (`review:<task id>`, where the
inner node waits). Our saver must keep both, hand the subgraph's back on a new saver for
the resume, and name the interrupt in its action log by the subgraph path, `review/ask`."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import psycopg
from corpus import Check, Run
from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, StateSnapshot, interrupt
from psycopg.rows import dict_row
from scripted import ScriptedChatModel, ai, human
from typing_extensions import TypedDict

THREAD = "review"


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    log: Annotated[list[str], operator.add]
    verdict: str


class Inner(TypedDict, total=False):
    """The subgraph's state: the parent's messages and verdict (the keys it hands back), and
    notes of its own (which the parent never sees)."""

    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]
    verdict: str


async def subgraph_interrupt(run: Run) -> None:
    model = ScriptedChatModel(label="drafter", answers=[ai("d-1", "A draft of the report."), ai("d-2", "A second draft.")])

    def draft(state: Inner) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])], "notes": ["drafted"]}

    def ask(state: Inner) -> dict[str, Any]:
        verdict = interrupt({"question": "publish this draft?", "draft": state["messages"][-1].content})
        return {"verdict": verdict, "notes": [f"reviewed: {verdict}"]}

    def prepare(state: State) -> dict[str, Any]:
        return {"log": ["prepared"]}

    def finish(state: State) -> dict[str, Any]:
        return {"log": [f"finished: {state['verdict']}"]}

    def build(saver: object) -> object:
        inner = StateGraph(Inner)
        inner.add_node("draft", draft)
        inner.add_node("ask", ask)
        inner.add_edge(START, "draft")
        inner.add_edge("draft", "ask")
        inner.add_edge("ask", END)
        parent = StateGraph(State)
        parent.add_node("prepare", prepare)
        parent.add_node("review", inner.compile())
        parent.add_node("finish", finish)
        parent.add_edge(START, "prepare")
        parent.add_edge("prepare", "review")
        parent.add_edge("review", "finish")
        parent.add_edge("finish", END)
        return parent.compile(checkpointer=saver)

    run.build(build)
    paused = await run.invoke({"messages": [human("h-1", "write the report")]}, THREAD)
    assert [i.value["question"] for i in paused["__interrupt__"]] == ["publish this draft?"]
    assert paused["log"] == ["prepared"]  # the parent's state: the subgraph has not returned

    snapshot = await run.state(THREAD, subgraphs=True)
    assert snapshot.next == ("review",)
    (review,) = snapshot.tasks
    assert review.name == "review" and [i.value["draft"] for i in review.interrupts] == ["A draft of the report."]
    inner_state = review.state
    assert isinstance(inner_state, StateSnapshot)
    assert inner_state.next == ("ask",)
    assert inner_state.values["notes"] == ["drafted"]
    assert [m.id for m in inner_state.values["messages"]] == ["h-1", "d-1"]

    await run.reopen()
    done = await run.invoke(Command(resume="yes"), THREAD)
    assert done["log"] == ["prepared", "finished: yes"], done["log"]
    assert done["verdict"] == "yes" and [m.id for m in done["messages"]] == ["h-1", "d-1"]
    assert model.calls == 1, "the resumed subgraph ran its draft node again"
    assert (await run.state(THREAD)).next == ()

    await run.update(THREAD, {"log": ["an operator's note"]})
    assert (await run.state(THREAD)).values["log"][-1] == "an operator's note"

    # Fork from the pause: the parent's checkpoint whose `review` task holds the interrupt.
    # LangGraph saves a fork checkpoint, so the `review` task has a new id and the subgraph a
    # new namespace with nothing in it: the subgraph runs from its start, drafting again.
    def at_pause(s: StateSnapshot) -> bool:
        return s.next == ("review",) and any(t.interrupts for t in s.tasks)

    forked = await run.fork(THREAD, at_pause)
    assert [i.value["draft"] for i in forked["__interrupt__"]] == ["A second draft."]
    assert forked["log"] == ["prepared"]
    refork = await run.state(THREAD, subgraphs=True)
    assert refork.metadata["source"] == "fork" and refork.next == ("review",)
    (again,) = refork.tasks
    assert isinstance(again.state, StateSnapshot) and again.state.next == ("ask",)
    assert again.state.config["configurable"]["checkpoint_ns"] != inner_state.config["configurable"]["checkpoint_ns"]
    assert [m.id for m in again.state.values["messages"]] == ["h-1", "d-2"]

    rejected = await run.invoke(Command(resume="no"), THREAD)
    assert rejected["verdict"] == "no" and rejected["log"] == ["prepared", "finished: no"]  # no operator's note: forked before it
    assert [m.id for m in rejected["messages"]] == ["h-1", "d-2"]
    assert model.calls == 2


def rows_of(run: Run, view: str, thread_id: str, order: str) -> list[dict[str, Any]]:
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        return list(conn.execute(f"SELECT * FROM {run.schema}.{view} WHERE thread_id = %s ORDER BY {order}", [thread_id]))


async def test_subgraph_interrupt_pauses_resumes_and_forks(check: Check) -> None:
    ours = await check(subgraph_interrupt)
    actions = rows_of(ours, "actions", THREAD, "created_at, task_id")
    for r in actions:
        print(r["step"], r["checkpoint_ns"], r["agent"], r["action_type"], r["payload"])
    runs = rows_of(ours, "runs", THREAD, "started_at")
    for r in runs:
        print(r["status"], r["steps"], r["agents"])

    assert not [r for r in actions if r["action_type"] == "error"]
    # Each pause (the first run's, the fork's) is logged where it happened, by the subgraph
    # path `review/ask`, and at the root by the node that runs the subgraph, with the same id.
    inner = [r for r in actions if r["action_type"] == "interrupt" and r["checkpoint_ns"]]
    root = [r for r in actions if r["action_type"] == "interrupt" and not r["checkpoint_ns"]]
    assert [r["agent"] for r in inner] == ["review/ask", "review/ask"], inner
    assert all(r["checkpoint_ns"].startswith("review:") for r in inner)
    assert [r["agent"] for r in root] == ["review", "review"], root
    assert [r["payload"]["interrupts"] for r in inner] == [r["payload"]["interrupts"] for r in root]
    assert [i["value"]["draft"] for r in inner for i in r["payload"]["interrupts"]] == ["A draft of the report.", "A second draft."]
    # Each answer is the resumed inner node's, in the namespace it paused in.
    answered = [
        (r["checkpoint_ns"], r["payload"]["state"]["verdict"])
        for r in actions
        if r["agent"] == "review/ask" and r["action_type"] == "decision"
    ]
    assert answered == [(inner[0]["checkpoint_ns"], "yes"), (inner[1]["checkpoint_ns"], "no")]
    drafts = [
        (r["agent"], m["id"]) for r in actions if r["checkpoint_ns"] and r["action_type"] == "llm_call" for m in r["payload"]["messages"]
    ]
    assert drafts == [("review/draft", "d-1"), ("review/draft", "d-2")]  # the resume did not draft again

    # The runs: the first paused inside the subgraph, the resume finished it; the fork likewise.
    assert [r["status"] for r in runs] == ["interrupted", "done", "interrupted", "done"]
    assert {"review/ask", "review"} <= set(runs[0]["agents"])
