"""Sans-I/O paging of the action log for `list_runs()` and `list_actions()`: the filters
checked, the keyset of the next page, and records from fetched rows.

Both stream like `list()`: pages are fetched by keyset, small first, so the first
record costs little and a long scan never holds more than a page.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, shown
from ..sql.logs import ActionColumn as C
from ..sql.logs import RunColumn as R
from .actions import ACTION_TYPES
from .codec import load_json
from .keys import id_text
from .paging import Pager, moment, one_of, page_limit
from .runs import RUN_STATUSES


@dataclass(frozen=True)
class RunRecord:
    """One row of the `runs` view: one graph invocation on a thread."""

    thread_id: str
    run_id: str
    started_at: datetime.datetime
    ended_at: datetime.datetime
    steps: int
    status: str  # done, interrupted, error or running
    agents: tuple[str, ...]
    tokens: int | None = None  # what its model replies report, each once (None: none reported)
    holds_thread: bool = False  # the run holds its thread: its writes are the ones the thread takes (README, "Exactly once")


@dataclass(frozen=True)
class ActionRecord:
    """One row of the `actions` view: what one task did in one run."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    run_id: str | None
    step: int | None
    task_id: str
    agent: str
    action_type: str
    payload: Any  # the JSON payload, parsed
    created_at: datetime.datetime


class RunScan(Pager):
    """One `list_runs()` call: newest run first, by (started_at, thread_id, run_id)."""

    FILTERS = (
        ("thread_id", "thread_id = %(thread_id)s"),
        ("status", "status = %(status)s"),
        ("since", "started_at >= %(since)s"),
        ("until", "started_at < %(until)s"),
        ("before_started", "(started_at, run_id) < (%(before_started)s, %(before_run)s)"),
    )
    KEYSET = "(started_at, thread_id, run_id) < (%(after_started)s, %(after_thread)s, %(after_run)s)"
    CURSOR = ("after_started", "after_thread", "after_run")

    def __init__(
        self,
        *,
        thread_id: Any = None,
        status: Any = None,
        since: Any = None,
        until: Any = None,
        limit: Any = None,
        before: Any = None,
    ) -> None:
        filters = {
            "thread_id": id_text(thread_id, "thread_id") if thread_id is not None else None,
            "status": one_of(status, RUN_STATUSES, "list_runs() status"),
            "since": moment(since, "list_runs() since"),
            "until": moment(until, "list_runs() until"),
            "before_started": None,
            "before_run": None,
        }
        if before is not None:  # a page of one thread's runs after the previous page's last
            if thread_id is None or not (isinstance(before, tuple) and len(before) == 2):
                raise ConfigError(f"list_runs() before takes (started_at, run_id) of a run of the thread given, got {shown(before)}")
            filters["before_started"] = moment(before[0], "list_runs() before's started_at")
            filters["before_run"] = id_text(before[1], "list_runs() before's run_id")
        super().__init__(page_limit(limit, "list_runs()"), filters)

    @property
    def one_thread(self) -> bool:
        """Whether the page is of one thread (its statement then names it everywhere)."""
        return self.filters["thread_id"] is not None

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[RunRecord]:
        """The page's records (`sql.logs.RunColumn` rows); moves the keyset past them."""
        records = [
            RunRecord(
                r[R.THREAD_ID],
                r[R.RUN_ID],
                r[R.STARTED_AT],
                r[R.ENDED_AT],
                r[R.STEPS],
                r[R.STATUS],
                tuple(r[R.AGENTS] or ()),
                r[R.TOKENS],
                bool(r[R.HOLDS_THREAD]),
            )
            for r in rows
        ]
        if records:
            last = records[-1]
            self.cursor = (last.started_at, last.thread_id, last.run_id)
        self.took(len(records), self._asked)
        return records


def action_records(rows: Sequence[Sequence[Any]]) -> list[ActionRecord]:
    """`sql.logs.ActionColumn` rows as records."""
    return [
        ActionRecord(
            r[C.THREAD_ID],
            r[C.CHECKPOINT_NS],
            r[C.CHECKPOINT_ID],
            r[C.RUN_ID] or None,
            r[C.STEP],
            r[C.TASK_ID],
            r[C.AGENT],
            r[C.ACTION_TYPE],
            load_json(r[C.PAYLOAD]),
            r[C.CREATED_AT],
        )
        for r in rows
    ]


def actions_from_params(thread_id: Any, checkpoint_ns: Any, checkpoint_id: Any, limit: Any) -> dict[str, Any]:
    """The parameters of `actions_from`, checked."""
    if type(limit) is not int or limit < 1:
        raise ConfigError(f"actions_from() limit must be a whole number >= 1, got {shown(limit)}")
    return {
        "thread_id": id_text(thread_id, "thread_id"),
        "checkpoint_ns": id_text(checkpoint_ns, "checkpoint_ns"),
        "checkpoint_id": id_text(checkpoint_id, "checkpoint_id"),
        "limit": limit,
    }


def _like(text: Any) -> str:
    """An ILIKE pattern matching `text` anywhere, its wildcards escaped."""
    plain = id_text(text, "contains")
    return "%" + plain.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class ActionScan(Pager):
    """One `list_actions()` call: oldest action first, by when it was committed."""

    FILTERS = (
        ("thread_id", "a.thread_id = %(thread_id)s"),
        ("run_id", "nullif(a.run_id, '') = %(run_id)s"),  # the run index's expression
        ("agent", "a.agent = %(agent)s"),
        ("action_type", "a.action_type = %(action_type)s"),
        ("since", "a.created_at >= %(since)s"),
        ("until", "a.created_at < %(until)s"),
        ("contains", "a.payload::text ILIKE %(contains)s"),  # the payload's JSON text: keys too
    )
    KEYSET = (
        "(a.created_at, a.thread_id, a.checkpoint_ns, a.checkpoint_id, a.task_id, a.run_id, a.idx) > "
        "(%(a_created)s, %(a_thread)s, %(a_ns)s, %(a_checkpoint)s, %(a_task)s, %(a_run)s, %(a_idx)s)"
    )
    CURSOR = ("a_created", "a_thread", "a_ns", "a_checkpoint", "a_task", "a_run", "a_idx")

    def __init__(
        self,
        *,
        thread_id: Any = None,
        run_id: Any = None,
        agent: Any = None,
        action_type: Any = None,
        since: Any = None,
        until: Any = None,
        limit: Any = None,
        contains: Any = None,
    ) -> None:
        filters = {
            "thread_id": id_text(thread_id, "thread_id") if thread_id is not None else None,
            "run_id": id_text(run_id, "run_id") if run_id is not None else None,
            "contains": _like(contains) if contains is not None else None,
            "agent": id_text(agent, "agent") if agent is not None else None,
            "action_type": one_of(action_type, ACTION_TYPES, "list_actions() action_type"),
            "since": moment(since, "list_actions() since"),
            "until": moment(until, "list_actions() until"),
        }
        super().__init__(page_limit(limit, "list_actions()"), filters)

    @property
    def one_thread(self) -> bool:
        """Whether the scan is of one thread (its page statement then names it in the join too)."""
        return self.filters["thread_id"] is not None

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[ActionRecord]:
        """The page's records (`sql.logs.ActionColumn` rows); moves the keyset past them."""
        records = action_records(rows)
        if rows:
            last = rows[-1]
            self.cursor = tuple(last[c] for c in (C.CREATED_AT, C.THREAD_ID, C.CHECKPOINT_NS, C.CHECKPOINT_ID, C.TASK_ID, C.RUN_ID, C.IDX))
        self.took(len(records), self._asked)
        return records
