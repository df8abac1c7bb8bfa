"""The hot statements touch what a step needs, not the thread: even under a generic plan
(one made while the tables were empty lives as long as the connection), a put's check
that its bases are still stored is a primary-key probe per base, and the values it
carries over from a parent it saw committed cost one probe, of the parent's row; under
a custom plan (every statement, with `prepare_threshold=None` as PgBouncer's transaction
mode wants), that probe is of the primary key too, not a walk of the thread's steps."""

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


def _sent_in_a_run(pg_dsn: str, schema_name: str, thread_id: str, **options: Any) -> list[Any]:
    """Every query a saver (built with `options`) sent in one run of the growing graph."""
    sent: list[Any] = []
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **options) as saver:
        saver.setup()
        send = saver._send

        def recording(conn: Any, query: Any, **flight: Any) -> Any:
            sent.append(query)
            return send(conn, query, **flight)

        saver._send = recording  # type: ignore[method-assign]
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": STEPS + 5}
        _graph(saver).invoke({"items": [], "step": 0}, config, durability="sync")
    return sent


def test_a_put_checks_its_bases_by_primary_key_whatever_the_plan(pg_dsn: str, schema_name: str) -> None:
    sent = _sent_in_a_run(pg_dsn, schema_name, f"plans-{uuid.uuid4().hex[:8]}")
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


def test_a_custom_plan_probes_the_parent_by_primary_key_on_a_long_thread(pg_dsn: str, schema_name: str) -> None:
    """A custom plan knows the namespace is the root's, which the root-step index's predicate
    asks; that index's key has the step between the thread and the checkpoint id, so a
    probe through it would read every root checkpoint of the thread (19 pages at 2,000
    steps, for the put's parent and the writes' checkpoint alike)."""
    thread_id = f"plans-{uuid.uuid4().hex[:8]}"
    sent = _sent_in_a_run(pg_dsn, schema_name, thread_id, prepare_threshold=None)
    put = next(q for q in reversed(sent) if "missing_bases" in q.sql and q.params.get("check_parent"))
    writes = next(q for q in reversed(sent) if "INTO" in q.sql and "checkpoint_writes" in q.sql and q.params.get("check_checkpoint"))
    table = sql.Identifier(schema_name, "checkpoints")
    with psycopg.connect(pg_dsn) as conn, conn.transaction(force_rollback=True):
        # A long thread's older root steps (no ANALYZE since: the planner's guess of its size
        # is as poor as on a busy server between two of autovacuum's).
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (thread_id, checkpoint_ns, checkpoint_id, step, checkpoint) "
                "SELECT %s, '', '0000' || lpad(n::text, 8, '0'), -n, '{{}}' FROM generate_series(1, 3000) AS n"
            ).format(table),
            (thread_id,),
        )
        conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        for query in (put, writes):
            plan = "\n".join(row[0] for row in conn.cursor(binary=True).execute("EXPLAIN " + query.sql, query.params))
            assert "checkpoints_root_step_idx" not in plan, plan
            assert "checkpoints_pkey on checkpoints" in plan, plan


def test_a_runs_page_finds_each_runs_replies_through_the_run_index(pg_dsn: str, schema_name: str) -> None:
    """The tokens of each run of a `list_runs` page come from its action rows: found by the
    run index, not by reading its thread's rows (or, on a small table, all of them) per run."""
    from langgraph_pg_durable.core.logs import RunScan

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        thread_id = f"plans-{uuid.uuid4().hex[:8]}"
        app = _graph(saver)
        for _ in range(3):
            app.invoke({"items": [], "step": STEPS - 2}, {"configurable": {"thread_id": thread_id}}, durability="sync")
        assert len(list(saver.list_runs(thread_id))) == 3
        for one_thread, scan in ((True, RunScan(thread_id=thread_id, limit=50)), (False, RunScan(limit=50))):
            page = saver.sql.runs_page(scan.page_where(), one_thread=one_thread)
            with psycopg.connect(pg_dsn) as conn, conn.transaction(force_rollback=True):
                conn.execute("SET LOCAL enable_seqscan = off")  # as on a table too big to scan
                plan = "\n".join(row[0] for row in conn.cursor(binary=True).execute("EXPLAIN " + page, scan.page_params()))
            assert "checkpoint_writes_run_idx on checkpoint_writes" in plan, plan
