"""Child process of test_effects_crash.py: a graph whose `charge` task charges an order once
(`once()` / `aonce()`), and, with --hold, says so and waits to be killed before the task's
writes are committed.

    python effects_worker.py DSN SCHEMA THREAD_ID [--async] [--hold]

The charge is real and outside the graph: it adds 1 to the order's row in SCHEMA.charges
(its own connection, committed) and returns a receipt with a random token. With --hold the
task prints `charged TOKEN` once `once` has returned (the result is committed) and reads
stdin, which the parent never closes: the process is inside the super-step, its writes not
stored, until the parent SIGKILLs it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, aonce, once


class Order(TypedDict, total=False):
    order: str
    receipt: dict[str, Any]
    confirmed: bool


def _charge_statement(schema: str) -> sql.Composed:
    return sql.SQL(
        "INSERT INTO {}.charges AS c (order_id, n) VALUES (%s, 1) ON CONFLICT (order_id) DO UPDATE SET n = c.n + 1 RETURNING n"
    ).format(sql.Identifier(schema))


def charge_card(dsn: str, schema: str, order: str) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(_charge_statement(schema), (order,)).fetchone()
    assert row is not None
    return {"order": order, "charge": row[0], "token": uuid.uuid4().hex}


async def acharge_card(dsn: str, schema: str, order: str) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        row = await (await conn.execute(_charge_statement(schema), (order,))).fetchone()
    assert row is not None
    return {"order": order, "charge": row[0], "token": uuid.uuid4().hex}


def _held(receipt: dict[str, Any]) -> None:
    print(f"charged {receipt['token']}", flush=True)
    sys.stdin.read()  # until killed: the parent keeps stdin open


def build_graph(checkpointer: Any, dsn: str, schema: str, *, hold: bool = False, use_async: bool = False) -> Any:
    """charge -> confirm; `charge` calls the card through once()/aonce()."""

    def charge(state: Order, config: RunnableConfig) -> dict[str, Any]:
        receipt = once(config, "charge", charge_card, dsn, schema, state["order"])
        if hold:
            _held(receipt)
        return {"receipt": receipt}

    async def acharge(state: Order, config: RunnableConfig) -> dict[str, Any]:
        receipt = await aonce(config, "charge", acharge_card, dsn, schema, state["order"])
        if hold:
            await asyncio.to_thread(_held, receipt)
        return {"receipt": receipt}

    graph = StateGraph(Order)
    graph.add_node("charge", acharge if use_async else charge)
    graph.add_node("confirm", lambda state: {"confirmed": True})
    graph.add_edge(START, "charge")
    graph.add_edge("charge", "confirm")
    graph.add_edge("confirm", END)
    return graph.compile(checkpointer=checkpointer)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("schema")
    parser.add_argument("thread_id")
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--hold", action="store_true")
    args = parser.parse_args()
    config = {"configurable": {"thread_id": args.thread_id}}
    order = {"order": args.thread_id}
    if args.use_async:

        async def run() -> None:
            async with AsyncDurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema) as saver:
                graph = build_graph(saver, args.dsn, args.schema, hold=args.hold, use_async=True)
                await graph.ainvoke(order, config, durability="sync")

        asyncio.run(run())
    else:
        with DurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema) as saver:
            build_graph(saver, args.dsn, args.schema, hold=args.hold).invoke(order, config, durability="sync")


if __name__ == "__main__":
    main()
