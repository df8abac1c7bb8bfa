"""List channels in the delta layout restore exactly what was put, whatever happened between.

The oracle is the serializer's own round trip of the whole value: what any saver that
stores the list whole would return.
"""

from __future__ import annotations

import asyncio
import enum
import json
import operator
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from checkpoints import next_put
from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_pg_durable.core import encode
from langgraph_pg_durable.core.codec import COMPRESSED
from langgraph_pg_durable.core.lists import LIST_TYPE
from langgraph_pg_durable.errors import ListIntegrityError

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths

# -- random histories of one list channel, put directly ----------------------------------------

ITEMS = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, width=32),
    st.tuples(st.integers(0, 3), st.text(max_size=3)),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)
OPS = st.one_of(
    st.tuples(st.just("append"), st.lists(ITEMS, min_size=0, max_size=4)),
    st.tuples(st.just("edit"), st.integers(0, 50), ITEMS),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("reverse")),
    st.tuples(st.just("not a list"), st.text(max_size=5)),
    st.tuples(st.just("fork"), st.integers(0, 50)),
    st.tuples(st.just("prune")),
    # A task's pending write, then the child holding its items appended (or, with
    # `other`, the same items reversed: a reducer that does not simply append).
    st.tuples(st.just("write"), st.lists(ITEMS, min_size=1, max_size=3), st.booleans(), st.booleans()),
)


def apply(value: Any, op: tuple) -> Any:
    """The next value of the channel; ops on a non-list start a new list."""
    current = list(value) if isinstance(value, list) else []
    kind = op[0]
    if kind == "append":
        return current + list(op[1])
    if kind == "edit" and current:
        current[op[1] % len(current)] = op[2]
        return current
    if kind == "remove" and current:
        del current[op[1] % len(current)]
        return current
    if kind == "reverse":
        return current[::-1]
    if kind == "not a list":
        return op[1]
    return current


class History:
    """Puts checkpoints of one channel as LangGraph would, tracking what each must restore."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver, self.thread_id = saver, thread_id
        self.expected: dict[str, Any] = {}  # checkpoint id -> the value put
        self.order: list[tuple[str, str, Any]] = []  # (checkpoint id, version, value) in put order
        self.head: tuple[dict, Any, Any] | None = None  # (config, checkpoint, value)
        self.writes: dict[str, list[tuple[str, str, Any]]] = {}  # checkpoint id -> its pending writes

    def put(self, value: Any, parent: tuple[dict, Any, Any] | None = None) -> None:
        base = parent or self.head
        config = base[0] if base else {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        previous = base[1] if base else empty_checkpoint()
        checkpoint = create_checkpoint(previous, None, len(self.order))
        version = self.saver.get_next_version(previous["channel_versions"].get("items"), None)
        checkpoint["channel_values"] = {"items": value}
        checkpoint["channel_versions"] = {"items": version}
        next_config = self.saver.put(config, checkpoint, {"source": "loop", "step": len(self.order)}, {"items": version})
        self.expected[checkpoint["id"]] = value
        self.order.append((checkpoint["id"], version, value))
        self.head = (next_config, checkpoint, value)

    def append(self, new_items: list, *, single: bool = False, appended: list | None = None) -> None:
        """As a graph step does: the task's pending write to the head checkpoint, then the
        child checkpoint holding the list with the write's items (or `appended`) appended."""
        assert self.head is not None
        value = new_items[0] if single else new_items
        task_id = f"task-{len(self.order):04d}"
        self.saver.put_writes(self.head[0], [("items", value)], task_id)
        self.writes.setdefault(self.head[1]["id"], []).append((task_id, "items", value))
        base = self.head[2] if isinstance(self.head[2], list) else []
        self.put(base + (new_items if appended is None else appended))

    def fork(self, index: int) -> None:
        """The next put continues from an older checkpoint, as update_state on history does."""
        if self.order:
            checkpoint_id, version, value = self.order[index % len(self.order)]
            config = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
            stored = self.saver.get_tuple(config)
            assert stored is not None
            self.head = (config, stored.checkpoint, value)


def check_every_checkpoint(dsn: str, schema: str, thread_id: str, expected: dict[str, Any], serde: Any, **options: Any) -> None:
    """Fresh savers, sync and async, restore each surviving checkpoint exactly, by id and
    through list()."""

    def roundtrip(value: Any) -> Any:
        return serde.loads_typed(serde.dumps_typed(value))

    with DurablePostgresSaver.from_conn_string(dsn, schema=schema, **options) as fresh:
        listed = {t.checkpoint["id"]: t for t in fresh.list({"configurable": {"thread_id": thread_id}})}
        assert set(listed) <= set(expected)
        for checkpoint_id, tuple_ in listed.items():
            want = roundtrip(expected[checkpoint_id])
            got = tuple_.checkpoint["channel_values"]["items"]
            assert got == want and _types(got) == _types(want), checkpoint_id
            one = fresh.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
            assert one is not None and one.checkpoint["channel_values"]["items"] == want
            assert _types(one.checkpoint["channel_values"]["items"]) == _types(want)

    async def read_async() -> dict[str, Any]:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn, schema=schema, **options) as afresh:
            config = {"configurable": {"thread_id": thread_id}}
            return {t.checkpoint["id"]: t.checkpoint["channel_values"]["items"] async for t in afresh.alist(config)}

    # The async saver, fresh too, reads the same (on a thread of its own: some callers are
    # async tests, already inside an event loop).
    with ThreadPoolExecutor(1) as pool:
        from_async = pool.submit(asyncio.run, read_async()).result()
    assert from_async == {k: t.checkpoint["channel_values"]["items"] for k, t in listed.items()}
    assert {k: _types(v) for k, v in from_async.items()} == {k: _types(roundtrip(expected[k])) for k in listed}


def _types(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_types(v) for v in value])
    if isinstance(value, dict):
        return ("dict", sorted((k, _types(v)) for k, v in value.items()))
    return type(value).__name__


@pytest.fixture(scope="module")
def shared_schema(pg_dsn: str) -> Any:
    name = f"lgpd_lists_{uuid.uuid4().hex[:10]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=25), snapshot_every=st.sampled_from([1, 2, 3, 5, 16]), min_bytes=st.sampled_from([0, 40]))
def test_random_histories_restore_exactly(pg_dsn: str, shared_schema: str, ops: list, snapshot_every: int, min_bytes: int) -> None:
    """min_bytes 40: lists move between the whole and the delta layout as they grow and shrink."""
    thread_id = f"h-{uuid.uuid4().hex[:10]}"
    with DurablePostgresSaver.from_conn_string(
        pg_dsn, schema=shared_schema, snapshot_every=snapshot_every, list_min_bytes=min_bytes
    ) as saver:
        history = History(saver, thread_id)
        value: Any = []
        history.put(value)
        for op in ops:
            if op[0] == "fork":
                history.fork(op[1])
                value = history.head[2] if history.head else value
                continue
            if op[0] == "prune":
                saver.prune([thread_id], strategy="keep_latest")
                history.order = history.order[-1:]  # the newest checkpoint survives
                continue
            if op[0] == "write":
                _, items, single, other = op
                written = items[:1] if single else items
                history.append(written, single=single, appended=written[::-1] if other else None)
                value = history.head[2]
                continue
            value = apply(value, op)
            history.put(value)
        check_every_checkpoint(pg_dsn, shared_schema, thread_id, history.expected, saver.serde)
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=shared_schema) as fresh:
            _check_writes(fresh, thread_id, history)


async def test_the_async_saver_writes_and_reads_the_same_layout(pg_dsn: str, schema_name: str) -> None:
    rng = random.Random(7)
    thread_id = f"a-{uuid.uuid4().hex[:10]}"
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=4, list_min_bytes=0) as saver:
        await saver.setup()
        expected: dict[str, Any] = {}
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        checkpoint, value = empty_checkpoint(), []
        for step in range(30):
            value = value + [f"m{step}"] * rng.randint(0, 2) if rng.random() < 0.85 else value[1:]
            checkpoint = create_checkpoint(checkpoint, None, step)
            version = saver.get_next_version(checkpoint["channel_versions"].get("items"), None)
            checkpoint["channel_values"], checkpoint["channel_versions"] = {"items": value}, {"items": version}
            config = await saver.aput(config, checkpoint, {"step": step}, {"items": version})
            expected[checkpoint["id"]] = value
        deltas = [t async for t in saver.alist({"configurable": {"thread_id": thread_id}})]
        assert {t.checkpoint["id"]: t.checkpoint["channel_values"]["items"] for t in deltas} == expected
    check_every_checkpoint(pg_dsn, schema_name, thread_id, expected, saver.serde)
    with psycopg.connect(pg_dsn) as conn:
        kinds = conn.execute(
            f"SELECT count(*) FILTER (WHERE cardinality(list_chain) > 0), count(*) FILTER (WHERE cardinality(list_chain) = 0) "
            f'FROM "{schema_name}".channel_values WHERE type = %s',
            (LIST_TYPE,),
        ).fetchone()
    assert kinds[0] > 0 and kinds[1] > 0  # both deltas and snapshots were written


# -- storage grows with what was added --------------------------------------------------------


def test_a_growing_list_stores_each_item_once(pg_dsn: str, schema_name: str) -> None:
    thread_id = f"g-{uuid.uuid4().hex[:10]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        history = History(saver, thread_id)
        value: list[str] = []
        for step in range(40):
            value = value + [f"item {step} " + "x" * 100]
            history.put(value)
    with psycopg.connect(pg_dsn) as conn:
        items = conn.execute(f'SELECT count(*) FROM "{schema_name}".channel_items').fetchone()[0]
        snapshots = conn.execute(f'SELECT count(*) FROM "{schema_name}".channel_values WHERE cardinality(list_chain) = 0').fetchone()[0]
    assert items == 40  # not 1 + 2 + ... + 40
    assert snapshots == 5  # versions 1, 9, 17, 25, 33: one in eight
    check_every_checkpoint(pg_dsn, schema_name, thread_id, history.expected, saver.serde)


class Tag(str, enum.Enum):
    """Equal to the str it stands for, and stored as an enum member."""

    LINE = "line 1500"


def test_an_equal_item_of_another_type_in_a_long_list_is_stored_as_it_is(pg_dsn: str, schema_name: str) -> None:
    """A long list's head is compared with the version it extends by identity, chunk by
    chunk at memcmp speed (core/identity.py): an item replaced by an equal object of another
    type, past the first chunks, is stored as the new object, not as the str it equals."""
    thread_id = f"eq-{uuid.uuid4().hex[:10]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        history = History(saver, thread_id)
        value = [f"line {i}" for i in range(2500)]
        history.put(value)
        history.put([*value, "appended"])  # an append: the head is the same objects
        changed = [*value, "appended", "again"]
        changed[1500] = Tag.LINE
        assert changed[1500] == value[1500]
        history.put(changed)
        warm = saver.get_tuple({"configurable": {"thread_id": thread_id}}).checkpoint["channel_values"]["items"]  # type: ignore[union-attr]
    assert type(warm[1500]) is Tag and warm == changed
    check_every_checkpoint(pg_dsn, schema_name, thread_id, history.expected, saver.serde)


def _append_steps(saver: Any, thread_id: str, steps: int) -> History:
    """A list grown by pending writes: one item, two items, or a single value, in turn."""
    history = History(saver, thread_id)
    history.put([f"{thread_id}:seed"])
    for step in range(steps):
        new = [f"{thread_id}:{step}:{k} " + "w" * 50 for k in range(1 + step % 2)]
        history.append(new[:1] if step % 3 == 2 else new, single=step % 3 == 2)
    return history


def _check_writes(saver: Any, thread_id: str, history: History) -> None:
    """Every surviving checkpoint's pending writes read back as written, by id and by list()."""
    serde = saver.serde
    listed = {t.checkpoint["id"]: t.pending_writes for t in saver.list({"configurable": {"thread_id": thread_id}})}
    assert listed
    for checkpoint_id, pending in listed.items():
        want = [(t, c, serde.loads_typed(serde.dumps_typed(v))) for t, c, v in history.writes.get(checkpoint_id, [])]
        assert pending == want, checkpoint_id
        assert _types([v for *_, v in pending]) == _types([v for *_, v in want])
        one = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
        assert one.pending_writes == pending


async def test_a_pending_write_stores_its_items_once_and_reads_back(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        history = _append_steps(saver, "pw", 30)
    appended = 1 + sum(len(v) if isinstance(v, list) else 1 for ws in history.writes.values() for _, _, v in ws)
    with psycopg.connect(pg_dsn) as conn:
        items = conn.execute(f'SELECT count(*) FROM "{schema_name}".channel_items').fetchone()[0]
        by_key = conn.execute(f'SELECT count(*) FROM "{schema_name}".checkpoint_writes WHERE item_version IS NOT NULL').fetchone()[0]
    assert items == appended  # in the writes' items, never again in the deltas
    assert by_key == 30
    check_every_checkpoint(pg_dsn, schema_name, "pw", history.expected, saver.serde)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        _check_writes(fresh, "pw", history)
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as asaver:
        latest = await asaver.aget_tuple({"configurable": {"thread_id": "pw"}})
        parent = await asaver.aget_tuple(latest.parent_config)
    assert latest.checkpoint["channel_values"]["items"] == history.order[-1][2]
    assert parent.pending_writes == history.writes[parent.checkpoint["id"]]


def test_a_put_that_outruns_the_pending_write_stores_the_items_itself(pg_dsn: str, schema_name: str) -> None:
    """LangGraph may send a child's put before its parent's writes commit."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        history = History(saver, "outrun")
        history.put(["first"])
        parent = history.head[1]["id"]
        # The writes' items are offered (as put_writes does before it is sent) but never stored.
        built = encode.put_writes_params(
            saver.codec, history.head[0], [("items", ["second"])], "task", "", saver.placement, saver.lists, saver.memory
        )
        for channel, offered, _ in built.offers:
            saver.memory.offer("outrun", "", parent, channel, offered)
        history.put(["first", "second"])
    check_every_checkpoint(pg_dsn, schema_name, "outrun", history.expected, saver.serde)
    with psycopg.connect(pg_dsn) as conn:
        versions = [r[0] for r in conn.execute(f'SELECT version FROM "{schema_name}".channel_items')]
    assert len(versions) == 2 and not any(v.startswith("~") for v in versions)


def test_a_put_waits_for_its_parents_writes_only_when_it_writes_a_list(pg_dsn: str, schema_name: str) -> None:
    """Only a list value can use the items of its parent's pending writes: a put of other
    values (W2's 2 MB value) is sent alongside those writes, never after them."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        waited: list[tuple[str, str, str]] = []
        wait = saver._writes_in_flight.wait
        saver._writes_in_flight.wait = lambda key: waited.append(key) or wait(key)  # type: ignore[method-assign]
        root = {"configurable": {"thread_id": "waits", "checkpoint_ns": ""}}
        first = {"blob": saver.get_next_version(None, None)}
        config = next_put(saver, root, {"blob": b"x" * 64}, first, first, step=0)
        assert waited == []
        grown = {"blob": first["blob"], "items": saver.get_next_version(None, None)}
        next_put(saver, config, {"blob": b"x" * 64, "items": ["a", "b"]}, grown, {"items": grown["items"]}, step=1)
        assert waited == [("waits", "", config["configurable"]["checkpoint_id"])]


def test_missing_items_of_a_pending_write_are_a_clear_error(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        history = _append_steps(saver, "pw-broken", 3)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM \"{schema_name}\".channel_items WHERE version LIKE '~%%'")
    parent = {"configurable": {"thread_id": "pw-broken", "checkpoint_ns": "", "checkpoint_id": history.order[-2][0]}}
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        for config in (parent, {"configurable": {"thread_id": "pw-broken"}}):
            with pytest.raises(ListIntegrityError) as failure:
                fresh.get_tuple(config)
            assert "'pw-broken'" in str(failure.value) and "'items'" in str(failure.value)
        with pytest.raises(ListIntegrityError):
            list(fresh.list({"configurable": {"thread_id": "pw-broken"}}))


# -- chains and deletions ----------------------------------------------------------------------


def _grow(saver: Any, thread_id: str, steps: int) -> History:
    history = History(saver, thread_id)
    value: list[str] = []
    for step in range(steps):
        value = value + [f"{thread_id}:{step}"]
        history.put(value)
    return history


@pytest.mark.parametrize("grow", [_grow, _append_steps], ids=["puts", "pending writes"])
def test_prune_copy_and_delete_keep_every_surviving_checkpoint_restorable(pg_dsn: str, schema_name: str, grow: Any) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=5, list_min_bytes=0) as saver:
        saver.setup()
        a = grow(saver, "chain-a", 13)
        saver.copy_thread("chain-a", "chain-b")
        saver.prune(["chain-a"], strategy="keep_latest")
        latest = a.order[-1][0]
        check_every_checkpoint(pg_dsn, schema_name, "chain-a", {latest: a.expected[latest]}, saver.serde)
        check_every_checkpoint(pg_dsn, schema_name, "chain-b", a.expected, saver.serde)
        _check_writes(saver, "chain-b", a)

        def items_of(thread_id: str) -> int:
            with psycopg.connect(pg_dsn) as conn:
                return conn.execute(f'SELECT count(*) FROM "{schema_name}".channel_items WHERE thread_id = %s', (thread_id,)).fetchone()[0]

        assert items_of("chain-a") == len(a.order[-1][2])  # what the latest list uses, nothing more
        saver.delete_thread("chain-a")
        check_every_checkpoint(pg_dsn, schema_name, "chain-b", a.expected, saver.serde)
        assert items_of("chain-a") == 0


def test_a_missing_chain_row_is_a_clear_error_never_a_wrong_value(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=6, list_min_bytes=0) as saver:
        saver.setup()
        _grow(saver, "broken", 4)  # a snapshot, then three deltas on it
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # "another process" removes the base
        conn.execute(f'DELETE FROM "{schema_name}".channel_values WHERE cardinality(list_chain) = 0')
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        with pytest.raises(ListIntegrityError) as failure:
            fresh.get_tuple({"configurable": {"thread_id": "broken"}})
        with pytest.raises(ListIntegrityError):
            list(fresh.list({"configurable": {"thread_id": "broken"}}))
    assert "'broken'" in str(failure.value) and "'items'" in str(failure.value)


# -- real graphs ---------------------------------------------------------------------------------


class Chat(TypedDict):
    messages: Annotated[list, add_messages]
    log: Annotated[list[str], operator.add]


def chat_graph(checkpointer: Any) -> Any:
    def reply(state: Chat) -> dict:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"re: {last.content}", id=f"ai-{last.id}")], "log": [last.id]}

    graph = StateGraph(Chat)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("snapshot_every", [1, 3, 16])
def test_a_chat_with_edits_and_removals_matches_the_in_memory_saver(pg_dsn: str, schema_name: str, snapshot_every: int) -> None:
    def run(checkpointer: Any) -> tuple[list, list]:
        app = chat_graph(checkpointer)
        config = {"configurable": {"thread_id": "chat"}}
        for turn in range(12):
            app.invoke({"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, config)
            if turn == 5:  # an edit of an earlier message by id, and a removal
                app.update_state(config, {"messages": [HumanMessage("edited", id="h2"), RemoveMessage(id="ai-h3")]})
        history = [(s.values, s.next, s.metadata.get("step")) for s in app.get_state_history(config)]
        return app.get_state(config).values, history

    want = run(InMemorySaver())
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=snapshot_every, list_min_bytes=0) as saver:
        saver.setup()
        run_result = run(saver)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=snapshot_every) as fresh:
        app = chat_graph(fresh)
        config = {"configurable": {"thread_id": "chat"}}
        from_fresh = (app.get_state(config).values, [(s.values, s.next, s.metadata.get("step")) for s in app.get_state_history(config)])
    assert run_result == want
    assert from_fresh == want
    assert [m.id for m in want[0]["messages"]][:6] == ["h0", "ai-h0", "h1", "ai-h1", "h2", "ai-h2"]


def test_items_the_saver_holds_are_not_fetched_again_and_read_the_same(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=4, list_min_bytes=0) as warm:
        warm.setup()
        history = _grow(warm, "cached", 12)
        config = {"configurable": {"thread_id": "cached"}}
        latest_version = history.order[-1][1]
        # The list it just put is known whole: neither its chain rows nor its items come back.
        query = warm._get_tuple_query(config)
        assert ["items", latest_version] in json.loads(query.params["known_lists"])
        with warm.conn.connection() as conn:
            assert not [row for row in warm._send(conn, query) if row[0] in ("i", "l")]
        from_warm = warm.get_tuple(config)
        # An older checkpoint holds another version: read in full, the same as a cold read.
        older = {"configurable": {**config["configurable"], "checkpoint_ns": "", "checkpoint_id": history.order[5][0]}}
        older_warm = warm.get_tuple(older).checkpoint["channel_values"]["items"]
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_cache_bytes=0) as cold:
        query = cold._get_tuple_query(config)
        assert json.loads(query.params["known"]) == json.loads(query.params["known_lists"]) == []
        from_cold = cold.get_tuple(config)
        assert cold.get_tuple(older).checkpoint["channel_values"]["items"] == older_warm == history.order[5][2]
    want = history.expected[history.order[-1][0]]
    assert from_warm.checkpoint["channel_values"]["items"] == from_cold.checkpoint["channel_values"]["items"] == want


# -- LangGraph's own DeltaChannel (beta) ----------------------------------------------------------


def _extend(state: list | None, writes: list) -> list:
    out = list(state or [])
    for batch in writes:
        out.extend(batch)
    return out


try:
    from langgraph.channels.delta import DeltaChannel
except ImportError:  # langgraph < 1.2
    DeltaChannel = None


class Deltas(TypedDict):
    items: Annotated[list, DeltaChannel(_extend, snapshot_frequency=3)] if DeltaChannel else list
    n: int


def delta_channel_graph(checkpointer: Any) -> Any:
    if DeltaChannel is None:
        pytest.skip("DeltaChannel needs langgraph 1.2")
    graph = StateGraph(Deltas)
    graph.add_node("add", lambda s: {"items": [f"item {s['n']}"], "n": s["n"] + 1})
    graph.add_edge(START, "add")
    graph.add_conditional_edges("add", lambda s: "add" if s["n"] < 10 else END, ["add", END])
    return graph.compile(checkpointer=checkpointer)


def test_a_delta_channel_graph_reads_like_the_in_memory_saver(pg_dsn: str, schema_name: str) -> None:
    def run(checkpointer: Any, thread_id: str) -> tuple:
        app = delta_channel_graph(checkpointer)
        config = {"configurable": {"thread_id": thread_id}}
        app.invoke({"items": [], "n": 0}, config)
        return app.get_state(config).values, [s.values for s in app.get_state_history(config)]

    want = run(InMemorySaver(), "d")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        assert run(saver, "d") == want
        saver.copy_thread("d", "d-copy")
        app = delta_channel_graph(saver)
        copy = {"configurable": {"thread_id": "d-copy"}}
        assert (app.get_state(copy).values, [s.values for s in app.get_state_history(copy)]) == want
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        app = delta_channel_graph(fresh)
        config = {"configurable": {"thread_id": "d"}}
        assert app.get_state(config).values == want[0] == {"items": [f"item {i}" for i in range(10)], "n": 10}


def _default_walk(saver: Any, config: dict, channels: list[str]) -> Any:
    """LangGraph's own get_delta_channel_history: one get_tuple per ancestor."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    return BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=channels)


async def test_delta_channel_history_matches_langgraphs_walk_for_every_checkpoint(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        app = delta_channel_graph(saver)
        config = {"configurable": {"thread_id": "walk"}}
        app.invoke({"items": [], "n": 0}, config)
        history = list(app.get_state_history(config))
        fork = app.update_state(history[4].config, {"items": ["forked"]})  # a branch off an old step
        configs = [s.config for s in history] + [fork, config, {"configurable": {"thread_id": "nobody"}}]
        channels = ["items", "n", "absent"]
        for one in configs:
            assert saver.get_delta_channel_history(config=one, channels=channels) == _default_walk(saver, one, channels)
        assert saver.get_delta_channel_history(config=config, channels=[]) == {}
        async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as asaver:
            for one in configs:
                got = await asaver.aget_delta_channel_history(config=one, channels=channels)
                assert got == _default_walk(saver, one, channels)


def test_prune_keeps_the_ancestors_a_delta_channel_replays(pg_dsn: str, schema_name: str) -> None:
    config = {"configurable": {"thread_id": "pruned"}}
    reference = delta_channel_graph(InMemorySaver())
    reference.invoke({"items": [], "n": 0}, config)
    want = reference.get_state(config).values
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        app = delta_channel_graph(saver)
        app.invoke({"items": [], "n": 0}, config)
        before = len(list(saver.list(config)))
        saver.prune(["pruned"], strategy="keep_latest")
        after = len(list(saver.list(config)))
        assert app.get_state(config).values == want
        assert 1 < after < before  # the replayed ancestors stay, older ones go
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert delta_channel_graph(fresh).get_state(config).values == want


def test_delete_for_runs_keeps_the_ancestors_a_surviving_delta_channel_replays(pg_dsn: str, schema_name: str) -> None:
    """A second run's checkpoints replay writes that the first run's checkpoints hold
    (LangGraph takes the run id from metadata; it drops config["run_id"])."""

    def two_runs(checkpointer: Any, thread_id: str) -> tuple[Any, dict]:
        app = delta_channel_graph(checkpointer)
        config = {"configurable": {"thread_id": thread_id}}
        app.invoke({"items": [], "n": 0}, {**config, "metadata": {"run_id": str(uuid.uuid4())}})
        app.invoke({"items": ["second run"], "n": 5}, {**config, "metadata": {"run_id": str(uuid.uuid4())}})
        return app, config

    reference, config = two_runs(InMemorySaver(), "runs")
    want = reference.get_state(config).values
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        app, config = two_runs(saver, "runs")
        history = list(app.get_state_history(config))
        first_run, second_run = history[-1].metadata["run_id"], history[0].metadata["run_id"]
        assert first_run != second_run
        survivors = [(s.config, s.values) for s in history if s.metadata["run_id"] == second_run]
        saver.delete_for_runs([first_run])
        after = list(app.get_state_history(config))
        assert app.get_state(config).values == want
        assert [app.get_state(c).values for c, _ in survivors] == [v for _, v in survivors]
        assert len(survivors) < len(after) < len(history)  # the replayed ancestors stay, older ones go
        saver.delete_for_runs([first_run, second_run])  # nothing survives to replay the first run
        assert list(saver.list(config)) == []
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert delta_channel_graph(fresh).get_state(config).values == {}


def test_items_from_one_kib_are_stored_compressed_and_extend_after_a_fresh_read(pg_dsn: str, schema_name: str) -> None:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rng = random.Random(3)

    def text(size: int) -> str:
        return " ".join(rng.choice(words) for _ in range(size // 5))[:size]

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        history = History(saver, "zipped")
        history.put([text(2000), text(100)])  # one item past the threshold, one under it
        history.append([text(1500)])
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as fresh:
        history.saver = fresh
        history.fork(-1)  # a fresh saver reads the newest list back, then extends it
        history.append([text(1200), "short"])
        history.append([random.Random(9).randbytes(1500)])  # random bytes do not compress: kept as they are
    with psycopg.connect(pg_dsn) as conn:
        stored = conn.execute(f'SELECT type, length(value) FROM "{schema_name}".channel_items ORDER BY version, idx').fetchall()
        snapshots = conn.execute(f'SELECT count(*) FROM "{schema_name}".channel_values WHERE cardinality(list_chain) = 0').fetchone()[0]
    compressed = [n for t, n in stored if t.endswith(COMPRESSED)]
    assert len(compressed) == 3 and all(n < 1100 for n in compressed)
    assert len(stored) == 6  # each item once
    assert snapshots == 1  # the fresh saver's read let it append a delta
    check_every_checkpoint(pg_dsn, schema_name, "zipped", history.expected, fresh.serde)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as reader:
        _check_writes(reader, "zipped", history)
