"""Sans-I/O paging of `list_steps()`: a thread's checkpoints newest first, each with the
tasks that made it and the tasks that ran from it, from rows alone (no value decoded).

`before` and `limit` page like `list()`; the keyset is the checkpoint id, which orders
a thread's checkpoints in every namespace.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ListIntegrityError, shown
from ..sql.steps import NeighbourColumn as N
from ..sql.steps import StepColumn as S
from .codec import load_json
from .keys import id_text
from .metadata import load_metadata_json
from .paging import Pager, page_limit


@dataclass(frozen=True)
class TaskRecord:
    """A task that ran from a checkpoint, as the action log has it."""

    task_id: str
    agent: str
    action_type: str
    detail: Any = None  # an error's or interrupt's payload (ran_from only)
    tools: tuple[str, ...] = ()  # the tools its new messages call (made_by only)
    reply: str | None = None  # the start of its reply's text (made_by only)
    tokens: int | None = None  # the tokens its new messages report (made_by only)


@dataclass(frozen=True)
class StepRecord:
    """One checkpoint of a thread, for a person reading its history."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    run_id: str | None
    step: int | None
    source: str | None
    created_at: datetime.datetime
    metadata: Any
    pending_writes: int
    made_by: tuple[TaskRecord, ...]  # the tasks whose writes produced it (they ran from its parent)
    ran_from: tuple[TaskRecord, ...]  # the tasks that ran from it: the next step, or its error or interrupt
    duration_ms: float | None = None  # since its parent was stored, for a step the graph ran


def tokens_of(tasks: Sequence[TaskRecord] | None) -> int | None:
    """The tokens some tasks report together (None: none reported): a step's, from its `made_by`."""
    counts = [t.tokens for t in tasks or () if t.tokens is not None]
    return sum(counts) if counts else None


def _tasks(text: str | None, *, where: str) -> tuple[TaskRecord, ...]:
    entries = load_json(text) or []
    if not isinstance(entries, list) or not all(isinstance(e, list) and 3 <= len(e) <= 7 for e in entries):
        raise ListIntegrityError(f"{where}: its action rows read back malformed")
    return tuple(_task(e, where) for e in entries)


def _task(entry: list[Any], where: str) -> TaskRecord:
    task_id, agent, action_type, *rest = entry
    detail, tools, reply, tokens = (rest + [None] * 4)[:4]
    if not all(isinstance(v, str) for v in (task_id, agent, action_type)):
        raise ListIntegrityError(f"{where}: its action rows read back malformed")
    return TaskRecord(
        task_id,
        agent,
        action_type,
        detail,
        tuple(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else (),
        reply if isinstance(reply, str) else None,
        int(tokens) if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) and tokens >= 0 else None,
    )


def step_number(value: Any, what: str) -> int:
    """A step number as the step column holds it (a 32-bit integer), refused by `what`."""
    if type(value) is not int or not -(2**31) <= value < 2**31:
        raise ConfigError(f"{what} must be a whole number, got {shown(value)}")
    return value


class StepScan(Pager):
    """One `list_steps()` call on one thread: one namespace or all, before a checkpoint; or
    the lookups of `lgpd show` and the replay page: a step number, a checkpoint id (whole,
    or a prefix), a run id's prefix.

    A step number in the root namespace is found through the root-step index (its
    predicate's `checkpoint_ns = ''` is written out so every plan can use it, and its
    `step IS NOT NULL` follows from `c.step = %(step)s`), a whole checkpoint id through the
    primary key: one index probe, whatever the thread's length."""

    FILTERS = (
        ("root", "c.checkpoint_ns = ''"),
        ("checkpoint_ns", "c.checkpoint_ns = %(checkpoint_ns)s"),
        ("step", "c.step = %(step)s"),
        ("checkpoint_id", "c.checkpoint_id = %(checkpoint_id)s"),
        ("checkpoint_prefix", "starts_with(c.checkpoint_id, %(checkpoint_prefix)s)"),
        ("run_prefix", "starts_with(c.run_id, %(run_prefix)s)"),
        ("before", "c.checkpoint_id < %(before)s"),
    )

    def __init__(
        self,
        thread_id: Any,
        *,
        checkpoint_ns: Any = None,
        before: Any = None,
        limit: Any = None,
        step: Any = None,
        checkpoint_id: Any = None,
        checkpoint_prefix: Any = None,
        run_prefix: Any = None,
    ) -> None:
        self.thread_id = id_text(thread_id, "thread_id")
        namespace = id_text(checkpoint_ns, "checkpoint_ns") if checkpoint_ns is not None else None
        filters = {
            "root": True if namespace == "" else None,
            "checkpoint_ns": namespace or None,
            "step": step_number(step, "list_steps() step") if step is not None else None,
            "checkpoint_id": id_text(checkpoint_id, "checkpoint_id") if checkpoint_id is not None else None,
            "checkpoint_prefix": id_text(checkpoint_prefix, "checkpoint_prefix") if checkpoint_prefix is not None else None,
            "run_prefix": id_text(run_prefix, "run_prefix") if run_prefix is not None else None,
            "before": id_text(before, "before") if before is not None else None,
        }
        super().__init__(page_limit(limit, "list_steps()"), filters)

    @property
    def across_lanes(self) -> bool:
        """Whether the scan is of every namespace of the thread (see `sql.steps.steps_page`)."""
        return self.filters["root"] is None and self.filters["checkpoint_ns"] is None

    def page_params(self) -> dict[str, Any]:
        params = super().page_params()
        params.pop("root", None)  # a literal in the statement, not a parameter
        params["thread_id"] = self.thread_id
        return params

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[StepRecord]:
        """The page's records (`sql.steps.StepColumn` rows); the next page starts before the last."""
        records = []
        for r in rows:
            where = f"thread {shown(self.thread_id)}, checkpoint {shown(r[S.CHECKPOINT_ID])}"
            records.append(
                StepRecord(
                    r[S.THREAD_ID],
                    r[S.CHECKPOINT_NS],
                    r[S.CHECKPOINT_ID],
                    r[S.PARENT_CHECKPOINT_ID],
                    r[S.RUN_ID] or None,
                    r[S.STEP],
                    r[S.SOURCE],
                    r[S.CREATED_AT],
                    load_metadata_json(r[S.METADATA]),
                    r[S.PENDING_WRITES],
                    _tasks(r[S.MADE_BY], where=where),
                    _tasks(r[S.RAN_FROM], where=where),
                    r[S.DURATION_MS],
                )
            )
        if records:
            self.filters["before"] = records[-1].checkpoint_id
        self.took(len(records), self._asked)
        return records


def neighbour_params(thread_id: Any, step: Any) -> dict[str, Any]:
    """The parameters of `step_neighbours`, checked."""
    return {"thread_id": id_text(thread_id, "thread_id"), "step": step_number(step, "step_neighbours() step")}


def neighbours_of(rows: Sequence[Sequence[Any]]) -> tuple[int | None, int | None]:
    """(the root step before, the root step after) from `step_neighbours`'s one row."""
    row = rows[0]
    return row[N.PREVIOUS_STEP], row[N.NEXT_STEP]
