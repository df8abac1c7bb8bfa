"""A map-reduce graph (a `Send` per topic to `summarize`, then `combine`) under each of
LangGraph's durability modes, on our savers as on InMemorySaver: two runs, resume on a new
saver, history, an edit and a fork. Its action rows: every map task named after its node
under "sync" and "async" (their writes can be stored before their checkpoint's put), and
under "exit", where LangGraph saves no task's writes, one row a run from its last checkpoint."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from corpus import Check, Run
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from psycopg.rows import dict_row


class Digest(TypedDict, total=False):
    topics: list[str]
    summaries: Annotated[list[str], operator.add]
    digest: str


class Topic(TypedDict):
    topic: str


def summarize(state: Topic) -> dict[str, Any]:
    return {"summaries": [f"{state['topic']}: in short"]}


def combine(state: Digest) -> dict[str, Any]:
    return {"digest": " / ".join(sorted(state["summaries"]))}


def fan_out(state: Digest) -> list[Send]:
    return [Send("summarize", {"topic": topic}) for topic in state["topics"]]


def build(saver: object) -> object:
    builder = StateGraph(Digest)
    builder.add_node("summarize", summarize)
    builder.add_node("combine", combine)
    builder.add_conditional_edges(START, fan_out, ["summarize"])
    builder.add_edge("summarize", "combine")
    builder.add_edge("combine", END)
    return builder.compile(checkpointer=saver)


def map_reduce(durability: str) -> Any:
    async def scenario(run: Run) -> None:
        run.build(build)
        first = await run.invoke({"topics": ["tides", "winds", "waves"], "summaries": []}, "digest", durability=durability)
        assert first["digest"] == "tides: in short / waves: in short / winds: in short"
        await run.reopen()
        second = await run.invoke({"topics": ["rain"]}, "digest", durability=durability)
        assert len(second["summaries"]) == 4
        await run.update("digest", {"digest": "edited by hand"})
        assert (await run.state("digest")).values["digest"] == "edited by hand"
        if durability == "exit":  # only each run's last checkpoint is saved: a new turn from the first run's
            first_end = lambda s: s.metadata["source"] == "loop" and len(s.values["summaries"]) == 3  # noqa: E731
            forked = await run.fork("digest", first_end, {"topics": ["fog"]}, durability=durability)
            assert len(forked["summaries"]) == 4
        else:  # the fan-out checkpoint: its three map tasks run again
            forked = await run.fork("digest", lambda s: s.metadata["step"] == 0 and s.metadata["source"] == "loop", durability=durability)
            assert forked["digest"] == first["digest"]

    scenario.__name__ = f"map_reduce_{durability}"
    return scenario


def rows(run: Run, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        query = f"SELECT * FROM {run.schema}.actions WHERE thread_id = %s ORDER BY created_at, task_id"
        return list(conn.execute(query, [thread_id]))


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_map_tasks_are_named_after_their_node(check: Check, durability: str) -> None:
    ours = await check(map_reduce(durability))
    agents = [r["agent"] for r in rows(ours, "digest")]
    assert agents.count("summarize") == 3 + 1 + 3, agents  # the first run's three, the second's, the fork's three again
    assert not any("__send__" in a for a in agents)


async def test_under_exit_each_run_is_one_row_from_its_last_checkpoint(check: Check) -> None:
    ours = await check(map_reduce("exit"))
    logged = rows(ours, "digest")
    unsaved = [r for r in logged if r["agent"] == "__unsaved__"]
    assert len(unsaved) == 3 and all(r["payload"]["unsaved_steps"] >= 2 for r in unsaved), [r["agent"] for r in logged]  # 2 runs, the fork
    assert not any(r["agent"] in ("summarize", "__send__") for r in logged)  # LangGraph saved none of the tasks' writes
