"""`lgpd` on a terminal, against a hostile transcript: escape sequences planted in every
field a command prints (thread id, node names, messages, tool names, arguments and
results, interrupt values, errors and their tracebacks, metadata) are shown escaped
(`\\x1b`, `\\x9b`, `\\u202e`), never written raw, in every table a person reads.

A real graph wrote the thread, with a scripted chat model (no network)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from psycopg import sql
from typer.testing import CliRunner

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app

OSC_52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # writes the clipboard
OSC_8 = "\x1b]8;;http://evil.example/\x1b\\a safe link\x1b]8;;\x1b\\"  # a link that hides where it goes
CLEAR = "\x1b[2J"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: what follows reads backwards
C1_CSI = "\x9b31m"  # CSI as one C1 character
HOSTILE = OSC_52 + OSC_8 + CLEAR + RLO + C1_CSI
# LangGraph refuses ':' and '|' in node names (they separate namespaces).
NAME = HOSTILE.replace(":", "")

THREAD = f"thread{HOSTILE}"
AGENT = f"agent{NAME}"
ASK = f"ask{NAME}"
CRASH = f"crash{NAME}"
TOOL = f"lookup{NAME}"

RAW = re.compile("[\x1b\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def hostile_graph(saver: Any) -> Any:
    """agent (asks the tool) -> tools -> agent (answers) -> ask (interrupts) -> crash (raises)."""
    lookup = StructuredTool.from_function(lambda query: f"found {HOSTILE} for {query}", name=TOOL, description="Look a query up.")
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(f"let me look {HOSTILE}", id="h-1", tool_calls=[agents.call(TOOL, "call-h", query=f"q {HOSTILE}")]),
            AIMessage(f"done {HOSTILE}", id="h-2"),
        ]
    )

    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": f"go on {HOSTILE}?"})
        return {"messages": [HumanMessage(f"answer {answer}", id="h-3")]}

    def crash(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError(f"disk {HOSTILE}")

    graph = StateGraph(MessagesState)
    graph.add_node(AGENT, agents.model_node(model))
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_node(ASK, ask)
    graph.add_node(CRASH, crash)
    graph.add_edge(START, AGENT)
    graph.add_conditional_edges(AGENT, lambda state: "tools" if state["messages"][-1].tool_calls else ASK, ["tools", ASK])
    graph.add_edge("tools", AGENT)
    graph.add_edge(ASK, CRASH)
    graph.add_edge(CRASH, END)
    return graph.compile(checkpointer=saver)


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_terminal_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        graph = hostile_graph(saver)
        config = {"configurable": {"thread_id": THREAD}, "metadata": {"user": HOSTILE}}
        graph.invoke({"messages": [HumanMessage(f"hello {HOSTILE}", id="h-0")]}, config, durability="sync")
        with pytest.raises(RuntimeError):
            graph.invoke(Command(resume=f"yes {HOSTILE}"), config, durability="sync")
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def lgpd(pg_dsn: str, schema: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", schema, *args])


def printed(result: Any) -> str:
    """What the command wrote, checked to hold no character a terminal would act on; its
    words joined by single spaces (`show` and `diff` wrap long lines)."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    text = result.stdout + result.stderr
    raw = RAW.search(text)
    assert raw is None, f"raw {raw.group()!r} in: {text[max(0, raw.start() - 80) : raw.end() + 80]!r}"
    return " ".join(text.split())


def test_the_graph_planted_the_strings_where_the_commands_read_them(pg_dsn: str, schema: str) -> None:
    (row,) = json.loads(lgpd(pg_dsn, schema, "threads", "-f", "json").stdout)
    assert row["thread_id"] == THREAD and row["metadata"]["user"] == HOSTILE
    agents_seen = {t["agent"] for r in json.loads(lgpd(pg_dsn, schema, "history", THREAD, "-f", "json").stdout) for t in r["made_by"]}
    assert {AGENT, "tools", ASK} <= agents_seen


def test_threads_runs_and_history(pg_dsn: str, schema: str) -> None:
    for args in (["threads"], ["threads", "--full-ids"], ["runs"], ["runs", THREAD]):
        text = printed(lgpd(pg_dsn, schema, *args))
        assert "thread\\x1b]52;c;" in text and "\\u202e" in text and "\\x9b31m" in text, (args, text)
    runs = printed(lgpd(pg_dsn, schema, "runs", "--full-ids"))
    assert "agent\\x1b]52;c;" in runs  # the node names, in the agents column
    for args in (["history", THREAD], ["history", THREAD, "--full-ids"]):
        timeline = printed(lgpd(pg_dsn, schema, *args))
        assert "agent\\x1b]52;c;" in timeline and "ask\\x1b]52;c;" in timeline, timeline  # node names, escaped and cut


def test_show_every_step(pg_dsn: str, schema: str) -> None:
    steps = [r["step"] for r in json.loads(lgpd(pg_dsn, schema, "history", THREAD, "--ns", "", "-f", "json").stdout)]
    shown = "".join(printed(lgpd(pg_dsn, schema, "show", THREAD, "--step", str(step))) for step in steps)
    shown += printed(lgpd(pg_dsn, schema, "show", THREAD, "--step", str(max(steps)), "--full"))
    for planted in ("hello ", "let me look ", "found ", "lookup", "done ", "answer yes ", "disk ", "agent", "crash"):
        assert f"{planted}\\x1b]52;c;" in shown, planted
    for as_json in ("q ", "go on "):  # tool arguments and interrupt values are shown as JSON, which escapes ESC itself
        assert f"{as_json}\\u001b]52;c;" in shown, as_json
    assert "RuntimeError" in shown and "\\u202e" in shown and "\\x9b31m" in shown
    missing = lgpd(pg_dsn, schema, "show", THREAD, "--step", "99")
    assert missing.exit_code == 1 and "\\x1b" in printed(missing)


def test_grep_hits_and_snippets(pg_dsn: str, schema: str) -> None:
    found = printed(lgpd(pg_dsn, schema, "grep", "--regex", "hello|look|found|done|disk|go on|yes|query"))
    for field in ("content", "result", "tool", "arguments", "error", "interrupt", "resume"):
        assert f" {field} " in found, field
    assert "\\x1b]8;;http" in found and "\\u202e" in found
    assert "\\x1b" in printed(lgpd(pg_dsn, schema, "grep", "hello", "--thread", THREAD, "--agent", "__start__"))


def test_diff(pg_dsn: str, schema: str) -> None:
    result = lgpd(pg_dsn, schema, "diff", THREAD, "--from", "0", "--to", "3")
    assert result.exit_code == 1, result.output
    text = printed(result)
    assert "--- thread\\x1b]52" in text and "let me look \\x1b" in text and "found \\x1b" in text and "\\u202e" in text


def test_tail(pg_dsn: str, schema: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        count = len(list(saver.list_actions(thread_id=THREAD)))
    result = lgpd(pg_dsn, schema, "tail", "--thread", THREAD, "--since", "1h", "--count", str(count))
    assert result.exit_code == 0, result.output
    text = printed(result)
    assert text.count("thread\\x1b]52") == count and "agent\\x1b]52" in text and "\\u202e" in text


def test_json_stays_exact(pg_dsn: str, schema: str) -> None:
    """JSON escapes C0 controls itself (ESC is \\u001b); C1 and bidi controls are valid JSON
    text and stay as they are: a program reading the JSON gets the record exactly."""
    out = lgpd(pg_dsn, schema, "threads", "-f", "jsonl").stdout
    assert "\x1b" not in out and "\\u001b" in out and json.loads(out)["thread_id"] == THREAD
