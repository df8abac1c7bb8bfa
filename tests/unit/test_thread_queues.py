"""Which flights wait in a saver's in-process queue of their thread (ops.THREAD_QUEUES)."""

from __future__ import annotations

from langgraph_pg_durable.core.offload import ObjectRef, Upload
from langgraph_pg_durable.core.plan import Query
from langgraph_pg_durable.ops import THREAD_QUEUES, SaverCore


def test_a_write_of_one_thread_waits_in_its_threads_queue() -> None:
    key = 2**62 + 12345
    assert SaverCore._queue_of(Query("put", "SELECT 1", {}, locks=[key])) == key % THREAD_QUEUES
    assert SaverCore._queue_of(Query("put", "SELECT 1", {}, locks=[-key])) == -key % THREAD_QUEUES  # a valid index


def test_reads_deletes_of_several_threads_and_uploads_wait_in_none() -> None:
    assert SaverCore._queue_of(Query("get_tuple", "SELECT 1", {})) is None
    assert SaverCore._queue_of(Query("delete", "SELECT 1", {}, locks=[1, 2])) is None
    upload = Upload(ObjectRef("key", "0" * 64, 7), b"payload", "put")
    assert SaverCore._queue_of(Query("put", "SELECT 1", {}, uploads=[upload], locks=[1])) is None
