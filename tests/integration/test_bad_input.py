"""Bad input gets an error naming the culprit, and nothing stored is lost or corrupted."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import (
    ConfigError,
    DurablePostgresSaver,
    SchemaVersionError,
    SerializationError,
)

NASTY = "it's a \"quoted\" ; DROP TABLE checkpoints; -- \\ %s %(x)s $1 {schema} ' OR '1'='1"


@pytest.fixture
def saver(pg_dsn: str, schema_name: str):
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def _put(saver, config, values, metadata=None):
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {k: version for k in values}
    return saver.put(config, checkpoint, metadata or {"source": "loop", "step": 0}, dict(checkpoint["channel_versions"]))


@pytest.mark.parametrize(
    "config",
    [{}, {"configurable": {}}, {"configurable": {"checkpoint_ns": ""}}, {"configurable": {"thread_id": ""}}],
)
def test_missing_thread_id_is_named(saver, config) -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        saver.get_tuple(config)
    with pytest.raises(ConfigError, match="thread_id"):
        _put(saver, config, {"a": 1})
    if config:
        with pytest.raises(ConfigError, match="thread_id"):
            list(saver.list(config))
    else:  # an empty config lists every thread, as the official saver's list() does
        assert list(saver.list(config)) == list(saver.list(None))


def test_put_writes_without_checkpoint_id_is_named(saver) -> None:
    with pytest.raises(ConfigError, match="checkpoint_id"):
        saver.put_writes({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, [("a", 1)], "task")


def test_nul_characters_round_trip_in_values_and_metadata(saver) -> None:
    config = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    value = {"text": "before\x00after", "nested": ["\x00", {"k\x00ey": "v\x00"}]}
    metadata = {"source": "loop", "step": 0, "note": "a\x00b", "deep": {"x\x00": ["y\x00z"]}}
    stored = _put(saver, config, {"doc": value, "plain": "\x00"}, metadata)
    saver.put_writes(stored, [("doc", "w\x00rite")], "task-1")

    fetched = saver.get_tuple(stored)
    assert fetched.checkpoint["channel_values"] == {"doc": value, "plain": "\x00"}
    assert fetched.metadata["note"] == "a\x00b"
    assert fetched.metadata["deep"] == {"x\x00": ["y\x00z"]}
    assert fetched.pending_writes == [("task-1", "doc", "w\x00rite")]
    # A filter carrying NUL finds the row, and a near miss does not.
    assert [t.config for t in saver.list(config, filter={"note": "a\x00b"})] == [stored]
    assert list(saver.list(config, filter={"note": "a\\u0000b"})) == []
    assert list(saver.list(config, filter={"note": "ab"})) == []


def test_unserializable_value_names_the_channel_and_stores_nothing(saver) -> None:
    config = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    first = _put(saver, config, {"ok": [1, 2, 3]})
    config_next = {"configurable": dict(first["configurable"])}
    with pytest.raises(SerializationError, match="'tool_handle'"):
        _put(saver, config_next, {"ok": [1], "tool_handle": threading.Lock()})
    with pytest.raises(SerializationError, match="'scratch'") as refused:
        saver.put_writes(first, [("fine", 1), ("scratch", threading.Lock())], "task-1")
    # The rest of the name, built only once the error is raised: the thread, checkpoint and task.
    thread_id, checkpoint_id = first["configurable"]["thread_id"], first["configurable"]["checkpoint_id"]
    assert all(repr(part) in str(refused.value) for part in (thread_id, checkpoint_id, "task-1")), refused.value
    latest = saver.get_tuple({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
    assert latest.config == first
    assert latest.checkpoint["channel_values"] == {"ok": [1, 2, 3]}
    assert latest.pending_writes == []


def test_ids_and_metadata_keys_with_sql_metacharacters_are_stored_verbatim(saver) -> None:
    config = {"configurable": {"thread_id": NASTY, "checkpoint_ns": NASTY + ":ns"}}
    metadata = {"source": "loop", "step": 1, NASTY: NASTY, "a'b\"c": "d'e\"f"}
    stored = _put(saver, config, {NASTY: NASTY}, metadata)
    saver.put_writes(stored, [(NASTY, NASTY)], NASTY, task_path=NASTY)

    fetched = saver.get_tuple(stored)
    assert fetched.config["configurable"]["thread_id"] == NASTY
    assert fetched.config["configurable"]["checkpoint_ns"] == NASTY + ":ns"
    assert fetched.checkpoint["channel_values"] == {NASTY: NASTY}
    assert fetched.metadata[NASTY] == NASTY and fetched.metadata["a'b\"c"] == "d'e\"f"
    assert fetched.pending_writes == [(NASTY, NASTY, NASTY)]
    found = list(saver.list(config, filter={"a'b\"c": "d'e\"f", NASTY: NASTY}))
    assert [t.config for t in found] == [stored]

    copy_target = NASTY + " copy"
    saver.copy_thread(NASTY, copy_target)
    assert saver.get_tuple({"configurable": {"thread_id": copy_target, "checkpoint_ns": NASTY + ":ns"}}) is not None
    saver.delete_thread(NASTY)
    assert saver.get_tuple(stored) is None


def test_nul_in_thread_id_is_refused_by_name(saver) -> None:
    with pytest.raises(ConfigError, match="thread_id.*NUL"):
        saver.get_tuple({"configurable": {"thread_id": "a\x00b"}})


def test_unknown_prune_strategy_is_named(saver) -> None:
    with pytest.raises(ConfigError, match="'keep_some'"):
        saver.prune(["t"], strategy="keep_some")


def test_schema_from_a_newer_version_is_refused_and_left_alone(pg_dsn: str, saver, schema_name: str) -> None:
    config = {"configurable": {"thread_id": "survivor", "checkpoint_ns": ""}}
    stored = _put(saver, config, {"a": "kept"})
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f'INSERT INTO "{schema_name}".schema_migrations (version, name) VALUES (999, %s)',
            ("from_the_future",),
        )
        before = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
            (schema_name,),
        ).fetchall()
    with pytest.raises(SchemaVersionError, match=f"{schema_name}.*999.*[Uu]pgrade"):
        saver.setup()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        after = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
            (schema_name,),
        ).fetchall()
    assert after == before
    assert saver.get_tuple(stored).checkpoint["channel_values"] == {"a": "kept"}


def test_bad_schema_name_is_refused_before_any_io(pg_dsn: str) -> None:
    with pytest.raises(ConfigError, match="schema"):
        DurablePostgresSaver(psycopg.Connection, schema="")  # type: ignore[arg-type]
