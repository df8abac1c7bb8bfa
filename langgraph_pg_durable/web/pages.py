"""The replay page's HTML pages, rendered by Jinja2 with autoescaping (a `<script>` in a
message shows as text), from the same reads as the JSON endpoints.

    /                                   threads: filters, paged
    /threads/{thread_id}                runs and the step timeline (it updates live)
    /threads/{thread_id}/steps/{step}   prompt, response, tool calls paired, interrupts,
                                        errors, the diff against the step before (?against=N)
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..cli.filters import metadata_filter
from ..cli.reading import find_step, read_diff, read_step_view
from ..cli.render import fields_of, plain, took
from ..core.actions import subgraph_path
from ..core.runs import RUN_STATUSES
from ..core.steps import tokens_of
from ..errors import ConfigError
from .api import runs_before, runs_page
from .guard import path_id
from .query import flag, integer, text, time_bound, whole

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE = 50
TIMELINE = 200
RUNS = 50  # runs on a thread's page; older ones a page at a time
CUT = 4000  # characters of a message shown before "N more"; the JSON has them all


def _when(value: Any) -> str:
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime.datetime) else ""


def _pretty(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(plain(value), ensure_ascii=False, indent=2)


def _json_text(value: Any) -> str:
    """Tool arguments (a JSON string) pretty-printed when they parse."""
    try:
        return json.dumps(json.loads(value), ensure_ascii=False, indent=2) if isinstance(value, str) else _pretty(value)
    except ValueError:
        return str(value)


def _cut(text: str) -> str:
    return text if len(text) <= CUT else f"{text[:CUT]}… ({len(text) - CUT:,} more characters in the JSON)"


environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)


def _isolate(value: Any) -> str:
    """Text from the database set apart for bidi where no element can be (a `<title>`):
    between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE, so a U+202E inside reverses
    nothing around it. In the body, `<bdi>` does the same."""
    return f"\u2068{value}\u2069"


environment.filters.update(
    when=_when, took=took, pretty=_pretty, jsontext=_json_text, cut=_cut, urlpart=lambda v: quote(str(v), safe=""), isolate=_isolate
)


def render(name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(environment.get_template(name).render(root="", **context))


def error_page(message: str, status: int) -> Response:
    page = environment.from_string(
        '{% extends "base.html" %}{% block main %}<h1>{{ status }}</h1><p class="error-line">{{ message }}</p>{% endblock %}'
    )
    return HTMLResponse(page.render(root="", schema="", status=status, message=message), status_code=status)


def page_routes(saver: Callable[[], Any], schema: str) -> list[tuple[str, Callable[[Request], Response]]]:
    """(path, endpoint) of each page, on the app's saver."""

    def threads(request: Request) -> Response:
        query = request.query_params
        status = text(query, "status")
        if status is not None and status not in RUN_STATUSES:
            raise ConfigError(f"?status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        meta_text = (query.get("meta") or "").strip()
        metadata = metadata_filter([f"meta.{term}" for term in meta_text.split()] if meta_text else None)
        records = list(
            saver().list_threads(
                status=status,
                metadata=metadata,
                since=time_bound(query, "since"),
                limit=PAGE,
                after=text(query, "after"),
            )
        )
        following = records[-1].thread_id if len(records) == PAGE else None
        more = "?" + urlencode({k: v for k, v in {**dict(query), "after": following}.items() if v}) if following else ""
        return render(
            "threads.html",
            schema=schema,
            threads=records,
            statuses=RUN_STATUSES,
            status=status or "",
            meta=meta_text,
            since=query.get("since") or "",
            next_after=following,
            more_url=more,
        )

    def thread(request: Request) -> Response:
        thread_id = path_id(request.path_params["thread_id"])
        query = request.query_params
        records = list(saver().list_steps(thread_id, before=text(query, "before"), limit=TIMELINE))
        if not records:
            raise LookupError(f"thread {thread_id!r} has no checkpoints")
        steps = [
            {
                **fields_of(r),
                "depth": len(subgraph_path(r.checkpoint_ns)),
                "namespace": "/".join(subgraph_path(r.checkpoint_ns)),
                "tokens": tokens_of(r.made_by),
            }
            for r in records
        ]
        following = records[-1].checkpoint_id if len(records) == TIMELINE else None
        runs, older_runs = runs_page(saver(), thread_id, RUNS, runs_before(text(query, "runs_before"), "?runs_before"))
        return render(
            "thread.html", schema=schema, thread_id=thread_id, runs=runs, older_runs=older_runs, steps=steps, next_before=following
        )

    def step(request: Request) -> Response:
        thread_id = path_id(request.path_params["thread_id"])
        number = whole(request.path_params["step"], "step")
        query = request.query_params
        internals = flag(query, "internals")
        against = integer(query, "against")
        record = find_step(saver(), thread_id, "", number, None, text(query, "run"))
        view = read_step_view(saver(), record, internals=internals)
        prev_step, next_step = saver().step_neighbours(thread_id, number)
        found = None
        if against is not None or record.parent_checkpoint_id:
            _, _, found = read_diff(
                saver(),
                thread_id,
                None if against is not None else record.parent_checkpoint_id,
                thread_id,
                record.checkpoint_id,
                from_step=against,
                internals=internals,
            )
        return render(
            "step.html",
            schema=schema,
            view=view,
            internals=internals,
            prev_step=prev_step,
            next_step=next_step,
            against=against,
            diff=found,
        )

    return [
        ("/", threads),
        ("/threads/{thread_id}/steps/{step}", step),
        ("/threads/{thread_id}", thread),
    ]
