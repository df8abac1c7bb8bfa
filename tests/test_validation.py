"""Bad input from a caller ends in a named error, and nothing stored before is lost."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import errors as pg_errors

from langgraph_pg_durable import ConfigError, DurablePostgresSaver, StatementError


def _put(saver: DurablePostgresSaver, thread_id: str, value: str) -> dict:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"v": value}
    checkpoint["channel_versions"] = {"v": saver.get_next_version(None, None)}
    return saver.put({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, checkpoint,
                     {"source": "input", "step": -1}, dict(checkpoint["channel_versions"]))


@pytest.fixture
def saver(pg_dsn: str, schema_name: str):
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def test_copy_thread_into_a_thread_that_has_checkpoints_is_refused(saver: DurablePostgresSaver, pg_dsn: str,
                                                                   schema_name: str) -> None:
    _put(saver, "source", "from the source")
    target = _put(saver, "target", "the target's own")
    with pytest.raises(ConfigError, match="'target' has checkpoints already.*nothing was copied"):
        saver.copy_thread("source", "target")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(target).checkpoint["channel_values"] == {"v": "the target's own"}
        assert [t.config for t in fresh.list({"configurable": {"thread_id": "target"}})] == [target]
        assert fresh.get_tuple({"configurable": {"thread_id": "source"}}).checkpoint["channel_values"] == {
            "v": "from the source"}
    saver.copy_thread("source", "empty")  # a thread with no checkpoints is a fine target
    assert saver.get_tuple({"configurable": {"thread_id": "empty"}}).checkpoint["channel_values"] == {
        "v": "from the source"}


def test_a_key_the_server_refuses_fails_at_once_with_a_short_named_error(saver: DurablePostgresSaver) -> None:
    kept = _put(saver, "kept", "safe")
    huge = "t" * (1 << 20)
    with pytest.raises(StatementError) as refused:
        _put(saver, huge, "x")
    assert refused.value.sqlstate == "54000" and isinstance(refused.value.__cause__, pg_errors.ProgramLimitExceeded)
    message = str(refused.value)
    assert "not retried" in message and "put of checkpoint" in message and len(message) < 1_000
    assert saver.get_tuple(kept).checkpoint["channel_values"] == {"v": "safe"}

