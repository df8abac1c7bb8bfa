"""list() paging: every checkpoint once, in order, across namespaces and page boundaries."""

from __future__ import annotations

import re

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.core.history import HistoryScan
from langgraph_pg_durable.sql.statements import Statements

NAMESPACES = ("", "sub:1", "sub:2")
PER_NAMESPACE = 45  # past the first pages (8, then 32): the cursor crosses namespaces


@pytest.fixture
def saver(pg_dsn: str, schema_name: str):
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def _fill(saver: DurablePostgresSaver, thread_id: str) -> list[tuple[str, str]]:
    """PER_NAMESPACE checkpoints in each namespace; all namespaces share each checkpoint id."""
    stored = []
    for i in range(PER_NAMESPACE):
        checkpoint_id = f"1ef{i:05d}-0000-6000-8000-000000000000"
        for ns in NAMESPACES:
            checkpoint = empty_checkpoint()
            checkpoint["id"] = checkpoint_id
            checkpoint["channel_values"] = {"n": i}
            checkpoint["channel_versions"] = {"n": saver.get_next_version(None)}
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
            saver.put(config, checkpoint, {"step": i, "source": "loop"}, dict(checkpoint["channel_versions"]))
            stored.append((checkpoint_id, ns))
    return stored


def _keys(tuples) -> list[tuple[str, str]]:
    return [(t.config["configurable"]["checkpoint_id"], t.config["configurable"]["checkpoint_ns"]) for t in tuples]


def test_a_thread_lists_every_namespace_newest_first_once(saver: DurablePostgresSaver) -> None:
    stored = _fill(saver, "paged")
    _fill(saver, "neighbour")
    everything = saver.list({"configurable": {"thread_id": "paged"}})
    want = sorted(stored, reverse=True)
    got = list(everything)
    assert _keys(got) == want
    assert [t.checkpoint["channel_values"]["n"] for t in got] == [int(cid[3:8]) for cid, _ in want]

    # `before` and `limit` cut the same order.
    before = {"configurable": {"thread_id": "paged", "checkpoint_ns": "", "checkpoint_id": want[60][0]}}
    tail = list(saver.list({"configurable": {"thread_id": "paged"}}, before=before, limit=50))
    assert _keys(tail) == [k for k in want if k[0] < want[60][0]][:50]


def test_thread_listing_walks_an_index_not_a_sort(saver: DurablePostgresSaver, pg_dsn: str, schema_name: str) -> None:
    _fill(saver, "paged")
    scan = HistoryScan(saver.codec, {"configurable": {"thread_id": "paged"}}, filter=None, before=None, limit=None)
    scan.cursor = ("1ef00020-0000-6000-8000-000000000000", "paged", "sub:1")  # as after a page
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'ANALYZE "{schema_name}".checkpoints')
        conn.execute("SET enable_seqscan = off")  # as on a table too big to scan
        page = Statements(schema_name).list_page(scan.page_where(), across_lanes=True)
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + page, scan.page_params()))
    assert "checkpoints_pkey" in plan and "checkpoints_subgraph_recent_idx" in plan, plan
    assert not re.search(r"(^|->\s+)Sort\s+\(", plan, re.M), plan  # an Incremental Sort of ties is fine
