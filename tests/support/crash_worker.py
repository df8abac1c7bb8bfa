"""Child process of test_crash.py: runs an order-processing graph until the parent SIGKILLs it.

    python crash_worker.py DSN SCHEMA THREAD_ID COUNTER_FILE [--async] [--block-until PATH]

The graph's second super-step runs several tool-like tasks in parallel. Each task
appends its name to COUNTER_FILE when it executes. With --block-until, the
"charge_card" task then waits for PATH to exist, which the parent never creates,
so the run stays inside that super-step until it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

FAST_TASKS = ("lookup_customer", "check_inventory", "quote_shipping")
SLOW_TASK = "charge_card"
BLOCK_LIMIT = 300.0  # seconds; ends an orphaned worker whose parent never killed it


class OrderState(TypedDict):
    order: str
    results: Annotated[list[str], operator.add]
    summary: str


def record(counter_file: Path, name: str) -> None:
    """One line per execution; O_APPEND keeps lines of parallel tasks whole."""
    with open(counter_file, "a", encoding="utf-8") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


def build_graph(checkpointer: Any, counter_file: Path, block_until: Path | None = None) -> Any:
    """receive -> (three fast tasks + charge_card, one super-step) -> confirm."""

    def receive(state: OrderState) -> dict[str, Any]:
        record(counter_file, "receive")
        return {"results": [f"received:{state['order']}"]}

    def fast(name: str) -> Any:
        def run(state: OrderState) -> dict[str, Any]:
            record(counter_file, name)
            return {"results": [f"{name}:{state['order']}:ok"]}

        return run

    def charge_card(state: OrderState) -> dict[str, Any]:
        record(counter_file, SLOW_TASK)
        if block_until is not None:
            deadline = time.monotonic() + BLOCK_LIMIT
            while not block_until.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{SLOW_TASK} was never killed; giving up")
                time.sleep(0.05)
        return {"results": [f"{SLOW_TASK}:{state['order']}:charged"]}

    def confirm(state: OrderState) -> dict[str, Any]:
        record(counter_file, "confirm")
        return {"summary": f"{state['order']}: {len(state['results'])} results"}

    builder = StateGraph(OrderState)
    builder.add_node("receive", receive)
    for name in FAST_TASKS:
        builder.add_node(name, fast(name))
    builder.add_node(SLOW_TASK, charge_card)
    builder.add_node("confirm", confirm)
    builder.add_edge(START, "receive")
    for name in (*FAST_TASKS, SLOW_TASK):
        builder.add_edge("receive", name)
        builder.add_edge(name, "confirm")
    builder.add_edge("confirm", END)
    return builder.compile(checkpointer=checkpointer)


def order_input() -> dict[str, Any]:
    return {"order": "order-42", "results": []}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("schema")
    parser.add_argument("thread_id")
    parser.add_argument("counter_file", type=Path)
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--block-until", type=Path)
    args = parser.parse_args(argv)
    config = {"configurable": {"thread_id": args.thread_id}}

    from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

    if args.use_async:

        async def run() -> None:
            async with AsyncDurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema) as saver:
                graph = build_graph(saver, args.counter_file, args.block_until)
                await graph.ainvoke(order_input(), config, durability="sync")

        asyncio.run(run())
    else:
        with DurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema) as saver:
            graph = build_graph(saver, args.counter_file, args.block_until)
            graph.invoke(order_input(), config, durability="sync")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
