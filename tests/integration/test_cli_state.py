"""`lgpd show`, `diff` and `export` read state the way LangGraph loads it: the values a
`DeltaChannel` keeps out of its checkpoints are rebuilt through the saver's delta history.

Two real graphs: a StateGraph whose `messages` and `notes` are LangGraph's own
`DeltaChannel`s, and a deepagents agent (which keeps `messages` and `files` in them), each
driven by a scripted chat model."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from psycopg import sql
from pydantic import PrivateAttr
from typer.testing import CliRunner

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app


def add_message_batches(state: list[AnyMessage] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """`add_messages` as a DeltaChannel reducer takes it: the state and a batch of writes."""
    messages: Any = state or []
    for write in writes:
        messages = add_messages(messages, write)
    return messages  # type: ignore[no-any-return]


def merge_notes(state: dict[str, str] | None, writes: Sequence[dict[str, str | None]]) -> dict[str, str]:
    merged = dict(state or {})
    for write in writes:
        for key, value in write.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
    return merged


class Notebook(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(add_message_batches)]
    notes: Annotated[dict[str, str], DeltaChannel(merge_notes)]


def notebook(saver: Any) -> Any:
    """answer (a reply and a note) -> tidy (another reply; one note replaced, one removed)."""

    def turn(state: Notebook) -> int:
        return len([m for m in state["messages"] if isinstance(m, HumanMessage)])

    def answer(state: Notebook) -> dict[str, Any]:
        n = turn(state)
        return {"messages": [AIMessage(f"answer {n}", id=f"a-{n}")], "notes": {f"n{n}": f"note {n}"}}

    def tidy(state: Notebook) -> dict[str, Any]:
        n = turn(state)
        return {"messages": [AIMessage(f"tidied {n}", id=f"t-{n}")], "notes": {"n1": None, f"kept{n}": "yes"}}

    graph = StateGraph(Notebook)
    graph.add_node("answer", answer)
    graph.add_node("tidy", tidy)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", "tidy")
    graph.add_edge("tidy", END)
    return graph.compile(checkpointer=saver)


class ScriptedModel(BaseChatModel):
    """Answers each call with the next of its fixed AIMessages; binding tools changes nothing."""

    answers: list[AIMessage]
    _next: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        answer = self.answers[self._next]
        self._next += 1
        return ChatResult(generations=[ChatGeneration(message=answer.model_copy(deep=True))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self


PLAN = "1. tides\n2. moon"


def deep_agent(saver: Any) -> Any:
    from deepagents import create_deep_agent

    model = ScriptedModel(
        answers=[
            AIMessage(
                "",
                id="d-1",
                tool_calls=[
                    {
                        "id": "call-w",
                        "name": "write_file",
                        "args": {"file_path": "/plan.md", "content": "1. tides\n2. moon"},
                        "type": "tool_call",
                    }
                ],
            ),
            AIMessage("The plan is in /plan.md.", id="d-2"),
        ]
    )
    return create_deep_agent(model=model, checkpointer=saver)


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_state_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        book = notebook(saver)
        config = {"configurable": {"thread_id": "book-1"}}
        book.invoke({"messages": [("user", "first")]}, config, durability="sync")
        book.invoke({"messages": [("user", "second")]}, config, durability="sync")
        deep_agent(saver).invoke({"messages": [("user", "plan the tides")]}, {"configurable": {"thread_id": "deep-1"}}, durability="sync")
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def lgpd(pg_dsn: str, schema: str, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--dsn", pg_dsn, "--schema", schema, *args])
    assert result.exit_code in (0, 1), result.output
    return result


def state_as_langgraph_has_it(pg_dsn: str, schema: str, graph: Any, thread: str) -> dict[str, Any]:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        return dict(graph(saver).get_state({"configurable": {"thread_id": thread}}).values)


def test_the_graph_keeps_its_delta_channels_out_of_its_checkpoints(pg_dsn: str, schema: str) -> None:
    """The premise: the newest checkpoint's stored values hold neither channel."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        stored = saver.get_tuple({"configurable": {"thread_id": "book-1"}})
        assert stored is not None
        assert "messages" not in stored.checkpoint["channel_values"] and "notes" not in stored.checkpoint["channel_values"]


def test_show_prints_the_messages_a_delta_channel_rebuilt(pg_dsn: str, schema: str) -> None:
    want = state_as_langgraph_has_it(pg_dsn, schema, notebook, "book-1")
    newest = json.loads(lgpd(pg_dsn, schema, "show", "book-1", "--format", "json").stdout)
    assert [m["content"] for m in newest["prompt"]] == [m.content for m in want["messages"][:-1]]
    assert [m["content"] for m in newest["prompt"]] == ["first", "answer 1", "tidied 1", "second", "answer 2"]
    table = lgpd(pg_dsn, schema, "show", "book-1").stdout
    assert "no messages before this step" not in table and "tidied 1" in table


def test_diff_lists_the_messages_and_notes_a_step_changed(pg_dsn: str, schema: str) -> None:
    found = json.loads(lgpd(pg_dsn, schema, "diff", "book-1", "--format", "json").stdout)
    paths = {op["path"] for op in found}
    assert "/messages/5" in paths  # tidied 2, added by the newest step
    assert "/notes/kept2" in paths
    text = lgpd(pg_dsn, schema, "diff", "book-1").stdout
    assert "messages: 1 added" in text and "tidied 2" in text and "/notes/kept2" in text
    across = lgpd(pg_dsn, schema, "diff", "book-1", "--from", "1", "--to", "2").stdout
    assert "/notes/n1" in across and "removed" in across  # tidy removed note n1


def test_export_writes_the_conversations(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    out = tmp_path / "book.jsonl"
    result = lgpd(pg_dsn, schema, "export", "--as", "openai", "--thread", "book-1", "--out", str(out))
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [[m["content"] for m in line["messages"]] for line in lines] == [
        ["first", "answer 1", "tidied 1"],
        ["first", "answer 1", "tidied 1", "second", "answer 2", "tidied 2"],
    ]


def test_a_deep_agents_messages_and_files_show_diff_and_export(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    want = state_as_langgraph_has_it(pg_dsn, schema, deep_agent, "deep-1")
    assert "/plan.md" in want["files"] and len(want["messages"]) == 4  # the premise: LangGraph reads them back
    shown = json.loads(lgpd(pg_dsn, schema, "show", "deep-1", "--format", "json").stdout)
    contents = [m.get("content") for m in shown["prompt"]]
    assert contents == [m.content for m in want["messages"]][: len(contents)] and len(contents) >= 3
    assert contents[0] == "plan the tides" and "Updated file /plan.md" in contents
    diff = lgpd(pg_dsn, schema, "diff", "deep-1", "--from", "0").stdout
    assert "messages: " in diff and "The plan is in /plan.md." in diff and "/files: +" in diff and "1. tides" in diff
    out = tmp_path / "deep.jsonl"
    result = lgpd(pg_dsn, schema, "export", "--as", "openai", "--thread", "deep-1", "--out", str(out))
    assert result.exit_code == 0, result.output
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    contents = [m.get("content") for m in line["messages"]]
    assert len(contents) == 4 and contents[0] == "plan the tides" and contents[-1] == "The plan is in /plan.md."
    assert line["messages"][1]["tool_calls"][0]["function"]["name"] == "write_file"
