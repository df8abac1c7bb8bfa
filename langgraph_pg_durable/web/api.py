"""The JSON endpoints of the replay page (README, "Replay page"), read-only.

    GET /api/threads                          ?status ?run ?meta.KEY=VALUE ?since ?until ?limit ?after
    GET /api/threads/{thread_id}/runs
    GET /api/threads/{thread_id}/steps        ?ns ?before ?limit
    GET /api/threads/{thread_id}/steps/{step} ?ns ?run ?checkpoint ?full
    GET /api/threads/{thread_id}/diff         ?from ?to ?ns ?against (THREAD@CHECKPOINT)
    GET /api/threads/{thread_id}/state        ?checkpoint ?ns (default: the newest)

Ids in a URL reach the database as bound parameters only (see app.py for the token).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..cli.filters import WHERE_PREFIX, metadata_filter, moment
from ..cli.reading import find_step, read_diff, read_step_view, state_of
from ..cli.render import fields_of, to_json
from ..cli.state_diff import as_json
from ..core.safe_serde import lenient_reads
from ..errors import ConfigError

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


def _json(document: Any, status: int = 200) -> Response:
    return Response(to_json(document), status_code=status, media_type="application/json")


def _int(request: Request, name: str, default: int | None = None, *, maximum: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"?{name}={raw!r} is not a whole number") from None
    if maximum is not None and value < 0:
        raise ConfigError(f"?{name} must be >= 0, got {value}")
    return min(value, maximum) if maximum is not None else value


def _flag(query: Any, name: str) -> bool:
    """A yes/no query parameter (`?internals=1`)."""
    return query.get(name) in ("1", "true", "yes")


def _step(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"step {text!r} is not a whole number") from None


def api_routes(saver: Callable[[], Any]) -> list[tuple[str, Callable[[Request], Response]]]:
    """(path, endpoint) of each JSON endpoint, on the app's saver."""

    def threads(request: Request) -> Response:
        query = request.query_params
        meta = [f"{k}={v}" for k, v in query.multi_items() if k.startswith(WHERE_PREFIX)]
        limit = _int(request, "limit", DEFAULT_LIMIT, maximum=MAX_LIMIT)
        records = list(
            saver().list_threads(
                status=query.get("status") or None,
                run_id=query.get("run") or None,
                metadata=metadata_filter(meta),
                since=moment(query.get("since"), "?since"),
                until=moment(query.get("until"), "?until"),
                limit=limit,
                after=query.get("after") or None,
            )
        )
        following = records[-1].thread_id if limit and len(records) == limit else None
        return _json({"threads": [fields_of(r) for r in records], "next_after": following})

    def runs(request: Request) -> Response:
        thread = request.path_params["thread_id"]
        return _json({"thread_id": thread, "runs": [fields_of(r) for r in saver().list_runs(thread)]})

    def steps(request: Request) -> Response:
        thread = request.path_params["thread_id"]
        limit = _int(request, "limit", DEFAULT_LIMIT, maximum=MAX_LIMIT)
        records = list(
            saver().list_steps(thread, checkpoint_ns=request.query_params.get("ns"), before=request.query_params.get("before"), limit=limit)
        )
        if not records and not request.query_params.get("before"):
            raise LookupError(f"thread {thread!r} has no checkpoints")
        following = records[-1].checkpoint_id if limit and len(records) == limit else None
        return _json({"thread_id": thread, "steps": [fields_of(r) for r in records], "next_before": following})

    def step(request: Request) -> Response:
        thread, number = request.path_params["thread_id"], _step(request.path_params["step"])
        query = request.query_params
        record = find_step(saver(), thread, query.get("ns", ""), number, query.get("checkpoint") or None, query.get("run") or None)
        return _json(read_step_view(saver(), record, full=_flag(query, "full"), internals=_flag(query, "internals")))

    def diff(request: Request) -> Response:
        thread = request.path_params["thread_id"]
        query = request.query_params
        against = query.get("against")
        other_thread, _, other_checkpoint = (against or "").rpartition("@") if against else ("", "", "")
        a, b, found = read_diff(
            saver(),
            thread,
            None,
            other_thread or thread,
            other_checkpoint or None,
            namespace=query.get("ns", ""),
            from_step=_int(request, "from"),
            to_step=_int(request, "to"),
            internals=_flag(query, "internals"),
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
        thread = request.path_params["thread_id"]
        query = request.query_params
        record = find_step(saver(), thread, query.get("ns", ""), None, query.get("checkpoint") or None, None)
        with lenient_reads() as unreadable:  # a type this server does not rebuild shows as its fields, named
            values = state_of(saver(), thread, record.checkpoint_ns, record.checkpoint_id, internals=_flag(query, "internals"))
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
        ("/api/threads/{thread_id:path}/state", state),
        ("/api/threads/{thread_id:path}/runs", runs),
        ("/api/threads/{thread_id:path}/steps/{step}", step),
        ("/api/threads/{thread_id:path}/steps", steps),
        ("/api/threads/{thread_id:path}/diff", diff),
    ]
