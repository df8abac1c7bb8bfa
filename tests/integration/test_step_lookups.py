"""A reader's lookups of one step read what that step needs, not the thread (issue 29: a
step page of a 20,005-step thread took 0.9-1.6 s, found by walking every step in Python).

`lgpd show --step N`, the replay page's step page, its previous / next links and a missing
step are each one indexed statement: replayed under a generic plan (as a long-lived
connection runs them), none reads more than a few dozen index entries and rows of a thread
of 300 steps, where a walk reads every one."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli.reading import ANSWER_WINDOW, find_step, read_step_view, step_actions

STEPS = 300
FEW = 40  # index entries and rows a lookup may read: a page of one step, its neighbours, its rows


class Counter(TypedDict):
    n: int


def _ticking(saver: Any) -> Any:
    graph = StateGraph(Counter)
    graph.add_node("tick", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", lambda s: "tick" if s["n"] < STEPS else END, ["tick", END])
    return graph.compile(checkpointer=saver)


@pytest.fixture(scope="module")
def long_thread(pg_dsn: str) -> Any:
    schema = f"lgpd_lookups_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        _ticking(saver).invoke({"n": 0}, {"configurable": {"thread_id": "long"}, "recursion_limit": STEPS + 10}, durability="sync")
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP SCHEMA {} CASCADE").format(psycopg.sql.Identifier(schema)))


def _statements_of(saver: Any, call: Any) -> tuple[Any, list[Any]]:
    sent: list[Any] = []
    send = saver._send

    def recording(conn: Any, query: Any, **options: Any) -> Any:
        sent.append(query)
        return send(conn, query, **options)

    saver._send = recording
    try:
        return call(), sent
    finally:
        saver._send = send


def _rows_read(pg_dsn: str, schema: str, query: Any) -> int:
    """Index entries and table rows the statement reads, sent again under a generic plan."""
    with psycopg.connect(pg_dsn) as conn, conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.cursor(binary=True).execute(query.sql, query.params, prepare=True)
        read = conn.execute(
            "SELECT sum(pg_stat_get_xact_tuples_returned(c.oid) + pg_stat_get_xact_tuples_fetched(c.oid))"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'i')",
            (schema,),
        ).fetchone()
    assert read is not None
    return int(read[0] or 0)


@pytest.mark.parametrize("step", [0, STEPS // 2, STEPS])
def test_a_step_its_neighbours_and_its_rows_are_indexed_lookups(pg_dsn: str, long_thread: str, step: int) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=long_thread) as saver:
        record, found = _statements_of(saver, lambda: find_step(saver, "long", "", step, None, None))
        assert record.step == step and record.checkpoint_ns == ""
        neighbours, around = _statements_of(saver, lambda: saver.step_neighbours("long", step))
        assert neighbours == (step - 1, step + 1 if step < STEPS else None)
        rows, actions = _statements_of(saver, lambda: step_actions(saver, record))
        assert [a.checkpoint_id for a in rows][:1] == [record.parent_checkpoint_id]
        view = read_step_view(saver, record)
        assert [r["agent"] for r in view["response"]] == ["__start__" if step == 0 else "tick"] and view["step"] == step
        assert sum(1 for _ in saver.list_steps("long", checkpoint_ns="")) == STEPS + 2  # the input checkpoint too
    assert len(found) == len(around) == len(actions) == 1 and 1 <= len(rows) <= ANSWER_WINDOW
    for query in (*found, *around):
        assert _rows_read(pg_dsn, long_thread, query) <= FEW, query.operation
    assert _rows_read(pg_dsn, long_thread, actions[0]) <= 2 * ANSWER_WINDOW + FEW  # the window's rows, each once


def test_a_missing_step_is_one_indexed_lookup(pg_dsn: str, long_thread: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=long_thread) as saver:
        with pytest.raises(LookupError, match="has no step 99999"):
            _statements_of(saver, lambda: find_step(saver, "long", "", 99999, None, None))
        _, sent = _statements_of(saver, lambda: next(iter(saver.list_steps("long", checkpoint_ns="", step=99999)), None))
        newest, across = _statements_of(saver, lambda: _newest(saver))  # every namespace: the newest of two lanes
        whole, by_id = _statements_of(saver, lambda: find_step(saver, "long", "", None, newest, None))
        assert whole.step == STEPS
    for query in (*sent, *across, *by_id):
        assert _rows_read(pg_dsn, long_thread, query) <= FEW, query.operation


def _newest(saver: Any) -> str:
    return next(iter(saver.list_steps("long", limit=1))).checkpoint_id  # type: ignore[no-any-return]


def test_a_checkpoint_prefix_and_a_run_prefix_still_resolve(pg_dsn: str, long_thread: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=long_thread) as saver:
        newest = next(iter(saver.list_steps("long", limit=1)))
        assert find_step(saver, "long", "", None, newest.checkpoint_id[:20], None).checkpoint_id == newest.checkpoint_id
        assert find_step(saver, "long", "", 3, None, newest.run_id[:12]).step == 3
        with pytest.raises(LookupError, match="is ambiguous"):
            find_step(saver, "long", "", None, newest.checkpoint_id[:4], None)
        with pytest.raises(LookupError, match="has no step 3, run 'nope'"):
            find_step(saver, "long", "", 3, None, "nope")
