"""With nothing listening, a put fails with a named error once the retry deadline passes."""

from __future__ import annotations

import socket
import time

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import DatabaseUnavailableError, DurablePostgresSaver, RetryPolicy


def _checkpoint(saver, values: dict):
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {k: version for k in values}
    return checkpoint


def _put(saver, config, values, step=0):
    checkpoint = _checkpoint(saver, values)
    return saver.put(config, checkpoint, {"source": "loop", "step": step}, dict(checkpoint["channel_versions"]))


def test_unreachable_server_fails_clearly_after_the_deadline() -> None:
    from psycopg_pool import ConnectionPool

    # Nothing listens on this port: every connection attempt is refused.
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]
    pool = ConnectionPool(f"postgresql://postgres@127.0.0.1:{port}/postgres", min_size=1, timeout=0.3, open=False)
    pool.open(wait=False)
    try:
        saver = DurablePostgresSaver(pool, retry=RetryPolicy(deadline=1.0, reconnect_deadline=1.0, initial_backoff=0.05, max_backoff=0.2))
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="put of checkpoint .* on thread 'gone'.*attempt"):
            _put(saver, {"configurable": {"thread_id": "gone", "checkpoint_ns": ""}}, {"a": 1})
        assert time.monotonic() - started < 10  # bounded by the deadline, not forever
    finally:
        pool.close()
