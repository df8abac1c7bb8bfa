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
from .runs import RUN_STATUSES

FIRST_PAGE = 16
LARGEST_PAGE = 512


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


def _moment(value: Any, what: str) -> datetime.datetime | None:
    """A datetime bound; a naive one is taken as UTC."""
    if value is None:
        return None
    if not isinstance(value, datetime.datetime):
        raise ConfigError(f"{what} must be a datetime, got {type(value).__name__} {shown(value)}")
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)


def _one_of(value: Any, allowed: Sequence[str], what: str) -> str | None:
    if value is None:
        return None
    if value not in allowed:
        raise ConfigError(f"{what} {shown(value)} is not one of {', '.join(allowed)}")
    return str(value)


def _limit(value: Any, call: str) -> int | None:
    if value is not None and (type(value) is not int or value < 0):
        raise ConfigError(f"{call} limit must be a whole number >= 0 or None, got {shown(value)}")
    return value


class _Pager:
    """What both scans share: the page size (doubling up to LARGEST_PAGE, never past what
    `limit` leaves), the remaining count, and the WHERE clause and parameters of the next
    page, from each scan's fixed fragments (`FILTERS`: a filter's name and its condition;
    `KEYSET`: the row comparison past the last row, `CURSOR`: its parameters)."""

    FILTERS: tuple[tuple[str, str], ...] = ()
    KEYSET = ""
    CURSOR: tuple[str, ...] = ()

    def __init__(self, limit: int | None, filters: dict[str, Any]) -> None:
        self.remaining = limit
        self.page_size = FIRST_PAGE
        self.done = limit == 0
        self.filters = filters
        self.cursor: tuple[Any, ...] | None = None
        self._asked = 0

    def page_where(self) -> str:
        """The WHERE clause of the next page (values are parameters)."""
        terms = [fragment for name, fragment in self.FILTERS if self.filters[name] is not None]
        if self.cursor is not None:
            terms.append(self.KEYSET)
        return " AND ".join(terms) or "true"

    def page_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {k: v for k, v in self.filters.items() if v is not None}
        if self.cursor is not None:
            params.update(zip(self.CURSOR, self.cursor))
        params["page"] = self._asked = self.size()
        return params

    def size(self) -> int:
        return self.page_size if self.remaining is None else min(self.page_size, self.remaining)

    def took(self, fetched: int, asked: int) -> None:
        if self.remaining is not None:
            self.remaining -= fetched
        self.done = fetched < asked or self.remaining == 0
        self.page_size = min(self.page_size * 2, LARGEST_PAGE)


class RunScan(_Pager):
    """One `list_runs()` call: newest run first, by (started_at, thread_id, run_id)."""

    FILTERS = (
        ("thread_id", "thread_id = %(thread_id)s"),
        ("status", "status = %(status)s"),
        ("since", "started_at >= %(since)s"),
        ("until", "started_at < %(until)s"),
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
    ) -> None:
        filters = {
            "thread_id": id_text(thread_id, "thread_id") if thread_id is not None else None,
            "status": _one_of(status, RUN_STATUSES, "list_runs() status"),
            "since": _moment(since, "list_runs() since"),
            "until": _moment(until, "list_runs() until"),
        }
        super().__init__(_limit(limit, "list_runs()"), filters)

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[RunRecord]:
        """The page's records (`sql.logs.RunColumn` rows); moves the keyset past them."""
        records = [
            RunRecord(r[R.THREAD_ID], r[R.RUN_ID], r[R.STARTED_AT], r[R.ENDED_AT], r[R.STEPS], r[R.STATUS], tuple(r[R.AGENTS] or ()))
            for r in rows
        ]
        if records:
            last = records[-1]
            self.cursor = (last.started_at, last.thread_id, last.run_id)
        self.took(len(records), self._asked)
        return records


class ActionScan(_Pager):
    """One `list_actions()` call: oldest action first, by when it was committed."""

    FILTERS = (
        ("thread_id", "a.thread_id = %(thread_id)s"),
        ("run_id", "nullif(a.run_id, '') = %(run_id)s"),  # the run index's expression
        ("agent", "a.agent = %(agent)s"),
        ("action_type", "a.action_type = %(action_type)s"),
        ("since", "a.created_at >= %(since)s"),
        ("until", "a.created_at < %(until)s"),
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
    ) -> None:
        filters = {
            "thread_id": id_text(thread_id, "thread_id") if thread_id is not None else None,
            "run_id": id_text(run_id, "run_id") if run_id is not None else None,
            "agent": id_text(agent, "agent") if agent is not None else None,
            "action_type": _one_of(action_type, ACTION_TYPES, "list_actions() action_type"),
            "since": _moment(since, "list_actions() since"),
            "until": _moment(until, "list_actions() until"),
        }
        super().__init__(_limit(limit, "list_actions()"), filters)

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[ActionRecord]:
        """The page's records (`sql.logs.ActionColumn` rows); moves the keyset past them."""
        records = [
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
        if rows:
            last = rows[-1]
            self.cursor = tuple(last[c] for c in (C.CREATED_AT, C.THREAD_ID, C.CHECKPOINT_NS, C.CHECKPOINT_ID, C.TASK_ID, C.RUN_ID, C.IDX))
        self.took(len(records), self._asked)
        return records
