"""gc never deletes an object a committing put is about to reference. A put that stores
objects holds gc's lock shared from its first upload to its commit; gc holds it exclusively
from its reference check to its last delete. The interleavings are forced: the test holds
one side (a put inside an open transaction, or gc stopped just before its delete) and
waits until the other is blocked on the lock (pg_locks shows the waiter)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import obstore
import psycopg

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.core.offload import object_key
from test_offload import MIB, blob_graph, open_same_store, payload, store_for, stored_keys, thread
from test_races import InBackground, wait_until_blocked_on_a_writer_lock

NO_REUSE = {"object_reuse_window": timedelta(0)}  # every put uploads; gc may collect anything past 0 s


def _value(saver: DurablePostgresSaver, config: dict) -> Any:
    return blob_graph(saver, 1, 2 * MIB).get_state(config).values.get("blob")


def test_a_put_reuploading_an_object_gc_is_about_to_delete_waits_and_keeps_it(
    pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str
) -> None:
    store = store_for(s3_server, s3_prefix)
    data = payload(0, 2 * MIB)  # what the graph's first step writes
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store, **NO_REUSE) as saver:
        saver.setup()
        # An object no row references, as a crashed put leaves: gc will want to delete it.
        orphan = object_key(saver.placement.prefix, hashlib.sha256(data).hexdigest())
        obstore.put(open_same_store(store), orphan, data)
        config = thread()
        put: list[InBackground] = []
        real_delete = saver.objects.delete

        def delete_once_the_put_waits(keys: Any) -> None:
            assert orphan in keys  # gc checked references and ages: the orphan is doomed
            # Now a graph step writes the same bytes, to reference that object again.
            put.append(InBackground(lambda: blob_graph(saver, 1, 2 * MIB).invoke({"blob": b"", "step": 0}, config, durability="sync")))
            wait_until_blocked_on_a_writer_lock(pg_dsn, put[0])
            real_delete(keys)

        saver.objects.delete = delete_once_the_put_waits  # type: ignore[method-assign]
        assert saver.gc(grace_period=timedelta(0)) == 1
        put[0].result()
    assert orphan in stored_keys(store)  # uploaded again after gc's delete
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store) as fresh:
        assert _value(fresh, config) == data


def test_gc_waits_for_a_put_that_uploaded_but_has_not_committed(pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str) -> None:
    store = store_for(s3_server, s3_prefix)
    config = thread()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store, **NO_REUSE) as saver:
        saver.setup()
        with psycopg.connect(pg_dsn) as writer, writer.transaction():  # the put's rows are not committed yet
            in_flight = DurablePostgresSaver(writer, schema=schema_name, **store, **NO_REUSE)
            blob_graph(in_flight, 1, 2 * MIB).invoke({"blob": b"", "step": 0}, config, durability="sync")
            assert len(stored_keys(store)) == 1  # uploaded, and old enough for a 0 s grace period
            gc = InBackground(lambda: saver.gc(grace_period=timedelta(0)))
            wait_until_blocked_on_a_writer_lock(pg_dsn, gc)
        assert gc.result() == 0  # it saw the committed row and kept the object
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store) as fresh:
        assert _value(fresh, config) == payload(0, 2 * MIB)
