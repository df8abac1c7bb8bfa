"""Sans-I/O paging of `list_threads()`: thread summaries in thread_id order, the filters
checked, the keyset of the next page, and records from fetched rows.

A summary is read from checkpoint rows and the run's row, never from a value: listing
threads costs the same whatever they hold.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..sql.threads import ThreadColumn as T
from .keys import id_text
from .metadata import filter_for_sql, load_metadata_json
from .paging import LARGEST_PAGE, Pager, moment, one_of, page_limit
from .runs import RUN_STATUSES


@dataclass(frozen=True)
class ThreadRecord:
    """One thread: how many checkpoints it has, where its root graph stands, and its last run."""

    thread_id: str
    checkpoints: int  # in every namespace
    last_step: int | None  # of the newest root checkpoint (None: no root checkpoint, or no step)
    last_checkpoint_id: str | None
    last_run_id: str | None
    status: str | None  # that run's: done, interrupted, error, running; None without the action log
    last_activity: datetime.datetime  # the newest checkpoint of any namespace
    metadata: Any  # the newest root checkpoint's metadata (its jsonb projection)
    held_by: str | None = None  # the run that holds the thread (README, "Exactly once"); None: none


class ThreadScan(Pager):
    """One `list_threads()` call. Filters on checkpoint rows go in the WHERE clause, on whole
    threads in HAVING; the status is known only once a thread's last run is joined, so it
    is checked here, and the keyset follows the last thread read, kept or not."""

    FILTERS = (
        ("run_id", "c.thread_id IN (SELECT k.thread_id FROM {q}.checkpoints k WHERE k.run_id = %(run_id)s)"),
        ("metadata", "c.thread_id IN (SELECT m.thread_id FROM {q}.checkpoints m WHERE m.metadata @> %(metadata)s::jsonb)"),
    )
    HAVING = (
        ("since", "max(c.created_at) >= %(since)s"),
        ("until", "max(c.created_at) < %(until)s"),
    )

    def __init__(
        self,
        *,
        status: Any = None,
        run_id: Any = None,
        metadata: Mapping[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        limit: Any = None,
        after: Any = None,
    ) -> None:
        self.status = one_of(status, RUN_STATUSES, "list_threads() status")
        filters = {
            "run_id": id_text(run_id, "run_id") if run_id is not None else None,
            "metadata": filter_for_sql(metadata),
            "since": moment(since, "list_threads() since"),
            "until": moment(until, "list_threads() until"),
        }
        super().__init__(page_limit(limit, "list_threads()"), filters)
        self.after = id_text(after, "after") if after is not None else ""  # the thread to go on after

    def rows_where(self, q: str) -> str:
        """The WHERE clause on the checkpoint rows of the next page (`q`: the quoted schema)."""
        terms = [fragment.replace("{q}", q) for name, fragment in self.FILTERS if self.filters[name] is not None]
        return " AND ".join(terms) or "true"

    def page_having(self) -> str:
        terms = [fragment for name, fragment in self.HAVING if self.filters[name] is not None]
        return " AND ".join(terms) or "true"

    def page_params(self) -> dict[str, Any]:
        params = super().page_params()
        params["after"] = self.after
        return params

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[ThreadRecord]:
        """The page's records (`sql.threads.ThreadColumn` rows) with the status asked for;
        moves the keyset past every row read."""
        asked = self._asked
        if rows:
            self.after = rows[-1][T.THREAD_ID]
        records = [
            ThreadRecord(
                r[T.THREAD_ID],
                r[T.CHECKPOINTS],
                r[T.LAST_STEP],
                r[T.LAST_CHECKPOINT_ID],
                r[T.LAST_RUN_ID],
                r[T.STATUS],
                r[T.LAST_ACTIVITY],
                load_metadata_json(r[T.METADATA]),
                r[T.HELD_BY],
            )
            for r in rows
            if self.status is None or r[T.STATUS] == self.status
        ]
        if self.remaining is not None:
            records = records[: self.remaining]
            self.remaining -= len(records)
        self.done = len(rows) < asked or self.remaining == 0
        self.page_size = min(self.page_size * 2, LARGEST_PAGE)
        return records
