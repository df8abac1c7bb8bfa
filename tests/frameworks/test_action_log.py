"""The action log of the corpus's agents, read with SQL as a person would: each task typed
and shown by what is new in its writes. The scenarios are the corpus's own (so every one
has also just passed its comparison with InMemorySaver); the rows are our saver's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from corpus import Check, Run
from psycopg.rows import dict_row
from typer.testing import CliRunner
from test_langchain_agent import REVIEW, reviewed_agent
from test_deepagents import deep_agent
from test_multi_agent import supervisor, swarm

from langgraph_pg_durable.cli import app


def actions(run: Run, thread_id: str, *, root_only: bool = False) -> list[dict[str, Any]]:
    """The thread's rows of the `actions` view, oldest first."""
    where = "thread_id = %s" + (" AND checkpoint_ns = ''" if root_only else "")
    with psycopg.connect(run.dsn, row_factory=dict_row) as conn:
        return list(conn.execute(f"SELECT * FROM {run.schema}.actions WHERE {where} ORDER BY created_at, task_id", [thread_id]))


def messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    return list(row["payload"].get("messages", []))


def ids(row: dict[str, Any]) -> list[str]:
    return [m.get("id") for m in messages(row)]


async def test_a_reviewed_call_is_logged_once_and_a_rejected_one_as_rejected(check: Check) -> None:
    ours = await check(reviewed_agent)

    # Each model reply is in the payload of exactly one row, whatever the review did:
    # the middleware writing the reviewed message back is not a second tool call.
    for thread_id, call_id in (("edit", "e-1"), ("reject", "r-1"), ("approve", "a-1")):
        rows = actions(ours, thread_id)
        carrying = [(r["agent"], r["action_type"]) for r in rows if call_id in ids(r)]
        assert carrying == [("model", "tool_call")], (thread_id, carrying)
        replies = Counter(m["id"] for r in rows for m in messages(r) if m["role"] == "assistant")
        assert set(replies.values()) == {1}, (thread_id, replies)

    # Approved: the review is a decision that sends the call on, its message only counted.
    review = [r for r in actions(ours, "approve") if r["agent"] == REVIEW and r["action_type"] != "interrupt"]
    assert review[0]["action_type"] == "decision"
    assert review[0]["payload"]["unchanged"] == 1 and "messages" not in review[0]["payload"]

    # Rejected: the call never ran, and the log says so: the reviewer's note is the
    # observation of that call id, with status error; no row holds a result of the tool.
    rejected = [(r["agent"], m) for r in actions(ours, "reject") for m in messages(r) if m.get("tool_call_id") == "c-r"]
    assert [(agent, m["status"]) for agent, m in rejected] == [(REVIEW, "error")]
    assert "rejected" in rejected[0][1]["content"]
    assert not any("sent to boss" in str(m.get("content")) for r in actions(ours, "reject") for m in messages(r))

    # Edited: the edit is the middleware's state write, and the tool's result the edited call's.
    edit = [r for r in actions(ours, "edit") if r["agent"] == REVIEW and r["action_type"] == "decision"]
    assert edit[0]["payload"]["state"]["hitl_edited_tool_calls"]["c-e"]["args"]["to"] == "bob@example.com"


async def test_an_agent_subgraph_is_typed_by_its_own_reply_and_does_not_grow(check: Check) -> None:
    ours = await check(swarm)
    root = actions(ours, "swarm", root_only=True)
    bob = [r for r in root if r["agent"] == "bob"]
    # Bob only answered: his node returns the whole conversation, of which his reply is new.
    assert [(r["action_type"], ids(r)) for r in bob] == [("llm_call", ["b-1"]), ("llm_call", ["b-2"])]
    assert [r["payload"]["unchanged"] for r in bob] == [3, 5]
    alice = [r for r in root if r["agent"] == "alice"]
    assert [r["action_type"] for r in alice] == ["tool_call", "llm_call", "llm_call"]  # the handoff, her answer, the fork's

    # What a subgraph was handed is not its work either: its input rows name no message.
    everything = actions(ours, "swarm")
    handed = [r for r in everything if r["agent"].endswith("/__start__")]
    assert handed and all("messages" not in r["payload"] for r in handed[1:]), [r["payload"] for r in handed]
    # So no row grows with the conversation: the largest is the first handoff's.
    assert max(len(str(r["payload"])) for r in everything) < 1000


async def test_supervisor_rows_hold_each_reply_once_per_level(check: Check) -> None:
    ours = await check(supervisor)
    root = actions(ours, "team", root_only=True)
    # Each agent's row at the root holds its reply and the handoff back, not the conversation.
    writer = next(r for r in root if r["agent"] == "writer")
    assert ids(writer)[0] == "w-1" and len(messages(writer)) == 3, ids(writer)
    final = [r for r in root if r["agent"] == "supervisor"][-2]
    assert (final["action_type"], ids(final)) == ("llm_call", ["s-3"])
    # Across the thread a reply appears once at the root and once inside its agent.
    replies = Counter(m["id"] for r in actions(ours, "team") for m in messages(r) if m.get("id", "").startswith(("s-", "x-", "w-")))
    assert set(replies) == {"s-1", "s-2", "s-3", "s-4", "x-1", "x-2", "w-1", "w-2"}
    assert max(replies.values()) == 2, replies


async def test_deep_agent_sub_agents_are_named_and_each_tool_call_by_its_node(check: Check) -> None:
    ours = await check(deep_agent)
    rows = actions(ours, "deep")
    agents = {r["agent"] for r in rows}
    # Sub-agents run under the node `tools`; each is named by its lc_agent_name.
    assert {"tools/researcher/model", "tools/researcher/tools", "tools/general-purpose/model", "tools/general-purpose/tools"} <= agents
    assert not any(a.endswith("__send__") for a in agents), agents  # every tool call (a Send) by its node
    paused = [r["agent"] for r in rows if r["action_type"] == "interrupt"]
    assert paused == ["tools/researcher/HumanInTheLoopMiddleware.after_model", "tools"]
    with psycopg.connect(ours.dsn) as conn:
        run_agents = {a for (agents_of_run,) in conn.execute(f"SELECT agents FROM {ours.schema}.runs") for a in agents_of_run}
    assert "tools/researcher/model" in run_agents and not any(a.endswith("__send__") for a in run_agents)


def lgpd(run: Run, *args: str) -> Any:
    return CliRunner().invoke(app, ["--dsn", run.dsn or "", "--schema", run.schema or "", *args])


async def test_lgpd_shows_and_exports_the_corpus_agents(check: Check, mode: str, tmp_path: Path) -> None:
    if mode == "async":
        pytest.skip("the rows are the same: the sync run reads them")
    reviewed = await check(reviewed_agent)
    # The rejected call's step: the call, paired with the reviewer's note as its result.
    view = json.loads(lgpd(reviewed, "show", "reject", "--step", "1", "-f", "json").stdout)
    assert [(c["name"], c["answered"]) for c in view["tool_calls"]] == [("send_email", True)]
    assert "rejected" in str(view["tool_calls"][0]["result"])
    out = tmp_path / "reviewed.jsonl"
    done = lgpd(reviewed, "export", "--as", "openai", "--thread", "approve", "--out", str(out))
    assert done.exit_code == 0, done.output
    (line,) = [json.loads(text) for text in out.read_text().splitlines()][-1:]
    assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert line["messages"][2]["content"] == "sent to carol@example.com: lunch?"

    deep = await check(deep_agent)
    steps = json.loads(lgpd(deep, "history", "deep", "-f", "json").stdout)
    called = {(t["agent"], tuple(t["tools"])) for s in steps for t in s["made_by"] if t["tools"]}
    assert ("tools/researcher/model", ("search_web",)) in called and ("model", ("task",)) in called, called
    history = lgpd(deep, "history", "deep")
    assert history.exit_code == 0 and "tools/researcher/model" in history.stdout
    assert max(len(row) for row in history.stdout.splitlines()) <= 120
    out = tmp_path / "deep.jsonl"
    done = lgpd(deep, "export", "--as", "openai", "--thread", "deep", "--out", str(out))
    assert done.exit_code == 0 and out.read_text().strip(), done.output  # its DeltaChannel messages, read as LangGraph reads them
    assert "The moon drives the tides; the notes agree." in out.read_text()
