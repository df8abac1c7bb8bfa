"""Child process of test_fencing_processes.py: one run of a two-step graph on a thread, under
a fencing policy (README, "Exactly once").

    python fencing_worker.py DSN SCHEMA THREAD_ID POLICY NAME [--hold] [--async]

`forks()` counts the forks of a thread's history, for the tests and tools/citus_trials.py.

The graph is `first` then `second`; each appends NAME's mark to the state. With --hold,
`first` prints `holding` once its run holds the thread (the run's first checkpoint is
committed) and reads a line from stdin before it returns: the parent decides when the run
goes on, so the interleaving is forced and nothing sleeps. The saver's log goes to stderr
(`wait` says there that it waits). The run ends by printing `done` (exit 0), or the name of
the error that refused it and its message (exit 3).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import operator
import sys
from collections.abc import Callable
from typing import Annotated, Any

import psycopg
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, ThreadHeldError

REFUSED = 3


def forks(dsn: str, schema: str, thread: str) -> int:
    """How many of the thread's root checkpoints have more than one child (0: one line of history)."""
    with psycopg.connect(dsn) as conn:
        query = sql.SQL(
            "SELECT count(*) FROM (SELECT parent_checkpoint_id FROM {}.checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
            "AND parent_checkpoint_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1) f"
        ).format(sql.Identifier(schema))
        row = conn.execute(query, (thread,)).fetchone()
    assert row is not None
    return int(row[0])


class Marks(TypedDict, total=False):
    marks: Annotated[list[str], operator.add]


def hold_on_stdin() -> None:
    print("holding", flush=True)
    sys.stdin.readline()  # until the parent says go on


def build(saver: Any, name: str, hold: Callable[[], None] | None = None) -> Any:
    """`first` then `second`, each adding NAME's mark; `hold()` runs inside `first`."""

    def first(state: Marks) -> Marks:
        if hold is not None:
            hold()
        return {"marks": [f"{name}:first"]}

    def second(state: Marks) -> Marks:
        return {"marks": [f"{name}:second"]}

    graph = StateGraph(Marks)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph.compile(checkpointer=saver)


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("dsn", "schema", "thread", "policy", "name"):
        parser.add_argument(name)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--async", dest="use_async", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(message)s")
    config = {"configurable": {"thread_id": args.thread}}
    hold = hold_on_stdin if args.hold else None
    inputs: Marks = {"marks": [f"{args.name}:input"]}
    try:
        if args.use_async:

            async def run() -> None:
                async with AsyncDurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema, fencing=args.policy) as saver:
                    await build(saver, args.name, hold).ainvoke(inputs, config, durability="sync")

            asyncio.run(run())
        else:
            with DurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema, fencing=args.policy) as saver:
                build(saver, args.name, hold).invoke(inputs, config, durability="sync")
    except ThreadHeldError as refused:
        print(f"{type(refused).__name__}: {refused}", flush=True)
        return REFUSED
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
