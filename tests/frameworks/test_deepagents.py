"""deepagents' `create_deep_agent` with two sub-agents, `researcher` (whose web search needs
a person's approval, so the whole agent pauses inside the sub-agent) and `general-purpose`
(which reads the file the main agent wrote): its `files` and `messages` live in
DeltaChannels, its sub-agents checkpoint under the `tools` task. On our savers as on
InMemorySaver: the pause, resume on a new saver, history, an edit of `files`, a fork."""

from __future__ import annotations

from corpus import Check, Run
from deepagents import create_deep_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command
from scripted import ScriptedChatModel, ai, call, human


@tool
def search_web(query: str) -> str:
    """Search the web."""
    return f"top result for {query}: the moon"


def tool_results(messages: list[object]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


async def deep_agent(run: Run) -> None:
    main = ScriptedChatModel(
        label="main",
        answers=[
            ai("m-1", "", call("write_file", "c-w", file_path="/notes.md", content="tides: ask the researcher")),
            ai("m-2", "", call("task", "c-r", description="Find what drives the tides.", subagent_type="researcher")),
            ai("m-3", "", call("task", "c-g", description="Read /notes.md and report.", subagent_type="general-purpose")),
            ai("m-4", "The moon drives the tides; the notes agree."),
            # the fork: from before the research, straight to an answer
            ai("m-5", "Skipping the research."),
        ],
    )
    researcher = ScriptedChatModel(
        label="researcher",
        answers=[
            ai("r-1", "", call("search_web", "c-s", query="tides")),
            ai("r-2", "The moon."),
        ],
    )
    general = ScriptedChatModel(
        label="general-purpose",
        answers=[
            ai("g-1", "", call("read_file", "c-f", file_path="/notes.md")),
            ai("g-2", "The notes say: ask the researcher."),
        ],
    )
    run.build(
        lambda saver: create_deep_agent(
            model=main,
            tools=[search_web],
            subagents=[
                {
                    "name": "researcher",
                    "description": "Researches a question on the web.",
                    "system_prompt": "You research.",
                    "tools": [search_web],
                    "model": researcher,
                    "interrupt_on": {"search_web": True},
                },
                {
                    "name": "general-purpose",
                    "description": "Does anything else.",
                    "system_prompt": "You help.",
                    "model": general,
                },
            ],
            checkpointer=saver,
        )
    )

    paused = await run.invoke({"messages": [human("h-1", "what drives the tides?")]}, "deep")
    assert [i.value["action_requests"][0]["name"] for i in paused["__interrupt__"]] == ["search_web"]
    assert researcher.calls == 1
    snapshot = await run.state("deep", subgraphs=True)
    assert snapshot.next == ("tools",)
    assert list(snapshot.values["files"]) == ["/notes.md"]

    await run.reopen()
    done = await run.invoke(Command(resume={"decisions": [{"type": "approve"}]}), "deep")
    assert done["messages"][-1].content == "The moon drives the tides; the notes agree."
    results = tool_results(done["messages"])
    assert results[1] == "The moon." and "ask the researcher" in results[2]
    assert (researcher.calls, general.calls) == (2, 2)

    # A person edits a file by hand, as `update_state` lets them.
    edited = {**done["files"]["/notes.md"], "content": ["tides: the moon"]}
    await run.update("deep", {"files": {"/notes.md": edited}})
    assert (await run.state("deep")).values["files"]["/notes.md"]["content"] == ["tides: the moon"]

    # Time travel: from the checkpoint before the first `task` call, the model answers at once.
    def before_research(snapshot: object) -> bool:
        messages = snapshot.values.get("messages", [])  # type: ignore[attr-defined]
        return snapshot.next == ("model",) and bool(messages) and messages[-1].id is not None and isinstance(messages[-1], ToolMessage)  # type: ignore[attr-defined]

    forked = await run.fork("deep", lambda s: before_research(s) and len(tool_results(s.values["messages"])) == 1)
    assert forked["messages"][-1].content == "Skipping the research."
    assert main.calls == len(main.answers)


async def test_deep_agent_with_two_sub_agents_and_files(check: Check) -> None:
    await check(deep_agent)
