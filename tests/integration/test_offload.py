"""Values past the offload threshold live in a real object store, referenced by SHA-256.

The S3 tests run against `weed mini` (a real S3 server started by the session); the
others against a local directory. Every read goes through a fresh saver where it
matters, so no in-process cache can hide a missing or tampered object.
"""

from __future__ import annotations

import hashlib
import os
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
import psycopg
import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from obstore.store import from_url
from typing_extensions import TypedDict

from langgraph_pg_durable import (
    AsyncDurablePostgresSaver,
    ConfigError,
    DurablePostgresSaver,
    ObjectIntegrityError,
    ObjectStoreError,
)
from tcp_gate import TcpGate

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths

MIB = 1 << 20
FAST_FAIL = {"max_retries": 0, "retry_timeout": timedelta(seconds=5)}


# -- a graph that writes one large value per step ------------------------------------------


class Blob(TypedDict):
    blob: bytes
    step: int


def payload(seed: int, size: int) -> bytes:
    """Incompressible and deterministic: equal seeds give equal objects across threads."""
    return random.Random(seed).randbytes(size)


def blob_graph(saver: Any, steps: int, size: int) -> Any:
    def regenerate(state: Blob) -> dict:
        return {"blob": payload(state["step"], size), "step": state["step"] + 1}

    graph = StateGraph(Blob)
    graph.add_node("regenerate", regenerate)
    graph.add_edge(START, "regenerate")
    graph.add_conditional_edges("regenerate", lambda s: "regenerate" if s["step"] < steps else END, ["regenerate", END])
    return graph.compile(checkpointer=saver)


def thread() -> dict:
    return {"configurable": {"thread_id": f"offload-{uuid.uuid4().hex[:10]}"}}


# -- savers on either API --------------------------------------------------------------------


class Driver:
    """Runs the same test on DurablePostgresSaver (invoke) and AsyncDurablePostgresSaver (ainvoke)."""

    def __init__(self, mode: str, dsn: str, schema: str) -> None:
        self.mode, self.dsn, self.schema = mode, dsn, schema

    @asynccontextmanager
    async def saver(self, **options: Any) -> AsyncIterator[Any]:
        if self.mode == "sync":
            with DurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema, **options) as saver:
                saver.setup()
                yield saver
        else:
            async with AsyncDurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema, **options) as saver:
                await saver.setup()
                yield saver

    async def invoke(self, graph: Any, inputs: Any, config: dict) -> Any:
        if self.mode == "sync":
            return graph.invoke(inputs, config, durability="sync")
        return await graph.ainvoke(inputs, config, durability="sync")

    async def state(self, graph: Any, config: dict) -> Any:
        return graph.get_state(config) if self.mode == "sync" else await graph.aget_state(config)

    async def gc(self, saver: Any, grace: timedelta) -> int:
        return saver.gc(grace_period=grace) if self.mode == "sync" else await saver.agc(grace_period=grace)


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest, pg_dsn: str, schema_name: str) -> Driver:
    return Driver(request.param, pg_dsn, schema_name)


@pytest.fixture(params=["s3", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Saver options for a real store: the session's S3 server, or a local directory."""
    if request.param == "s3":
        s3 = request.getfixturevalue("s3_server")
        return {"object_store": s3.url(request.getfixturevalue("s3_prefix")), "object_store_options": s3.options()}
    return {"object_store": f"file://{tmp_path}/objects"}


def open_same_store(options: dict[str, Any]) -> Any:
    url = options["object_store"]
    extra = dict(options.get("object_store_options") or {})
    return from_url(url, **({"mkdir": True} if url.startswith("file://") else extra))


def stored_keys(options: dict[str, Any]) -> dict[str, int]:
    """Every object in the store, with its size."""
    return {m["path"]: m["size"] for batch in obstore.list(open_same_store(options)) for m in batch}


def rows(dsn: str, schema: str, sql: str, *args: Any) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql.format(s=f'"{schema}"'), args).fetchall()


def referenced_keys(dsn: str, schema: str) -> set[str]:
    return {
        r[0]
        for r in rows(
            dsn,
            schema,
            "SELECT object_key FROM {s}.channel_values WHERE object_key IS NOT NULL"
            " UNION SELECT object_key FROM {s}.checkpoint_writes WHERE object_key IS NOT NULL",
        )
    }


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("size", [MIB + 1, 20 * MIB])
async def test_large_values_round_trip_through_the_store(
    driver: Driver, store: dict[str, Any], size: int, pg_dsn: str, schema_name: str
) -> None:
    config = thread()
    async with driver.saver(**store) as saver:
        await driver.invoke(blob_graph(saver, 2, size), {"blob": b"", "step": 0}, config)

    # A new saver reads it back, byte for byte, from the store.
    async with driver.saver(**store) as saver:
        state = await driver.state(blob_graph(saver, 2, size), config)
    assert state.values == {"blob": payload(1, size), "step": 2}

    offloaded = rows(
        pg_dsn,
        schema_name,
        "SELECT value IS NULL, object_key, object_sha256, object_size "
        "FROM {s}.channel_values WHERE channel = 'blob' AND object_key IS NOT NULL",
    )
    assert len(offloaded) == 2  # steps 1 and 2; the empty input value stays inline
    objects = stored_keys(store)
    for value_is_null, key, sha, object_size in offloaded:
        assert value_is_null and object_size == size and objects[key] == size
        assert key.endswith(sha) and sha in {hashlib.sha256(payload(s, size)).hexdigest() for s in (0, 1)}
    # Each value was written twice (the node's write, the next checkpoint's channel) and stored once.
    assert len(objects) == 2
    assert referenced_keys(pg_dsn, schema_name) == set(objects)


async def test_a_value_at_the_threshold_stays_inline(driver: Driver, store: dict[str, Any], pg_dsn: str, schema_name: str) -> None:
    config = thread()
    async with driver.saver(**store) as saver:
        await driver.invoke(blob_graph(saver, 1, MIB), {"blob": b"", "step": 0}, config)
        assert (await driver.state(blob_graph(saver, 1, MIB), config)).values["blob"] == payload(0, MIB)
    assert stored_keys(store) == {}
    sizes = rows(pg_dsn, schema_name, "SELECT octet_length(value) FROM {s}.channel_values WHERE channel = 'blob'")
    assert sorted(s for (s,) in sizes) == [0, MIB]


@pytest.mark.slow
async def test_a_600_mb_value_round_trips_through_s3(pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str) -> None:
    options = {"object_store": s3_server.url(s3_prefix), "object_store_options": s3_server.options()}
    size = 600 * MIB
    big = os.urandom(size)
    config = thread()

    def node(state: Blob) -> dict:
        return {"blob": big, "step": 1}

    graph = StateGraph(Blob)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **options) as saver:
        await saver.setup()
        await graph.compile(checkpointer=saver).ainvoke({"blob": b"", "step": 0}, config, durability="sync")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **options) as saver:
        got = graph.compile(checkpointer=saver).get_state(config).values["blob"]
    assert len(got) == size and got == big
    assert list(stored_keys(options).values()) == [size]


# -- the store failing -----------------------------------------------------------------------


async def test_store_unreachable_during_put_commits_nothing_and_the_thread_resumes(
    driver: Driver, pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str
) -> None:
    with TcpGate.in_front_of(s3_server.endpoint) as gate:
        options = s3_server.options()
        options["config"] = {**options["config"], "endpoint": gate.endpoint}
        options["retry_config"] = FAST_FAIL
        store = {"object_store": s3_server.url(s3_prefix), "object_store_options": options}
        config = thread()
        async with driver.saver(**store) as saver:
            graph = blob_graph(saver, 3, 2 * MIB)
            gate.down()
            with pytest.raises(ObjectStoreError) as failure:
                await driver.invoke(graph, {"blob": b"", "step": 0}, config)
            message = str(failure.value)
            assert config["configurable"]["thread_id"] in message and "blob" in message and "/objects/" in message

            # Nothing stored points at an object the store does not hold.
            assert referenced_keys(pg_dsn, schema_name) <= set(stored_keys(store_for(s3_server, s3_prefix)))
            before = await driver.state(graph, config)
            assert before.values.get("step", 0) == 0  # only the input checkpoint was committed

            gate.up()
            final = await driver.invoke(graph, None, config)
            assert final == {"blob": payload(2, 2 * MIB), "step": 3}
        assert referenced_keys(pg_dsn, schema_name) <= set(stored_keys(store_for(s3_server, s3_prefix)))


def store_for(s3_server: Any, prefix: str) -> dict[str, Any]:
    return {"object_store": s3_server.url(prefix), "object_store_options": s3_server.options()}


async def test_refused_credentials_fail_the_put_by_name_and_commit_nothing(
    driver: Driver, pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str
) -> None:
    options = s3_server.options()
    options["config"] = {**options["config"], "secret_access_key": "not-the-secret"}
    options["retry_config"] = FAST_FAIL
    config = thread()
    async with driver.saver(object_store=s3_server.url(s3_prefix), object_store_options=options) as saver:
        graph = blob_graph(saver, 2, 2 * MIB)
        with pytest.raises(ObjectStoreError, match="PermissionDenied|Unauthenticated|403"):
            await driver.invoke(graph, {"blob": b"", "step": 0}, config)
    assert referenced_keys(pg_dsn, schema_name) == set()
    assert stored_keys(store_for(s3_server, s3_prefix)) == {}


# -- integrity -------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["tampered", "deleted"])
async def test_a_damaged_object_raises_an_error_naming_thread_checkpoint_channel_and_key(
    driver: Driver, store: dict[str, Any], damage: str, pg_dsn: str, schema_name: str
) -> None:
    config = thread()
    async with driver.saver(**store) as saver:
        await driver.invoke(blob_graph(saver, 1, 2 * MIB), {"blob": b"", "step": 0}, config)
    (key,) = stored_keys(store)
    raw = open_same_store(store)
    if damage == "tampered":
        obstore.put(raw, key, payload(99, 2 * MIB))  # same size, other bytes
    else:
        obstore.delete(raw, key)

    async with driver.saver(**store) as saver:
        with pytest.raises(ObjectIntegrityError) as failure:
            await driver.state(blob_graph(saver, 1, 2 * MIB), config)
    checkpoint_id = rows(pg_dsn, schema_name, "SELECT checkpoint_id FROM {s}.checkpoints ORDER BY checkpoint_id DESC LIMIT 1")[0][0]
    message = str(failure.value)
    for name in (config["configurable"]["thread_id"], checkpoint_id, "'blob'", key):
        assert name in message, (name, message)
    assert ("does not match" if damage == "tampered" else "missing") in message


async def test_the_object_holds_the_serializers_output_so_encryption_covers_it(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    store = {"object_store": f"file://{tmp_path}/objects"}
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    marker = b"PLAINTEXT-MARKER-" * 100_000
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=serde, **store) as saver:
        saver.setup()
        graph = StateGraph(Blob)
        graph.add_node("n", lambda s: {"blob": marker, "step": 1})
        graph.add_edge(START, "n")
        graph.add_edge("n", END)
        app = graph.compile(checkpointer=saver)
        app.invoke({"blob": b"", "step": 0}, thread(), durability="sync")
    files = [p for p in (tmp_path / "objects").rglob("*") if p.is_file()]
    assert files and all(b"PLAINTEXT-MARKER" not in p.read_bytes() for p in files)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=serde, **store) as saver:
        (latest,) = list(saver.list(None, limit=1))
    assert latest.checkpoint["channel_values"]["blob"] == marker


async def test_history_fetches_each_shared_object_once_per_call(
    pg_dsn: str, schema_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten checkpoints hold one 2 MiB version; reading them all costs one GET."""
    store = {"object_store": f"file://{tmp_path}/objects"}
    big = payload(7, 2 * MIB)

    class Counted(TypedDict):
        blob: bytes
        step: int

    graph = StateGraph(Counted)
    graph.add_node("first", lambda s: {"blob": big, "step": 1})
    graph.add_node("tick", lambda s: {"step": s["step"] + 1})
    graph.add_edge(START, "first")
    graph.add_edge("first", "tick")
    graph.add_conditional_edges("tick", lambda s: "tick" if s["step"] < 10 else END, ["tick", END])
    config = thread()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, object_cache_bytes=0, **store) as saver:
        saver.setup()
        app = graph.compile(checkpointer=saver)
        app.invoke({"blob": b"", "step": 0}, config, durability="sync")

        gets: list[str] = []
        real_get = obstore.get
        monkeypatch.setattr(obstore, "get", lambda s, key, **kw: gets.append(key) or real_get(s, key, **kw))
        history = list(app.get_state_history(config))
        assert sum(1 for h in history if h.values.get("blob") == big) >= 10
        assert len(gets) == 1


# -- garbage collection ----------------------------------------------------------------------


async def test_gc_deletes_exactly_the_objects_no_row_references(
    driver: Driver, pg_dsn: str, schema_name: str, s3_server: Any, s3_prefix: str
) -> None:
    store = store_for(s3_server, s3_prefix)
    size = MIB + 17
    a, b, c = thread(), thread(), thread()
    async with driver.saver(**store, object_reuse_window=timedelta(0)) as saver:
        # Threads a and b compute the same values: their first object is shared.
        await driver.invoke(blob_graph(saver, 2, size), {"blob": b"", "step": 0}, a)
        await driver.invoke(blob_graph(saver, 1, size), {"blob": b"", "step": 0}, b)
        # A fork of a, from its first step, with a value of its own.
        history = (
            [s async for s in blob_graph(saver, 2, size).aget_state_history(a)]
            if driver.mode == "async"
            else list(blob_graph(saver, 2, size).get_state_history(a))
        )
        first_step = next(s for s in history if s.values.get("step") == 1)
        app = blob_graph(saver, 2, size)
        fork_value = payload(1234, size)
        if driver.mode == "sync":
            app.update_state(first_step.config, {"blob": fork_value})
            saver.copy_thread(a["configurable"]["thread_id"], c["configurable"]["thread_id"])
        else:
            await app.aupdate_state(first_step.config, {"blob": fork_value})
            await saver.acopy_thread(a["configurable"]["thread_id"], c["configurable"]["thread_id"])
        # An object no row will ever reference, as a crash between upload and commit leaves.
        orphan = f"{saver.placement.prefix}/00/{'0' * 64}"
        obstore.put(open_same_store(store), orphan, b"left behind")

        shared, only_a = (hashlib.sha256(payload(s, size)).hexdigest() for s in (0, 1))
        fork = hashlib.sha256(fork_value).hexdigest()
        keys = {k.rsplit("/", 1)[-1]: k for k in stored_keys(store)}
        assert set(keys) == {shared, only_a, fork, "0" * 64}

        assert await driver.gc(saver, timedelta(hours=1)) == 0  # all too young to collect
        assert await driver.gc(saver, timedelta(0)) == 1
        assert set(stored_keys(store)) == {keys[shared], keys[only_a], keys[fork]}

        async def delete(t: dict) -> None:
            tid = t["configurable"]["thread_id"]
            saver.delete_thread(tid) if driver.mode == "sync" else await saver.adelete_thread(tid)

        await delete(a)  # c, its copy, still holds all three
        assert await driver.gc(saver, timedelta(0)) == 0
        await delete(c)  # b still holds the shared one
        assert await driver.gc(saver, timedelta(0)) == 2
        assert set(stored_keys(store)) == {keys[shared]}
        async with driver.saver(**store) as reader:  # b reads back intact
            assert (await driver.state(blob_graph(reader, 1, size), b)).values["blob"] == payload(0, size)
        await delete(b)
        assert await driver.gc(saver, timedelta(0)) == 1
        assert stored_keys(store) == {}


async def test_gc_refuses_a_grace_period_shorter_than_the_reuse_window(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, object_store=f"file://{tmp_path}") as saver:
        saver.setup()
        with pytest.raises(ConfigError, match="object_reuse_window"):
            saver.gc(grace_period=timedelta(seconds=1))


# -- without a store ---------------------------------------------------------------------------


async def test_a_saver_without_a_store_names_the_object_it_cannot_read(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    config = thread()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, object_store=f"file://{tmp_path}") as saver:
        saver.setup()
        blob_graph(saver, 1, 2 * MIB).invoke({"blob": b"", "step": 0}, config, durability="sync")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        with pytest.raises(ConfigError, match="no object_store configured") as failure:
            saver.get_tuple(config)
    assert "'blob'" in str(failure.value) and "/objects/" in str(failure.value)
