"""The action log and run ids on real agent graphs (deterministic fake chat models, no
network): every task's row in the `actions` view, one row per invocation in `runs`, and the
run id on every checkpoint.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from psycopg import sql
from psycopg.rows import dict_row

import agents
from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths


# (step, agent, action_type) of the calculator agent's two turns ("what is 1+2?", "thanks").
CALCULATOR_ACTIONS = [
    (0, "__start__", "human"),
    (1, "agent", "tool_call"),
    (2, "tools", "observation"),
    (3, "agent", "llm_call"),
    (5, "__start__", "human"),
    (6, "agent", "llm_call"),
]


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def query(dsn: str, schema: str, text: str, *params: Any) -> list[dict[str, Any]]:
    """Rows of `text`, whose `{s}` is the saver's schema."""
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn.execute(text, params).fetchall()  # type: ignore[arg-type]


def actions(dsn: str, schema: str, thread_id: str) -> list[dict[str, Any]]:
    return query(dsn, schema, "SELECT * FROM actions WHERE thread_id = %s ORDER BY created_at, step, agent", thread_id)


def kinds(rows: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(r["step"], r["agent"], r["action_type"]) for r in rows]


@pytest.fixture
def saver(pg_dsn: str, schema_name: str) -> Any:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def test_a_tool_calling_agent_logs_each_task_in_order(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.tool_agent(saver, agents.calculator_replies())
    config = thread()
    graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
    graph.invoke({"messages": [("user", "thanks")]}, config, durability="sync")
    rows = actions(pg_dsn, schema_name, config["configurable"]["thread_id"])
    assert kinds(rows) == CALCULATOR_ACTIONS
    first, call, result, answer = (r["payload"] for r in rows[:4])
    assert first["messages"] == [{"role": "user", "content": "what is 1+2?"}]
    assert first["goto"] == ["agent"]
    (asked,) = call["messages"]
    assert asked["role"] == "assistant" and asked["id"] == "ai-1"
    assert asked["tool_calls"] == [{"id": "call-1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]
    assert asked["usage_metadata"] == {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}
    (tool_message,) = result["messages"]
    assert {k: tool_message[k] for k in ("role", "name", "tool_call_id", "content")} == {
        "role": "tool",
        "name": "add",
        "tool_call_id": "call-1",
        "content": "3",
    }
    assert answer["messages"][0]["content"] == "1 + 2 = 3"
    # Each tool call paired with its result, by id, in SQL.
    paired = query(
        pg_dsn,
        schema_name,
        """
        SELECT c.agent, tc->'function'->>'name' AS tool, (tc->'function'->>'arguments')::jsonb AS arguments,
               r.agent AS ran_by, m->>'content' AS result
        FROM actions c
        CROSS JOIN jsonb_array_elements(c.payload->'messages') AS a(msg)
        CROSS JOIN jsonb_array_elements(a.msg->'tool_calls') AS tc
        JOIN actions r ON r.thread_id = c.thread_id AND r.action_type = 'observation'
        CROSS JOIN jsonb_array_elements(r.payload->'messages') AS m
        WHERE c.thread_id = %s AND c.action_type = 'tool_call' AND m->>'tool_call_id' = tc->>'id'
        """,
        config["configurable"]["thread_id"],
    )
    assert paired == [{"agent": "agent", "tool": "add", "arguments": {"a": 1, "b": 2}, "ran_by": "tools", "result": "3"}]


def test_two_invokes_and_a_resume_are_three_runs_each_holding_its_checkpoints(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.approval(saver)
    config = thread()
    tid = config["configurable"]["thread_id"]
    graph.invoke({"item": "book", "status": "new"}, config, durability="sync")  # stops at the interrupt
    graph.invoke(Command(resume="yes"), config, durability="sync")
    graph.invoke({"item": "pen", "status": "new"}, config, durability="sync")  # a new order: interrupts again
    runs = query(pg_dsn, schema_name, "SELECT * FROM runs WHERE thread_id = %s ORDER BY started_at", tid)
    assert [r["status"] for r in runs] == ["interrupted", "done", "interrupted"]
    assert len({r["run_id"] for r in runs}) == 3
    by_run = query(
        pg_dsn, schema_name, "SELECT run_id, count(*) AS n, min(step) AS first, max(step) AS last FROM checkpoints GROUP BY run_id"
    )
    counts = {r["run_id"]: (r["n"], r["first"], r["last"]) for r in by_run}
    # input, start, draft (approve asked: no checkpoint) | approve | input, start, draft
    assert [counts[r["run_id"]] for r in runs] == [(3, -1, 1), (1, 2, 2), (3, 3, 5)]
    assert [r["steps"] for r in runs] == [3, 1, 3]
    assert None not in counts
    # The resume run's actions: the caller's resume value, then the approved task's result.
    # (LangGraph saves the two from different threads: they commit in either order.)
    resumed = sorted((r for r in actions(pg_dsn, schema_name, tid) if r["run_id"] == runs[1]["run_id"]), key=lambda r: r["agent"])
    assert kinds(resumed) == [(2, "__input__", "human"), (2, "approve", "decision")]
    assert resumed[0]["payload"] == {"resume": "yes"}
    assert resumed[1]["payload"] == {"state": {"status": "shipped"}, "resume": ["yes"]}
    asked = [r for r in actions(pg_dsn, schema_name, tid) if r["action_type"] == "interrupt"]
    assert [r["payload"]["interrupts"][0]["value"] for r in asked] == [{"question": "ship book?"}, {"question": "ship pen?"}]
    # delete_for_runs of the middle run removes exactly its checkpoints and actions.
    saver.delete_for_runs([runs[1]["run_id"]])
    left = query(pg_dsn, schema_name, "SELECT DISTINCT run_id FROM checkpoints")
    assert {r["run_id"] for r in left} == {runs[0]["run_id"], runs[2]["run_id"]}
    assert runs[1]["run_id"] not in {r["run_id"] for r in actions(pg_dsn, schema_name, tid)}
    assert [r["run_id"] for r in query(pg_dsn, schema_name, "SELECT run_id FROM runs ORDER BY started_at")] == [
        runs[0]["run_id"],
        runs[2]["run_id"],
    ]


def _table_counts(dsn: str, schema: str, thread_id: str) -> tuple[int, int]:
    """(action_log rows, writes rows holding an action) of a thread."""
    (row,) = query(
        dsn,
        schema,
        """SELECT (SELECT count(*) FROM action_log WHERE thread_id = %s) AS logged,
                  (SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s AND action_type IS NOT NULL) AS folded""",
        thread_id,
        thread_id,
    )
    return row["logged"], row["folded"]


def _without_thread(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["checkpoint_id"], r["run_id"], r["step"], r["task_id"], r["agent"], r["action_type"], r["payload"]) for r in rows]


def test_actions_held_by_packed_writes_rows_outlive_a_prune_copy_with_the_thread_and_are_stored_once(
    saver: Any, pg_dsn: str, schema_name: str
) -> None:
    """A task's packed writes row holds its action (migration 0014); the `actions` view reads
    them with action_log's. A copy takes them along, a prune moves them to action_log (the
    log outlives the writes), and the same writes sent again add no second row."""
    graph = agents.tool_agent(saver, agents.calculator_replies())
    config = thread()
    tid = config["configurable"]["thread_id"]
    graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
    before = actions(pg_dsn, schema_name, tid)
    assert [(a, t) for _, a, t in kinds(before)] == [
        ("__start__", "human"),
        ("agent", "tool_call"),
        ("tools", "observation"),
        ("agent", "llm_call"),
    ]
    assert _table_counts(pg_dsn, schema_name, tid) == (0, 4)  # every task's row holds its action
    # The same writes sent again (a retry whose first statement committed): no second row.
    last = graph.get_state(config)
    parent = last.parent_config
    assert parent is not None
    task = next(t for t in graph.get_state(parent).tasks if t.name == "agent")
    again = {**parent, "metadata": {"run_id": before[-1]["run_id"]}}
    saver.put_writes(again, [("messages", last.values["messages"][-1:])], task.id)
    assert actions(pg_dsn, schema_name, tid) == before
    # A copy holds the same rows, at the same times.
    copy = f"{tid}-copy"
    saver.copy_thread(tid, copy)
    assert _without_thread(actions(pg_dsn, schema_name, copy)) == _without_thread(before)
    assert [r["created_at"] for r in actions(pg_dsn, schema_name, copy)] == [r["created_at"] for r in before]
    # A prune deletes the writes of every checkpoint but the newest: their actions stay.
    saver.prune([tid])
    assert actions(pg_dsn, schema_name, tid) == before
    assert _table_counts(pg_dsn, schema_name, tid) == (4, 0)


class Counting(TypedDict):
    n: int
    row_versions: Annotated[list[str], lambda a, b: a + b]


def test_a_runs_row_is_written_when_it_changes_not_at_every_step(saver: Any, pg_dsn: str, schema_name: str) -> None:
    """A run's last step and time are its newest root checkpoint's: its row in run_log is
    written by the run's first checkpoint, a new agent and its last checkpoint (status
    `done`), not by each checkpoint."""
    config = thread()
    tid = config["configurable"]["thread_id"]

    def count(state: Counting) -> dict[str, Any]:
        (row,) = query(pg_dsn, schema_name, "SELECT xmin::text AS version FROM run_log WHERE thread_id = %s", tid)
        return {"n": state["n"] + 1, "row_versions": [row["version"]]}

    builder = StateGraph(Counting)
    builder.add_node("count", count)
    builder.add_edge(START, "count")
    builder.add_conditional_edges("count", lambda s: "count" if s["n"] < 8 else "__end__")
    builder.compile(checkpointer=saver).invoke({"n": 0, "row_versions": []}, config, durability="sync")
    versions = saver.get_tuple(config).checkpoint["channel_values"]["row_versions"]
    # The first pass's writes add its agent to the row; from then on, the same row version.
    assert len(versions) == 8 and len(set(versions[1:])) == 1, versions
    (run,) = query(pg_dsn, schema_name, "SELECT * FROM runs WHERE thread_id = %s", tid)
    (last,) = query(pg_dsn, schema_name, "SELECT max(step) AS step, max(created_at) AS at FROM checkpoints WHERE thread_id = %s", tid)
    assert (run["status"], run["steps"], run["ended_at"]) == ("done", 10, last["at"])  # steps -1 to 8
    (stored,) = query(pg_dsn, schema_name, "SELECT xmin::text AS version, last_step FROM run_log WHERE thread_id = %s", tid)
    assert stored["version"] != versions[0] and stored["last_step"] == last["step"]  # the last checkpoint wrote it: done


def test_an_update_state_edit_is_an_action_and_not_a_run(saver: Any, pg_dsn: str, schema_name: str) -> None:
    config = thread()
    tid = config["configurable"]["thread_id"]
    agent = agents.tool_agent(saver, agents.calculator_replies())
    agent.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
    agent.update_state(config, {"messages": [("user", "(a note from the operator)")]})
    agent.invoke({"messages": [("user", "thanks")]}, config, durability="sync")
    runs = query(pg_dsn, schema_name, "SELECT * FROM runs WHERE thread_id = %s ORDER BY started_at", tid)
    assert [(r["status"], r["steps"]) for r in runs] == [("done", 5), ("done", 3)]  # the two invocations, nothing else
    (edit,) = [r for r in actions(pg_dsn, schema_name, tid) if r["agent"] == "__update__"]
    assert (edit["action_type"], edit["run_id"]) == ("human", None)
    assert edit["payload"]["messages"][0]["content"] == "(a note from the operator)"


def test_a_callers_metadata_run_id_wins(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.tool_agent(saver, agents.calculator_replies())
    config = {**thread(), "metadata": {"run_id": "run-from-the-server"}}
    graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
    assert {r["run_id"] for r in query(pg_dsn, schema_name, "SELECT run_id FROM checkpoints")} == {"run-from-the-server"}
    assert {r["run_id"] for r in actions(pg_dsn, schema_name, config["configurable"]["thread_id"])} == {"run-from-the-server"}
    (run,) = query(pg_dsn, schema_name, "SELECT * FROM runs")
    assert (run["run_id"], run["status"], run["agents"]) == ("run-from-the-server", "done", ["__start__", "agent", "tools"])


def test_langchains_run_id_names_the_run_when_the_caller_gives_one(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.fan_out(saver)
    traced = uuid.uuid4()
    graph.invoke({"topics": ["a"], "notes": []}, {**thread(), "run_id": traced}, durability="sync")
    assert {r["run_id"] for r in query(pg_dsn, schema_name, "SELECT run_id FROM checkpoints")} == {str(traced)}


def test_a_supervisor_s_sub_agents_are_named_by_their_path_and_share_the_run(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.supervisor(saver)
    config = thread()
    graph.invoke({"messages": [("user", "write about tides")]}, config, durability="sync")
    rows = actions(pg_dsn, schema_name, config["configurable"]["thread_id"])
    assert {r["run_id"] for r in rows} == {r["run_id"] for r in query(pg_dsn, schema_name, "SELECT run_id FROM checkpoints")}
    assert len({r["run_id"] for r in rows}) == 1
    sub = [(r["agent"], r["action_type"]) for r in rows if r["checkpoint_ns"]]
    assert sub == [
        ("researcher/__start__", "decision"),
        ("researcher/model", "tool_call"),
        ("researcher/tools", "observation"),
        ("researcher/model", "llm_call"),
        ("writer/__start__", "decision"),
        ("writer/model", "llm_call"),
    ]
    search = next(r for r in rows if r["agent"] == "researcher/tools")
    assert search["payload"]["messages"][0]["content"] == "results for tides"
    assert search["payload"]["messages"][0]["tool_call_id"] == "call-s"
    root = [(r["agent"], r["action_type"]) for r in rows if not r["checkpoint_ns"]]
    assert [a for a, _ in root] == ["__start__", "route", "researcher", "route", "writer", "route"]
    routes = [r["payload"] for r in rows if r["agent"] == "route"]
    assert [p.get("goto") for p in routes] == [["researcher"], ["writer"], None]
    (run,) = query(pg_dsn, schema_name, "SELECT * FROM runs")
    assert run["status"] == "done"
    assert set(run["agents"]) == {a for a, _ in root} | {a for a, _ in sub}


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_tasks_started_by_send_are_named_after_their_node(saver: Any, pg_dsn: str, schema_name: str, durability: str) -> None:
    graph = agents.fan_out(saver)
    config = thread()
    graph.invoke({"topics": ["a", "b", "c"], "notes": []}, config, durability=durability)
    # By step: under durability="async" LangGraph sends a step's writes from other threads,
    # so the row of the input's task can commit (created_at) after the workers' rows.
    rows = sorted(actions(pg_dsn, schema_name, config["configurable"]["thread_id"]), key=lambda r: (r["step"], r["agent"]))
    assert kinds(rows) == [(0, "__start__", "human")] + [(1, "worker", "decision")] * 3
    (run,) = query(pg_dsn, schema_name, "SELECT agents FROM runs WHERE thread_id = %s", config["configurable"]["thread_id"])
    assert sorted(run["agents"]) == ["__start__", "worker"]
    assert sorted(r["payload"]["state"]["notes"][0] for r in rows[1:]) == ["note on a", "note on b", "note on c"]
    assert [s["node"] for s in rows[0]["payload"]["sends"]] == ["worker"] * 3


def _add_batches(state: Any, writes: Any) -> Any:
    messages = state or []
    for write in writes:
        messages = add_messages(messages, write)
    return messages


class Reviewed(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_batches)]


def test_a_message_written_back_after_a_restart_is_known_though_a_delta_channel_holds_it(pg_dsn: str, schema_name: str) -> None:
    # The messages live in a DeltaChannel (as deepagents keeps them): no checkpoint carries
    # them, and a new saver object knows them only from the history LangGraph reads back.
    call = AIMessage("", id="m-1", tool_calls=[{"id": "c-1", "name": "send", "args": {"to": "ana"}}])

    def model(state: Reviewed) -> dict[str, Any]:
        return {"messages": [call]}

    def review(state: Reviewed) -> dict[str, Any]:
        verdict = interrupt("send it?")
        return {"messages": [state["messages"][-1], ToolMessage(f"reviewer: {verdict}", tool_call_id="c-1", id="t-1")]}

    builder = StateGraph(Reviewed)
    builder.add_node("model", model)
    builder.add_node("review", review)
    builder.add_edge(START, "model")
    builder.add_edge("model", "review")
    config = thread()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        builder.compile(checkpointer=saver).invoke({"messages": [HumanMessage("hi", id="h-1")]}, config, durability="sync")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:  # another process
        builder.compile(checkpointer=saver).invoke(Command(resume="yes"), config, durability="sync")
    rows = actions(pg_dsn, schema_name, config["configurable"]["thread_id"])
    carrying = [(r["agent"], r["action_type"]) for r in rows if "m-1" in [m.get("id") for m in r["payload"].get("messages", [])]]
    assert carrying == [("model", "tool_call")]
    (written_back,) = [r for r in rows if r["agent"] == "review" and r["action_type"] != "interrupt"]
    assert (written_back["action_type"], written_back["payload"]["unchanged"]) == ("observation", 1)


def test_under_durability_exit_each_run_is_logged_from_its_last_checkpoint(saver: Any, pg_dsn: str, schema_name: str) -> None:
    # LangGraph saves only a run's last checkpoint and none of its tasks' writes: the log
    # says what it can, one row a run, typed by the messages new in that checkpoint.
    config = thread()
    tid = config["configurable"]["thread_id"]
    agent = agents.tool_agent(saver, agents.calculator_replies())
    agent.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="exit")
    agent.invoke({"messages": [("user", "thanks")]}, config, durability="exit")
    rows = actions(pg_dsn, schema_name, tid)
    assert kinds(rows) == [(3, "__unsaved__", "tool_call"), (6, "__unsaved__", "llm_call")]
    assert [m["content"] for m in rows[0]["payload"]["messages"]] == ["what is 1+2?", "", "3", "1 + 2 = 3"]
    assert [m["content"] for m in rows[1]["payload"]["messages"]] == ["thanks", "You're welcome."]
    assert [r["payload"]["unsaved_steps"] for r in rows] == [4, 3]
    runs = query(pg_dsn, schema_name, "SELECT run_id, agents, status FROM runs WHERE thread_id = %s ORDER BY started_at", tid)
    assert [(r["agents"], r["status"]) for r in runs] == [(["__unsaved__"], "done")] * 2
    assert [r["run_id"] for r in runs] == [r["run_id"] for r in rows]
    # With the steps saved, no such row.
    agent.invoke({"messages": [("user", "and 2+2?")]}, config, durability="sync")
    assert [r["agent"] for r in actions(pg_dsn, schema_name, tid)].count("__unsaved__") == 2


def test_a_send_task_whose_writes_come_before_its_checkpoint_is_named_by_the_put(saver: Any, pg_dsn: str, schema_name: str) -> None:
    # LangGraph calls a checkpoint's put only once the previous put is done, so with
    # durability="async" its Send tasks' writes can be stored first: forced here.
    thread_id = thread()["configurable"]["thread_id"]
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"__pregel_tasks": [Send("worker", {"topic": "a"}), Send("critic", {"topic": "a"})]}
    checkpoint["channel_versions"] = {"__pregel_tasks": saver.get_next_version(None, None)}
    at = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint["id"]}, "metadata": {"run_id": "run-1"}}
    saver.put_writes(at, [("notes", ["too harsh"])], "task-critic", "~__pregel_push, 0000000001, False")
    assert [r["agent"] for r in actions(pg_dsn, schema_name, thread_id)] == ["__send__"]  # not known yet, and said so

    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}, "metadata": {"run_id": "run-1"}}
    saver.put(root, checkpoint, {"source": "input", "step": -1, "parents": {}}, checkpoint["channel_versions"])
    assert [(r["agent"], r["step"]) for r in actions(pg_dsn, schema_name, thread_id)] == [("critic", 0)]
    (run,) = query(pg_dsn, schema_name, "SELECT agents FROM runs WHERE thread_id = %s", thread_id)
    assert run["agents"] == ["critic"]

    # Once the checkpoint is known, a later Send task of it is named as it is stored.
    saver.put_writes(at, [("notes", ["fine"])], "task-worker", "~__pregel_push, 0000000000, False")
    assert sorted(r["agent"] for r in actions(pg_dsn, schema_name, thread_id)) == ["critic", "worker"]


def test_a_task_that_raises_is_an_error_and_fails_its_run(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.failing_tool(saver)
    config = thread()
    with pytest.raises(ValueError, match="service down"):
        graph.invoke({"messages": [("user", "weather?")]}, config, durability="sync")
    rows = actions(pg_dsn, schema_name, config["configurable"]["thread_id"])
    assert kinds(rows) == [(0, "__start__", "human"), (1, "agent", "tool_call"), (2, "tools", "error")]
    error = rows[-1]["payload"]["error"]
    assert (error["type"], error["message"]) == ("ValueError", "service down for 'weather'")
    assert "Traceback (most recent call last)" in error["traceback"] and "in flaky" in error["traceback"]
    (run,) = query(pg_dsn, schema_name, "SELECT * FROM runs")
    assert run["status"] == "error"
    failed_today = query(pg_dsn, schema_name, "SELECT run_id FROM runs WHERE status = 'error' AND started_at >= current_date")
    assert [r["run_id"] for r in failed_today] == [run["run_id"]]


def test_a_run_stopped_at_a_static_breakpoint_is_interrupted_once_the_next_run_starts(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.approval(saver)
    graph.interrupt_before_nodes = ["approve"]
    config = thread()
    graph.invoke({"item": "book", "status": "new"}, config, durability="sync")
    assert [r["status"] for r in query(pg_dsn, schema_name, "SELECT status FROM runs")] == ["running"]
    graph.invoke(None, config, durability="sync")  # goes on: approve asks with interrupt()
    statuses = [r["status"] for r in query(pg_dsn, schema_name, "SELECT status FROM runs ORDER BY started_at")]
    assert statuses == ["interrupted", "interrupted"]


def test_action_log_off_writes_no_action_or_run_rows_but_keeps_run_ids(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, action_log=False) as saver:
        saver.setup()
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = thread()
        graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
        assert graph.get_state(config).values["messages"][-1].content == "1 + 2 = 3"
    assert query(pg_dsn, schema_name, "SELECT * FROM actions") == []
    assert query(pg_dsn, schema_name, "SELECT * FROM runs") == []
    assert len({r["run_id"] for r in query(pg_dsn, schema_name, "SELECT run_id FROM checkpoints")} - {None}) == 1


async def test_the_async_saver_logs_the_same_rows(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = thread()
        await graph.ainvoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
        await graph.ainvoke({"messages": [("user", "thanks")]}, config, durability="sync")
    rows = actions(pg_dsn, schema_name, config["configurable"]["thread_id"])
    assert kinds(rows) == CALCULATOR_ACTIONS
    assert [r["status"] for r in query(pg_dsn, schema_name, "SELECT status FROM runs ORDER BY started_at")] == ["done", "done"]


# -- encryption -----------------------------------------------------------------------------

SECRET = "the vault combination is 31-41-59"


def _dump(pg_dsn: str, schema: str) -> bytes:
    """The schema as pg_dump writes it (a pg_dump at least as new as the server), else every
    row of every table as text: what a reader of the database sees."""
    with psycopg.connect(pg_dsn) as conn:
        server_major = conn.info.server_version // 10000
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
    for candidate in (shutil.which("pg_dump"), *sorted(str(p) for p in Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))):
        if candidate is None:
            continue
        version = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout.split()[-1]
        if int(version.split(".")[0]) >= server_major:
            return subprocess.run([candidate, "--dbname", pg_dsn, "--schema", schema], capture_output=True, check=True).stdout
    out = []
    with psycopg.connect(pg_dsn) as conn:
        for table in tables:
            out += [
                r[0] for r in conn.execute(sql.SQL("SELECT t::text FROM {}.{} t").format(sql.Identifier(schema), sql.Identifier(table)))
            ]
    return "\n".join(out).encode()


@pytest.mark.parametrize("encrypt", [False, True], ids=["plain", "encrypted"])
def test_under_encryption_no_message_text_is_stored_anywhere(pg_dsn: str, schema_name: str, encrypt: bool) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef") if encrypt else None
    replies = [
        agents.AIMessage("", id="s-1", tool_calls=[agents.call("search", "call-v", query=SECRET)]),
        agents.AIMessage(f"I found: {SECRET}", id="s-2"),
    ]
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=serde) as saver:
        saver.setup()
        graph = agents.tool_agent(saver, replies)
        config = thread()
        graph.invoke({"messages": [("user", f"find {SECRET}")]}, config, durability="sync")
        assert graph.get_state(config).values["messages"][-1].content == f"I found: {SECRET}"
    dump = _dump(pg_dsn, schema_name)
    readable = SECRET.encode() in dump or SECRET.encode().hex().encode() in dump
    assert readable is not encrypt  # the plain run shows the search finds it
    rows = actions(pg_dsn, schema_name, config["configurable"]["thread_id"])
    assert kinds(rows) == [(0, "__start__", "human"), (1, "agent", "tool_call"), (2, "tools", "observation"), (3, "agent", "llm_call")]
    if encrypt:
        assert all(r["payload"] == {"$lgpd": "encrypted"} for r in rows)
    else:
        assert json.dumps(rows[1]["payload"]).count("vault combination") == 1


def test_the_three_common_questions_are_index_scans_on_a_large_log(saver: Any, pg_dsn: str, schema_name: str) -> None:
    """A run's actions in order; an agent's tool calls in the last hour; failed runs today.
    Most actions are held by packed writes rows, the rest by action_log (migration 0014):
    each question reads both through an index, and the writes rows without an action not at all."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema_name)))
        conn.execute(
            """INSERT INTO action_log (thread_id, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload, created_at)
            SELECT 't' || (g / 40), 'c' || g, 'task', 'r' || (g / 20), 0, g % 20, 'agent' || (g % 7),
                   (ARRAY['llm_call', 'tool_call', 'observation', 'decision'])[1 + g % 4], '{}', now() - g * interval '1 second'
            FROM generate_series(1, 20000) g"""
        )
        conn.execute(
            """INSERT INTO checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, type, value,
                                              run_id, step, agent, action_type, payload, created_at)
            SELECT 't' || (g / 40), 'c' || g, 'task', 0, 'messages', 'packed', '\\x00',
                   CASE WHEN g % 3 > 0 THEN 'r' || (g / 20) END, CASE WHEN g % 3 > 0 THEN g % 20 END,
                   CASE WHEN g % 3 > 0 THEN 'agent' || (g % 7) END,
                   CASE WHEN g % 3 > 0 THEN (ARRAY['llm_call', 'tool_call', 'observation', 'decision'])[1 + g % 4] END,
                   CASE WHEN g % 3 > 0 THEN '{}'::jsonb END, now() - g * interval '1 second'
            FROM generate_series(20001, 200000) g"""
        )
        conn.execute(
            """INSERT INTO checkpoints (thread_id, checkpoint_id, step, checkpoint)
            SELECT 't' || (g / 40), 'c' || g, g % 20, '{}' FROM generate_series(1, 100000) g"""
        )
        conn.execute(
            """INSERT INTO run_log (thread_id, run_id, started_at, status)
            SELECT 't' || (g / 2), 'r' || g, now() - g * interval '10 seconds', CASE WHEN g % 50 = 0 THEN 'error' ELSE 'done' END
            FROM generate_series(1, 5000) g"""
        )
        conn.execute("ANALYZE action_log, checkpoint_writes, run_log, checkpoints")
        for question in (
            "SELECT step, agent FROM actions WHERE run_id = 'r77' ORDER BY step",
            "SELECT * FROM actions WHERE agent = 'agent3' AND action_type = 'tool_call' AND created_at > now() - interval '1 hour'",
            "SELECT * FROM runs WHERE status = 'error' AND started_at >= current_date",
        ):
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + question))
            assert "Index" in plan and "Seq Scan" not in plan, plan


# -- the Python API ---------------------------------------------------------------------------


def test_list_runs_and_list_actions_filter_and_stream_in_pages(saver: Any, pg_dsn: str, schema_name: str) -> None:
    graph = agents.tool_agent(saver, agents.calculator_replies())
    config = thread()
    tid = config["configurable"]["thread_id"]
    graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
    graph.invoke({"messages": [("user", "thanks")]}, config, durability="sync")
    with pytest.raises(ValueError):
        agents.failing_tool(saver).invoke({"messages": [("user", "weather?")]}, thread(), durability="sync")
    runs = list(saver.list_runs(tid))
    assert [r.status for r in runs] == ["done", "done"] and runs[0].started_at > runs[1].started_at  # newest first
    assert runs[1].agents == ("__start__", "agent", "tools") and runs[1].steps == 5
    (failed,) = saver.list_runs(status="error")
    assert failed.thread_id != tid
    assert list(saver.list_runs(tid, limit=1)) == runs[:1]
    everything = list(saver.list_actions(thread_id=tid))
    assert [(a.step, a.agent, a.action_type) for a in everything] == CALCULATOR_ACTIONS
    assert everything[1].payload["messages"][0]["tool_calls"][0]["function"]["name"] == "add"
    assert [a.step for a in saver.list_actions(run_id=runs[1].run_id)] == [0, 1, 2, 3]
    tool_calls = list(saver.list_actions(agent="agent", action_type="tool_call"))
    assert [(a.thread_id == tid, a.payload["messages"][0]["tool_calls"][0]["id"]) for a in tool_calls] == [
        (True, "call-1"),
        (False, "call-f"),
    ]
    assert list(saver.list_actions(thread_id=tid, since=everything[4].created_at)) == everything[4:]
    assert list(saver.list_actions(thread_id=tid, until=everything[1].created_at)) == everything[:1]
    # Streamed: more rows than the first page, read page by page in order, none twice.
    many = thread()
    for _ in range(12):
        agents.fan_out(saver).invoke({"topics": [f"t{j}" for j in range(3)], "notes": []}, many, durability="sync")
    streamed = list(saver.list_actions(thread_id=many["configurable"]["thread_id"]))
    assert len(streamed) == 12 * 4 and len({(a.checkpoint_id, a.task_id, a.run_id) for a in streamed}) == 48
    assert [a.created_at for a in streamed] == sorted(a.created_at for a in streamed)
    assert len(list(saver.list_actions(thread_id=many["configurable"]["thread_id"], limit=20))) == 20


async def test_the_async_list_api_matches(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        config = thread()
        await agents.tool_agent(saver, agents.calculator_replies()).ainvoke({"messages": [("user", "1+2?")]}, config, durability="sync")
        runs = [r async for r in saver.alist_runs(config["configurable"]["thread_id"])]
        found = [a async for a in saver.alist_actions(run_id=runs[0].run_id)]
        assert [(a.step, a.agent, a.action_type) for a in found] == CALCULATOR_ACTIONS[:4]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.list_runs(status="finished"), "status 'finished' is not one of"),
        (lambda s: s.list_actions(action_type="tool"), "action_type 'tool' is not one of"),
        (lambda s: s.list_actions(since="yesterday"), "since must be a datetime"),
        (lambda s: s.list_runs(limit=-1), "limit must be a whole number"),
        (lambda s: s.list_actions(agent=3.5), "agent must be a string"),
    ],
)
def test_bad_filters_are_refused_by_name(saver: Any, call: Any, message: str) -> None:
    from langgraph_pg_durable import ConfigError

    with pytest.raises(ConfigError, match=message):
        list(call(saver))


# -- backfill -----------------------------------------------------------------------------------


def _scenarios(saver: Any, prefix: str) -> None:
    """Every shape of the log: two turns with a tool, subgraphs, Sends, an interrupt and its
    resume, a failed run, a run stopped at a static breakpoint and continued.

    (Not: a run that only continues from a breakpoint into an `interrupt()`, writing no
    checkpoint. Its id is stored nowhere when the log is off, and its interrupt reads like
    one of the run before: the backfill gives it to that run.)"""
    calc = {"configurable": {"thread_id": f"{prefix}-calc"}}
    agent = agents.tool_agent(saver, agents.calculator_replies())
    agent.invoke({"messages": [("user", "what is 1+2?")]}, calc, durability="sync")
    agent.invoke({"messages": [("user", "thanks")]}, calc, durability="sync")
    agents.supervisor(saver).invoke({"messages": [("user", "tides")]}, {"configurable": {"thread_id": f"{prefix}-team"}}, durability="sync")
    agents.fan_out(saver).invoke({"topics": ["a", "b"], "notes": []}, {"configurable": {"thread_id": f"{prefix}-fan"}}, durability="sync")
    order = {"configurable": {"thread_id": f"{prefix}-order"}}
    approval = agents.approval(saver)
    approval.invoke({"item": "book", "status": "new"}, order, durability="sync")
    approval.invoke(Command(resume="yes"), order, durability="sync")
    approval.update_state(order, {"status": "reviewed"})  # an edit: an action, not a run
    with pytest.raises(ValueError):
        agents.failing_tool(saver).invoke({"messages": [("user", "weather?")]}, {"configurable": {"thread_id": f"{prefix}-flaky"}})
    paused = {"configurable": {"thread_id": f"{prefix}-paused"}}
    stepwise = agents.approval(saver)
    stepwise.interrupt_before_nodes = ["draft"]
    stepwise.invoke({"item": "pen", "status": "new"}, paused, durability="sync")
    stepwise.invoke(None, paused, durability="sync")  # goes on: draft, then approve asks
    stepwise.invoke(Command(resume="no"), paused, durability="sync")


RANDOM_ID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def _ids(payload: Any) -> Any:
    """The payload without the ids LangGraph draws at random (a tool's message, an
    interrupt): two runs draw different ones, and whether a tool message's id is drawn
    before its write is saved is a race inside LangGraph (the reducer assigns it)."""
    if isinstance(payload, dict):
        return {
            k: _ids(v)
            for k, v in payload.items()
            if not (k == "id" and isinstance(v, str) and RANDOM_ID.fullmatch(v)) and k != "traceback"  # not stored: not backfilled
        }
    if isinstance(payload, list):
        return [_ids(v) for v in payload]
    return payload


def _side(pg_dsn: str, schema: str, prefix: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The action and run rows of the threads named `prefix-...`, comparable with another
    prefix's: threads by their name after the prefix, runs by their order in the thread."""
    like = f"{prefix}-%"
    runs = query(pg_dsn, schema, "SELECT * FROM runs WHERE thread_id LIKE %s ORDER BY thread_id, started_at", like)
    ordinal = {r["run_id"]: n for n, r in enumerate(runs)}
    rows = query(
        pg_dsn, schema, "SELECT * FROM actions WHERE thread_id LIKE %s ORDER BY thread_id, created_at, checkpoint_ns, task_id", like
    )
    actions = [
        (
            r["thread_id"].split("-", 1)[1],
            bool(r["checkpoint_ns"]),
            r["step"],
            r["agent"],
            r["action_type"],
            _ids(r["payload"]),
            ordinal.get(r["run_id"]),  # None: an edit outside any run
        )
        for r in rows
    ]
    # Sorted, not in commit order: LangGraph saves a step's writes from several threads, so
    # two tasks of a step (the caller's resume and the resumed task, say) commit in either order.
    runs_out = [(r["thread_id"].split("-", 1)[1], r["steps"], r["status"], sorted(r["agents"]), ordinal[r["run_id"]]) for r in runs]
    return sorted(actions, key=repr), runs_out


def test_backfill_of_threads_written_with_the_log_off_gives_the_rows_the_log_writes(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        _scenarios(saver, "on")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, action_log=False) as saver:
        _scenarios(saver, "off")
        assert _side(pg_dsn, schema_name, "off") == ([], [])
        assert saver.backfill_actions(batch_size=2) == 6  # the log-off threads only, two a page
        assert saver.backfill_actions() == 0  # run again: every thread has its log
    on_actions, on_runs = _side(pg_dsn, schema_name, "on")
    off_actions, off_runs = _side(pg_dsn, schema_name, "off")
    assert len(on_actions) > 30 and len(on_runs) == 10
    assert off_actions == on_actions
    assert off_runs == on_runs
    # Each action, logged or backfilled, is dated by the statement that stored its writes.
    dated = query(
        pg_dsn,
        schema_name,
        """SELECT EXISTS (SELECT 1 FROM checkpoint_writes w
                          WHERE w.thread_id = a.thread_id AND w.checkpoint_ns = a.checkpoint_ns
                            AND w.checkpoint_id = a.checkpoint_id AND w.task_id = a.task_id
                            AND w.created_at = a.created_at) AS same
           FROM action_log a""",
    )
    assert dated and all(r["same"] for r in dated)


async def test_the_async_backfill_fills_a_thread(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, action_log=False) as saver:
        await saver.setup()
        config = thread()
        await agents.tool_agent(saver, agents.calculator_replies()).ainvoke({"messages": [("user", "1+2?")]}, config, durability="sync")
        assert await saver.abackfill_actions(thread_ids=[config["configurable"]["thread_id"]]) == 1
        found = [(a.step, a.agent, a.action_type) async for a in saver.alist_actions(thread_id=config["configurable"]["thread_id"])]
        assert found == CALCULATOR_ACTIONS[:4]
