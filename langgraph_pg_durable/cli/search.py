"""`lgpd grep` and `lgpd tail`: the action log searched for text, and followed as it grows.

`grep` looks at what a person would search (message text, tool names and arguments, tool
results, errors, interrupts), not at JSON keys; the database narrows the rows first when
it can (`list_actions(contains=...)`). Under an encrypting serializer payloads hold no
text, so nothing is found. `tail` polls the log (a trigger would not survive Citus).
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from ..core.logs import ActionRecord
from ..errors import ConfigError, shown
from .app import app, failing_cleanly
from .filters import metadata_filter, moment
from .listing import FormatOption, LimitOption, SinceOption, UntilOption, WhereOption, threads_matching
from .render import Column, Format, emit, when
from .target import Target

SNIPPET = 120
POLL_SECONDS = 1.0
CLOCK_MARGIN_SECONDS = 5.0  # tail from now also shows what committed in the last few seconds


def searchable(payload: Any) -> Iterator[tuple[str, str]]:
    """(field, text) of what a person searches in an action's payload."""
    if not isinstance(payload, Mapping):
        return
    for message in payload.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [b.get("text") for b in content or () if isinstance(b, Mapping)]
        field = "result" if message.get("role") == "tool" else "content"
        for text in texts:
            if isinstance(text, str) and text:
                yield field, text
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                yield "tool", str(function.get("name", ""))
                yield "arguments", str(function.get("arguments", ""))
    error = payload.get("error")
    if isinstance(error, Mapping):
        yield "error", f"{error.get('type', '')}: {error.get('message', '')}"
    for interrupt in payload.get("interrupts") or ():
        yield "interrupt", json.dumps(interrupt.get("value") if isinstance(interrupt, Mapping) else interrupt, ensure_ascii=False)
    if "resume" in payload:
        yield "resume", json.dumps(payload["resume"], ensure_ascii=False)


def matcher(pattern: str, *, regex: bool, ignore_case: bool) -> Callable[[str], re.Match[str] | None]:
    flags = re.IGNORECASE if ignore_case else 0
    try:
        compiled = re.compile(pattern if regex else re.escape(pattern), flags)
    except re.error as exc:
        raise ConfigError(f"--regex {shown(pattern)} is not a regular expression ({exc})") from None
    return compiled.search


def snippet(text: str, found: re.Match[str]) -> str:
    start = max(0, found.start() - SNIPPET // 3)
    piece = text[start : start + SNIPPET].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + SNIPPET < len(text) else "")


def _hit(action: ActionRecord, field: str, text: str) -> dict[str, Any]:
    return {
        "thread_id": action.thread_id,
        "checkpoint_ns": action.checkpoint_ns,
        "run_id": action.run_id,
        "step": action.step,
        "agent": action.agent,
        "action_type": action.action_type,
        "created_at": action.created_at,
        "field": field,
        "text": text,
    }


HIT_COLUMNS = [
    Column("thread", "thread_id", style="cyan"),
    Column("step", "step"),
    Column("agent", "agent"),
    Column("type", "action_type"),
    Column("field", "field"),
    Column("text", "text"),
]


@app.command()
@failing_cleanly
def grep(
    ctx: typer.Context,
    pattern: Annotated[str, typer.Argument(help="the text to find (with --regex, a Python regular expression)")],
    regex: Annotated[bool, typer.Option("--regex", "-E", help="PATTERN is a regular expression")] = False,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="any case")] = False,
    thread: Annotated[str | None, typer.Option(help="only this thread")] = None,
    agent: Annotated[str | None, typer.Option(help="only this agent (node)")] = None,
    where: WhereOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: LimitOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Find text in what agents said and did: messages, tool names and arguments, tool
    results, errors, interrupts. Exits 1 when nothing matches, as grep does."""
    search = matcher(pattern, regex=regex, ignore_case=ignore_case)
    start, end = moment(since, "--since"), moment(until, "--until")
    # The database narrows the rows when the text reads the same in the payload's JSON.
    prefilter = pattern if not regex and not any(c in pattern for c in '"\\') and pattern.isprintable() else None
    metadata = metadata_filter(where)
    target: Target = ctx.obj
    with target.saver() as saver:
        among = threads_matching(saver, metadata)
        actions = (
            a
            for a in saver.list_actions(thread_id=thread, agent=agent, since=start, until=end, contains=prefilter)
            if among is None or a.thread_id in among
        )

        def hits() -> Iterator[dict[str, Any]]:
            found = 0
            for action in actions:
                for field, text in searchable(action.payload):
                    match = search(text)
                    if match:
                        yield _hit(action, field, snippet(text, match) if fmt is Format.table else text)
                        found += 1
                        if limit is not None and found >= limit:
                            return

        count = emit(hits(), fmt, HIT_COLUMNS, empty="no match")
    if not count:
        raise typer.Exit(1)


ACTION_COLUMNS = [
    Column("time", "created_at", when),
    Column("thread", "thread_id", style="cyan"),
    Column("step", "step"),
    Column("agent", "agent"),
    Column("type", "action_type"),
    Column("run", "run_id", lambda r: r or "-"),
]


@app.command()
@failing_cleanly
def tail(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option(help="only this thread")] = None,
    agent: Annotated[str | None, typer.Option(help="only this agent (node)")] = None,
    where: WhereOption = None,
    since: Annotated[str | None, typer.Option(help="start from this time or age (default: now)")] = None,
    count: Annotated[int | None, typer.Option("--count", min=1, help="stop after this many actions")] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table for a person; jsonl for a program")] = Format.table,
) -> None:
    """Follow the action log: print each action as it commits (Ctrl-C stops)."""
    started = moment(since, "--since") if since else None
    metadata = metadata_filter(where)
    target: Target = ctx.obj
    printed = 0
    with target.saver() as saver:
        if started is None:  # from now, with a margin for the client's clock against the server's
            started = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=CLOCK_MARGIN_SECONDS)
        cursor = LogCursor(started)
        try:
            while count is None or printed < count:
                among = threads_matching(saver, metadata)  # again each time: new threads may match
                polled = saver.list_actions(thread_id=thread, agent=agent, since=cursor.since)
                for action in cursor.fresh(a for a in polled if among is None or a.thread_id in among):
                    record = {
                        k: getattr(action, k)
                        for k in ("created_at", "thread_id", "checkpoint_ns", "run_id", "step", "agent", "action_type")
                    }
                    record["payload"] = action.payload
                    emit([record], Format.jsonl if fmt is Format.json else fmt, ACTION_COLUMNS)
                    sys.stdout.flush()
                    cursor.printed(action)
                    printed += 1
                    if count is not None and printed >= count:
                        return
                time.sleep(POLL_SECONDS)
        except KeyboardInterrupt:
            return


@dataclass
class LogCursor:
    """Where `tail` is in the action log: the newest time it printed (the next poll starts
    there) and the actions it printed at that time, which that poll returns again. It holds
    no more than those, however long `tail` runs."""

    since: datetime.datetime
    printed_at_since: set[tuple[Any, ...]] = field(default_factory=set)

    def fresh(self, polled: Iterable[ActionRecord]) -> list[ActionRecord]:
        """The actions of a poll from `since` not printed yet (read whole before any is printed)."""
        return [a for a in polled if a.created_at > self.since or _identity(a) not in self.printed_at_since]

    def printed(self, action: ActionRecord) -> None:
        if action.created_at > self.since:
            self.since, self.printed_at_since = action.created_at, set()
        self.printed_at_since.add(_identity(action))


def _identity(action: ActionRecord) -> tuple[Any, ...]:
    return (action.thread_id, action.checkpoint_ns, action.checkpoint_id, action.task_id, action.run_id or "", action.created_at)
