"""The hot statements touch what a step needs, not the thread: even under a generic plan
(one made while the tables were empty lives as long as the connection), a put's check
that its bases are still stored is a primary-key probe per base, and the values it
carries over from a parent it saw committed cost one probe, of the parent's row."""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import psycopg
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import DurablePostgresSaver

STEPS = 60


class Growing(TypedDict):
    items: Annotated[list[str], operator.add]
    step: int


def _graph(saver: Any) -> Any:
    graph = StateGraph(Growing)
    graph.add_node("grow", lambda s: {"items": [f"item {s['step']} " * 60], "step": s["step"] + 1})
    graph.add_edge(START, "grow")
    graph.add_conditional_edges("grow", lambda s: "grow" if s["step"] < STEPS else END, ["grow", END])
    return graph.compile(checkpointer=saver)


def test_a_put_checks_its_bases_by_primary_key_whatever_the_plan(pg_dsn: str, schema_name: str) -> None:
    sent: list[Any] = []
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        send = saver._send

        def recording(conn: Any, query: Any, **options: Any) -> Any:
            sent.append(query)
            return send(conn, query, **options)

        saver._send = recording  # type: ignore[method-assign]
        config = {"configurable": {"thread_id": f"plans-{uuid.uuid4().hex[:8]}"}, "recursion_limit": STEPS + 5}
        _graph(saver).invoke({"items": [], "step": 0}, config, durability="sync")
    last_put = next(q for q in reversed(sent) if "missing_bases" in q.sql and "base_item_channels" in q.params)
    # The step counter, the branch channels and the list's base: all the parent's.
    assert last_put.params["check_parent"] == last_put.params["parent_checkpoint_id"] is not None
    assert list(last_put.params["base_channels"]) == []
    bases = 1 + len(last_put.params["base_item_channels"])
    with psycopg.connect(pg_dsn) as conn:
        stored = conn.execute(sql.SQL("SELECT count(*) FROM {}.channel_values").format(sql.Identifier(schema_name))).fetchone()
        assert stored is not None and stored[0] > 2 * STEPS // 3  # a thread with many stored values
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.cursor(binary=True).execute(last_put.sql, last_put.params, prepare=True)  # the put again: a no-op update
            # Index entries this transaction read, by the primary keys of both tables.
            read = conn.execute(
                "SELECT sum(pg_stat_get_xact_tuples_returned(format('%%I.%%I', %(s)s::text, k)::regclass))"
                " FROM unnest(ARRAY['channel_values_pkey', 'channel_items_pkey']) AS k",
                {"s": schema_name},
            ).fetchone()
    assert read is not None and read[0] <= 2 * bases, (read, bases)
