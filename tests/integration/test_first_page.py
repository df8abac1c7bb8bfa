"""A walk's first page of a whole thread comes with its details in one statement
(sql.reads.first_page): the same tuples, in the same order, as the page and its details
read apart, and the pages after it read as before."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.core.history import HistoryScan

THREAD = "walk"
STEPS = 12


def _thread(saver: DurablePostgresSaver) -> None:
    """Two namespaces whose checkpoints share ids (the page orders them by namespace
    after the id), each holding a growing list and a scalar, with a pending write each."""
    for ns in ("", "child:1"):
        config: dict[str, Any] = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ns}}
        items: list[str] = []
        version = None
        for step in range(STEPS):
            items = [*items, f"{ns} item {step}"]
            version = saver.get_next_version(version, None)
            checkpoint = empty_checkpoint()
            checkpoint["id"] = f"1ef00000-0000-6000-8000-{step:012d}"
            checkpoint["channel_values"] = {"items": items, "step": step}
            checkpoint["channel_versions"] = {"items": version, "step": version}
            config = saver.put(config, checkpoint, {"source": "loop", "step": step, "ns": ns}, {"items": version, "step": version})
            saver.put_writes(config, [("items", [f"{ns} pending {step}"])], task_id=f"task-{step}")


def _read(saver: DurablePostgresSaver, lane: str | None = None, **options: Any) -> list[tuple[Any, ...]]:
    configurable = {"thread_id": THREAD} if lane is None else {"thread_id": THREAD, "checkpoint_ns": lane}
    found = saver.list({"configurable": configurable}, **options)
    return [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes) for t in found]


def _sends(saver: DurablePostgresSaver) -> list[str]:
    sent: list[str] = []
    send = saver._send

    def counting(conn: Any, query: Any, **options: Any) -> Any:
        sent.append(query.operation)
        return send(conn, query, **options)

    saver._send = counting  # type: ignore[method-assign]
    return sent


@pytest.mark.parametrize(
    "options",
    [
        {"limit": 5},
        {"limit": 2 * STEPS},
        {},
        {"filter": {"ns": "child:1"}},
        {"before": {"configurable": {"checkpoint_id": "1ef00000-0000-6000-8000-000000000007"}}},
    ],
    ids=["limit-within-a-page", "limit-of-every-checkpoint", "unlimited", "filtered", "before"],
)
def test_the_first_page_with_its_details_reads_as_the_two_statements_did(
    pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        _thread(saver)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        sent = _sends(fresh)
        together = _read(fresh, **options)
        statements = len(sent)
    monkeypatch.setattr(HistoryScan, "first_in_one", property(lambda self: False))
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        sent = _sends(fresh)
        apart = _read(fresh, **options)
    assert together == apart and together
    namespaces = [t[0]["configurable"]["checkpoint_ns"] for t in together[:2]]
    assert namespaces == (["child:1"] * 2 if "filter" in options else ["child:1", ""])  # a shared id: by namespace, descending
    # The first page's two statements are one, for a walk of the whole thread; a filter of
    # the whole thread, or a `before`, keeps the two (a where the warm-up does not plan: see
    # HistoryScan.first_in_one).
    assert statements == len(sent) - (0 if "filter" in options or "before" in options else 1)


@pytest.mark.parametrize("lane", ["", "child:1"])
def test_a_lanes_filtered_walk_reads_its_first_page_with_its_details(
    pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch, lane: str
) -> None:
    # (The saver's warm-up plans this where too: see HistoryScan.first_in_one.)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        _thread(saver)
    wanted = {"ns": lane, "step": 3}
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        sent = _sends(fresh)
        together = _read(fresh, lane, filter=wanted)
        statements = len(sent)
    monkeypatch.setattr(HistoryScan, "first_in_one", property(lambda self: False))
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        sent = _sends(fresh)
        apart = _read(fresh, lane, filter=wanted)
    assert together == apart and [t[2]["step"] for t in together] == [3]
    assert statements == len(sent) - 1


def test_a_limit_within_the_first_page_is_one_statement(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        _thread(saver)
        sent = _sends(saver)
        found = _read(saver, limit=10)
    assert len(found) == 10 and sent == ["list"]
