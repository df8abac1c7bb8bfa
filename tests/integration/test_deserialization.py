"""Safe deserialization by default: a planted row that names a type outside the allowlist
runs nothing and reads back as an error naming thread, checkpoint and channel."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import ormsgpack
import psycopg
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql

from checkpoints import first_put
from langgraph_pg_durable import DeserializationError, DurablePostgresSaver

EXT_CONSTRUCTOR_POS_ARGS = 1  # LangGraph's msgpack ext code for "call module.name(*args)"


@dataclasses.dataclass
class Ticket:
    """A type of the user's own, stored in graph state."""

    number: int
    title: str


def exploit(marker: Path) -> bytes:
    """msgpack that, decoded by a permissive JsonPlusSerializer, runs code writing `marker`."""
    code = f"open({str(marker)!r}, 'w').write('ran')"
    return ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["builtins", "exec", [code]])))


def _update(pg_dsn: str, schema: str, statement: str, *args: Any) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        changed = conn.execute(sql.SQL(statement).format(s=sql.Identifier(schema)), args).rowcount
    assert changed >= 1


@pytest.mark.parametrize("planted_in", ["channel_values", "channel_items", "packed writes"])
def test_a_planted_call_runs_nothing_and_is_named(pg_dsn: str, schema_name: str, tmp_path: Path, planted_in: str) -> None:
    marker = tmp_path / "ran"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        kept = first_put(saver, "kept", {"doc": {"safe": True}})
        config = first_put(saver, "t", {"doc": {"a": 1}, "items": [f"item {i}" for i in range(20)]})
        saver.put_writes(config, [("doc", {"w": 1}), ("other", {"w": 2})], "task")
    payload = exploit(marker)
    if planted_in == "channel_values":
        _update(pg_dsn, schema_name, "UPDATE {s}.channel_values SET value = %s WHERE thread_id = 't' AND channel = 'doc'", payload)
        expected = "channel 'doc'"
    elif planted_in == "channel_items":
        _update(pg_dsn, schema_name, "UPDATE {s}.channel_items SET type = 'msgpack', value = %s WHERE thread_id = 't' AND idx = 3", payload)
        expected = "channel 'items'"
    else:
        packed = ormsgpack.packb([[0, "doc", "msgpack", payload], [1, "other", "msgpack", ormsgpack.packb(2)]])
        _update(pg_dsn, schema_name, "UPDATE {s}.checkpoint_writes SET value = %s WHERE thread_id = 't'", packed)
        expected = "task 'task'"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        with pytest.raises(DeserializationError) as refused:
            fresh.get_tuple(config)
        with pytest.raises(DeserializationError):
            list(fresh.list({"configurable": {"thread_id": "t"}}))
        assert fresh.get_tuple(kept).checkpoint["channel_values"] == {"doc": {"safe": True}}
    message = str(refused.value)
    assert "builtins.exec" in message and "allowlist" in message and expected in message
    assert "'t'" in message and config["configurable"]["checkpoint_id"] in message
    assert not marker.exists()
    # The same row under LangGraph's permissive serializer would have run it: the test's payload is live.
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", payload))
    assert marker.exists()


def test_the_users_own_types_are_added_with_allowed_types(pg_dsn: str, schema_name: str) -> None:
    ticket = Ticket(7, "printer on fire")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, allowed_types=[Ticket]) as saver:
        saver.setup()
        config = first_put(saver, "t", {"ticket": ticket})
        assert saver.get_tuple(config).checkpoint["channel_values"]["ticket"] == ticket
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as strict:
        with pytest.raises(DeserializationError, match=r"Ticket.*allowed_types"):
            strict.get_tuple(config)
    # Opting out: LangGraph's permissive serializer, given explicitly.
    with DurablePostgresSaver.from_conn_string(
        pg_dsn, schema=schema_name, serde=JsonPlusSerializer(allowed_msgpack_modules=True)
    ) as permissive:
        assert permissive.get_tuple(config).checkpoint["channel_values"]["ticket"] == ticket


def test_langchain_messages_and_langgraph_types_need_no_allowlist(pg_dsn: str, schema_name: str) -> None:
    from datetime import datetime, timezone
    from uuid import UUID

    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.types import Interrupt, Send

    values = {
        "messages": [HumanMessage("hi", id="1"), AIMessage("hello", id="2"), ToolMessage("42", tool_call_id="c", id="3")],
        "when": datetime(2026, 12, 1, tzinfo=timezone.utc),
        "who": UUID(int=7),
        "tags": {"a", "b"},
        "sends": [Send("node", {"x": 1})],
        "pause": Interrupt(value="ask", id="i"),
    }
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        config = first_put(saver, "t", values)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(config).checkpoint["channel_values"] == values
