"""`lgpd` against a real database populated by real agent graphs: each command's table,
JSON and JSON Lines output, its filters and its exit status; once as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import operator
from typing import Annotated, Any, TypedDict

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from langgraph.graph import START, StateGraph

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app


@pytest.fixture(scope="module")
def sample_schema(pg_dsn: str) -> Iterator[str]:
    """One populated schema for the module: the commands only read it."""
    name = f"lgpd_cli_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.sample_threads(saver)
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def sample(sample_schema: str) -> dict[str, str]:
    return {"done": "calc-1", "interrupted": "order-7", "error": "flaky-1", "team": "team-1"}


@pytest.fixture
def schema(sample_schema: str) -> str:
    return sample_schema


def lgpd(pg_dsn: str, schema: str, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", schema, *args])
    return result


def as_json(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_threads_lists_each_thread_with_its_status(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    rows = as_json(lgpd(pg_dsn, schema, "threads", "--format", "json"))
    assert [r["thread_id"] for r in rows] == sorted(sample.values())
    by_id = {r["thread_id"]: r for r in rows}
    calc = by_id["calc-1"]
    assert set(calc) == {
        "thread_id",
        "checkpoints",
        "last_step",
        "last_checkpoint_id",
        "last_run_id",
        "status",
        "last_activity",
        "metadata",
        "held_by",
    }
    assert (calc["checkpoints"], calc["last_step"], calc["status"]) == (8, 6, "done")
    assert calc["held_by"] == calc["last_run_id"]  # the thread's last run took it (README, "Exactly once")
    assert calc["last_activity"].endswith("+00:00") and calc["metadata"]["user"] == "ana"
    assert {r["thread_id"]: r["status"] for r in rows} == {"calc-1": "done", "order-7": "interrupted", "flaky-1": "error", "team-1": "done"}
    table = lgpd(pg_dsn, schema, "threads")
    assert table.exit_code == 0 and "order-7" in table.stdout and "interrupted" in table.stdout


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--status", "interrupted"], ["order-7"]),
        (["--where", "meta.user=ana"], ["calc-1"]),
        (["--where", "meta.user=bo", "--where", "meta.source=loop"], ["order-7"]),
        (["--limit", "2"], ["calc-1", "flaky-1"]),
        (["--since", "1h"], ["calc-1", "flaky-1", "order-7", "team-1"]),
        (["--until", "1h"], []),
    ],
)
def test_threads_filters(pg_dsn: str, schema: str, sample: dict[str, str], args: list[str], want: list[str]) -> None:
    lines = lgpd(pg_dsn, schema, "threads", "--format", "jsonl", *args)
    assert lines.exit_code == 0, lines.output
    assert [json.loads(line)["thread_id"] for line in lines.stdout.splitlines()] == want


def test_runs_newest_first_with_their_agents(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    runs = as_json(lgpd(pg_dsn, schema, "runs", "calc-1", "-f", "json"))
    assert len(runs) == 2 and runs[0]["started_at"] >= runs[1]["started_at"]
    assert set(runs[0]) == {"thread_id", "run_id", "started_at", "ended_at", "steps", "status", "agents", "tokens", "holds_thread"}
    assert [run["holds_thread"] for run in runs] == [True, False]  # the newest run took the thread from the older
    assert runs[1]["agents"] == ["__start__", "agent", "tools"] and runs[1]["steps"] == 5
    assert [r["tokens"] for r in runs] == [34, 17 + 26]  # each reply's usage_metadata once
    failed = as_json(lgpd(pg_dsn, schema, "runs", "--status", "error", "-f", "json"))
    assert [r["thread_id"] for r in failed] == ["flaky-1"]
    anas = as_json(lgpd(pg_dsn, schema, "runs", "--where", "meta.user=ana", "--limit", "1", "-f", "json"))
    assert [r["thread_id"] for r in anas] == ["calc-1"]


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["threads", "--status", "finished"], 2, "--status"),
        (["threads", "--since", "yesterday"], 2, "--since 'yesterday'"),
        (["threads", "--where", "user=ana"], 2, "meta.KEY=VALUE"),
        (["runs", "--limit", "-1"], 2, "--limit"),
    ],
)
def test_bad_command_lines_exit_2_naming_the_option(pg_dsn: str, schema_name: str, args: list[str], status: int, message: str) -> None:
    result = lgpd(pg_dsn, schema_name, *args)
    assert result.exit_code == status and message in result.output, result.output


def test_a_schema_that_is_not_the_savers_is_named(pg_dsn: str) -> None:
    result = lgpd(pg_dsn, "no_such_schema", "threads")
    assert result.exit_code == 2 and "schema 'no_such_schema' holds no langgraph-pg-durable tables" in result.output


def test_an_unreachable_server_exits_1_with_one_line(pg_dsn: str) -> None:
    result = CliRunner().invoke(app, ["--dsn", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1", "threads"])
    assert result.exit_code == 1 and result.output.startswith("error:") and "Traceback" not in result.output


def test_setup_then_version(pg_dsn: str, schema_name: str) -> None:
    made = lgpd(pg_dsn, schema_name, "setup")
    assert made.exit_code == 0 and "is at version" in made.stdout
    assert as_json(lgpd(pg_dsn, schema_name, "threads", "-f", "json")) == []
    assert CliRunner().invoke(app, ["version"]).stdout.startswith("langgraph-pg-durable ")


def test_lgpd_runs_as_a_real_process(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    env = {**os.environ, "DATABASE_URL": pg_dsn, "LGPD_SCHEMA": schema}
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_durable", "threads", "--format", "jsonl"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["thread_id"] for line in done.stdout.splitlines()] == sorted(sample.values())
    bad = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_durable", "threads", "--status", "x"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2


def test_text_from_the_database_is_printed_as_text(pg_dsn: str, schema_name: str) -> None:
    """A thread id with rich markup in it shows as written, not as a style."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        agents.approval(saver).invoke({"item": "x"}, {"configurable": {"thread_id": "[red]boom[/red]"}}, durability="sync")
    table = lgpd(pg_dsn, schema_name, "threads")
    assert table.exit_code == 0 and "[red]boom[/red]" in table.stdout


# -- history and show ---------------------------------------------------------------------------


def test_history_names_what_made_each_step(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    rows = as_json(lgpd(pg_dsn, schema, "history", "calc-1", "-f", "json"))
    assert [r["step"] for r in rows] == [6, 5, 4, 3, 2, 1, 0, -1]  # newest first
    made = {r["step"]: [(t["agent"], t["action_type"]) for t in r["made_by"]] for r in rows}
    assert made[1] == [("agent", "tool_call")] and made[2] == [("tools", "observation")] and made[3] == [("agent", "llm_call")]
    assert made[-1] == [] and rows[-1]["source"] == "input"
    assert len({r["run_id"] for r in rows}) == 2 and all(r["created_at"].endswith("+00:00") for r in rows)
    page = as_json(lgpd(pg_dsn, schema, "history", "calc-1", "--limit", "3", "-f", "json"))
    rest = as_json(lgpd(pg_dsn, schema, "history", "calc-1", "--before", page[-1]["checkpoint_id"], "-f", "json"))
    assert [r["checkpoint_id"] for r in page + rest] == [r["checkpoint_id"] for r in rows]
    assert as_json(lgpd(pg_dsn, schema, "history", "calc-1", "--since", "1h", "--limit", "2", "-f", "json")) == rows[:2]
    assert as_json(lgpd(pg_dsn, schema, "history", "calc-1", "--until", "1h", "-f", "json")) == []
    failed = as_json(lgpd(pg_dsn, schema, "history", "flaky-1", "-f", "json"))
    (error,) = [t for r in failed for t in r["ran_from"] if t["action_type"] == "error"]
    assert error["agent"] == "tools" and error["detail"]["error"]["type"] == "ValueError"


def test_an_edit_is_made_by_its_own_row_and_never_by_another_branchs_tasks(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = {"configurable": {"thread_id": "edited"}}
        graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
        graph.update_state(config, {"messages": [("user", "(a note)")]})  # the newest step: LangGraph stores its writes
        past = next(s for s in graph.get_state_history(config) if s.metadata["step"] == 1)  # the tool call, before it ran
        graph.update_state(past.config, {"messages": [("user", "(use 2+2)")]})  # a branch from step 1: no writes stored
    rows = as_json(lgpd(pg_dsn, schema_name, "history", "edited", "-f", "json"))
    made = {r["checkpoint_id"]: [(t["agent"], t["action_type"]) for t in r["made_by"]] for r in rows}
    note, branch = sorted((r for r in rows if r["source"] == "update"), key=lambda r: r["step"], reverse=True)
    assert made[note["checkpoint_id"]] == [("__update__", "human")]
    assert made[branch["checkpoint_id"]] == []  # not the tool's result, which made the other branch's step 2
    at_one = next(r for r in rows if r["step"] == 1)
    assert [(t["agent"], t["action_type"]) for t in at_one["ran_from"]] == [("tools", "observation")]
    newest_run = next(r for r in rows if r["step"] == 3 and r["source"] == "loop")
    assert [(t["agent"], t["action_type"]) for t in newest_run["ran_from"]] == []  # the note made the next step; it did not run from it


def test_history_nests_subgraph_namespaces(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    rows = as_json(lgpd(pg_dsn, schema, "history", "team-1", "-f", "json"))
    namespaces = {r["checkpoint_ns"].split(":")[0] for r in rows}
    assert namespaces == {"", "researcher", "writer"}
    assert [r["checkpoint_ns"] for r in as_json(lgpd(pg_dsn, schema, "history", "team-1", "--ns", "", "-f", "json"))] == [""] * 7
    table = lgpd(pg_dsn, schema, "history", "team-1")
    assert table.exit_code == 0 and "writer/model llm_call" in table.stdout


def test_the_timeline_names_tools_replies_time_and_tokens_and_fits_120_columns(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    table = lgpd(pg_dsn, schema, "history", "calc-1")
    lines = table.stdout.splitlines()
    assert table.exit_code == 0 and max(len(line) for line in lines) <= 120, max(lines, key=len)
    step = {line.split()[0]: line for line in lines[1:]}
    assert "agent tool_call: add" in step["1"] and "17" in step["1"].split("add", 1)[1]  # the tool, and its tokens
    assert "agent llm_call: '1 + 2 =" in step["3"]  # the reply's start, cut to fit
    assert "(input)" in step["-1"] and "ms" in step["1"]  # no task made the input step; the others took time
    rows = as_json(lgpd(pg_dsn, schema, "history", "calc-1", "-f", "json"))
    shown_ids = [line.split()[-1] for line in lines[1:]]
    assert all(full.startswith(short) and len(short) < len(full) for short, full in zip(shown_ids, (r["checkpoint_id"] for r in rows)))
    assert len(set(shown_ids)) == len(shown_ids)  # each tells its checkpoint apart
    # A shown id is taken back where an id is asked for.
    one = json.loads(lgpd(pg_dsn, schema, "show", "calc-1", "--checkpoint", shown_ids[3], "-f", "json").stdout)
    assert one["checkpoint_id"] == rows[3]["checkpoint_id"]
    assert (
        lgpd(pg_dsn, schema, "history", "calc-1", "--before", shown_ids[3], "-f", "json").stdout
        == lgpd(pg_dsn, schema, "history", "calc-1", "--before", rows[3]["checkpoint_id"], "-f", "json").stdout
    )
    ambiguous = lgpd(pg_dsn, schema, "show", "calc-1", "--checkpoint", rows[0]["checkpoint_id"][:4])
    assert ambiguous.exit_code != 0 and "ambiguous" in ambiguous.output
    wide = lgpd(pg_dsn, schema, "history", "calc-1", "--full-ids")
    assert rows[0]["checkpoint_id"] in wide.stdout and rows[0]["run_id"] in wide.stdout
    runs = lgpd(pg_dsn, schema, "runs", "calc-1")
    assert max(len(line) for line in runs.stdout.splitlines()) <= 120 and "43" in runs.stdout  # the first run's tokens


def test_show_pairs_each_tool_call_with_its_result(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    view = as_json(lgpd(pg_dsn, schema, "show", "calc-1", "--step", "1", "-f", "json"))
    assert [(m["role"], m["content"]) for m in view["prompt"]] == [("user", "what is 1+2?")]
    assert [(t["agent"], t["action_type"]) for t in view["response"]] == [("agent", "tool_call")]
    assert view["tool_calls"] == [{"id": "call-1", "name": "add", "arguments": {"a": 1, "b": 2}, "result": "3", "answered": True}]
    assert view["interrupts"] == [] and view["errors"] == []
    last = as_json(lgpd(pg_dsn, schema, "show", "calc-1", "-f", "json"))  # the newest step
    assert last["step"] == 6 and last["response"][0]["payload"]["messages"][0]["content"] == "You're welcome."
    table = lgpd(pg_dsn, schema, "show", "calc-1", "--step", "1")
    assert table.exit_code == 0 and "what is 1+2?" in table.stdout and 'add({"a": 1, "b": 2})' in table.stdout and "-> 3" in table.stdout


def test_show_an_interrupt_and_an_error(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    waiting = as_json(lgpd(pg_dsn, schema, "show", "order-7", "-f", "json"))
    assert [i["value"] for i in waiting["interrupts"]] == [{"question": "ship book?"}]
    failed = as_json(lgpd(pg_dsn, schema, "show", "flaky-1", "--step", "1", "-f", "json"))
    (error,) = failed["errors"]
    assert (error["agent"], error["type"], error["message"]) == ("tools", "ValueError", "service down for 'weather'")
    assert "Traceback" in error["traceback"]
    assert failed["tool_calls"][0]["answered"] is False
    table = lgpd(pg_dsn, schema, "show", "flaky-1", "--step", "1")
    assert "ValueError: service down for 'weather'" in table.stdout


def test_show_what_is_not_there_exits_1(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    missing = lgpd(pg_dsn, schema, "show", "calc-1", "--step", "99")
    assert missing.exit_code == 1 and "thread 'calc-1' has no step 99 in the root graph" in missing.output
    nothing = lgpd(pg_dsn, schema, "history", "nobody")
    assert nothing.exit_code == 0 and "thread 'nobody' has no checkpoints" in nothing.stdout


# -- diff ----------------------------------------------------------------------------------------


def test_langgraphs_own_channels_stay_out_of_diff_show_and_state_unless_asked(pg_dsn: str, schema_name: str) -> None:
    # Two branches that join: LangGraph tracks the edges in channels of its own (join:*, branch:to:*).
    def note(name: str) -> Any:
        return lambda state: {"log": [name]}

    builder = StateGraph(Trip)
    for name in ("plan", "flights", "weather", "ask"):
        builder.add_node(name, note(name))
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "flights")
    builder.add_edge("plan", "weather")
    builder.add_edge(["flights", "weather"], "ask")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        builder.compile(checkpointer=saver).invoke({"log": []}, {"configurable": {"thread_id": "trip"}})

    def paths(*extra: str) -> set[str]:
        found = json.loads(lgpd(pg_dsn, schema_name, "diff", "trip", "--from", "1", "--to", "2", "-f", "json", *extra).stdout)
        return {op["path"].split("/")[1] for op in found}

    assert paths() == {"log"}
    assert any(p.startswith(("join:", "branch:")) for p in paths("--internals")), paths("--internals")
    shown_step = json.loads(lgpd(pg_dsn, schema_name, "show", "trip", "--step", "2", "-f", "json").stdout)
    keys = {k for task in shown_step["response"] for k in task["payload"].get("state", {})}
    assert keys == {"log"}
    everything = json.loads(lgpd(pg_dsn, schema_name, "show", "trip", "--step", "2", "--internals", "-f", "json").stdout)
    assert any(k.startswith(("join:", "branch:")) for task in everything["response"] for k in task["payload"].get("state", {}))


class Trip(TypedDict):
    log: Annotated[list[str], operator.add]


def test_diff_marks_an_edited_message_and_exits_1(pg_dsn: str, schema_name: str) -> None:
    from langchain_core.messages import AIMessage

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = {"configurable": {"thread_id": "edit-1"}}
        graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
        graph.update_state(config, {"messages": [AIMessage("1 + 2 = three", id="ai-2")]})  # replaces ai-2 by id
    table = lgpd(pg_dsn, schema_name, "diff", "edit-1")  # the newest step against its parent
    assert table.exit_code == 1, table.output
    assert "messages: 0 added, 0 removed, 1 edited" in table.stdout and "1 + 2 = three" in table.stdout
    ops = json.loads(lgpd(pg_dsn, schema_name, "diff", "edit-1", "-f", "json").stdout)
    assert {"op": "replace", "path": "/messages/3/content", "value": "1 + 2 = three"} in ops
    steps = json.loads(lgpd(pg_dsn, schema_name, "diff", "edit-1", "--from", "0", "--to", "3", "-f", "json").stdout)
    assert [op["path"] for op in steps if op["path"].startswith("/messages/")] == ["/messages/1", "/messages/2", "/messages/3"]
    same = lgpd(pg_dsn, schema_name, "diff", "edit-1", "--from", "3", "--to", "3")
    assert same.exit_code == 0 and "no difference" in same.stdout
    newest = json.loads(lgpd(pg_dsn, schema_name, "history", "edit-1", "--limit", "1", "-f", "json").stdout)[0]["checkpoint_id"]
    across = lgpd(pg_dsn, schema_name, "diff", f"edit-1@{newest}", f"edit-1@{newest}")
    assert across.exit_code == 0
    missing = lgpd(pg_dsn, schema_name, "diff", "edit-1", "--from", "42")
    assert missing.exit_code == 2 and "thread 'edit-1' has no step 42" in missing.output  # trouble, as diff(1) says


# -- fork and replay --------------------------------------------------------------------------


def test_fork_copies_up_to_a_step_and_leaves_the_source_alone(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        agents.sample_threads(saver)
        before = [s.checkpoint_id for s in saver.list_steps("calc-1")]
        at_two = next(t for t in saver.list({"configurable": {"thread_id": "calc-1"}}) if t.metadata["step"] == 2)
    forked = lgpd(pg_dsn, schema_name, "fork", "calc-1", "--step", "2", "--to", "calc-fork")
    assert forked.exit_code == 0, forked.output
    config = json.loads(forked.stdout)
    assert (
        config["configurable"]["thread_id"] == "calc-fork"
        and config["configurable"]["checkpoint_id"] == at_two.config["configurable"]["checkpoint_id"]
    )
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        assert [s.step for s in saver.list_steps("calc-fork")] == [2, 1, 0, -1]
        newest = saver.get_tuple({"configurable": {"thread_id": "calc-fork"}})
        assert newest is not None and newest.checkpoint["channel_values"] == at_two.checkpoint["channel_values"]
        assert newest.pending_writes == []  # the next step runs again when resumed
        assert [s.checkpoint_id for s in saver.list_steps("calc-1")] == before
        assert [r.status for r in saver.list_runs("calc-fork")] == ["running"]
    again = lgpd(pg_dsn, schema_name, "fork", "calc-1", "--step", "1", "--to", "calc-fork")
    assert again.exit_code == 2 and "thread 'calc-fork' already has checkpoints" in again.output


def test_replay_runs_the_users_graph_on_from_the_step(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        agents.sample_threads(saver)
    run = lgpd(pg_dsn, schema_name, "replay", "calc-1", "--step", "2", "--graph", "agents:replay_calculator", "--to", "calc-replay")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout.splitlines()[0])["replayed_to_step"] == 3
    view = json.loads(lgpd(pg_dsn, schema_name, "show", "calc-replay", "-f", "json").stdout)
    assert view["response"][0]["payload"]["messages"][0]["content"] == "1 + 2 is 3 (replayed)."
    original = json.loads(lgpd(pg_dsn, schema_name, "show", "calc-1", "--step", "3", "-f", "json").stdout)
    assert original["response"][0]["payload"]["messages"][0]["content"] == "1 + 2 = 3"
    bad = lgpd(pg_dsn, schema_name, "replay", "calc-1", "--step", "2", "--graph", "agents:nothing_here")
    assert bad.exit_code == 2 and "--graph 'agents:nothing_here'" in bad.output


# -- grep and tail ---------------------------------------------------------------------------------


def test_grep_finds_text_where_a_person_would_look(pg_dsn: str, schema: str, sample: dict[str, str]) -> None:
    hits = as_json(lgpd(pg_dsn, schema, "grep", "weather", "-f", "json"))
    assert {(h["thread_id"], h["agent"], h["field"]) for h in hits} == {
        ("flaky-1", "__start__", "content"),
        ("flaky-1", "agent", "arguments"),
        ("flaky-1", "tools", "error"),
    }
    assert any("service down for 'weather'" in h["text"] for h in hits)
    sums = as_json(lgpd(pg_dsn, schema, "grep", "--regex", r"1\s*\+\s*2", "--thread", "calc-1", "-f", "json"))
    assert {h["field"] for h in sums} == {"content"} and len(sums) == 2  # the question and the answer
    assert as_json(lgpd(pg_dsn, schema, "grep", "add", "--agent", "agent", "-f", "json"))[0]["field"] == "tool"
    assert lgpd(pg_dsn, schema, "grep", "WEATHER").exit_code == 1  # case matters
    assert lgpd(pg_dsn, schema, "grep", "-i", "WEATHER").exit_code == 0
    assert lgpd(pg_dsn, schema, "grep", "role").exit_code == 1  # JSON keys are not searched
    assert lgpd(pg_dsn, schema, "grep", "weather", "--where", "meta.user=ana").exit_code == 1  # flaky-1 has no user
    bad = lgpd(pg_dsn, schema, "grep", "--regex", "(")
    assert bad.exit_code == 2 and "not a regular expression" in bad.output


def test_tail_prints_a_step_committed_while_it_runs(pg_dsn: str, schema_name: str) -> None:
    from langgraph.types import Command

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        graph = agents.approval(saver)
        config = {"configurable": {"thread_id": "live-1"}}
        graph.invoke({"item": "book"}, config, durability="sync")  # three actions, then it waits
        env = {**os.environ, "DATABASE_URL": pg_dsn, "LGPD_SCHEMA": schema_name}
        tail = subprocess.Popen(
            [sys.executable, "-m", "langgraph_pg_durable", "tail", "--thread", "live-1", "--since", "1h", "--count", "5", "-f", "jsonl"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert tail.stdout is not None
            first = [json.loads(tail.stdout.readline()) for _ in range(3)]  # tail is running: it printed what was there
            assert [a["agent"] for a in first] == ["__start__", "draft", "approve"]
            graph.invoke(Command(resume="yes"), config, durability="sync")  # committed while tail runs
            out, err = tail.communicate(timeout=60)
        finally:
            tail.kill()
    later = [json.loads(line) for line in out.splitlines()]
    assert tail.returncode == 0, err
    # The resume value and the task it let finish commit from different threads: either may come first.
    assert sorted(a["action_type"] for a in later) == ["decision", "human"]
    assert next(a for a in later if a["action_type"] == "decision")["payload"]["state"] == {"status": "shipped"}


def test_show_cuts_long_text_and_fetches_offloaded_values_with_full(pg_dsn: str, schema_name: str, tmp_path: Any) -> None:
    from langchain_core.messages import AIMessage

    store = (tmp_path / "objects").as_uri()
    huge = "".join(f"{i:07d} " for i in range(200_000))  # 1.6 MB: offloaded to the object store
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, object_store=store) as saver:
        saver.setup()
        graph = agents.tool_agent(saver, [AIMessage(huge, id="ai-huge")])
        graph.invoke({"messages": [("user", "x" * 3000)]}, {"configurable": {"thread_id": "big-1"}}, durability="sync")
    args = ["--dsn", pg_dsn, "--schema", schema_name, "--object-store", store, "show", "big-1", "--step", "1"]
    brief = json.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    (task,) = brief["response"]
    assert task["payload"]["state"]["messages"]["$lgpd"] == "offloaded" and task["payload"]["state"]["messages"]["size"] > 1 << 20
    whole = json.loads(CliRunner().invoke(app, [*args, "--full", "-f", "json"]).stdout)
    assert whole["response"][0]["payload"]["messages"][0]["content"] == huge
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "more characters; --full shows all" in table.stdout
    assert "more characters" not in CliRunner().invoke(app, [*args, "--full"]).stdout
