"""A checkpoint that names a channel version with no stored value raises an integrity
error naming thread, checkpoint, channel and version: never a state with a channel missing.
A put whose held values were deleted meanwhile writes them again: its checkpoint is whole."""

from __future__ import annotations


import psycopg
import pytest
from psycopg import sql

from checkpoints import next_put
from langgraph_pg_durable import AsyncDurablePostgresSaver, CheckpointIntegrityError, DurablePostgresSaver, HistoryRewoundError

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths

DOC = {"a document": ["that", "is", "not", "a", "scalar"]}


def _two_steps(saver: DurablePostgresSaver, thread_id: str) -> tuple[dict, dict, dict[str, str]]:
    v1 = {"doc": saver.get_next_version(None, None), "notes": saver.get_next_version(None, None)}
    first = next_put(
        saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, {"doc": DOC, "notes": ["n"] * 2000}, v1, v1, step=0
    )
    v2 = {**v1, "doc": saver.get_next_version(v1["doc"], None)}
    second = next_put(saver, first, {"doc": {**DOC, "v": 2}, "notes": ["n"] * 2000}, v2, {"doc": v2["doc"]}, step=1)
    return first, second, v1


def _delete_value(pg_dsn: str, schema: str, thread_id: str, channel: str, version: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        deleted = conn.execute(
            sql.SQL("DELETE FROM {}.channel_values WHERE thread_id = %s AND channel = %s AND version = %s").format(sql.Identifier(schema)),
            (thread_id, channel, version),
        ).rowcount
    assert deleted == 1


def _assert_names(error: BaseException, *names: str) -> None:
    for name in names:
        assert name in str(error), (name, str(error))


@pytest.mark.parametrize("channel", ["doc", "notes"])  # a plain value, and a list in the delta layout
def test_a_value_row_deleted_by_hand_is_an_integrity_error_on_every_read(pg_dsn: str, schema_name: str, channel: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        first, second, v1 = _two_steps(saver, "t")
    _delete_value(pg_dsn, schema_name, "t", channel, v1[channel])
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        with pytest.raises(CheckpointIntegrityError) as failure:
            fresh.get_tuple(first)
        _assert_names(failure.value, "'t'", first["configurable"]["checkpoint_id"], repr(channel), v1[channel])
        with pytest.raises(CheckpointIntegrityError):
            list(fresh.list({"configurable": {"thread_id": "t"}}))
        if channel == "doc":  # the newer checkpoint holds another version of doc, still there
            assert fresh.get_tuple(second).checkpoint["channel_values"]["doc"] == {**DOC, "v": 2}


async def test_the_async_saver_raises_it_too(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        first, _, v1 = _two_steps(saver, "t")
    _delete_value(pg_dsn, schema_name, "t", "doc", v1["doc"])
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        with pytest.raises(CheckpointIntegrityError, match="'doc'"):
            await fresh.aget_tuple(first)


def test_a_put_after_delete_thread_writes_a_complete_checkpoint(pg_dsn: str, schema_name: str) -> None:
    """A run still writing when its thread is deleted: its next put holds versions that are
    gone, and writes them again rather than a checkpoint with channels missing."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        first, second, v1 = _two_steps(saver, "t")
        saver.delete_thread("t")
        v3 = {"doc": saver.get_next_version(v1["doc"], None), "notes": v1["notes"]}
        values = {"doc": {**DOC, "v": 3}, "notes": ["n"] * 2000}
        third = next_put(saver, second, values, v3, {"doc": v3["doc"]}, step=2)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(third).checkpoint["channel_values"] == values


def test_a_fork_from_a_pruned_checkpoint_writes_a_complete_checkpoint(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        first, _, v1 = _two_steps(saver, "t")
        saver.prune(["t"])  # the first checkpoint and its version of doc are gone
        fork_versions = {**v1, "notes": saver.get_next_version(v1["notes"], None)}
        values = {"doc": DOC, "notes": ["m"] * 2000}
        fork = next_put(saver, first, values, fork_versions, {"notes": fork_versions["notes"]}, step=1)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(fork).checkpoint["channel_values"] == values


@pytest.mark.parametrize("log", [True, False])
def test_writes_to_a_checkpoint_another_process_deleted_raise_and_write_nothing(pg_dsn: str, schema_name: str, log: bool) -> None:
    """The checkpoint a task's writes go to, which the saver saw committed, is gone (another
    process deleted the thread, or a failover rewound it): HistoryRewoundError, and no
    pending write, item or action row is written for a checkpoint that is not there."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, action_log=log) as saver:
        saver.setup()
        first, second, _ = _two_steps(saver, "t")
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute(saver.sql.delete_threads, {"thread_ids": ["t"]})
        with pytest.raises(HistoryRewoundError) as rewound:
            saver.put_writes(second, [("notes", ["more"]), ("doc", {"v": 3})], "task-1")
        assert rewound.value.missing_checkpoint_id == second["configurable"]["checkpoint_id"]
        assert rewound.value.newest_checkpoint_id is None and "put_writes of task 'task-1'" in str(rewound.value)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in ("checkpoint_writes", "channel_items", "action_log", "run_log"):
            count = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.{} WHERE thread_id = 't'").format(sql.Identifier(schema_name), sql.Identifier(table))
            )
            assert count.fetchone()[0] == 0, table
