"""One writer per thread across real processes (README, "Exactly once"): two workers
(fencing_worker.py) run the same thread, the first held inside its first step while the
second starts. The interleaving is forced (the first says `holding` and waits for a line
on stdin; under `wait` the second says on stderr that it waits), nothing sleeps.

- `takeover`: the second run takes the thread and finishes; the first, let go, is refused
  its next write (ThreadTakenError naming the second run), and writes nothing more.
- `reject`: the second run is refused (ThreadBusyError naming the first), writes nothing;
  the first finishes.
- `wait`: the second run waits until the first has finished, then runs after it.
- `allow` (today's behaviour, for contrast): both finish, and the history forks.

In every policy but `allow` the thread's history has no fork: no checkpoint has two children.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from fencing_worker import forks
from langgraph_pg_durable import DurablePostgresSaver

WORKER = Path(__file__).resolve().parent.parent / "support" / "fencing_worker.py"
WAIT_SECONDS = 120  # the longest a worker may take; a bound, not a pause


def _start(dsn: str, schema: str, thread: str, policy: str, name: str, *, hold: bool, mode: str) -> subprocess.Popen[str]:
    flags = [*(["--hold"] if hold else []), *(["--async"] if mode == "async" else [])]
    argv = [sys.executable, str(WORKER), dsn, schema, thread, policy, name, *flags]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _go_on(child: subprocess.Popen[str]) -> None:
    """Let a worker held with --hold go on."""
    assert child.stdin is not None
    child.stdin.write("go on\n")
    child.stdin.flush()


def _said(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    return child.stdout.readline().strip()


def _finish(child: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = child.communicate(timeout=WAIT_SECONDS)
    return child.returncode, out, err


def _history(dsn: str, schema: str, thread: str) -> list[tuple[str, str | None, str]]:
    """(checkpoint id, parent id, run id) of the thread's root checkpoints."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT checkpoint_id, parent_checkpoint_id, run_id FROM {}.checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id"
            ).format(sql.Identifier(schema)),
            (thread,),
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def _runs(dsn: str, schema: str, thread: str) -> list[str]:
    """The thread's runs in the order their first checkpoint was written."""
    seen: list[str] = []
    for _, _, run in _history(dsn, schema, thread):
        if run not in seen:
            seen.append(run)
    return seen


@pytest.fixture
def schema(pg_dsn: str, schema_name: str) -> str:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
    return schema_name


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_takeover_refuses_the_old_run_and_the_history_does_not_fork(mode: str, pg_dsn: str, schema: str) -> None:
    thread = f"takeover-{uuid.uuid4().hex[:8]}"
    old = _start(pg_dsn, schema, thread, "takeover", "old", hold=True, mode=mode)
    try:
        assert _said(old) == "holding"
        held = _history(pg_dsn, schema, thread)  # the old run's checkpoints before its first step
        new = _start(pg_dsn, schema, thread, "takeover", "new", hold=False, mode=mode)
        code, out, err = _finish(new)
        assert (code, out.strip()) == (0, "done"), err
        _go_on(old)
        code, out, err = _finish(old)
    finally:
        old.kill()
    assert code == 3, (out, err)
    old_run, new_run = _runs(pg_dsn, schema, thread)
    assert out.startswith("ThreadTakenError: ") and f"thread {thread!r} was taken by another run: run {new_run!r} holds it" in out
    history = _history(pg_dsn, schema, thread)
    assert forks(pg_dsn, schema, thread) == 0
    # The old run wrote nothing after the new run took the thread.
    assert [row for row in history if row[2] == old_run] == held
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        state = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert state is not None and state.checkpoint["channel_values"]["marks"] == ["old:input", "new:input", "new:first", "new:second"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_reject_refuses_the_new_run_while_the_holder_is_live(mode: str, pg_dsn: str, schema: str) -> None:
    thread = f"reject-{uuid.uuid4().hex[:8]}"
    old = _start(pg_dsn, schema, thread, "reject", "old", hold=True, mode=mode)
    try:
        assert _said(old) == "holding"
        new = _start(pg_dsn, schema, thread, "reject", "new", hold=False, mode=mode)
        code, out, err = _finish(new)
        (old_run,) = _runs(pg_dsn, schema, thread)
        assert code == 3, (out, err)
        assert out.startswith("ThreadBusyError: ") and f"thread {thread!r} is busy: run {old_run!r} holds it since" in out
        _go_on(old)
        code, out, err = _finish(old)
    finally:
        old.kill()
    assert (code, out.strip()) == (0, "done"), err
    history = _history(pg_dsn, schema, thread)
    assert forks(pg_dsn, schema, thread) == 0 and {run for _, _, run in history} == {old_run}
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT status FROM {}.run_log WHERE thread_id = %s").format(sql.Identifier(schema))
        statuses = conn.execute(query, (thread,)).fetchall()
    assert statuses == [("done",)]  # the refused run left no row, and did not mark the holder interrupted


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_wait_runs_the_new_run_after_the_holder(mode: str, pg_dsn: str, schema: str) -> None:
    thread = f"wait-{uuid.uuid4().hex[:8]}"
    old = _start(pg_dsn, schema, thread, "wait", "old", hold=True, mode=mode)
    new = None
    try:
        assert _said(old) == "holding"
        new = _start(pg_dsn, schema, thread, "wait", "new", hold=False, mode=mode)
        assert new.stderr is not None
        waiting = new.stderr.readline()
        assert "waiting for run" in waiting and repr(thread) in waiting, waiting
        _go_on(old)
        code, out, err = _finish(old)
        assert (code, out.strip()) == (0, "done"), err
        code, out, err = _finish(new)
        assert (code, out.strip()) == (0, "done"), err
    finally:
        old.kill()
        if new is not None:
            new.kill()
    history = _history(pg_dsn, schema, thread)
    assert forks(pg_dsn, schema, thread) == 0
    old_run, new_run = _runs(pg_dsn, schema, thread)
    runs = [run for _, _, run in history]
    assert runs == [old_run] * runs.count(old_run) + [new_run] * runs.count(new_run)  # every new checkpoint after the old run's
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        state = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert state is not None
    assert state.checkpoint["channel_values"]["marks"] == ["old:input", "old:first", "old:second", "new:input", "new:first", "new:second"]


def test_allow_keeps_the_old_behaviour_and_forks(pg_dsn: str, schema: str) -> None:
    """For contrast: without fencing, both runs finish and the history forks."""
    thread = f"allow-{uuid.uuid4().hex[:8]}"
    old = _start(pg_dsn, schema, thread, "allow", "old", hold=True, mode="sync")
    try:
        assert _said(old) == "holding"
        new = _start(pg_dsn, schema, thread, "allow", "new", hold=False, mode="sync")
        assert _finish(new)[:2] == (0, "done\n")
        _go_on(old)
        assert _finish(old)[:2] == (0, "done\n")
    finally:
        old.kill()
    assert forks(pg_dsn, schema, thread) == 1
