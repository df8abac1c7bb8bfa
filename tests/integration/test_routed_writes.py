"""The two write paths store the same thing: the write statements (sql/writes.py), which a
saver sends on plain PostgreSQL, and the calls of the schema's write functions (migration
0008, sql/routed.py), which it sends when the tables are distributed on Citus. The same
agents run through each into their own schema, on a real server, and what every read
gives back is compared, with the rows each table holds. (The modules marked
`both_write_paths` run their cases through both paths too.)"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from agents import sample_threads
from langchain_core.messages import BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import ConfigError, DurablePostgresSaver

# Compared row for row count. How many value and item rows a list takes depends on timing
# too (whether a put finds its task's items committed and reuses them), so those two are
# compared by what the reads give back, not by count.
TABLES = ("checkpoints", "checkpoint_writes", "run_log", "action_log")


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]
    big: str
    n: int


def _notes_graph() -> Any:
    """A list channel long enough for the delta layout (snapshots, deltas, items), and a
    value past the offload threshold."""

    def write(state: Notes) -> dict[str, Any]:
        n = state.get("n", 0)
        return {"notes": [f"note {n} " + "x" * 300], "n": n + 1, "big": "B" * 3000 if n == 2 else state.get("big", "")}

    builder = StateGraph(Notes)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    builder.add_conditional_edges("write", lambda s: "write" if s["n"] < 25 else END, ["write", END])
    return builder


def _message(m: Any) -> Any:
    if isinstance(m, BaseMessage):  # ids are random where the graph does not set them
        calls = [(c["name"], c["args"]) for c in getattr(m, "tool_calls", None) or []]
        return (m.type, m.content, calls)
    return m


def _plain(value: Any) -> Any:
    if isinstance(value, Interrupt):  # its id is made of the run's random ids
        return ("interrupt", _plain(value.value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return _message(value)


def _stored(saver: DurablePostgresSaver, pg_dsn: str, schema: str) -> dict[str, Any]:
    """What the reads give back, without the ids and times that differ from run to run."""
    out: dict[str, Any] = {}
    for thread in sorted({t.thread_id for t in saver.list_threads()}):
        config = {"configurable": {"thread_id": thread}}
        history = list(saver.list(config))
        out[thread] = {
            "history": [
                (t.metadata.get("step"), t.metadata.get("source"), _plain(t.checkpoint["channel_values"]), len(t.pending_writes or []))
                for t in history
            ],
            "writes": sorted((w[1], repr(_plain(w[2]))) for t in history for w in t.pending_writes or []),
            # Sorted: a resume's value and the resumed task's writes are saved from different
            # threads (LangGraph's), and commit in either order, which orders their rows and a
            # run's agents.
            "actions": sorted((a.step, a.agent, a.action_type) for a in saver.list_actions(thread_id=thread)),
            "runs": sorted((r.status, r.steps, tuple(sorted(r.agents))) for r in saver.list_runs(thread_id=thread)),
        }
    with psycopg.connect(pg_dsn) as conn:
        for table in TABLES:
            query = sql.SQL("SELECT count(*) FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            out[f"rows of {table}"] = conn.execute(query).fetchone()
        items = sql.SQL("SELECT count(*) > 0 FROM {}.channel_items").format(sql.Identifier(schema))
        out["some list items"] = conn.execute(items).fetchone()
    return out


@pytest.fixture
def two_schemas(schema_name: str, pg_dsn: str) -> Iterator[tuple[str, str]]:
    routed = f"{schema_name}_routed"
    yield schema_name, routed
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(routed)))


def _run_everything(saver: DurablePostgresSaver) -> None:
    ids = sample_threads(saver)
    from agents import approval

    approval(saver).invoke(Command(resume="yes"), {"configurable": {"thread_id": ids["interrupted"]}}, durability="sync")
    graph = _notes_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "notes"}, "recursion_limit": 100}
    graph.invoke({"notes": [], "n": 0, "big": ""}, config, durability="sync")
    graph.update_state(config, {"notes": ["edited by hand"]})
    past = list(graph.get_state_history(config))[10].config
    graph.invoke(None, past, durability="sync")  # a fork from the past


def test_the_write_functions_store_what_the_statements_store(pg_dsn: str, two_schemas: tuple[str, str], tmp_path: Any) -> None:
    results = []
    for schema, routed in zip(two_schemas, (False, True)):
        with DurablePostgresSaver.from_conn_string(
            pg_dsn,
            schema=schema,
            routed_writes=routed,
            object_store=f"file://{tmp_path}/{schema}",
            offload_threshold=2048,
            list_min_bytes=512,
            snapshot_every=4,
        ) as saver:
            saver.setup()
            _run_everything(saver)
            assert saver.routed_writes is routed
            results.append(_stored(saver, pg_dsn, schema))
    statements, functions = results
    assert statements.keys() == functions.keys()
    for key in statements:
        assert functions[key] == statements[key], key
    assert statements["some list items"] == (True,), "no list in the delta layout: the comparison would miss the items"


def test_a_saver_on_plain_postgres_finds_its_tables_are_not_distributed(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        assert saver.routed_writes is None  # not asked yet
        saver.setup()
        assert saver.routed_writes is False  # setup() asked
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:  # no setup(): the first write asks
        graph = _notes_graph().compile(checkpointer=saver)
        graph.invoke({"notes": [], "n": 20, "big": ""}, {"configurable": {"thread_id": "t"}}, durability="sync")
        assert saver.routed_writes is False


def test_routed_writes_takes_a_bool_or_none() -> None:
    with pytest.raises(ConfigError, match="routed_writes must be True, False or None, got 'yes'"):
        DurablePostgresSaver.from_conn_string("postgresql://nowhere/x", routed_writes="yes").__enter__()  # type: ignore[arg-type]
