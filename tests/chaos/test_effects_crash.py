"""A tool's side effect is not repeated when its task runs again after a crash (README,
"Exactly once"): the worker (effects_worker.py) charges an order through `once()` /
`aonce()` and is SIGKILLed after the charge returned and before the task's writes were
committed; the thread is resumed in a new process, which runs the task again. The charge
counter, kept in a table of its own, has moved exactly once, and the run goes on with the
first charge's receipt. Twenty trials, sync and async; the interleaving is forced (the
worker says `charged` and waits for its kill), nothing sleeps.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from effects_worker import build_graph
from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

WORKER = Path(__file__).resolve().parent.parent / "support" / "effects_worker.py"
TRIALS = 20
WAIT_SECONDS = 120  # the longest a worker may take to charge; a bound, not a pause


def _charges(dsn: str, schema: str, order: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL("SELECT n FROM {}.charges WHERE order_id = %s").format(sql.Identifier(schema)), (order,)).fetchone()
    return row[0] if row else 0


def _killed_after_the_charge(argv: list[str]) -> str:
    """Run the worker until it says it charged, then SIGKILL it; the receipt's token."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = child.stdout.readline() if child.stdout else ""  # blocks until the charge is recorded
        assert said.startswith("charged "), f"the worker ended before charging: {said}{child.stdout.read() if child.stdout else ''}"
        child.kill()
        assert child.wait(timeout=WAIT_SECONDS) == -9
        return said.split()[1]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


async def _resume_async(dsn: str, schema: str, config: dict[str, object]) -> dict[str, object]:
    async with AsyncDurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        return await build_graph(saver, dsn, schema, use_async=True).ainvoke(None, config, durability="sync")  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_charge_survives_a_crash_exactly_once(mode: str, pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {}.charges (order_id text PRIMARY KEY, n integer NOT NULL)").format(sql.Identifier(schema_name)))
    for trial in range(TRIALS):
        thread = f"order-{mode}-{trial}-{uuid.uuid4().hex[:6]}"
        argv = [sys.executable, str(WORKER), pg_dsn, schema_name, thread, "--hold", *(["--async"] if mode == "async" else [])]
        token = _killed_after_the_charge(argv)
        assert _charges(pg_dsn, schema_name, thread) == 1
        config = {"configurable": {"thread_id": thread}}
        if mode == "async":
            final = asyncio.run(_resume_async(pg_dsn, schema_name, config))
        else:
            with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
                final = build_graph(saver, pg_dsn, schema_name).invoke(None, config, durability="sync")
        assert _charges(pg_dsn, schema_name, thread) == 1, f"trial {trial}: the card was charged again"
        assert final["confirmed"] is True and final["receipt"] == {"order": thread, "charge": 1, "token": token}
