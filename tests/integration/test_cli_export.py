"""`lgpd export` on the sample database: each format equals its hand-checked file, every
line passes its format's rules, and the options do what they say (success only, redact,
split, dedupe, per thread, tools, resume after an interruption), and `--redact` lets a
secret through in no format, however it is escaped."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, messages_from_dict
from langchain_core.tools import StructuredTool
from psycopg import sql
from typer.testing import CliRunner

import agents
from json_strings import strings_in
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app

EXPECTED = Path(__file__).resolve().parent.parent / "data" / "export"


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_export_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.sample_threads(saver)
        calc = agents.tool_agent(saver, agents.calculator_replies())  # the same first turn again: a duplicate
        calc.invoke({"messages": [("user", "what is 1+2?")]}, {"configurable": {"thread_id": "calc-2"}}, durability="sync")
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def export(pg_dsn: str, schema: str, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", schema, "export", *args])
    assert result.exit_code == 0, result.output
    return result


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fmt", ["openai", "trl", "sharegpt"])
def test_each_format_equals_its_hand_checked_file(pg_dsn: str, schema: str, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"{fmt}.jsonl"
    export(pg_dsn, schema, "--as", fmt, "--success-only", "--thread", "calc-1", "--thread", "team-1", "--out", str(out))
    assert lines(out) == lines(EXPECTED / f"{fmt}.jsonl")


def test_openai_lines_keep_the_rules(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    out = tmp_path / "openai.jsonl"
    result = export(pg_dsn, schema, "--as", "openai", "--out", str(out))
    assert "the conversation ends on a tool call that has no result" in result.output  # flaky-1, counted, not written
    for line in lines(out):
        messages = line["messages"]
        assert messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls")
        calls = {c["id"] for m in messages for c in m.get("tool_calls", ())}
        results = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert calls == results
        assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for m in messages for c in m.get("tool_calls", ()))
        assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name"} for m in messages)


def test_success_only_drops_the_interrupted_and_the_failed_run(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    out = tmp_path / "raw.jsonl"
    result = export(pg_dsn, schema, "--as", "raw", "--success-only", "--out", str(out))
    kept = lines(out)
    assert {(r["thread_id"], r["status"]) for r in kept} == {("calc-1", "done"), ("calc-2", "done"), ("team-1", "done")}
    assert len(kept) == 4 and "skipped 2 not successful" in result.output
    assert kept[0]["messages"][0]["type"] == "human" and kept[0]["metadata"]["user"] == "ana"
    every = tmp_path / "every.jsonl"
    export(pg_dsn, schema, "--as", "raw", "--out", str(every))
    assert {"flaky-1"} <= {r["thread_id"] for r in lines(every)}


def test_redact_removes_the_pattern_everywhere(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("# the question, and a word\n1\\+2 => <SUM>\ntides\n")
    out = tmp_path / "openai.jsonl"
    result = export(pg_dsn, schema, "--as", "openai", "--success-only", "--redact", str(rules), "--out", str(out))
    text = out.read_text()
    assert "1+2" not in text and "tides" not in text and "<SUM>" in text and "[REDACTED]" in text and len(lines(out)) == 4
    assert "redacted 3 matches of '1\\\\+2'" in result.output, result.output
    # A rule that matches inside a tool call's arguments (numbers too) redacts what it matches
    # there; the arguments stay JSON, and no line is lost.
    digits = tmp_path / "digits.txt"
    digits.write_text("\\d => N\n")
    kept = export(pg_dsn, schema, "--as", "openai", "--success-only", "--redact", str(digits), "--out", str(out))
    assert "invalid" not in kept.output and len(lines(out)) == 4, kept.output
    arguments = [json.loads(c["function"]["arguments"]) for line in lines(out) for m in line["messages"] for c in m.get("tool_calls", ())]
    assert arguments == [{"a": "N", "b": "N"}] * 3 + [{"query": "tides"}]
    broken = tmp_path / "bad.txt"
    broken.write_text("(unclosed\n")
    bad = CliRunner().invoke(
        app, ["--dsn", pg_dsn, "--schema", schema, "export", "--as", "openai", "--redact", str(broken), "--out", str(out)]
    )
    assert bad.exit_code == 2 and "line 1" in bad.output


def test_split_is_deterministic_and_dedupe_writes_identical_conversations_once(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "data.jsonl", tmp_path / "b" / "data.jsonl"
    for out in (first, second):
        export(pg_dsn, schema, "--as", "openai", "--success-only", "--split", "0.5", "--out", str(out))
    for side in ("train", "valid"):
        assert (first.parent / f"data.{side}.jsonl").read_text() == (second.parent / f"data.{side}.jsonl").read_text()
    total = sum(len(lines(first.parent / f"data.{side}.jsonl")) for side in ("train", "valid"))
    assert total == 4
    once = tmp_path / "once.jsonl"
    result = export(pg_dsn, schema, "--as", "openai", "--success-only", "--dedupe", "--out", str(once))
    assert len(lines(once)) == 3 and "1 duplicates" in result.output  # calc-2 repeats calc-1's first run


def test_per_thread_and_tools(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    out = tmp_path / "trl.jsonl"
    export(pg_dsn, schema, "--as", "trl", "--per", "thread", "--success-only", "--tools", "agents:add", "--out", str(out))
    kept = lines(out)
    assert len(kept) == 3  # calc-1, calc-2, team-1: the newest conversation of each
    assert kept[0]["tools"][0]["function"]["name"] == "add" and "a" in kept[0]["tools"][0]["function"]["parameters"]["properties"]
    bad = CliRunner().invoke(
        app, ["--dsn", pg_dsn, "--schema", schema, "export", "--as", "trl", "--tools", "agents:nothing", "--out", str(out)]
    )
    assert bad.exit_code == 2 and "--tools 'agents:nothing'" in bad.output


def test_resume_after_an_interruption_ends_with_the_same_file(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    export(pg_dsn, schema, "--as", "sharegpt", "--out", str(whole))
    out = tmp_path / "out.jsonl"
    first_thread = whole.read_text().splitlines(keepends=True)[:2]  # calc-1: two runs
    # As an export stopped while writing its second thread leaves it: one whole thread
    # recorded, then half a line.
    out.write_text("".join(first_thread) + '{"conversations": [{"fr')
    (tmp_path / "out.jsonl.lgpd-export").write_text(json.dumps({"after": "calc-1", "sizes": {"all": len("".join(first_thread).encode())}}))
    export(pg_dsn, schema, "--as", "sharegpt", "--resume", "--out", str(out))
    assert out.read_text() == whole.read_text()
    assert not (tmp_path / "out.jsonl.lgpd-export").exists()


# -- a secret in every place a line can carry it -------------------------------------------

SECRET = 'sk-"tok\\en\n€ü-42'  # a backslash, a double quote, a newline and non-ASCII: escaped in JSON


def _vault(**arguments: Any) -> dict[str, Any]:
    """A tool whose result is a dict: ToolNode stores it as JSON text, the secret escaped inside."""
    return {"token": SECRET, "asked": arguments}


@pytest.fixture(scope="module")
def secret_schema(pg_dsn: str) -> Iterator[str]:
    """One run with SECRET in a system prompt, a user's text and parts, the assistant's text, a
    tool's name, an argument's key, value and nested value (also in the provider's JSON form),
    the tool's result, and a metadata key and value."""
    name = f"lgpd_secret_{uuid.uuid4().hex[:12]}"
    vault = StructuredTool.from_function(
        _vault, name=SECRET, description="Open the vault.", args_schema={"type": "object", "properties": {}}
    )
    args = {"query": SECRET, SECRET: "key", "nested": {"deeper": [f"at {SECRET}"]}}
    provider = {"tool_calls": [{"id": "call-v", "type": "function", "function": {"name": SECRET, "arguments": json.dumps(args)}}]}
    replies = [
        AIMessage(f"opening {SECRET}", id="v-1", tool_calls=[agents.call(SECRET, "call-v", **args)], additional_kwargs=provider),
        AIMessage(f"the token is {SECRET}", id="v-2"),
    ]
    question = [
        SystemMessage(f"never say {SECRET}"),
        HumanMessage([{"type": "text", "text": f"my key: {SECRET}"}]),
        HumanMessage(f"open it with {SECRET}"),
    ]
    config = {"configurable": {"thread_id": "vault-1"}, "metadata": {SECRET: f"value {SECRET}"}}
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.tool_agent(saver, replies, [vault]).invoke({"messages": question}, config, durability="sync")
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def encodings(text: str) -> set[str]:
    """`text` as a file can hold it: raw, or JSON-escaped up to three times deep (an arguments
    string inside a string inside a line), non-ASCII kept or \\u-escaped at each depth."""
    forms, layer = {text}, {text}
    for _ in range(3):
        layer = {json.dumps(form, ensure_ascii=ascii_only)[1:-1] for form in layer for ascii_only in (False, True)}
        forms |= layer
    return forms


def assert_valid(fmt: str, line: dict[str, Any]) -> None:
    """The line still keeps its format's rules, its tool call's arguments an object."""
    if fmt == "raw":
        assert messages_from_dict(line["messages"])[-1].content == "the token is [REDACTED]"
        return
    if fmt == "sharegpt":
        turns = line["conversations"]
        assert [t["from"] for t in turns] == ["human", "function_call", "observation", "gpt"]
        assert isinstance(json.loads(turns[1]["value"])["arguments"], dict)
        return
    messages = line["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool", "assistant"]
    [arguments] = [c["function"]["arguments"] for m in messages for c in m.get("tool_calls", ())]
    assert isinstance(json.loads(arguments) if fmt == "openai" else arguments, dict)


@pytest.mark.parametrize("fmt", ["openai", "trl", "sharegpt", "raw"])
def test_redact_lets_no_secret_through(pg_dsn: str, secret_schema: str, tmp_path: Path, fmt: str) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text(re.escape(SECRET).replace("\n", "n") + "\n", encoding="utf-8")  # re.escape leaves the newline raw; a rule is one line
    out = tmp_path / f"{fmt}.jsonl"
    result = export(pg_dsn, secret_schema, "--as", fmt, "--redact", str(rules), "--out", str(out))
    assert "invalid" not in result.output and "redacted" in result.output, result.output
    data = out.read_bytes()
    assert not [form for form in encodings(SECRET) | encodings("€ü-42") if form.encode() in data]
    [line] = lines(out)
    found = list(strings_in(line))
    assert not [s for s in found if "ü-42" in s]
    for redacted in ("never say [REDACTED]", "my key: [REDACTED]", "the token is [REDACTED]", "at [REDACTED]"):
        assert any(redacted in s for s in found), redacted
    assert "[REDACTED]" in found  # the tool's name, an argument's key, the tool's token
    if fmt == "raw":
        assert line["metadata"]["[REDACTED]"] == "value [REDACTED]"
    assert_valid(fmt, line)
