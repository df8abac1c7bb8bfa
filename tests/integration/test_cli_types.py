"""A thread holding a class of the user's own, read by `lgpd` in a process that has not
imported it (as trustcall's extraction schemas and langmem's summaries are, run from a
user's script): `show` shows what it can and names the type, `export` skips that thread
with its reason and writes the others, `--allow-type module:Name` reads it whole."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typer.testing import CliRunner

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app

MODULE = "lgpd_test_profiles"


def lgpd(pg_dsn: str, schema: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", schema, *args])


@pytest.fixture
def threads_with_a_users_class(pg_dsn: str, schema_name: str, tmp_path: Path) -> Iterator[str]:
    """Two threads, one holding a `lgpd_test_profiles.UserProfile`; the module is then
    forgotten, as in a process that never imported it."""
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel

            class UserProfile(BaseModel):
                name: str
                likes: list[str]
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        profiles = __import__(MODULE)

        class State(TypedDict, total=False):
            messages: Annotated[list[AnyMessage], add_messages]
            profile: Any

        def extract(state: State) -> State:
            return {"messages": [AIMessage("Noted: Ana likes tea.", id="a-1")], "profile": profiles.UserProfile(name="Ana", likes=["tea"])}

        def answer(state: State) -> State:
            return {"messages": [AIMessage("Hello!", id="a-2")]}

        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
            saver.setup()
            for thread, node in (("profiled", extract), ("plain", answer)):
                builder = StateGraph(State)
                builder.add_node("node", node)
                builder.add_edge(START, "node")
                builder.compile(checkpointer=saver).invoke(
                    {"messages": [HumanMessage("hi", id="h-1")]}, {"configurable": {"thread_id": thread}}
                )
        del sys.modules[MODULE]
        yield schema_name
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(MODULE, None)


def test_show_shows_what_it_can_and_names_the_type(pg_dsn: str, threads_with_a_users_class: str) -> None:
    schema = threads_with_a_users_class
    table = lgpd(pg_dsn, schema, "show", "profiled")
    assert table.exit_code == 0, table.output
    assert f"values of {MODULE}.UserProfile shown as their fields" in table.stdout
    diff = lgpd(pg_dsn, schema, "diff", "profiled", "--from", "-1", "-f", "json")
    assert diff.exit_code == 1 and {"op": "add", "path": "/profile", "value": {"name": "Ana", "likes": ["tea"]}} in json.loads(diff.stdout)
    assert MODULE not in sys.modules  # shown by its fields: nothing imported, nothing called


def test_export_skips_the_unreadable_thread_with_its_reason_and_writes_the_rest(
    pg_dsn: str, threads_with_a_users_class: str, tmp_path: Path
) -> None:
    out = tmp_path / "lines.jsonl"
    result = lgpd(pg_dsn, threads_with_a_users_class, "export", "--as", "openai", "--out", str(out))
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [m["content"] for m in lines[0]["messages"]] == ["hi", "Hello!"] and len(lines) == 1
    assert "skipped 1 unreadable threads ('profiled':" in result.stderr and f"{MODULE}.UserProfile" in result.stderr
    assert "--allow-type" in result.stderr  # the fix, named


def test_allow_type_reads_the_users_class_whole(pg_dsn: str, threads_with_a_users_class: str, tmp_path: Path) -> None:
    # The module is on the path (as a user's PYTHONPATH has it) but not imported: --allow-type imports it.
    out = tmp_path / "lines.jsonl"
    allowed = ["--allow-type", f"{MODULE}:UserProfile"]
    table = CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", threads_with_a_users_class, *allowed, "show", "profiled"])
    assert table.exit_code == 0 and "shown as their fields" not in table.stdout, table.output
    result = CliRunner().invoke(
        app, ["--dsn", pg_dsn, "--schema", threads_with_a_users_class, *allowed, "export", "--as", "openai", "--out", str(out)]
    )
    assert result.exit_code == 0 and len(out.read_text().splitlines()) == 2 and "unreadable" not in result.stderr, result.output
    bad = CliRunner().invoke(app, ["--dsn", pg_dsn, "--allow-type", "not a name", "threads"])
    assert bad.exit_code == 2 and "--allow-type" in bad.output
