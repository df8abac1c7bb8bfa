"""Safe deserialization by default: a planted row that names anything but a data type of an
imported module runs nothing and reads back as an error naming thread, checkpoint and
channel; the graph's own data types read back with no option; a value the read would refuse
is refused on write."""

from __future__ import annotations

import dataclasses
import enum
import sys
from pathlib import Path
from typing import Any, NamedTuple

import ormsgpack
import psycopg
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql
from pydantic import BaseModel

from checkpoints import first_put
from langgraph_pg_durable import DeserializationError, DurablePostgresSaver, DurableSerializer, SerializationError

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
    assert "builtins.exec" in message and "is not a class" in message and expected in message
    assert "'t'" in message and config["configurable"]["checkpoint_id"] in message
    assert not marker.exists()
    # The same row under LangGraph's permissive serializer would have run it: the test's payload is live.
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", payload))
    assert marker.exists()


class Priority(enum.Enum):
    HIGH = "high"


class Labels(NamedTuple):
    team: str
    area: str


class Reply(BaseModel):
    text: str
    ticket: Ticket


class NotData:
    """A class with `_asdict`, which LangGraph's serializer stores as its fields, but no data
    type: its constructor is not its fields."""

    def __init__(self) -> None:
        self.secret = 1

    def _asdict(self) -> dict[str, int]:
        return {"secret": self.secret}


def test_the_graphs_own_data_types_read_back_with_no_option(pg_dsn: str, schema_name: str) -> None:
    values = {
        "ticket": Ticket(7, "printer on fire"),
        "context": {"priority": Priority.HIGH, "labels": Labels("ops", "printers")},
        "reply": Reply(text="on it", ticket=Ticket(8, "toner")),
    }
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        config = first_put(saver, "t", values)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(config).checkpoint["channel_values"] == values


def test_a_class_defined_in_a_function_reads_back_as_its_fields(pg_dsn: str, schema_name: str) -> None:
    class Local(BaseModel):
        a: int

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        config = first_put(saver, "t", {"local": Local(a=1)})
        assert saver.get_tuple(config).checkpoint["channel_values"] == {"local": {"a": 1}}


def test_a_value_its_read_would_refuse_is_refused_on_write_and_nothing_is_stored(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        config = first_put(saver, "t", {"doc": 1})
        with pytest.raises(SerializationError) as refused:
            first_put(saver, "t2", {"box": {"inner": NotData()}})
        assert saver.get_tuple({"configurable": {"thread_id": "t2"}}) is None
        assert saver.get_tuple(config) is not None
    message = str(refused.value)
    assert "channel 'box'" in message and f"{__name__}.NotData" in message and "not a data type" in message
    assert "allowed_types=[NotData]" in message
    # Allowed explicitly, it is stored (and reads back as LangGraph rebuilds it: its fields).
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, allowed_types=[NotData]) as allowing:
        config = first_put(allowing, "t3", {"box": NotData()})
        assert allowing.get_tuple(config) is not None


def test_strict_keeps_the_allowlist_alone(pg_dsn: str, schema_name: str) -> None:
    ticket = Ticket(7, "printer on fire")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=DurableSerializer(strict=True)) as strict:
        strict.setup()
    with DurablePostgresSaver.from_conn_string(
        pg_dsn, schema=schema_name, serde=DurableSerializer(strict=True), allowed_types=[Ticket]
    ) as allowing:
        config = first_put(allowing, "t", {"ticket": ticket})
        assert allowing.get_tuple(config).checkpoint["channel_values"]["ticket"] == ticket
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=DurableSerializer(strict=True)) as strict:
        with pytest.raises(DeserializationError, match=r"Ticket.*allowed_types"):
            strict.get_tuple(config)
    # Opting out: LangGraph's permissive serializer, given explicitly.
    with DurablePostgresSaver.from_conn_string(
        pg_dsn, schema=schema_name, serde=JsonPlusSerializer(allowed_msgpack_modules=True)
    ) as permissive:
        assert permissive.get_tuple(config).checkpoint["channel_values"]["ticket"] == ticket


@pytest.mark.parametrize(
    ("module", "name", "reason"),
    [
        ("os", "system", "is not a class"),
        ("subprocess", "Popen", "is not a data type"),
        ("lgpd_planted_module", "Ticket", "is not imported"),
    ],
)
def test_a_planted_row_naming_anything_but_an_imported_data_type_is_refused(
    pg_dsn: str, schema_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, name: str, reason: str
) -> None:
    import subprocess  # noqa: F401  (imported: the refusal is for what it is, not for where)

    # A real module on the path that, imported, leaves a marker: the read must not import it.
    marker = tmp_path / "imported"
    (tmp_path / "lgpd_planted_module.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\nimport dataclasses\n@dataclasses.dataclass\nclass Ticket:\n    n: int\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        config = first_put(saver, "t", {"doc": {"a": 1}})
    planted = ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb([module, name, ["echo ran"]])))
    _update(pg_dsn, schema_name, "UPDATE {s}.channel_values SET value = %s WHERE thread_id = 't' AND channel = 'doc'", planted)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        with pytest.raises(DeserializationError) as refused:
            fresh.get_tuple(config)
    assert f"{module}.{name}" in str(refused.value) and reason in str(refused.value)
    assert not marker.exists() and "lgpd_planted_module" not in sys.modules


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
