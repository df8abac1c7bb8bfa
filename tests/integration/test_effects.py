"""`once()` and `aonce()` on real graphs (README, "Exactly once"): a task run again (resumed
after an error, retried in process by a RetryPolicy, resumed after an interrupt inside a
langchain `create_agent` tool) gets the recorded result and the function is not called
again; calls in a loop are told apart; the result reads back in SQL; what cannot be
recorded is refused by name, and the records go with their thread."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, interrupt
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import (
    AsyncDurablePostgresSaver,
    ConfigError,
    DurablePostgresSaver,
    HistoryRewoundError,
    SerializationError,
    aonce,
    idempotency_key,
    once,
)


class State(TypedDict, total=False):
    order: str
    receipts: list[Any]
    keys: list[str]


class Card:
    """A card whose charges are counted, and which can refuse the first attempts after charging."""

    def __init__(self, failures: int = 0) -> None:
        self.charges: list[str] = []
        self.failures = failures
        self.ids = itertools.count(1)

    def charge(self, order: str, amount: int = 10) -> dict[str, Any]:
        self.charges.append(order)
        return {"order": order, "amount": amount, "charge": next(self.ids)}

    async def acharge(self, order: str, amount: int = 10) -> dict[str, Any]:
        return self.charge(order, amount)

    def after_charge(self) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the network went away after the charge")


def _rows(dsn: str, schema: str, thread: str) -> list[tuple[str, Any]]:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT key, result FROM {}.effects WHERE thread_id = %s ORDER BY key").format(sql.Identifier(schema))
        return [(r[0], r[1]) for r in conn.execute(query, (thread,)).fetchall()]


def _charging(card: Card, saver: Any, *, retry: RetryPolicy | None = None) -> Any:
    def charge(state: State, config: RunnableConfig) -> dict[str, Any]:
        receipts = [once(config, "charge", card.charge, state["order"], amount=n) for n in (10, 20, 30)]
        receipts.append(once(config, "charge", card.charge, state["order"], key="shipping", amount=5))
        keys = [idempotency_key(config, "refund"), idempotency_key(config, "refund")]
        card.after_charge()
        return {"receipts": receipts, "keys": keys}

    graph = StateGraph(State)
    graph.add_node("charge", charge, retry_policy=retry)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", END)
    return graph.compile(checkpointer=saver)


def test_a_task_run_again_after_an_error_calls_nothing_again(pg_dsn: str, schema_name: str) -> None:
    card = Card(failures=1)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        graph = _charging(card, saver)
        config = {"configurable": {"thread_id": "order-1"}}
        with pytest.raises(RuntimeError, match="network went away"):
            graph.invoke({"order": "o-1"}, config, durability="sync")
        assert len(card.charges) == 4
        final = graph.invoke(None, config, durability="sync")  # LangGraph runs the failed task again
    assert len(card.charges) == 4
    assert [r["amount"] for r in final["receipts"]] == [10, 20, 30, 5] and [r["charge"] for r in final["receipts"]] == [1, 2, 3, 4]
    assert final["keys"][0] == final["keys"][1]  # the key of the next call, not a call
    assert [key for key, _ in _rows(pg_dsn, schema_name, "order-1")] == ["charge#0", "charge#1", "charge#2", "charge/shipping"]
    assert _rows(pg_dsn, schema_name, "order-1")[1][1] == {"order": "o-1", "amount": 20, "charge": 2}  # readable in SQL


def test_a_retry_in_process_calls_nothing_again(pg_dsn: str, schema_name: str) -> None:
    card = Card(failures=2)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        retry = RetryPolicy(max_attempts=3, initial_interval=0.0, jitter=False, retry_on=RuntimeError)
        final = _charging(card, saver, retry=retry).invoke({"order": "o-2"}, {"configurable": {"thread_id": "order-2"}}, durability="sync")
    assert len(card.charges) == 4 and [r["charge"] for r in final["receipts"]] == [1, 2, 3, 4]


async def test_aonce_in_an_async_node_and_once_in_a_sync_node_of_an_async_graph(pg_dsn: str, schema_name: str) -> None:
    card = Card(failures=2)

    async def charge(state: State, config: RunnableConfig) -> dict[str, Any]:
        receipt = await aonce(config, "charge", card.acharge, state["order"])
        card.after_charge()
        return {"receipts": [receipt]}

    def ship(state: State, config: RunnableConfig) -> dict[str, Any]:
        receipt = once(config, "ship", card.charge, state["order"], amount=1)
        card.after_charge()
        return {"receipts": [*state["receipts"], receipt]}

    graph = StateGraph(State)
    graph.add_node("charge", charge)
    graph.add_node("ship", ship)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", "ship")
    graph.add_edge("ship", END)
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "order-3"}}
        for _ in range(2):
            with pytest.raises(RuntimeError):
                await app.ainvoke({"order": "o-3"} if _ == 0 else None, config, durability="sync")
        final = await app.ainvoke(None, config, durability="sync")
    assert card.charges == ["o-3", "o-3"] and [r["charge"] for r in final["receipts"]] == [1, 2]


def test_a_create_agent_tool_paused_after_its_charge_does_not_charge_again(pg_dsn: str, schema_name: str) -> None:
    """The agents people run: a langchain `create_agent` tool charges, then asks a person to
    confirm (`interrupt`); on the resume the tool runs again from its first line."""
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from tests.frameworks.scripted import ScriptedChatModel, ai, call

    card = Card()

    @tool
    def buy(item: str, config: RunnableConfig) -> str:
        """Buy an item."""
        receipt = once(config, "charge", card.charge, item)
        approved = interrupt({"confirm": receipt})
        return f"bought {item} (charge {receipt['charge']}, {approved})"

    model = ScriptedChatModel(answers=[ai("ai-1", "", call("buy", "c-1", item="lamp")), ai("ai-2", "done")])
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        agent = create_agent(model, tools=[buy], checkpointer=saver)
        config = {"configurable": {"thread_id": "shop-1"}}
        paused = agent.invoke({"messages": [("user", "buy a lamp")]}, config, durability="sync")
        assert paused["__interrupt__"][0].value == {"confirm": {"order": "lamp", "amount": 10, "charge": 1}}
        final = agent.invoke(Command(resume="yes"), config, durability="sync")
    assert card.charges == ["lamp"]
    assert final["messages"][-2].content == "bought lamp (charge 1, yes)"
    assert [key for key, _ in _rows(pg_dsn, schema_name, "shop-1")] == ["charge#0"]


def test_what_cannot_be_recorded_is_refused_by_name(pg_dsn: str, schema_name: str) -> None:
    def charge(state: State, config: RunnableConfig) -> dict[str, Any]:
        once(config, "open-socket", lambda: __import__("socket").socket())
        return {}

    graph = StateGraph(State)
    graph.add_node("charge", charge)
    graph.add_edge(START, "charge")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        with pytest.raises(SerializationError, match="open-socket#0"):
            graph.compile(checkpointer=saver).invoke({"order": "x"}, {"configurable": {"thread_id": "bad"}}, durability="sync")
    assert _rows(pg_dsn, schema_name, "bad") == []
    with pytest.raises(ConfigError, match="InMemorySaver"):
        graph.compile(checkpointer=InMemorySaver()).invoke({"order": "x"}, {"configurable": {"thread_id": "mem"}})
    with pytest.raises(ConfigError, match="runs inside a graph's task"):
        once({"configurable": {"thread_id": "t", "__pregel_scratchpad": object()}}, "charge", lambda: 1)


def test_encrypted_results_stay_encrypted_and_records_go_with_their_thread(pg_dsn: str, schema_name: str) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    card = Card()
    serde = EncryptedSerializer.from_pycryptodome_aes(key=uuid.uuid4().bytes)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=serde) as saver:
        saver.setup()
        graph = _charging(card, saver)
        final = graph.invoke({"order": "secret-order"}, {"configurable": {"thread_id": "enc"}}, durability="sync")
        assert final["receipts"][0]["order"] == "secret-order"
        rows = _rows(pg_dsn, schema_name, "enc")
        assert len(rows) == 4 and all(result == {"$lgpd": "encrypted"} for _, result in rows)
        with psycopg.connect(pg_dsn) as conn:
            raw = conn.execute(sql.SQL("SELECT value FROM {}.effects").format(sql.Identifier(schema_name))).fetchall()
        assert raw and all(b"secret-order" not in bytes(v) for (v,) in raw)
        saver.delete_thread("enc")
    assert _rows(pg_dsn, schema_name, "enc") == []


def test_a_record_gone_from_the_server_is_refused_not_repeated(pg_dsn: str, schema_name: str) -> None:
    """The server lost a result this saver saw recorded (a failover to a standby that had
    not received it; here another process deletes it): the task is refused, not run again."""
    card = Card(failures=1)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        graph = _charging(card, saver)
        config = {"configurable": {"thread_id": "rewound"}}
        with pytest.raises(RuntimeError):
            graph.invoke({"order": "o-9"}, config, durability="sync")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DELETE FROM {}.effects WHERE key = 'charge#1'").format(sql.Identifier(schema_name)))
        with pytest.raises(HistoryRewoundError, match="'charge#1'.*no longer stored") as refused:
            graph.invoke(None, config, durability="sync")
    assert refused.value.thread_id == "rewound" and len(card.charges) == 4


def test_a_task_inside_a_subgraph_is_keyed_in_the_subgraphs_namespace(pg_dsn: str, schema_name: str) -> None:
    card = Card(failures=1)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        inner = _charging(card, None)  # compiled without a checkpointer: it uses the parent's
        outer = StateGraph(State)
        outer.add_node("shop", inner)
        outer.add_edge(START, "shop")
        outer.add_edge("shop", END)
        graph = outer.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "nested"}}
        with pytest.raises(RuntimeError):
            graph.invoke({"order": "o-n"}, config, durability="sync")
        final = graph.invoke(None, config, durability="sync")
    assert len(card.charges) == 4 and [r["charge"] for r in final["receipts"]] == [1, 2, 3, 4]
    with psycopg.connect(pg_dsn) as conn:
        namespaces = conn.execute(
            sql.SQL("SELECT DISTINCT checkpoint_ns FROM {}.effects WHERE thread_id = 'nested'").format(sql.Identifier(schema_name))
        ).fetchall()
    assert [ns for (ns,) in namespaces] != [""] and all(ns.startswith("shop:") for (ns,) in namespaces)
