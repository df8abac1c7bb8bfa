"""The JSON endpoints of the replay page (README, "Replay page"), read-only.

    GET /api/threads                          ?status ?run ?meta.KEY=VALUE ?since ?until ?limit ?after
    GET /api/threads/{thread_id}/runs         ?limit ?before
    GET /api/threads/{thread_id}/steps        ?ns ?before ?limit
    GET /api/threads/{thread_id}/steps/{step} ?ns ?run ?checkpoint ?full ?internals
    GET /api/threads/{thread_id}/diff         ?from ?to ?ns ?against (THREAD@CHECKPOINT) ?internals
    GET /api/threads/{thread_id}/state        ?checkpoint ?ns ?internals (default: the newest)

Ids in a URL are percent-encoded, a `/` in one too (guard.segment_path keeps it in its
segment), and reach the database as bound parameters only.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..cli.filters import WHERE_PREFIX, metadata_filter
from ..cli.reading import find_step, read_diff, read_step_view, state_of
from ..cli.render import fields_of, to_json
from ..cli.state_diff import as_json
from ..core.logs import RunRecord
from ..core.safe_serde import lenient_reads
from ..errors import ConfigError, shown
from .guard import path_id
from .query import flag, integer, text, time_bound, whole

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


def _json(document: Any, status: int = 200) -> Response:
    return Response(to_json(document), status_code=status, media_type="application/json")


def run_cursor(run: RunRecord) -> str:
    """Where the next page of a thread's runs starts: after this one (`?before=`)."""
    return f"{run.started_at.isoformat()}|{run.run_id}"


def runs_before(cursor: str | None, name: str) -> tuple[datetime.datetime, str] | None:
    """`run_cursor`'s text read back, refused by `name` when it is not one."""
    if cursor is None:
        return None
    started, _, run_id = cursor.partition("|")
    try:
        if run_id:
            return datetime.datetime.fromisoformat(started), run_id
    except ValueError:
        pass
    raise ConfigError(f"{name} {shown(cursor)} is not a page's next_before")


def runs_page(saver: Any, thread: str, limit: int, before: tuple[datetime.datetime, str] | None) -> tuple[list[RunRecord], str | None]:
    """A page of a thread's runs, newest first, and the cursor of the next (None: the last)."""
    records = list(saver.list_runs(thread, limit=limit, before=before))
    return records, run_cursor(records[-1]) if len(records) == limit else None


def api_routes(saver: Callable[[], Any]) -> list[tuple[str, Callable[[Request], Response]]]:
    """(path, endpoint) of each JSON endpoint, on the app's saver."""

    def threads(request: Request) -> Response:
        query = request.query_params
        meta = [f"{k}={v}" for k, v in query.multi_items() if k.startswith(WHERE_PREFIX)]
        limit = integer(query, "limit", DEFAULT_LIMIT, minimum=0, cap=MAX_LIMIT)
        records = list(
            saver().list_threads(
                status=text(query, "status"),
                run_id=text(query, "run"),
                metadata=metadata_filter(meta),
                since=time_bound(query, "since"),
                until=time_bound(query, "until"),
                limit=limit,
                after=text(query, "after"),
            )
        )
        following = records[-1].thread_id if limit and len(records) == limit else None
        return _json({"threads": [fields_of(r) for r in records], "next_after": following})

    def runs(request: Request) -> Response:
        thread = path_id(request.path_params["thread_id"])
        query = request.query_params
        limit = integer(query, "limit", DEFAULT_LIMIT, minimum=1, cap=MAX_LIMIT) or DEFAULT_LIMIT
        records, following = runs_page(saver(), thread, limit, runs_before(text(query, "before"), "?before"))
        return _json({"thread_id": thread, "runs": [fields_of(r) for r in records], "next_before": following})

    def steps(request: Request) -> Response:
        thread = path_id(request.path_params["thread_id"])
        query = request.query_params
        limit = integer(query, "limit", DEFAULT_LIMIT, minimum=0, cap=MAX_LIMIT)
        records = list(saver().list_steps(thread, checkpoint_ns=query.get("ns"), before=text(query, "before"), limit=limit))
        if not records and not text(query, "before"):
            raise LookupError(f"thread {thread!r} has no checkpoints")
        following = records[-1].checkpoint_id if limit and len(records) == limit else None
        return _json({"thread_id": thread, "steps": [fields_of(r) for r in records], "next_before": following})

    def step(request: Request) -> Response:
        thread, number = path_id(request.path_params["thread_id"]), whole(request.path_params["step"], "step")
        query = request.query_params
        full, internals = flag(query, "full"), flag(query, "internals")
        record = find_step(saver(), thread, query.get("ns", ""), number, text(query, "checkpoint"), text(query, "run"))
        return _json(read_step_view(saver(), record, full=full, internals=internals))

    def diff(request: Request) -> Response:
        thread = path_id(request.path_params["thread_id"])
        query = request.query_params
        against = text(query, "against")
        other_thread, _, other_checkpoint = against.rpartition("@") if against else ("", "", "")
        a, b, found = read_diff(
            saver(),
            thread,
            None,
            other_thread or thread,
            other_checkpoint or None,
            namespace=query.get("ns", ""),
            from_step=integer(query, "from"),
            to_step=integer(query, "to"),
            internals=flag(query, "internals"),
        )
        return _json(
            {
                "a": {"thread_id": thread, "checkpoint_id": a},
                "b": {"thread_id": other_thread or thread, "checkpoint_id": b},
                "differ": bool(found),
                "messages": {
                    ch: {"added": c.added, "removed": c.removed, "edited": [list(p) for p in c.edited]} for ch, c in found.messages.items()
                },
                "changes": found.changes,
                "patch": found.patch,
            }
        )

    def state(request: Request) -> Response:
        thread = path_id(request.path_params["thread_id"])
        query = request.query_params
        internals = flag(query, "internals")
        record = find_step(saver(), thread, query.get("ns", ""), None, text(query, "checkpoint"), None)
        with lenient_reads() as unreadable:  # a type this server does not rebuild shows as its fields, named
            values = state_of(saver(), thread, record.checkpoint_ns, record.checkpoint_id, internals=internals)
        return _json(
            {
                "thread_id": thread,
                "checkpoint_ns": record.checkpoint_ns,
                "checkpoint_id": record.checkpoint_id,
                "values": as_json(values),
                "unreadable_types": unreadable,
            }
        )

    return [
        ("/api/threads", threads),
        ("/api/threads/{thread_id}/state", state),
        ("/api/threads/{thread_id}/runs", runs),
        ("/api/threads/{thread_id}/steps/{step}", step),
        ("/api/threads/{thread_id}/steps", steps),
        ("/api/threads/{thread_id}/diff", diff),
    ]
