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

from ..cli.filters import metadata_filter, moment
from ..cli.reading import find_step, read_diff, read_step_view
from ..cli.render import fields_of, plain, took
from ..core.actions import subgraph_path
from ..core.runs import RUN_STATUSES
from ..core.steps import tokens_of
from ..errors import ConfigError

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE = 50
TIMELINE = 200
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
environment.filters.update(when=_when, took=took, pretty=_pretty, jsontext=_json_text, cut=_cut, urlpart=lambda v: quote(str(v), safe=""))


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
        status = query.get("status") or None
        if status is not None and status not in RUN_STATUSES:
            raise ConfigError(f"status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        meta_text = (query.get("meta") or "").strip()
        metadata = metadata_filter([f"meta.{term}" for term in meta_text.split()] if meta_text else None)
        records = list(
            saver().list_threads(
                status=status,
                metadata=metadata,
                since=moment(query.get("since") or None, "since"),
                limit=PAGE,
                after=query.get("after") or None,
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
        thread_id = request.path_params["thread_id"]
        records = list(saver().list_steps(thread_id, before=request.query_params.get("before") or None, limit=TIMELINE))
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
        return render(
            "thread.html", schema=schema, thread_id=thread_id, runs=list(saver().list_runs(thread_id)), steps=steps, next_before=following
        )

    def step(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        try:
            number = int(request.path_params["step"])
        except ValueError:
            raise ConfigError(f"step {request.path_params['step']!r} is not a whole number") from None
        record = find_step(saver(), thread_id, "", number, None, request.query_params.get("run") or None)
        internals = request.query_params.get("internals") in ("1", "true", "yes")
        view = read_step_view(saver(), record, internals=internals)
        root_steps = sorted({s.step for s in saver().list_steps(thread_id, checkpoint_ns="") if s.step is not None})
        earlier = [s for s in root_steps if s < number]
        later = [s for s in root_steps if s > number]
        against_text = request.query_params.get("against") or ""
        against = int(against_text) if against_text.lstrip("-").isdigit() else None
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
            prev_step=earlier[-1] if earlier else None,
            next_step=later[0] if later else None,
            against=against,
            diff=found,
        )

    return [
        ("/", threads),
        ("/threads/{thread_id:path}/steps/{step}", step),
        ("/threads/{thread_id:path}", thread),
    ]
