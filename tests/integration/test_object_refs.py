"""Object references read from rows: only the key a saver derives from its own prefix and
the digest is fetched, gc of one prefix never touches another's, and messages do not
disclose the size or bytes of an object the row had no business naming."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import obstore
import psycopg
import pytest
from psycopg import sql

from langgraph_pg_durable import DurablePostgresSaver, ObjectIntegrityError
from langgraph_pg_durable.core.offload import object_key
from test_offload import MIB, blob_graph, open_same_store, payload, rows, store_for, stored_keys, thread

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths


def _graph_state(saver: DurablePostgresSaver, config: dict) -> Any:
    return blob_graph(saver, 1, 2 * MIB).get_state(config).values


def _one_blob_thread(pg_dsn: str, schema: str, store: dict[str, Any]) -> dict:
    """A thread of one step whose 2 MiB value is offloaded to `store`; its config."""
    config = thread()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema, **store) as saver:
        saver.setup()
        blob_graph(saver, 1, 2 * MIB).invoke({"blob": b"", "step": 0}, config, durability="sync")
    return config


def test_a_row_pointing_at_another_savers_object_is_refused_unfetched(
    pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str
) -> None:
    store = store_for(s3_server, s3_prefix)
    config = _one_blob_thread(pg_dsn, schema_name, store)
    # Another saver's object, and a row rewritten to point at it with its true digest.
    secret = payload(7, 3 * MIB + 5)
    digest = hashlib.sha256(secret).hexdigest()
    foreign = object_key("someone_else/objects", digest)
    obstore.put(open_same_store(store), foreign, secret)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {}.channel_values SET object_key = %s, object_sha256 = %s, object_size = %s WHERE object_key IS NOT NULL"
            ).format(sql.Identifier(schema_name)),
            (foreign, digest, len(secret)),
        )
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store) as fresh:
        with pytest.raises(ObjectIntegrityError) as refused:
            _graph_state(fresh, config)
        assert fresh.objects is not None and fresh.objects.cache.get(digest) is None  # never fetched
    message = str(refused.value)
    assert foreign in message and "not a reference this saver writes" in message
    assert config["configurable"]["thread_id"] in message and "'blob'" in message
    assert f"{len(secret):,}" not in message and str(len(secret)) not in message


def test_a_tampered_object_is_named_without_its_size(pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str) -> None:
    store = store_for(s3_server, s3_prefix)
    config = _one_blob_thread(pg_dsn, schema_name, store)
    (key,) = stored_keys(store)
    replaced = payload(99, 5 * MIB + 3)
    obstore.put(open_same_store(store), key, replaced)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store) as fresh:
        with pytest.raises(ObjectIntegrityError, match="does not match") as refused:
            _graph_state(fresh, config)
    assert key in str(refused.value) and f"{len(replaced):,}" not in str(refused.value)


def test_gc_of_a_prefix_keeps_the_objects_of_a_saver_whose_prefix_lies_below_it(
    pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str
) -> None:
    store = store_for(s3_server, s3_prefix)
    outer_schema, inner_schema = schema_name, f"{schema_name}_inner"
    outer_config, inner_config = thread(), thread()
    try:
        with (
            DurablePostgresSaver.from_conn_string(
                pg_dsn, schema=outer_schema, object_prefix="shared", object_reuse_window=timedelta(0), **store
            ) as outer,
            DurablePostgresSaver.from_conn_string(
                pg_dsn, schema=inner_schema, object_prefix="shared/ab", object_reuse_window=timedelta(0), **store
            ) as inner,
        ):
            outer.setup()
            inner.setup()
            blob_graph(outer, 1, 2 * MIB).invoke({"blob": b"", "step": 0}, outer_config, durability="sync")
            # The inner saver's value differs, so its object is its own.
            app = blob_graph(inner, 1, 2 * MIB)
            app.invoke({"blob": b"", "step": 0}, inner_config, durability="sync")
            app.update_state(inner_config, {"blob": payload(4242, 2 * MIB)})
            inner_keys = {k for k in stored_keys(store) if k.startswith("shared/ab/")}
            assert inner_keys
            outer.delete_thread(outer_config["configurable"]["thread_id"])
            assert outer.gc(grace_period=timedelta(0)) == 1  # its own object, and nothing else
            assert inner_keys <= set(stored_keys(store))
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=inner_schema, object_prefix="shared/ab", **store) as fresh:
            assert _graph_state(fresh, inner_config)["blob"] == payload(4242, 2 * MIB)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(inner_schema)))
    assert rows(pg_dsn, outer_schema, "SELECT count(*) FROM {s}.checkpoints")[0][0] == 0
