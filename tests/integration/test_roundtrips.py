"""One network round trip for each put, put_writes and get_tuple, counted on the wire."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.round_trips import WireCounter  # noqa: E402  (reads the protocol, not just flights)


class Requests:
    """Round trips counted by request: a client message that asks, after the server answered."""

    def __init__(self, dsn: str) -> None:
        self.counter = WireCounter(dsn)
        self.dsn = self.counter.dsn
        self._seen = 0

    def reset(self) -> int:
        total = self.counter.counts()[0]
        count, self._seen = total - self._seen, total
        return count


@pytest.fixture
def proxy(pg_dsn: str):
    proxy = Requests(pg_dsn)
    yield proxy
    proxy.counter.close()


def _checkpoint(saver, step: int, previous: dict | None):
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(previous["messages"] if previous else None, None)
    checkpoint["channel_values"] = {"messages": [f"m{i}" for i in range(step + 1)], "step": step}
    checkpoint["channel_versions"] = {"messages": version, "step": version}
    return checkpoint


def test_sync_saver_round_trips(pg_dsn: str, schema_name: str, proxy: Requests) -> None:
    with psycopg.connect(proxy.dsn, autocommit=True) as conn:
        saver = DurablePostgresSaver(conn, schema=schema_name)
        saver.setup()
        config = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
        versions = None
        # Past psycopg's prepare threshold (5) too: preparing must not add a trip.
        for step in range(8):
            checkpoint = _checkpoint(saver, step, versions)
            versions = checkpoint["channel_versions"]
            proxy.reset()
            config = saver.put(config, checkpoint, {"source": "loop", "step": step}, versions)
            assert proxy.reset() == 1, "put"
            saver.put_writes(config, [("messages", ["x"]), ("step", step + 1)], str(uuid.uuid4()))
            assert proxy.reset() == 1, "put_writes"
            fetched = saver.get_tuple(config)
            assert proxy.reset() == 1, "get_tuple"
            assert fetched.checkpoint["channel_values"]["step"] == step
            latest = saver.get_tuple({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
            assert proxy.reset() == 1, "get_tuple (latest)"
            assert latest.config == config


async def test_async_saver_round_trips(pg_dsn: str, schema_name: str, proxy: Requests) -> None:
    async with await psycopg.AsyncConnection.connect(proxy.dsn, autocommit=True) as conn:
        saver = AsyncDurablePostgresSaver(conn, schema=schema_name)
        await saver.setup()
        config = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
        versions = None
        for step in range(8):
            checkpoint = _checkpoint(saver, step, versions)
            versions = checkpoint["channel_versions"]
            proxy.reset()
            config = await saver.aput(config, checkpoint, {"source": "loop", "step": step}, versions)
            assert proxy.reset() == 1, "aput"
            await saver.aput_writes(config, [("messages", ["x"])], str(uuid.uuid4()))
            assert proxy.reset() == 1, "aput_writes"
            fetched = await saver.aget_tuple(config)
            assert proxy.reset() == 1, "aget_tuple"
            assert fetched.pending_writes[0][2] == ["x"]


@pytest.mark.parametrize("citus", [False, True], ids=["postgres", "citus installed"])
def test_a_saver_on_a_schema_set_up_before_writes_its_first_put_in_one_round_trip(
    pg_dsn: str, schema_name: str, proxy: Requests, citus: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saver that never ran setup() does not know whether its tables are distributed: its
    first put's row says whether Citus is installed (no round trip of its own). Where it is,
    the next write asks which tables are distributed, once."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as admin:
        admin.setup()
    with psycopg.connect(proxy.dsn, autocommit=True) as conn:
        saver = DurablePostgresSaver(conn, schema=schema_name, routed_writes=None)
        if citus:  # what a server with Citus says (its catalog is not here): installed, this schema not distributed
            monkeypatch.setattr(saver.sql, "tables_distributed", "SELECT %(table)s::text IS NULL")
            installed = {k: v.replace("pg_catalog.pg_dist_partition", "pg_catalog.pg_class") for k, v in saver.sql.put.items()}
            monkeypatch.setattr(saver.sql, "put", installed)
        assert saver.routed_writes is None
        config = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
        checkpoint = _checkpoint(saver, 0, None)
        proxy.reset()
        config = saver.put(config, checkpoint, {"source": "input", "step": 0}, checkpoint["channel_versions"])
        assert proxy.reset() == 1
        assert saver.routed_writes is (None if citus else False)
        saver.put_writes(config, [("messages", ["x"]), ("step", 1)], str(uuid.uuid4()))
        assert proxy.reset() == (2 if citus else 1)  # with Citus: which tables are distributed (here: none)
        assert saver.routed_writes is False
