"""trustcall: `create_extractor(llm, tools=[UserProfile], tool_choice="UserProfile")`, unchanged,
as the one node of a parent StateGraph that holds the checkpointer. trustcall compiles its own
graph with `checkpointer=False` and wraps it (`coerce_inputs | graph | filter_state`), so it
never checkpoints itself: a graph that calls it as a node is how it runs on a saver. The
parent's channels are trustcall's inputs (`messages`, `existing`) and outputs (`responses`,
`response_metadata`, `attempts`).

Why: the state then holds the user's own pydantic objects, instances of `UserProfile`, a
class of this test module as a script's class lives in `__main__`. Our saver must store
them and read them back as that class with no `allowed_types` option, after a reopen too.
The scenario: an extraction, a reopen, a second extraction that patches the existing
profile (trustcall's `existing` path: the model answers with a JSON patch), an
`update_state` that writes a profile object, and a fork that reruns the patch from its
checkpoint (the `existing` it reads is the stored one). The action log's rows of the
thread hold no error.
"""

from __future__ import annotations

from typing import Annotated, Any

import psycopg
from corpus import Check, Run
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import START, StateGraph, add_messages
from psycopg.rows import dict_row
from pydantic import BaseModel, Field
from scripted import ScriptedChatModel, ai, call, human
from trustcall import create_extractor
from typing_extensions import TypedDict


class UserProfile(BaseModel):
    """What the conversation says about the user."""

    name: str = Field(description="The user's name")
    city: str = Field(description="Where the user lives")
    interests: list[str] = Field(default_factory=list, description="What the user likes")


class Extraction(TypedDict, total=False):
    """trustcall's inputs and outputs, as the parent graph's channels."""

    messages: Annotated[list[AnyMessage], add_messages]
    existing: dict[str, Any] | None
    responses: list[UserProfile]
    response_metadata: list[dict[str, Any]]
    attempts: int


def extract(call_id: str, **args: Any) -> dict[str, Any]:
    """The model's answer on trustcall's extract path: a call of the schema (its args hold a `name`)."""
    return {**call("UserProfile", call_id), "args": args}


def patch(call_id: str, city: str) -> dict[str, Any]:
    """The model's answer on trustcall's update path: a JSON patch of the existing profile."""
    edit = {"op": "replace", "path": "/city", "value": city}
    return call("PatchDoc", call_id, json_doc_id="UserProfile", planned_edits=f"replace /city with {city}", patches=[edit])


def profile_of(values: dict[str, Any]) -> UserProfile:
    (profile,) = values["responses"]
    assert type(profile) is UserProfile, type(profile)  # this module's class, not its fields as a dict
    return profile


async def extraction(run: Run) -> None:
    model = ScriptedChatModel(
        label="extractor",
        answers=[
            ai("x-1", "", extract("tc-1", name="Ada", city="London", interests=["mathematics"])),
            ai("x-2", "", patch("tc-2", "Paris")),
            ai("x-3", "", patch("tc-3", "Rome")),  # the fork
        ],
    )

    def build(saver: object) -> object:
        extractor = create_extractor(model, tools=[UserProfile], tool_choice="UserProfile")
        builder = StateGraph(Extraction)
        builder.add_node("extract", extractor)
        builder.add_edge(START, "extract")
        return builder.compile(checkpointer=saver)

    run.build(build)
    first = await run.invoke({"messages": [human("h-1", "I'm Ada, a mathematician in London.")]}, "profile")
    assert profile_of(first) == UserProfile(name="Ada", city="London", interests=["mathematics"])
    assert first["response_metadata"] == [{"id": "tc-1"}] and first["attempts"] == 1

    await run.reopen()
    stored = profile_of((await run.state("profile")).values)
    assert stored == UserProfile(name="Ada", city="London", interests=["mathematics"])

    existing = {"UserProfile": stored.model_dump()}
    second = await run.invoke({"messages": [human("h-2", "I moved to Paris.")], "existing": existing}, "profile")
    assert profile_of(second) == UserProfile(name="Ada", city="Paris", interests=["mathematics"])
    assert second["response_metadata"] == [{"id": "tc-2", "json_doc_id": "UserProfile"}]
    assert isinstance(second["messages"][-1], AIMessage) and second["messages"][-1].tool_calls[0]["args"]["city"] == "Paris"

    edited = UserProfile(name="Ada", city="Paris", interests=["mathematics", "chess"])
    await run.update("profile", {"responses": [edited]})
    assert profile_of((await run.state("profile")).values) == edited

    forked = await run.fork("profile", lambda s: s.next == ("extract",))
    assert forked["existing"] == existing  # read back from the checkpoint the fork starts at
    assert profile_of(forked) == UserProfile(name="Ada", city="Rome", interests=["mathematics"])
    assert model.calls == 3


def actions(run: Run, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        return list(conn.execute(f"SELECT * FROM {run.schema}.actions WHERE thread_id = %s ORDER BY created_at, task_id", [thread_id]))


async def test_trustcall_extractor_keeps_user_pydantic_objects(check: Check) -> None:
    ours = await check(extraction)
    rows = actions(ours, "profile")
    assert rows and not [r for r in rows if r["action_type"] == "error"], [(r["agent"], r["action_type"]) for r in rows]
    assert {r["agent"] for r in rows} >= {"extract"}
