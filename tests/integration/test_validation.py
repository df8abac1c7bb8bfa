"""Bad input from a caller ends in a named error, and nothing stored before is lost."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from psycopg import errors as pg_errors
from psycopg import sql

from checkpoints import first_put
from langgraph_pg_durable import (
    ConfigError,
    DeserializationError,
    DurablePostgresSaver,
    StatementError,
)


def _put(saver: DurablePostgresSaver, thread_id: object, value: str) -> dict:
    return first_put(saver, thread_id, {"v": value})


@pytest.fixture
def saver(pg_dsn: str, schema_name: str):
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def test_copy_thread_into_a_thread_that_has_checkpoints_is_refused(saver: DurablePostgresSaver, pg_dsn: str, schema_name: str) -> None:
    _put(saver, "source", "from the source")
    target = _put(saver, "target", "the target's own")
    with pytest.raises(ConfigError, match="'target' has checkpoints already.*nothing was copied"):
        saver.copy_thread("source", "target")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(target).checkpoint["channel_values"] == {"v": "the target's own"}
        assert [t.config for t in fresh.list({"configurable": {"thread_id": "target"}})] == [target]
        assert fresh.get_tuple({"configurable": {"thread_id": "source"}}).checkpoint["channel_values"] == {"v": "from the source"}
    saver.copy_thread("source", "empty")  # a thread with no checkpoints is a fine target
    assert saver.get_tuple({"configurable": {"thread_id": "empty"}}).checkpoint["channel_values"] == {"v": "from the source"}


def test_a_key_the_server_refuses_fails_at_once_with_a_short_named_error(saver: DurablePostgresSaver) -> None:
    kept = _put(saver, "kept", "safe")
    huge = "t" * (1 << 20)
    with pytest.raises(StatementError) as refused:
        _put(saver, huge, "x")
    assert refused.value.sqlstate == "54000" and isinstance(refused.value.__cause__, pg_errors.ProgramLimitExceeded)
    message = str(refused.value)
    assert "not retried" in message and "put of checkpoint" in message and len(message) < 1_000
    assert saver.get_tuple(kept).checkpoint["channel_values"] == {"v": "safe"}


@pytest.mark.parametrize("limit", ["5", -1, 1.5, True])
def test_a_bad_limit_is_named(saver: DurablePostgresSaver, limit: object) -> None:
    _put(saver, "t", "x")
    with pytest.raises(ConfigError, match="limit"):
        list(saver.list(None, limit=limit))  # type: ignore[arg-type]


@pytest.mark.parametrize("thread_id", [{"a": 1}, ["t"], 1.5, b"t", None.__class__, True])
def test_a_thread_id_of_another_type_is_refused_not_coerced(saver: DurablePostgresSaver, thread_id: object) -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        saver.get_tuple({"configurable": {"thread_id": thread_id}})
    with pytest.raises(ConfigError, match="thread_id"):
        _put(saver, thread_id, "x")  # type: ignore[arg-type]


def test_int_and_uuid_thread_ids_are_kept_as_their_text(saver: DurablePostgresSaver) -> None:
    numeric = _put(saver, 42, "by int")  # type: ignore[arg-type]
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    by_uuid = _put(saver, ident, "by uuid")  # type: ignore[arg-type]
    assert numeric["configurable"]["thread_id"] == "42"
    assert saver.get_tuple({"configurable": {"thread_id": "42"}}).checkpoint["channel_values"] == {"v": "by int"}
    assert saver.get_tuple({"configurable": {"thread_id": ident}}).config == by_uuid
    saver.delete_thread(42)  # type: ignore[arg-type]
    assert saver.get_tuple({"configurable": {"thread_id": "42"}}) is None


def test_a_lone_surrogate_is_named(saver: DurablePostgresSaver) -> None:
    with pytest.raises(ConfigError, match="surrogate"):
        _put(saver, "t\ud800", "x")
    checkpoint = empty_checkpoint()
    with pytest.raises(ConfigError, match="metadata holds 'bad .udc80', with a lone surrogate"):
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint, {"source": "input", "step": -1, "note": "bad \udc80"}, {}
        )
    with pytest.raises(ConfigError, match="filter holds"):
        list(saver.list(None, filter={"note": "bad \udc80"}))


def _nested(depth: int) -> dict:
    doc: dict = {"leaf": 1}
    for _ in range(depth):
        doc = {"k": doc}
    return doc


def test_deeply_nested_metadata_and_filters_are_named_not_a_recursion_error(saver: DurablePostgresSaver) -> None:
    kept = _put(saver, "kept", "safe")
    checkpoint = empty_checkpoint()
    with pytest.raises(ConfigError, match="metadata nests deeper than 64"):
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            checkpoint,
            {"source": "input", "step": -1, "deep": _nested(5000)},
            {},
        )
    with pytest.raises(ConfigError, match="filter nests deeper than 64"):
        list(saver.list(None, filter={"deep": _nested(5000)}))
    _put(saver, "ok", "x")  # 60 levels are fine
    assert list(saver.list(None, filter={"deep": _nested(60)})) == []
    assert saver.get_tuple(kept).checkpoint["channel_values"] == {"v": "safe"}


def test_a_config_key_that_is_not_a_string_is_named(saver: DurablePostgresSaver) -> None:
    checkpoint = empty_checkpoint()
    with pytest.raises(ConfigError, match="not a string: 7"):
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": "", 7: "x"}}, checkpoint, {"source": "input", "step": -1}, {})


@pytest.mark.parametrize("broken", ["no id", "no channel_values", "not a mapping"])
def test_a_checkpoint_without_its_fields_is_named(saver: DurablePostgresSaver, broken: str) -> None:
    checkpoint: object = empty_checkpoint()
    if broken == "no id":
        del checkpoint["id"]  # type: ignore[attr-defined]
    elif broken == "no channel_values":
        del checkpoint["channel_values"]  # type: ignore[attr-defined]
    else:
        checkpoint = ["not", "a", "checkpoint"]
    with pytest.raises(ConfigError, match="the checkpoint has no"):
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            checkpoint,  # type: ignore[arg-type]
            {"source": "input", "step": -1},
            {},
        )


# -- what cannot be decoded is named ---------------------------------------------------------


def _execute(pg_dsn: str, statement: str, *args: object) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(statement, args)


def test_a_wrong_encryption_key_is_named_by_thread_checkpoint_and_channel(pg_dsn: str, schema_name: str) -> None:
    right = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    wrong = EncryptedSerializer.from_pycryptodome_aes(key=b"fedcba9876543210")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=right) as saver:
        saver.setup()
        config = _put(saver, "secret", "a long enough value " * 20)
        saver.put_writes(config, [("v", "w1"), ("other", "w2")], "task")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=wrong) as other:
        with pytest.raises(DeserializationError) as failure:
            other.get_tuple(config)
    message = str(failure.value)
    assert "'secret'" in message and config["configurable"]["checkpoint_id"] in message
    assert "channel 'v'" in message or "task 'task'" in message
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=right) as fresh:
        assert fresh.get_tuple(config).checkpoint["channel_values"] == {"v": "a long enough value " * 20}


@pytest.mark.parametrize("where", ["value", "packed writes"])
def test_planted_bytes_are_named_and_other_threads_still_read(pg_dsn: str, schema_name: str, where: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        kept = _put(saver, "kept", "x" * 300)
        config = _put(saver, "t", "y" * 300)
        saver.put_writes(config, [("a", 1), ("b", 2)], "task")
    s = sql.Identifier(schema_name).as_string()
    if where == "value":
        _execute(pg_dsn, f"UPDATE {s}.channel_values SET value = %s WHERE thread_id = 't'", b"\xc1\xc1 not msgpack")
        expected = "channel 'v'"
    else:
        _execute(pg_dsn, f"UPDATE {s}.checkpoint_writes SET value = %s WHERE thread_id = 't'", b"\x93\x01\x02\x03")
        expected = "task 'task'"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        with pytest.raises(DeserializationError, match=expected):
            fresh.get_tuple(config)
        with pytest.raises(DeserializationError, match=expected):
            list(fresh.list({"configurable": {"thread_id": "t"}}))
        assert fresh.get_tuple(kept).checkpoint["channel_values"] == {"v": "x" * 300}
