"""langchain's `create_agent` with `HumanInTheLoopMiddleware` (a reviewer edits, rejects and
approves a tool call, one thread each) and `TodoListMiddleware` (the agent writes its todo
list), on our savers as on InMemorySaver: runs, resume on a new saver, history, an
`update_state` edit and a fork that answers a past review differently."""

from __future__ import annotations

from typing import Any

from corpus import Check, Run
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, TodoListMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command
from scripted import ScriptedChatModel, ai, call, human

REVIEW = "HumanInTheLoopMiddleware.after_model"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}: {body}"


def decision(kind: str, **fields: Any) -> Command[Any]:
    return Command(resume={"decisions": [{"type": kind, **fields}]})


def paused_on(snapshot: Any, name: str) -> bool:
    return snapshot.next == (REVIEW,) and any(i.value["action_requests"][0]["name"] == name for i in snapshot.interrupts)


async def reviewed_agent(run: Run) -> None:
    model = ScriptedChatModel(
        label="assistant",
        answers=[
            # edit
            ai("e-1", "", call("send_email", "c-e", to="alice@example.com", body="hi")),
            ai("e-2", "Sent to Bob instead."),
            # reject
            ai("r-1", "", call("send_email", "c-r", to="boss@example.com", body="I quit")),
            ai("r-2", "Understood, not sent."),
            # approve
            ai("a-1", "", call("send_email", "c-a", to="carol@example.com", body="lunch?")),
            ai("a-2", "Carol has your note."),
            # todos
            ai("t-1", "", call("write_todos", "c-t", todos=[{"content": "draft", "status": "in_progress"}])),
            ai("t-2", "Drafting first."),
            # the fork of the edit thread: approved as proposed this time
            ai("e-3", "Sent to Alice."),
        ],
    )
    run.build(
        lambda saver: create_agent(
            model,
            tools=[send_email],
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True}), TodoListMiddleware()],
            checkpointer=saver,
        )
    )

    paused = await run.invoke({"messages": [human("h-e", "email alice")]}, "edit")
    assert [i.value["action_requests"][0]["args"]["to"] for i in paused["__interrupt__"]] == ["alice@example.com"]
    await run.reopen()  # the review is answered in another process
    assert paused_on(await run.state("edit"), "send_email")
    done = await run.invoke(decision("edit", edited_action={"name": "send_email", "args": {"to": "bob@example.com", "body": "hi"}}), "edit")
    assert "sent to bob@example.com" in str(next(m for m in done["messages"] if isinstance(m, ToolMessage)).content)

    await run.invoke({"messages": [human("h-r", "tell my boss I quit")]}, "reject")
    done = await run.invoke(decision("reject", message="Not today."), "reject")
    assert done["messages"][-1].content == "Understood, not sent."

    await run.invoke({"messages": [human("h-a", "ask carol to lunch")]}, "approve")
    await run.reopen()
    done = await run.invoke(decision("approve"), "approve")
    assert [m.content for m in done["messages"] if isinstance(m, ToolMessage)] == ["sent to carol@example.com: lunch?"]

    done = await run.invoke({"messages": [human("h-t", "plan my essay")]}, "todos")
    assert done["todos"] == [{"content": "draft", "status": "in_progress"}]

    # A person edits state by hand: the todo is done.
    await run.update("todos", {"todos": [{"content": "draft", "status": "completed"}]})
    assert (await run.state("todos")).values["todos"][0]["status"] == "completed"

    # Time travel: the edit thread's review, answered "approve" this time.
    forked = await run.fork("edit", lambda s: paused_on(s, "send_email"), decision("approve"))
    assert [m.content for m in forked["messages"] if isinstance(m, AIMessage)][-1] == "Sent to Alice."
    assert model.calls == len(model.answers)


async def test_create_agent_with_review_and_todos(check: Check) -> None:
    await check(reviewed_agent)
