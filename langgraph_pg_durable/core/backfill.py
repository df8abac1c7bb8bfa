"""Sans-I/O `backfill_actions()`: the action rows, run rows and run ids a thread would have
had, had the action log been on when it was written (threads written before migration
0007, or with `action_log=False`).

Pure: a thread's checkpoint rows, its writes rows and its decoded checkpoints in; the rows
to insert out. It replays what the live statements do (`sql.writes._task_log`,
`_checkpoint_run`), so a thread written with the log off backfills to the rows the log
would have written: the same agents, types, payloads, steps and times.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langgraph.checkpoint.base import WRITES_IDX_MAP

from .actions import NULL_TASK_ID, Action, agent_label, describe, is_update, held_messages, run_status, send_nodes, written_messages
from .arrays import Int4Array, TextArray
from .runs import has_next_tasks, new_run_id

_TASKS: Final = "__pregel_tasks"
_STARTS: Final = ("input", "update", "fork")  # sources of a checkpoint that begins a run
_EDITS: Final = ("update", "fork")  # sources of a checkpoint update_state writes, outside any invocation


@dataclass(frozen=True)
class CheckpointFacts:
    """A checkpoint row's columns the backfill needs (no values)."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    run_id: str | None
    step: int | None
    source: str | None
    created_at: datetime.datetime


@dataclass(frozen=True)
class WriteFacts:
    """A checkpoint_writes row's columns: a packed row (`packed`) holds the indexes 0..idx."""

    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    task_path: str
    packed: bool
    object_key: str | None
    object_size: int | None
    created_at: datetime.datetime


@dataclass(frozen=True)
class Decoded:
    """What a decoded checkpoint gives: its body (for `has_next_tasks`) and its pending writes."""

    checkpoint: Mapping[str, Any]
    pending_writes: Sequence[tuple[str, str, Any]]  # (task_id, channel, value)
    # The messages its channels hold, by id: of those its own tasks, or the tasks of its
    # subgraphs, wrote again (not all: a long thread's lists would all be held at once).
    held_messages: Mapping[str, Any] | None = None
    parents: Mapping[str, str] | None = None  # of a subgraph's: each parent namespace's checkpoint id
    written_ids: frozenset[str] = frozenset()  # of the messages its tasks wrote
    agent_label: str | None = None  # the agent a subgraph's checkpoint is of (`lc_agent_name`)


@dataclass(frozen=True)
class ActionRow:
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    run_id: str
    step: int | None
    action: Action
    created_at: datetime.datetime


@dataclass
class RunRow:
    run_id: str
    started_at: datetime.datetime
    ended_at: datetime.datetime
    first_step: int | None = None
    last_step: int | None = None
    status: str = "running"
    status_step: int | None = None
    agents: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Backfill:
    """A thread's rows: run ids for its checkpoints that have none, action rows, run rows."""

    run_ids: dict[tuple[str, str], str]
    actions: list[ActionRow]
    runs: list[RunRow]


@dataclass
class _Group:
    """The writes of one put_writes call, as the log would have described them."""

    checkpoint: CheckpointFacts
    task_id: str
    task_path: str
    writes: list[tuple[str, Any]]
    offloaded: dict[int, tuple[str, int]]
    created_at: datetime.datetime
    special: bool  # an interrupt or an error, alone

    @property
    def key(self) -> tuple[str, str]:
        return (self.checkpoint.checkpoint_ns, self.checkpoint.checkpoint_id)


def thread_backfill(
    checkpoints: Sequence[CheckpointFacts],
    writes: Sequence[WriteFacts],
    decoded: Mapping[tuple[str, str], Decoded],
    *,
    encrypted: bool,
) -> Backfill:
    """The rows of one thread (see the module docstring)."""
    by_key = {(c.checkpoint_ns, c.checkpoint_id): c for c in checkpoints}
    run_ids = _assign_runs(checkpoints)
    run_of = {key: c.run_id or run_ids[key] for key, c in by_key.items()}
    children: dict[tuple[str, str], CheckpointFacts] = {}
    for c in sorted(checkpoints, key=lambda c: c.checkpoint_id):
        if c.parent_checkpoint_id is not None:
            children.setdefault((c.checkpoint_ns, c.parent_checkpoint_id), c)

    groups = _groups(by_key, writes, decoded)
    # The caller's writes at a checkpoint begin the run that resumes from it; a task's
    # result after its interrupt or error shows a later run went past them.
    resumes: dict[tuple[str, str], datetime.datetime] = {}
    results: dict[tuple[str, str, str], datetime.datetime] = {}
    for g in groups:
        if g.task_id == NULL_TASK_ID:
            resumes[g.key] = g.created_at
        elif not g.special:
            results[(g.key[0], g.key[1], g.task_id)] = max(g.created_at, results.get((g.key[0], g.key[1], g.task_id), g.created_at))
    actions: list[ActionRow] = []
    resumed: dict[tuple[str, str], str] = {}  # a resume run that wrote no checkpoint, by checkpoint
    for g in groups:
        c = g.checkpoint
        child = children.get(g.key)
        later_result = results.get((g.key[0], g.key[1], g.task_id))
        if g.task_id != NULL_TASK_ID and g.special and (child is not None or (later_result is not None and later_result > g.created_at)):
            run = run_of[g.key]  # an interrupt or error that a later run went past
        elif is_update(g.task_path):
            run = ""  # an edit outside any run, as the log writes it
        elif child is not None:
            run = run_of[(child.checkpoint_ns, child.checkpoint_id)]
        elif g.key in resumes and g.created_at >= resumes[g.key]:
            run = resumed.setdefault(g.key, new_run_id(resumes[g.key]))
        else:
            run = run_of[g.key]
        action = describe(
            g.writes,
            checkpoint_ns=c.checkpoint_ns,
            task_id=g.task_id,
            task_path=g.task_path,
            sends=send_nodes(decoded[g.key].checkpoint),
            offloaded=g.offloaded,
            encrypted=encrypted,
            prior_messages=_prior_messages(decoded, g.key),
            agent_label=decoded[g.key].agent_label if c.checkpoint_ns else None,
        )
        step = c.step + 1 if c.step is not None else None
        actions.append(ActionRow(c.checkpoint_ns, c.checkpoint_id, g.task_id, run, step, action, g.created_at))
    return Backfill(run_ids, actions, _runs(checkpoints, run_of, actions, decoded))


def _prior_messages(decoded: Mapping[tuple[str, str], Decoded], key: tuple[str, str]) -> dict[str, Any]:
    """The messages a task at the checkpoint was handed: its checkpoint's, and in a
    subgraph its parent graphs' checkpoints' (as the saver's memory has them live)."""
    own = decoded[key]
    out: dict[str, Any] = {}
    for ns, checkpoint_id in (own.parents or {}).items():
        parent = decoded.get((ns, checkpoint_id))
        if ns != key[0] and parent is not None:
            out.update(parent.held_messages or {})
    out.update(own.held_messages or {})
    return out


def _assign_runs(checkpoints: Sequence[CheckpointFacts]) -> dict[tuple[str, str], str]:
    """Run ids for checkpoints written without one: a root checkpoint starts a run when it
    takes input (or is an update or a fork) and else continues its parent's; a subgraph's
    checkpoint belongs to the root run going on when it was written."""
    out: dict[tuple[str, str], str] = {}
    roots = sorted((c for c in checkpoints if not c.checkpoint_ns), key=lambda c: c.checkpoint_id)
    run_by_id: dict[str, str] = {}
    for c in roots:
        run = c.run_id
        if run is None:
            parent = run_by_id.get(c.parent_checkpoint_id or "")
            run = parent if parent is not None and c.source not in _STARTS else new_run_id(c.created_at)
            out[("", c.checkpoint_id)] = run
        run_by_id[c.checkpoint_id] = run
    for c in checkpoints:
        if c.checkpoint_ns and c.run_id is None:
            before = [r for r in roots if r.created_at <= c.created_at]
            after = [r for r in roots if r.created_at > c.created_at]
            around = after[0] if after else before[-1] if before else None
            out[(c.checkpoint_ns, c.checkpoint_id)] = run_by_id[around.checkpoint_id] if around else new_run_id(c.created_at)
    return out


def _groups(
    by_key: Mapping[tuple[str, str], CheckpointFacts], writes: Sequence[WriteFacts], decoded: Mapping[tuple[str, str], Decoded]
) -> list[_Group]:
    """Each put_writes call's writes, rebuilt from the stored ones, in commit order: the
    caller's writes are one call (LangGraph sends the earlier again with the later, regular
    ones first); a task's interrupt and its error are a call each; its result is one call,
    the resume values it consumed first."""
    rows: dict[tuple[str, str, str], list[WriteFacts]] = {}
    for w in writes:
        rows.setdefault((w.checkpoint_ns, w.checkpoint_id, w.task_id), []).append(w)
    out: list[_Group] = []
    for key, found in decoded.items():
        c = by_key.get(key)
        if c is None:
            continue
        per_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in found.pending_writes:
            per_task.setdefault(task_id, []).append((channel, value))
        for task_id, task_writes in per_task.items():
            facts = rows.get((*key, task_id), [])
            indexed = _indexed(task_writes)
            regular = sorted(i for i in indexed if i >= 0)
            calls: list[tuple[list[int], bool]]
            if task_id == NULL_TASK_ID:
                calls = [(regular + sorted((i for i in indexed if i < 0), reverse=True), False)]
            else:
                calls = [([i], True) for i in (-3, -1) if i in indexed]
                calls.append(([i for i in (-4,) if i in indexed] + regular + [i for i in (-2,) if i in indexed], False))
            refs = {f.idx: (f.object_key, int(f.object_size or 0)) for f in facts if f.object_key is not None and not f.packed}
            for indexes, special in calls:
                if not indexes:
                    continue
                times = [f.created_at for f in facts if _covers(f, indexes)]
                out.append(
                    _Group(
                        c,
                        task_id,
                        facts[0].task_path if facts else "",
                        [indexed[i] for i in indexes],
                        {n: refs[i] for n, i in enumerate(indexes) if i in refs},
                        min(times) if times else c.created_at,
                        special,
                    )
                )
    out.sort(key=lambda g: (g.created_at, g.checkpoint.checkpoint_ns, g.checkpoint.checkpoint_id, g.task_id))
    return out


def _indexed(task_writes: list[tuple[str, Any]]) -> dict[int, tuple[str, Any]]:
    """A task's writes by the index they are stored at: specials at LangGraph's negative
    indexes, the others in order (decoded writes keep the stored order)."""
    out: dict[int, tuple[str, Any]] = {}
    n = 0
    for channel, value in task_writes:
        if channel in WRITES_IDX_MAP:
            out[WRITES_IDX_MAP[channel]] = (channel, value)
        else:
            out[n] = (channel, value)
            n += 1
    return out


def _covers(fact: WriteFacts, indexes: Sequence[int]) -> bool:
    if fact.packed:
        return any(0 <= i <= fact.idx for i in indexes)
    return fact.idx in indexes


def _runs(
    checkpoints: Sequence[CheckpointFacts],
    run_of: Mapping[tuple[str, str], str],
    actions: Sequence[ActionRow],
    decoded: Mapping[tuple[str, str], Decoded],
) -> list[RunRow]:
    """The run rows, by replaying in commit order what the live statements do to run_log."""
    # An update_state's checkpoint (outside any invocation) is no run of its own, as the log writes it.
    events: list[tuple[datetime.datetime, int, Any]] = [
        (c.created_at, 0, c) for c in checkpoints if c.checkpoint_ns or c.source not in _EDITS
    ]
    events += [(a.created_at, 1, a) for a in actions if a.run_id]
    events.sort(key=lambda e: (e[0], e[1]))
    runs: dict[str, RunRow] = {}
    for at, kind, item in events:
        run_id = run_of[(item.checkpoint_ns, item.checkpoint_id)] if kind == 0 else item.run_id
        row = runs.get(run_id)
        if row is None:
            row = runs[run_id] = RunRow(run_id, at, at)
            for other in runs.values():  # a new run: the thread's runs still running stopped with work left
                if other is not row and other.status == "running":
                    other.status = "interrupted"
            fresh = True
        else:
            fresh = False
        if kind == 0:
            c: CheckpointFacts = item
            if c.checkpoint_ns or c.step is None:
                continue  # a subgraph's checkpoint leaves its run's row as it is
            found = decoded.get(("", c.checkpoint_id))
            if not fresh:
                row.ended_at = at
            row.first_step = c.step if row.first_step is None else min(row.first_step, c.step)
            row.last_step = c.step if row.last_step is None else max(row.last_step, c.step)
            _set_status(row, "running" if found is None or has_next_tasks(found.checkpoint) else "done", c.step)
        else:
            a: ActionRow = item
            new_agent = a.action.agent not in row.agents
            if new_agent:
                row.agents.append(a.action.agent)
            status = run_status(a.action.action_type, a.checkpoint_ns)
            if status is not None:
                _set_status(row, status, a.step)
            if not fresh and (new_agent or status is not None):
                row.ended_at = at
    return list(runs.values())


def _set_status(row: RunRow, status: str, step: int | None) -> None:
    """A status set at `step` replaces one set at an earlier step, as the statements do."""
    if step is None:
        return
    if row.status_step is None or step >= row.status_step:
        row.status = status
        row.status_step = step


def store_params(thread_id: str, built: Backfill) -> dict[str, Any]:
    """The parameters of `sql.logs.backfill_store` for one thread's rows."""
    names = sorted(built.run_ids.items())
    a, r = built.actions, built.runs
    return {
        "thread_id": thread_id,
        "c_namespaces": TextArray(k[0] for k, _ in names),
        "c_ids": TextArray(k[1] for k, _ in names),
        "c_runs": TextArray(v for _, v in names),
        "a_namespaces": TextArray(x.checkpoint_ns for x in a),
        "a_ids": TextArray(x.checkpoint_id for x in a),
        "a_tasks": TextArray(x.task_id for x in a),
        "a_runs": TextArray(x.run_id for x in a),
        "a_idx": Int4Array(x.action.idx for x in a),
        "a_steps": Int4Array(x.step for x in a),
        "a_agents": TextArray(x.action.agent for x in a),
        "a_types": TextArray(x.action.action_type for x in a),
        "a_payloads": TextArray(x.action.payload for x in a),
        "a_times": TextArray(x.created_at.isoformat() for x in a),
        "r_ids": TextArray(x.run_id for x in r),
        "r_started": TextArray(x.started_at.isoformat() for x in r),
        "r_ended": TextArray(x.ended_at.isoformat() for x in r),
        "r_first": Int4Array(x.first_step for x in r),
        "r_last": Int4Array(x.last_step for x in r),
        "r_status": TextArray(x.status for x in r),
        "r_status_steps": Int4Array(x.status_step for x in r),
        "r_agents": TextArray("\x1f".join(x.agents) for x in r),
    }


def decoded_for_backfill(
    checkpoint: Mapping[str, Any],
    pending_writes: Sequence[tuple[str, str, Any]],
    metadata: Mapping[str, Any] | None = None,
    wanted_ids: Collection[str] = (),
) -> Decoded:
    """What the backfill keeps of a decoded checkpoint: its versions, and only the values of
    the channels that trigger nodes and of its pending Sends (not its state: a long thread's
    lists would all be held at once), and of its messages those its tasks wrote again, or
    that `wanted_ids` names (written by the tasks of its subgraphs' checkpoints, which a
    thread's newest-first scan decodes first)."""
    seen = checkpoint.get("versions_seen") or {}
    triggers = {ch for node in seen.values() if isinstance(node, Mapping) for ch in node}
    values = {
        ch: v
        for ch, v in (checkpoint.get("channel_values") or {}).items()
        if ch in triggers or ch in (_TASKS, "__start__") or (isinstance(ch, str) and ch.startswith("branch:to:"))
    }
    kept = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    kept["channel_values"] = values
    parents = (metadata or {}).get("parents")
    parents = {k: v for k, v in parents.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(parents, Mapping) else None
    written = frozenset(written_messages([(channel, value) for _, channel, value in pending_writes]))
    wanted = written | frozenset(wanted_ids)
    held = {i: m for i, m in held_messages(checkpoint.get("channel_values") or {}).items() if i in wanted}
    return Decoded(kept, list(pending_writes), held, parents, written, agent_label(metadata))
