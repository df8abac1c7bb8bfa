"""A process killed (SIGKILL) mid super-step: on resume, finished tasks are not executed again.

The worker (crash_worker.py) runs a super-step of parallel tasks; three finish and their
writes are committed, one blocks. We kill the worker, resume the thread in this process
with a new saver, and count executions in the worker's counter file.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from psycopg import sql

from crash_worker import FAST_TASKS, SLOW_TASK, build_graph, order_input
from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

WORKER = Path(__file__).resolve().parent.parent / "support" / "crash_worker.py"
POLL_TIMEOUT = 60.0  # generous: the worker must import langgraph and open a pool first


def executions(counter_file: Path) -> Counter[str]:
    if not counter_file.exists():
        return Counter()
    return Counter(counter_file.read_text(encoding="utf-8").split())


def committed_fast_writes(dsn: str, schema: str, thread_id: str) -> int:
    """Tasks with committed "results" writes on the thread's newest checkpoint (the fan-out step)."""
    query = sql.SQL(
        """
        SELECT count(DISTINCT w.task_id)
        FROM {s}.checkpoint_writes w
        WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = '' AND w.channel = 'results'
          AND w.checkpoint_id = (
            SELECT max(c.checkpoint_id) FROM {s}.checkpoints c
            WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = '' AND c.step = 1)
        """
    ).format(s=sql.Identifier(schema))
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, {"thread": thread_id}).fetchone()[0]


async def poll_until(condition: Callable[[], bool], *, what: str, child: subprocess.Popen, log: Path) -> None:
    """Poll `condition` until it holds; fail early if the worker dies, or after POLL_TIMEOUT."""
    deadline = time.monotonic() + POLL_TIMEOUT
    while not condition():
        if child.poll() is not None:
            pytest.fail(f"worker exited ({child.returncode}) before {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {POLL_TIMEOUT:.0f}s; worker output:\n{log.read_text()}")
        await asyncio.sleep(0.05)


async def resume(mode: str, dsn: str, schema: str, thread_id: str, counter_file: Path) -> tuple[set[str], dict[str, Any]]:
    """In this process, with a new saver: which tasks' writes survived, and the resumed run's result."""
    config = {"configurable": {"thread_id": thread_id}}
    if mode == "sync":
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
            graph = build_graph(saver, counter_file)
            state = graph.get_state(config)
            pending = saver.get_tuple(config).pending_writes
            names = {t.id: t.name for t in state.tasks}
            final = graph.invoke(None, config, durability="sync")
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
            graph = build_graph(saver, counter_file)
            state = await graph.aget_state(config)
            pending = (await saver.aget_tuple(config)).pending_writes
            names = {t.id: t.name for t in state.tasks}
            final = await graph.ainvoke(None, config, durability="sync")
    assert sorted(names.values()) == sorted([*FAST_TASKS, SLOW_TASK])
    survived = {names[task_id] for task_id, channel, _ in pending if channel == "results"}
    return survived, final


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_sigkill_mid_superstep_reruns_only_the_unfinished_task(mode: str, pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
    thread_id = f"crash-{uuid.uuid4().hex[:8]}"
    counter_file = tmp_path / "executions.log"
    log = tmp_path / "worker.log"
    argv = [
        sys.executable, str(WORKER), pg_dsn, schema_name, thread_id, str(counter_file),
        "--block-until", str(tmp_path / "never-created"),
    ]  # fmt: skip
    if mode == "async":
        argv.append("--async")

    with open(log, "w") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        await poll_until(
            lambda: committed_fast_writes(pg_dsn, schema_name, thread_id) == len(FAST_TASKS) and executions(counter_file)[SLOW_TASK] == 1,
            what="committed writes of the fast tasks while the slow task runs",
            child=child,
            log=log,
        )
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    before = executions(counter_file)
    assert before == Counter({"receive": 1, SLOW_TASK: 1, **{name: 1 for name in FAST_TASKS}})

    survived, final = await resume(mode, pg_dsn, schema_name, thread_id, counter_file)
    assert survived == set(FAST_TASKS)

    reference_counter = tmp_path / "reference.log"
    reference = build_graph(InMemorySaver(), reference_counter).invoke(
        order_input(), {"configurable": {"thread_id": "reference"}}, durability="sync"
    )
    assert final == reference
    assert final["summary"] == f"order-42: {2 + len(FAST_TASKS)} results"

    after = executions(counter_file)
    # Each fast task whose writes were committed ran once in all; the killed task ran twice.
    assert {name: after[name] for name in FAST_TASKS} == {name: 1 for name in FAST_TASKS}
    assert after[SLOW_TASK] == 2
    assert after["receive"] == 1 and after["confirm"] == 1
    assert executions(reference_counter) == Counter({"receive": 1, "confirm": 1, SLOW_TASK: 1, **{n: 1 for n in FAST_TASKS}})
