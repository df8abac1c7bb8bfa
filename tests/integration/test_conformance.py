"""LangGraph's own conformance suite, every capability group, for both savers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths


class SyncSaverAsAsync(BaseCheckpointSaver):
    """Drives a sync saver from the suite's async calls, each in a worker thread."""

    def __init__(self, saver: DurablePostgresSaver) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver

    async def aget_tuple(self, config):
        return await asyncio.to_thread(self.saver.get_tuple, config)

    async def alist(self, config, *, filter=None, before=None, limit=None) -> AsyncIterator[Any]:
        items = await asyncio.to_thread(lambda: list(self.saver.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):
        return await asyncio.to_thread(self.saver.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):
        return await asyncio.to_thread(self.saver.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id):
        return await asyncio.to_thread(self.saver.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]):
        return await asyncio.to_thread(self.saver.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id, target_thread_id):
        return await asyncio.to_thread(self.saver.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids, *, strategy="keep_latest"):
        return await asyncio.to_thread(self.saver.prune, thread_ids, strategy=strategy)

    def get_next_version(self, current, channel=None):
        return self.saver.get_next_version(current, channel)


def assert_every_group_passed(report) -> None:
    report.print_report()
    assert report.passed_all_base(), report.to_dict()
    for capability in Capability:
        result = report.results.get(capability.value)
        assert result is not None, f"{capability.value} did not run"
        assert result.detected, f"{capability.value} was not detected"
        assert result.passed is True, f"{capability.value}: {result.failures}"
        assert result.tests_passed > 0 and result.tests_failed == 0


async def test_async_saver_passes_every_group(pg_dsn: str, schema_name: str) -> None:
    @checkpointer_test(name="AsyncDurablePostgresSaver")
    async def factory():
        async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
            await saver.setup()
            yield saver

    assert_every_group_passed(await validate(factory))


async def test_sync_saver_passes_every_group(pg_dsn: str, schema_name: str) -> None:
    @checkpointer_test(name="DurablePostgresSaver")
    async def factory():
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
            saver.setup()
            yield SyncSaverAsAsync(saver)

    assert_every_group_passed(await validate(factory))


# The pool the official saver's documentation prescribes, which users switching over bring.
DOCS_POOL_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


async def test_async_saver_on_the_official_docs_pool_passes_every_group(pg_dsn: str, schema_name: str) -> None:
    @checkpointer_test(name="AsyncDurablePostgresSaver(dict_row, prepare_threshold=0 pool)")
    async def factory():
        async with AsyncConnectionPool(pg_dsn, max_size=10, kwargs=DOCS_POOL_KWARGS, open=False) as pool:
            saver = AsyncDurablePostgresSaver(pool, schema=schema_name)
            await saver.setup()
            yield saver

    assert_every_group_passed(await validate(factory))


async def test_sync_saver_on_the_official_docs_pool_passes_every_group(pg_dsn: str, schema_name: str) -> None:
    @checkpointer_test(name="DurablePostgresSaver(dict_row, prepare_threshold=0 pool)")
    async def factory():
        with ConnectionPool(pg_dsn, max_size=10, kwargs=DOCS_POOL_KWARGS) as pool:
            saver = DurablePostgresSaver(pool, schema=schema_name)
            saver.setup()
            yield SyncSaverAsAsync(saver)

    assert_every_group_passed(await validate(factory))


@pytest.mark.parametrize("autocommit", [True, False])
async def test_sync_saver_on_one_connection_passes_every_group(pg_dsn: str, schema_name: str, autocommit: bool) -> None:
    import psycopg

    @checkpointer_test(name="DurablePostgresSaver(Connection)")
    async def factory():
        with psycopg.connect(pg_dsn, autocommit=autocommit) as conn:
            saver = DurablePostgresSaver(conn, schema=schema_name)
            saver.setup()
            yield SyncSaverAsAsync(saver)

    assert_every_group_passed(await validate(factory))


# -- with every value offloaded to an object store (threshold 1 byte) ----------------------


def _store(kind: str, request: pytest.FixtureRequest, tmp_path) -> tuple[str, dict]:
    if kind == "s3":
        s3 = request.getfixturevalue("s3_server")
        return s3.url(request.getfixturevalue("s3_prefix")), s3.options()
    if kind == "file":
        return f"file://{tmp_path}/objects", {}
    return "memory:///", {}


@pytest.mark.parametrize("store", ["s3", "file", "memory"])
async def test_async_saver_with_offload_passes_every_group(
    pg_dsn: str, schema_name: str, store: str, request: pytest.FixtureRequest, tmp_path
) -> None:
    url, options = _store(store, request, tmp_path)

    @checkpointer_test(name=f"AsyncDurablePostgresSaver(offload to {store})")
    async def factory():
        async with AsyncDurablePostgresSaver.from_conn_string(
            pg_dsn, schema=schema_name, object_store=url, object_store_options=options, offload_threshold=1
        ) as saver:
            await saver.setup()
            yield saver

    assert_every_group_passed(await validate(factory))


@pytest.mark.parametrize("store", ["s3", "file"])
async def test_sync_saver_with_offload_passes_every_group(
    pg_dsn: str, schema_name: str, store: str, request: pytest.FixtureRequest, tmp_path
) -> None:
    url, options = _store(store, request, tmp_path)

    @checkpointer_test(name=f"DurablePostgresSaver(offload to {store})")
    async def factory():
        with DurablePostgresSaver.from_conn_string(
            pg_dsn, schema=schema_name, object_store=url, object_store_options=options, offload_threshold=1
        ) as saver:
            saver.setup()
            yield SyncSaverAsAsync(saver)

    assert_every_group_passed(await validate(factory))


@pytest.mark.parametrize("snapshot_every", [1, 2, 16])
async def test_async_saver_with_other_snapshot_intervals_passes_every_group(pg_dsn: str, schema_name: str, snapshot_every: int) -> None:
    @checkpointer_test(name=f"AsyncDurablePostgresSaver(snapshot_every={snapshot_every})")
    async def factory():
        async with AsyncDurablePostgresSaver.from_conn_string(
            pg_dsn, schema=schema_name, snapshot_every=snapshot_every, list_min_bytes=0
        ) as saver:
            await saver.setup()
            yield saver

    assert_every_group_passed(await validate(factory))
