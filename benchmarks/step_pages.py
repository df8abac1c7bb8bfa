"""The replay page's step pages on a long thread and a short one (issue 29): a step page
(the first step, a middle one, the last), a missing step (404) and the JSON of step 0,
each timed warm on a thread of 200 checkpoints and one of 20,000, with the ratio of their
medians. Ratios are reported, never asserted.

    python -m benchmarks.step_pages [--dsn DSN] [--steps 200,20000] [--repeat 30] [--json OUT]

Without --dsn a PostgreSQL is started as the tests start one; either way the threads go in
a fresh schema, dropped afterwards. The app runs in this process (Starlette's TestClient,
`create_app(Target(dsn, schema).saver)`); each request is sent 3 times to warm up, then
--repeat times, the threads alternating; the figure is the median.

Both threads are a tool-calling agent (tests/support/agents.py: a scripted chat model and
an `add` tool) on DurablePostgresSaver, in turns of up to nine tool calls, each turn
opening by clearing the conversation (RemoveMessage of all messages): a step's state is
as big on either thread, so a ratio shows what the thread's length costs, not a bigger
state. The short thread is made by the graph. The long one would take the graph minutes,
so it is made in three parts:
- the graph runs a template thread: a first turn, then turns of 400 checkpoints;
- its rows are read, rewritten and written back (COPY) into the long thread, the first
  turn once and the 400 checkpoints as often as fits, each copy a valid continuation: new uuid6 checkpoint
  ids (times shifted, clock_seq = step, as LangGraph makes them) after the previous ones,
  parents chained, steps continued (column and metadata), channel versions counted on and
  list write keys renamed (in checkpoints, channel_values, channel_items and the writes'
  bytes), task ids derived from the new checkpoint ids as LangGraph derives them (checked
  on the template first), each turn a new run (run_log, the actions); the copies are
  placed in the past, so that
- the graph itself adds the last turns (resuming from the copied history) to the exact
  length; the template is then deleted. (About 40 s for 20,000 checkpoints on 2 cores.)
The long thread is checked: a linear history of steps -1..n-2, no channel's version going
back, a copied checkpoint's state equal to its original's, `get_tuple` of the newest and
`list_steps(step=0)`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from starlette.testclient import TestClient
from xxhash import xxh3_128_hexdigest

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli.target import Target
from langgraph_pg_durable.web import create_app

from .stats import rotation, summary

_TESTS = str(Path(__file__).resolve().parent.parent / "tests" / "support")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
import agents  # noqa: E402
from pg_server import start_pg_server  # noqa: E402

TOOL_CALLS = 9  # the most a turn makes: 2 * 9 + 3 = 21 checkpoints
TEMPLATE_STEPS = 400  # checkpoints of the template's turns that are copied
WARM_UP = 3
MISSING_STEP = 999_999
BASE_URL = "http://127.0.0.1:8765"  # the app answers loopback Host names only
TEMPLATE_THREAD = "step-pages-template"

# The columns of each table the copy writes. A column not named here makes the copy
# refuse: it could hold an id or a version the copy does not rewrite.
COLUMNS = {
    "checkpoints": (
        "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "run_id", "step", "source", "created_at",
        "checkpoint", "value_channels", "value_versions", "metadata", "metadata_exact",
    ),
    "checkpoint_writes": (
        "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "task_path", "channel", "type", "value", "created_at",
        "object_key", "object_sha256", "object_size", "item_version", "run_id", "step", "agent", "action_type", "payload",
    ),
    "action_log": (
        "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "run_id", "idx", "step", "agent", "action_type", "payload",
        "created_at",
    ),
    "run_log": ("thread_id", "run_id", "started_at", "ended_at", "first_step", "last_step", "status", "status_step", "agents"),
    "channel_values": (
        "thread_id", "checkpoint_ns", "channel", "version", "type", "value", "object_key", "object_sha256", "object_size",
        "list_chain", "item_versions",
    ),
    "channel_items": (
        "thread_id", "checkpoint_ns", "channel", "version", "idx", "type", "value", "object_key", "object_sha256", "object_size",
    ),
}  # fmt: skip
JSONB_COLUMNS = frozenset({"checkpoint", "metadata", "payload"})

# A channel version ("0000002a." then 11 random characters) and a list write key ("~" then 12).
VERSION = re.compile(r"[0-9a-f]{8}\.[A-Za-z0-9_-]{11}")
KEY = re.compile(r"~[A-Za-z0-9_-]{12}")
TOKEN_BYTES = re.compile(rb"[0-9a-f]{8}\.[A-Za-z0-9_-]{11}|~[A-Za-z0-9_-]{12}")
PULL_TASK = re.compile(r"~__pregel_pull, (.+)")


class CopyRefused(RuntimeError):
    """The template holds something the copy cannot rewrite faithfully; the message names it."""


# -- the conversation ---------------------------------------------------------------------


def turns(checkpoints: int) -> list[int]:
    """Tool calls of each turn, so that the turns make exactly `checkpoints` checkpoints
    (a turn of c calls makes 2c + 3), fewest calls first."""
    if checkpoints % 2 == 1 and 3 <= checkpoints <= 2 * TOOL_CALLS + 3:
        return [(checkpoints - 3) // 2]
    if checkpoints < 6:
        raise ValueError(f"no turns make {checkpoints} checkpoints (3, 5 or 6 and more)")
    if checkpoints <= 2 * TOOL_CALLS + 7:
        return sorted([0, *turns(checkpoints - 3)])
    return sorted([TOOL_CALLS, *turns(checkpoints - 2 * TOOL_CALLS - 3)])


def run_turns(saver: DurablePostgresSaver, thread_id: str, plan: list[int]) -> None:
    """The agent runs one turn per entry of `plan` (its tool calls) on the thread."""
    replies: list[AIMessage] = []
    for turn, calls in enumerate(plan):
        tag = f"{thread_id}-{turn}"
        replies += [
            AIMessage(
                "", id=f"ai-{tag}-{i}", tool_calls=[agents.call("add", f"call-{tag}-{i}", a=i, b=1)], usage_metadata=agents.usage(40, 9)
            )
            for i in range(calls)
        ]
        replies.append(AIMessage(f"The {calls} sums are done.", id=f"ai-{tag}-end", usage_metadata=agents.usage(60, 7)))
    graph = agents.tool_agent(saver, replies)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 4 * TOOL_CALLS + 10}
    for turn, calls in enumerate(plan):
        question = HumanMessage(f"add one to each of 0..{calls - 1}", id=f"q-{thread_id}-{turn}")
        graph.invoke({"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), question]}, config, durability="sync")


# -- copying the template -----------------------------------------------------------------


def pull_task_id(checkpoint_id: str, step: int, node: str) -> str:
    """The id LangGraph gives the task that runs `node` from a checkpoint of step `step - 1`
    (checkpoint format v2+: xxh3 of the checkpoint id, node, step, node, PULL and the
    node's trigger; the agent's nodes each have one, named after it)."""
    trigger = node if node == "__start__" else f"branch:to:{node}"
    parts = f"{node}{step}{node}__pregel_pull{trigger}".encode()
    digest = xxh3_128_hexdigest(bytes.fromhex(checkpoint_id.replace("-", "")) + parts)
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def shifted_checkpoint_id(checkpoint_id: str, shift_us: int, step: int) -> str:
    """A uuid6 `shift_us` later than `checkpoint_id`, its clock_seq the step (as LangGraph's)."""
    old = uuid.UUID(checkpoint_id).int
    timestamp = ((old >> 80) << 12 | (old >> 64) & 0x0FFF) + shift_us * 10  # 100 ns units
    new = ((timestamp >> 12) & 0xFFFFFFFFFFFF) << 80 | 6 << 76 | (timestamp & 0x0FFF) << 64  # time, version 6
    new |= (0x8000 | step & 0x3FFF) << 48 | old & 0xFFFFFFFFFFFF  # RFC variant, clock_seq, node
    return str(uuid.UUID(int=new))


def shifted_run_id(run_id: str, shift_us: int) -> str:
    """A uuid7 run id `shift_us` (whole milliseconds) later, its random bits kept."""
    old = uuid.UUID(run_id)
    if old.version != 7:
        raise CopyRefused(f"run id {run_id!r} is not a uuid7: the copy shifts its time")
    return str(uuid.UUID(int=((old.int >> 80) + shift_us // 1000) << 80 | old.int & ((1 << 80) - 1)))


def _micros(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=value.tzinfo)) // timedelta(microseconds=1)


def _uuid6_micros(checkpoint_id: str) -> int:
    """The time of a uuid6, in microseconds since 1970."""
    value = uuid.UUID(checkpoint_id).int
    return (((value >> 80) << 12 | (value >> 64) & 0x0FFF) - 0x01B21DD213814000) // 10


class Template:
    """The rows of the graph-made template thread, and how to copy them into another thread:
    the first turn (`first` checkpoints) once, then the rest (the block) as often as asked."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]], first: int) -> None:
        self.rows = rows
        checkpoints = sorted(rows["checkpoints"], key=lambda r: r["checkpoint_id"])
        self.step_of = {r["checkpoint_id"]: r["step"] for r in checkpoints}
        self._check(checkpoints)
        self.checkpoints, self.block = checkpoints, checkpoints[first:]
        self.block_ids = {r["checkpoint_id"] for r in self.block}
        self.first_last = checkpoints[first - 1]["checkpoint_id"]
        # Versions count up along the thread: the block's own are those past the first turn's.
        self.first_top = max(self._counter(v) for r in checkpoints[:first] for v in r["checkpoint"]["channel_versions"].values())
        block_versions = [v for r in self.block for v in r["checkpoint"]["channel_versions"].values()]
        block_versions += [r["version"] for r in rows["channel_values"] if VERSION.fullmatch(r["version"])]
        self.version_span = max(self._counter(v) for v in block_versions) - self.first_top
        self.write_keys = {w["item_version"] for w in rows["checkpoint_writes"] if w["item_version"]}
        self.block_keys = {
            w["item_version"] for w in rows["checkpoint_writes"] if w["checkpoint_id"] in self.block_ids and w["item_version"]
        }
        # What the block reads of the first turn is its last checkpoint's versions; in a copy
        # they are the previous copy's last versions, found where the block's last has them.
        self.carried = self._carried(checkpoints[first - 1]["checkpoint"], self.block[-1]["checkpoint"])
        self.known = set(self.carried) | self.write_keys | {r["version"] for r in rows["channel_values"]}
        # The block's copies follow each other this far apart: more than the whole template
        # spans (every time it holds, ids included), so a copy's rows all come after the previous copy's.
        times = [_micros(r["created_at"]) for table in ("checkpoints", "checkpoint_writes", "action_log") for r in rows[table]]
        times += [_micros(r[c]) for r in rows["run_log"] for c in ("started_at", "ended_at")]
        times += [_micros(datetime.fromisoformat(r["checkpoint"]["ts"])) for r in checkpoints]
        times += [_uuid6_micros(r["checkpoint_id"]) for r in checkpoints]
        times += [(uuid.UUID(r["run_id"]).int >> 80) * 1000 for r in rows["run_log"]]
        self.span_us = (max(times) - min(times)) // 1000 * 1000 + 2000

    def _check(self, checkpoints: list[dict[str, Any]]) -> None:
        parent = None
        for step, row in enumerate(checkpoints, start=-1):
            if row["checkpoint_ns"] or row["step"] != step or row["parent_checkpoint_id"] != parent:
                raise CopyRefused(f"the template is not a linear root history at step {step}")
            if row["metadata_exact"] is not None:
                raise CopyRefused(f"checkpoint {row['checkpoint_id']} keeps metadata_exact, which the copy does not rewrite")
            parent = row["checkpoint_id"]
        for table in ("checkpoint_writes", "channel_values", "channel_items"):
            if any(r["object_key"] is not None for r in self.rows[table]):
                raise CopyRefused(f"{table} references an object store value, which the copy does not duplicate")
        for table in ("checkpoint_writes", "action_log"):
            for r in self.rows[table]:
                node = r["agent"] if table == "action_log" else PULL_TASK.fullmatch(r["task_path"])[1]  # type: ignore[index]
                if r["task_id"] != pull_task_id(r["checkpoint_id"], self.step_of[r["checkpoint_id"]] + 1, node):
                    raise CopyRefused(f"task {r['task_id']} of {table} is not the id LangGraph derives: the copy cannot rename it")

    @staticmethod
    def _counter(version: str) -> int:
        return int(version[:8], 16)

    @staticmethod
    def _carried(before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
        found: dict[str, str] = {}
        pairs = [(before["channel_versions"], after["channel_versions"])]
        pairs += [(seen, after["versions_seen"].get(node, {})) for node, seen in before["versions_seen"].items()]
        for old, new in pairs:
            if set(old) != set(new):
                raise CopyRefused("the first turn and the block end in states of another shape: their versions do not pair up")
            for channel, version in old.items():
                if found.setdefault(version, new[channel]) != new[channel]:
                    raise CopyRefused(f"version {version} of the first turn pairs with two of the block's")
        return found

    # -- one copy --------------------------------------------------------------------------

    def token(self, token: str, copy: int) -> str:
        """A version or write key as copy `copy` of the block has it (0: as the template has it)."""
        if copy == 0:
            return token
        if VERSION.fullmatch(token) and self._counter(token) > self.first_top:
            return f"{self._counter(token) + copy * self.version_span:08x}{token[8:]}"
        if token in self.block_keys:
            digest = hashlib.sha256(f"{token}/{copy}".encode()).digest()
            return "~" + base64.urlsafe_b64encode(digest).decode()[:12]
        if token in self.carried:
            return self.token(self.carried[token], copy - 1)
        raise CopyRefused(f"the block reads {token!r} of the first turn, which its copies cannot carry on")

    def _bytes(self, value: bytes | None, copy: int) -> bytes | None:
        """Serialized bytes with the versions and write keys they name (a packed write's item
        keys) renamed; the same length, so the msgpack around them stays valid."""
        if value is None or copy == 0:
            return value
        return TOKEN_BYTES.sub(lambda m: self.token(m[0].decode(), copy).encode() if m[0].decode() in self.known else m[0], value)

    def copy(self, thread_id: str, copy: int, shift_us: int, after: str | None) -> dict[str, list[dict[str, Any]]]:
        """Copy `copy` of the block (0: the whole template), `shift_us` later than the
        template and continuing the checkpoint `after` (the previous copy's last), as rows by table."""
        checkpoints = self.checkpoints if copy == 0 else self.block
        ids = {r["checkpoint_id"] for r in checkpoints}
        offset = copy * len(self.block)
        step = {r["checkpoint_id"]: r["step"] + offset for r in checkpoints}
        new_id = {old: shifted_checkpoint_id(old, shift_us, s) for old, s in step.items()}
        if after is not None:
            new_id[self.first_last] = after
        delta = timedelta(microseconds=shift_us)
        runs = {r["run_id"] for r in checkpoints}

        def tokens(values: list[str] | None) -> list[str] | None:
            return None if values is None else [self.token(v, copy) for v in values]

        out: dict[str, list[dict[str, Any]]] = {table: [] for table in COLUMNS}
        for r in checkpoints:
            document = dict(r["checkpoint"])
            document["ts"] = (datetime.fromisoformat(document["ts"]) + delta).isoformat()
            document["channel_versions"] = {ch: self.token(v, copy) for ch, v in document["channel_versions"].items()}
            document["versions_seen"] = {
                node: {ch: self.token(v, copy) for ch, v in seen.items()} for node, seen in document["versions_seen"].items()
            }
            if "id" in document:
                document["id"] = new_id[r["checkpoint_id"]]
            out["checkpoints"].append(
                {
                    **r,
                    "thread_id": thread_id,
                    "checkpoint_id": new_id[r["checkpoint_id"]],
                    "parent_checkpoint_id": new_id.get(r["parent_checkpoint_id"]) if r["parent_checkpoint_id"] else None,
                    "run_id": shifted_run_id(r["run_id"], shift_us) if r["run_id"] else None,
                    "step": step[r["checkpoint_id"]],
                    "created_at": r["created_at"] + delta,
                    "checkpoint": document,
                    "value_versions": tokens(r["value_versions"]),
                    "metadata": {**r["metadata"], "step": step[r["checkpoint_id"]]},
                }
            )
        for r in self.rows["checkpoint_writes"]:
            if r["checkpoint_id"] in ids:
                node = PULL_TASK.fullmatch(r["task_path"])[1]  # type: ignore[index]
                out["checkpoint_writes"].append(
                    {
                        **r,
                        "thread_id": thread_id,
                        "checkpoint_id": new_id[r["checkpoint_id"]],
                        "task_id": pull_task_id(new_id[r["checkpoint_id"]], step[r["checkpoint_id"]] + 1, node),
                        "value": self._bytes(r["value"], copy),
                        "created_at": r["created_at"] + delta,
                        "item_version": self.token(r["item_version"], copy) if r["item_version"] else None,
                        # The task's action, when its packed row holds one (migration 0014).
                        "run_id": shifted_run_id(r["run_id"], shift_us) if r["run_id"] else r["run_id"],
                        "step": None if r["step"] is None else r["step"] + offset,
                    }
                )
        for r in self.rows["action_log"]:
            if r["checkpoint_id"] in ids:
                out["action_log"].append(
                    {
                        **r,
                        "thread_id": thread_id,
                        "checkpoint_id": new_id[r["checkpoint_id"]],
                        "task_id": pull_task_id(new_id[r["checkpoint_id"]], step[r["checkpoint_id"]] + 1, r["agent"]),
                        "run_id": shifted_run_id(r["run_id"], shift_us) if r["run_id"] else "",
                        "step": None if r["step"] is None else r["step"] + offset,
                        "created_at": r["created_at"] + delta,
                    }
                )
        for r in self.rows["run_log"]:
            if r["run_id"] in runs:
                moved = {c: None if r[c] is None else r[c] + offset for c in ("first_step", "last_step", "status_step")}
                out["run_log"].append(
                    {
                        **r,
                        **moved,
                        "thread_id": thread_id,
                        "run_id": shifted_run_id(r["run_id"], shift_us),
                        "started_at": r["started_at"] + delta,
                        "ended_at": r["ended_at"] + delta,
                    }
                )
        for table in ("channel_values", "channel_items"):
            for r in self.rows[table]:
                if copy > 0 and not self._own(r["version"]):
                    continue  # the first turn's: stored once, by copy 0
                row = {**r, "thread_id": thread_id, "version": self.token(r["version"], copy), "value": self._bytes(r["value"], copy)}
                if table == "channel_values":
                    row |= {"list_chain": tokens(r["list_chain"]), "item_versions": tokens(r["item_versions"])}
                out[table].append(row)
        return out

    def _own(self, token: str) -> bool:
        """Whether a stored value or item belongs to the block (else to the first turn)."""
        if VERSION.fullmatch(token):
            return self._counter(token) > self.first_top
        if KEY.fullmatch(token):
            if token not in self.write_keys:
                raise CopyRefused(f"write key {token!r} is stored but no write names it")
            return token in self.block_keys
        raise CopyRefused(f"{token!r} is neither a channel version nor a write key")


def read_template(conn: psycopg.Connection, schema: str, thread_id: str) -> dict[str, list[dict[str, Any]]]:
    rows = {}
    for table, columns in COLUMNS.items():
        present = {
            r["column_name"]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s", (schema, table)
            )
        }
        if present != set(columns):
            raise CopyRefused(f"{table} has columns {sorted(present ^ set(columns))} the copy does not know (or lacks)")
        query = sql.SQL("SELECT {} FROM {}.{} WHERE thread_id = %s").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(schema), sql.Identifier(table)
        )
        rows[table] = conn.execute(query, (thread_id,)).fetchall()
    return rows


def write_rows(conn: psycopg.Connection, schema: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    for table, columns in COLUMNS.items():
        statement = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
            sql.Identifier(schema), sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        with conn.cursor().copy(statement) as copy:
            for row in rows[table]:
                copy.write_row([Jsonb(row[c]) if c in JSONB_COLUMNS and row[c] is not None else row[c] for c in columns])


# -- building and checking the threads -----------------------------------------------------


def build(dsn: str, schema: str, sizes: list[int], log: Callable[[str], None]) -> dict[int, str]:
    """One thread per size (checkpoints in the root namespace); their ids by size."""
    first = 2 * TOOL_CALLS + 3
    threads = {n: f"steps-{n}" for n in sizes}
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        saver.setup()
        long = [n for n in sizes if n >= first + TEMPLATE_STEPS + 3]
        if long:
            start = time.perf_counter()
            run_turns(saver, TEMPLATE_THREAD, [TOOL_CALLS, *turns(TEMPLATE_STEPS)])
            log(f"template: {first + TEMPLATE_STEPS} checkpoints by the graph in {time.perf_counter() - start:.1f} s")
            with psycopg.connect(dsn, row_factory=dict_row) as conn:
                template = Template(read_template(conn, schema, TEMPLATE_THREAD), first)
        for n in sizes:
            start = time.perf_counter()
            tail = n
            if n in long:
                copies = (n - first - 3) // TEMPLATE_STEPS
                tail = n - first - copies * TEMPLATE_STEPS
                if tail == 4:
                    copies, tail = copies - 1, tail + TEMPLATE_STEPS
                shift = -(copies * template.span_us + 1000)  # all copies before the template was made
                with psycopg.connect(dsn, row_factory=dict_row) as conn:
                    after = None
                    for copy in range(copies):
                        rows = template.copy(threads[n], copy, shift + copy * template.span_us, after)
                        write_rows(conn, schema, rows)
                        after = rows["checkpoints"][-1]["checkpoint_id"]
                    conn.commit()
                check_copy(saver, template, threads[n])
                log(f"{threads[n]}: {first + copies * TEMPLATE_STEPS} checkpoints copied in {time.perf_counter() - start:.1f} s")
                start = time.perf_counter()
            run_turns(saver, threads[n], turns(tail))
            log(f"{threads[n]}: {tail} checkpoints by the graph in {time.perf_counter() - start:.1f} s")
        if long:
            saver.delete_thread(TEMPLATE_THREAD)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in COLUMNS:
            conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table)))
    return threads


def check_copy(saver: DurablePostgresSaver, template: Template, thread_id: str) -> None:
    """The last copy's checkpoints hold the state (and pending writes) their originals hold;
    its first, which carries the previous copy's state on, holds the block's last state
    with its own input."""

    def read(thread: str, checkpoint_id: str) -> Any:
        found = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
        assert found is not None
        return found.checkpoint["channel_values"], [w[1:] for w in found.pending_writes or []]

    block = template.block
    copied = list(reversed(list(saver.list_steps(thread_id, checkpoint_ns="", limit=len(block)))))
    (carried, _), (start, writes) = read(TEMPLATE_THREAD, block[-1]["checkpoint_id"]), read(TEMPLATE_THREAD, block[0]["checkpoint_id"])
    expected = [({**carried, **{ch: start[ch] for ch in block[0]["checkpoint"]["updated_channels"]}}, writes)]
    expected += [read(TEMPLATE_THREAD, r["checkpoint_id"]) for r in block[1:]]
    for original, copy, state in zip(block, copied, expected):
        if read(thread_id, copy.checkpoint_id) != state:
            raise AssertionError(f"{thread_id}: step {copy.step} does not hold the state of template step {original['step']}")


def verify(dsn: str, schema: str, thread_id: str, checkpoints: int) -> None:
    """A linear history of steps -1..n-2 whose channels' versions never go back, readable
    by the saver (`get_tuple` of the newest, `list_steps` of step 0)."""
    query = sql.SQL(
        "SELECT checkpoint_id, parent_checkpoint_id, step, (metadata->>'step')::int AS meta_step,"
        " checkpoint->'channel_versions' AS versions"
        " FROM {}.checkpoints WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id"
    ).format(sql.Identifier(schema))
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        rows = conn.execute(query, (thread_id,)).fetchall()
    if len(rows) != checkpoints:
        raise AssertionError(f"{thread_id}: {len(rows)} checkpoints, not {checkpoints}")
    parent, newest = None, {}
    for step, row in enumerate(rows, start=-1):
        if (row["step"], row["meta_step"], row["parent_checkpoint_id"]) != (step, step, parent):
            raise AssertionError(f"{thread_id}: checkpoint {row['checkpoint_id']} breaks the linear history at step {step}")
        for channel, version in row["versions"].items():
            if version < newest.get(channel, ""):
                raise AssertionError(f"{thread_id}: channel {channel} goes back to {version} at step {step}")
            newest[channel] = version
        parent = row["checkpoint_id"]
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        if found is None or found.config["configurable"]["checkpoint_id"] != parent or found.metadata["step"] != checkpoints - 2:
            raise AssertionError(f"{thread_id}: get_tuple does not read back the newest checkpoint")
        if [r.step for r in saver.list_steps(thread_id, checkpoint_ns="", step=0)] != [0]:
            raise AssertionError(f"{thread_id}: list_steps(step=0) does not find step 0")


# -- timing ---------------------------------------------------------------------------------


def requests_of(dsn: str, schema: str, thread_id: str, checkpoints: int) -> dict[str, tuple[str, int]]:
    """What is timed on a thread of `checkpoints` (steps -1..n-2): name -> (path, status).
    The middle step is the end of the turn in the thread's middle: like the last step, it
    holds a whole turn's state, on either thread."""
    query = sql.SQL(
        "SELECT max(step) - 1 FROM {}.checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND source = 'input' AND step <= %s"
    ).format(sql.Identifier(schema))
    with psycopg.connect(dsn) as conn:
        middle = conn.execute(query, (thread_id, checkpoints // 2)).fetchone()[0]  # type: ignore[index]
    return {
        "step page, step 0": (f"/threads/{thread_id}/steps/0", 200),
        "step page, middle step": (f"/threads/{thread_id}/steps/{middle}", 200),
        "step page, last step": (f"/threads/{thread_id}/steps/{checkpoints - 2}", 200),
        "missing step (404)": (f"/threads/{thread_id}/steps/{MISSING_STEP}", 404),
        "JSON of step 0": (f"/api/threads/{thread_id}/steps/0", 200),
    }


def measure(dsn: str, schema: str, requests: dict[int, dict[str, tuple[str, int]]], repeat: int) -> dict[str, dict[int, list[float]]]:
    """Seconds of each request on each thread (by size), `repeat` warm samples, the threads alternating."""
    sizes = list(requests)
    names = list(requests[sizes[0]])
    samples: dict[str, dict[int, list[float]]] = {name: {n: [] for n in sizes} for name in names}
    app = create_app(Target(dsn, schema).saver, schema=schema)
    with TestClient(app, base_url=BASE_URL) as client:

        def get(n: int, name: str) -> float:
            path, status = requests[n][name]
            start = time.perf_counter()
            response = client.get(path)
            elapsed = time.perf_counter() - start
            if response.status_code != status:
                raise AssertionError(f"GET {path}: {response.status_code}, not {status}: {response.text[:300]}")
            return elapsed

        for name in names:
            for n in sizes:
                for _ in range(WARM_UP):
                    get(n, name)
        for rep in range(repeat):
            for name in names:
                for n in rotation(sizes, rep):
                    samples[name][n].append(get(n, name))
    return samples


# -- the run ------------------------------------------------------------------------------


@contextmanager
def database(dsn: str | None) -> Iterator[tuple[str, str]]:
    """(DSN, schema name): a fresh schema, in a fresh database of a started server without `dsn`; dropped afterwards."""
    name = f"lgpd_bench_steps_{uuid.uuid4().hex[:8]}"
    if dsn is not None:
        try:
            yield dsn, name
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        return
    server = start_pg_server()
    try:
        created = server.create_database(name)
        try:
            yield created, name
        finally:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    finally:
        server.stop()  # a no-op for a server given by $LANGGRAPH_PG_DURABLE_TEST_DSN


def sizes_of(text: str) -> list[int]:
    """--steps: checkpoints of each thread, the first the one the others are compared with."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
        for n in sizes:
            turns(n)  # ValueError names a size no turns make
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if len(sizes) < 2:
        raise argparse.ArgumentTypeError("give two sizes or more: the first is what the others are compared with")
    if sizes[-1] - 2 >= MISSING_STEP:
        raise argparse.ArgumentTypeError(f"{sizes[-1]} checkpoints reach the step timed as missing ({MISSING_STEP})")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_pages", description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL to use (a fresh schema in it, dropped afterwards); default: start one")
    parser.add_argument("--steps", type=sizes_of, default=sizes_of("200,20000"), help="checkpoints of each thread (default: 200,20000)")
    parser.add_argument("--repeat", type=int, default=30, help="timed requests of each kind on each thread (default: 30)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the figures (and every sample) to OUT")
    args = parser.parse_args(argv)
    begun = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - begun:6.1f} s] {message}", file=sys.stderr, flush=True)

    sizes: list[int] = args.steps
    with database(args.dsn) as (dsn, schema):
        with psycopg.connect(dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        threads = build(dsn, schema, sizes, log)
        for n, thread_id in threads.items():
            verify(dsn, schema, thread_id, n)
        requests = {n: requests_of(dsn, schema, thread_id, n) for n, thread_id in threads.items()}
        log(f"threads verified; timing {len(requests[sizes[0]])} requests on {len(sizes)} threads, {args.repeat} times each")
        samples = measure(dsn, schema, requests, args.repeat)

    base = sizes[0]
    medians = {name: {n: summary(by_size[n], 1e3)["median"] for n in sizes} for name, by_size in samples.items()}
    print(
        f"Replay page step pages on threads of {' and '.join(f'{n:,}' for n in sizes)} checkpoints (a tool-calling agent), "
        f"PostgreSQL {version}, {os.cpu_count()} CPUs;"
    )
    print(f"median ms of {args.repeat} warm requests each ({WARM_UP} warm-up), the threads alternating, the app in-process (TestClient).\n")
    print(
        "| request | "
        + " | ".join(f"{n:,} steps, ms" for n in sizes)
        + " | "
        + " | ".join(f"ratio {n:,} / {base:,}" for n in sizes[1:])
        + " |"
    )
    print("| --- " * (2 * len(sizes)) + "|")
    for name, by_size in medians.items():
        figures = [f"{by_size[n]:.1f}" for n in sizes] + [f"{by_size[n] / by_size[base]:.2f}" for n in sizes[1:]]
        print(f"| {name} | {' | '.join(figures)} |")
    if args.json:
        document = {
            "meta": {"server_version": version, "cpus": os.cpu_count(), "repeat": args.repeat, "warm_up": WARM_UP, "sizes": sizes},
            "requests": {
                name: {
                    "paths": {str(n): requests[n][name][0] for n in sizes},
                    "ms": {str(n): summary(by_size[n], 1e3) for n in sizes},
                    "ratio_of_medians": {str(n): medians[name][n] / medians[name][base] for n in sizes[1:]},
                    "samples_ms": {str(n): [s * 1e3 for s in by_size[n]] for n in sizes},
                }
                for name, by_size in samples.items()
            },
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
