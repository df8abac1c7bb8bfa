"""The async saver's sync methods, as LangGraph's sync APIs call them from worker threads."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import AsyncDurablePostgresSaver


async def test_sync_methods_run_on_the_saver_loop_from_another_thread(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()

        def work():
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"a": [1, 2]}
            checkpoint["channel_versions"] = {"a": saver.get_next_version(None, None)}
            config = saver.put(
                {"configurable": {"thread_id": "bridge", "checkpoint_ns": ""}},
                checkpoint,
                {"source": "input", "step": -1},
                dict(checkpoint["channel_versions"]),
            )
            saver.put_writes(config, [("a", [3])], "task")
            return config, saver.get_tuple(config), list(saver.list({"configurable": {"thread_id": "bridge"}}))

        config, fetched, listed = await asyncio.to_thread(work)
        assert fetched.checkpoint["channel_values"] == {"a": [1, 2]}
        assert fetched.pending_writes == [("task", "a", [3])]
        assert [t.config for t in listed] == [config]

        # On the loop's own thread a sync call would deadlock: it is refused instead.
        with pytest.raises(RuntimeError, match="thread other than its event loop"):
            saver.get_tuple(config)
