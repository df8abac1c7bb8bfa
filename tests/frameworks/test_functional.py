"""LangGraph's functional API: an `@entrypoint` that calls two `@task`s and pauses between them
with `interrupt("approve?")`. The first task asks a (scripted) chat model for a draft; the
entrypoint then waits for approval, resumed with `Command(resume=...)` on a new saver; the
second task polishes the draft. A second invocation of the thread reads the entrypoint's
saved value (`previous`), which `entrypoint.final` keeps apart from what it returns.

Why: the functional API keeps a task's result only as the task's pending write (there is no
state channel to hold it), and a resumed entrypoint runs again from its top, reading each
finished task's result back from those writes. Our saver must hand them back on a new saver
object, or the model would be asked again (and the script, spent, would say so); and the
entrypoint's `previous` is the `__previous__` channel of the thread's last checkpoint."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
from corpus import Check, Run
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.func import entrypoint, task
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from scripted import ScriptedChatModel, ai

THREAD = "writer"


async def functional(run: Run) -> None:
    model = ScriptedChatModel(label="drafter", answers=[ai("d-1", "tides follow the moon"), ai("d-2", "the moon is far")])
    polished: list[str] = []

    @task
    def draft(topic: str) -> AIMessage:
        reply = model.invoke([HumanMessage(f"write one line about {topic}")])
        assert isinstance(reply, AIMessage)
        return reply

    @task
    def polish(text: str) -> str:
        polished.append(text)
        return text.capitalize() + "."

    def build(saver: object) -> object:
        @entrypoint(checkpointer=saver)
        def writer(topic: str, *, previous: list[str] | None = None) -> entrypoint.final[dict[str, Any], list[str]]:
            reply = draft(topic).result()
            verdict = interrupt("approve?")
            if verdict != "yes":
                return entrypoint.final(value={"published": None, "earlier": previous or []}, save=previous or [])
            line = polish(str(reply.content)).result()
            published = [*(previous or []), line]
            return entrypoint.final(value={"published": line, "earlier": previous or []}, save=published)

        return writer

    run.build(build)
    paused = await run.invoke("tides", THREAD)
    assert [i.value for i in paused["__interrupt__"]] == ["approve?"]
    snapshot = await run.state(THREAD)
    assert snapshot.next == ("writer",)
    assert [i.value for i in snapshot.interrupts] == ["approve?"]

    await run.reopen()
    done = await run.invoke(Command(resume="yes"), THREAD)
    assert done == {"published": "Tides follow the moon.", "earlier": []}
    assert model.calls == 1, "the resumed entrypoint asked the model again: the draft task's result was not read back"
    assert (await run.state(THREAD)).values == done  # the state is what the entrypoint returned, not what it saved

    # A second invocation: `previous` is what the first one saved; this draft is rejected.
    again = await run.invoke("the moon", THREAD)
    assert [i.value for i in again["__interrupt__"]] == ["approve?"]
    rejected = await run.invoke(Command(resume="no"), THREAD)
    assert rejected == {"published": None, "earlier": ["Tides follow the moon."]}
    final = await run.state(THREAD)
    assert final.next == () and final.values == rejected

    history = await run.history(THREAD)
    assert [s.metadata["source"] for s in history][-1] == "input"
    assert sum(1 for s in history if s.interrupts) == 2  # one pause per invocation
    assert (model.calls, polished) == (2, ["tides follow the moon"])


def actions(run: Run, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        return list(conn.execute(f"SELECT * FROM {run.schema}.actions WHERE thread_id = %s ORDER BY created_at, task_id", [thread_id]))


async def test_functional_api_tasks_interrupt_and_previous(check: Check) -> None:
    ours = await check(functional)
    rows = actions(ours, THREAD)
    for r in rows:
        print(r["step"], r["agent"], r["action_type"], r["payload"])
    with psycopg.connect(ours.dsn, row_factory=dict_row) as conn:
        runs = list(conn.execute(f"SELECT * FROM {ours.schema}.runs WHERE thread_id = %s ORDER BY started_at", [THREAD]))
    print([(r["status"], r["agents"]) for r in runs])

    assert not [r for r in rows if r["action_type"] == "error"], rows
    # A task of the functional API is `__task__`: its writes' task path names the entrypoint
    # and the call's index, not the task function, so the saver has no name to give it.
    kinds = Counter((r["agent"], r["action_type"]) for r in rows)
    assert kinds == Counter(
        {
            ("__task__", "llm_call"): 2,  # draft, once per invocation: the resume did not run it again
            ("__task__", "decision"): 1,  # polish, in the approved invocation only
            ("writer", "interrupt"): 2,
            ("__input__", "human"): 2,  # the two resumes
            ("writer", "decision"): 2,  # the entrypoint's return, and what it saved
        }
    ), kinds

    drafts = [m["id"] for r in rows if r["action_type"] == "llm_call" for m in r["payload"]["messages"]]
    assert drafts == ["d-1", "d-2"]
    (polished,) = [r for r in rows if (r["agent"], r["action_type"]) == ("__task__", "decision")]
    assert polished["payload"]["state"] == {"__return__": "Tides follow the moon."}
    paused = [r for r in rows if r["action_type"] == "interrupt"]
    assert [[i["value"] for i in r["payload"]["interrupts"]] for r in paused] == [["approve?"], ["approve?"]]
    assert [r["payload"]["resume"] for r in rows if r["agent"] == "__input__"] == ["yes", "no"]
    returned = [r["payload"]["state"] for r in rows if (r["agent"], r["action_type"]) == ("writer", "decision")]
    assert [(s["__end__"]["published"], s["__previous__"]) for s in returned] == [
        ("Tides follow the moon.", ["Tides follow the moon."]),
        (None, ["Tides follow the moon."]),
    ]
    assert [r["status"] for r in runs] == ["interrupted", "done", "interrupted", "done"]
