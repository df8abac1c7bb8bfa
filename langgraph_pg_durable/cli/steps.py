"""`lgpd history` and `lgpd show`: a thread step by step, and one step as a person reads it."""

from __future__ import annotations

import itertools
import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from ..core.actions import subgraph_path
from ..core.steps import tokens_of
from ..errors import shown
from .app import app, failing_cleanly
from .filters import moment
from .listing import FormatOption, FullIdsOption, InternalsOption, LimitOption, SinceOption, UntilOption
from .render import Column, Format, console_for, emit, fields_of, plain, took, when
from .reading import find_step, read_step_view
from .target import Target

SHOW_WIDTH = 100  # piped: prose reads better narrow
CUT_CHARS = 2000  # a longer text is cut in the table view, unless --full
STOPS = ("error", "interrupt")  # what can follow a step instead of the next one
ROLE_STYLES = {"user": "green", "assistant": "cyan", "tool": "yellow", "system": "magenta"}


def _task(task: Any) -> str:
    """A task as a timeline names it: agent and action, then the tools it called, or the
    start of its reply."""
    text = f"{task.agent} {task.action_type}"
    if task.tools:
        return f"{text}: {', '.join(task.tools)}"
    if task.reply:
        return f"{text}: {task.reply!r}"
    return text


def _tasks(tasks: Any) -> str:
    return "; ".join(_task(t) for t in tasks or ())


def _made_by(record: dict[str, Any]) -> str:
    return _tasks(record["made_by"]) or f"({record['source'] or 'no task'})"


def _tokens(tasks: Any) -> str:
    total = tokens_of(tasks)
    return "" if total is None else f"{total:,}"


def _created(value: Any) -> str:
    return when(value)[5:16]  # month, day, hour and minute: the JSON has the whole time


def _namespace(ns: str) -> str:
    """A subgraph namespace as its path of node names (`writer:<task id>|...` -> `writer`)."""
    return "/".join(subgraph_path(ns))


HISTORY_COLUMNS = [
    Column("step", "step"),
    # Fits 120 columns (README): ids shortened, long cells cut; the JSON has every field whole.
    Column("ns", "checkpoint_ns", _namespace, width=10),
    Column("made by", "", _made_by, width=26),  # the whole record: its source when no task made it
    Column("took", "duration_ms", took),
    Column("tokens", "made_by", _tokens),
    Column("created", "created_at", _created),
    Column("then", "ran_from", lambda ts: ", ".join(f"{t.agent} {t.action_type}" for t in ts or () if t.action_type in STOPS), width=14),
    Column("run", "run_id", lambda r: r or "-", short_id=True),
    Column("checkpoint", "checkpoint_id", short_id=True),
]


@app.command()
@failing_cleanly
def history(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="the thread id")],
    namespace: Annotated[str | None, typer.Option("--ns", help="one namespace only ('' for the root graph)")] = None,
    before: Annotated[str | None, typer.Option(help="only checkpoints before this checkpoint id (the next page)")] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: LimitOption = None,
    fmt: FormatOption = Format.table,
    full_ids: FullIdsOption = False,
) -> None:
    """A thread's checkpoints, newest first: step, the tasks that made it (the tools they
    called, the start of a reply), how long it took and the tokens it reported, its run,
    its pending writes, an error or interrupt that followed. No value is read."""
    start, end = moment(since, "--since"), moment(until, "--until")
    target: Target = ctx.obj
    with target.saver() as saver:
        records: Any = saver.list_steps(thread, checkpoint_ns=namespace, before=before, limit=None if end else limit)
        if start is not None or end is not None:
            # Filtered, not cut off: an imported or copied thread's times need not follow its ids.
            kept = (r for r in records if (end is None or r.created_at < end) and (start is None or r.created_at >= start))
            records = itertools.islice(kept, limit)
        emit((fields_of(r) for r in records), fmt, HISTORY_COLUMNS, empty=f"thread {shown(thread)} has no checkpoints", full_ids=full_ids)


@app.command()
@failing_cleanly
def show(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="the thread id")],
    step: Annotated[int | None, typer.Option(help="the step (default: the newest)")] = None,
    checkpoint: Annotated[str | None, typer.Option(help="the checkpoint id, instead of a step")] = None,
    run: Annotated[str | None, typer.Option(help="the run, when several reached the step (a fork)")] = None,
    namespace: Annotated[str, typer.Option("--ns", help="a subgraph's namespace (default: the root graph)")] = "",
    full: Annotated[bool, typer.Option("--full", help="long texts whole, and offloaded values fetched from the object store")] = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table for a person; json for a program")] = Format.table,
    internals: InternalsOption = False,
) -> None:
    """One step for a person: the prompt the model saw, its response, each tool call with
    its result, and the interrupt or error that followed. Long texts are cut, and values in
    the object store shown by size, unless --full."""
    target: Target = ctx.obj
    with target.saver() as saver:
        view = read_step_view(saver, find_step(saver, thread, namespace, step, checkpoint, run), full=full, internals=internals)
    if fmt is Format.table:
        _print_view(view, console_for(sys.stdout, piped_width=SHOW_WIDTH), cut=None if full else CUT_CHARS)
    else:
        print(json.dumps(plain(view), ensure_ascii=False, indent=None if fmt is Format.jsonl else 2))


def _cut(text: str, cut: int | None) -> str:
    if cut is None or len(text) <= cut:
        return text
    return f"{text[:cut]}… ({len(text) - cut:,} more characters; --full shows all)"


def _message(console: Console, message: Any, cut: int | None = None) -> None:
    role = str(message.get("role") or message.get("type") or "?")
    line = Text(f"{role:>9} ", style=f"bold {ROLE_STYLES.get(role, 'white')}")
    content = message.get("content")
    line.append(_cut(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False), cut))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        line.append(f"\n          calls {function.get('name')}({function.get('arguments')})", style="dim")
    console.print(line)


def _title(text: str) -> Text:
    """A rule's title from the database, as text: a str title would be read as markup."""
    return Text(text, style="rule.text")


def _print_view(view: dict[str, Any], console: Console, *, cut: int | None) -> None:
    """The step for a person, on a console from `console_for` (which escapes what it prints)."""
    head = Text(f"thread {view['thread_id']}", style="bold")
    head.append(f"  step {view['step']}  {when(view['created_at'])}  run {view['run_id'] or '-'}")
    if view["checkpoint_ns"]:
        head.append(f"  in {_namespace(view['checkpoint_ns'])}")
    console.print(head)
    console.print(Text(f"checkpoint {view['checkpoint_id']}", style="dim"))
    if view.get("unreadable_types"):
        names = ", ".join(view["unreadable_types"])
        console.print(Text(f"note: values of {names} shown as their fields (not rebuilt here; --allow-type module:Name)", style="yellow"))
    console.print(Rule("prompt", style="dim"))
    for message in view["prompt"] or [{"role": "-", "content": "(no messages before this step)"}]:
        _message(console, message, cut)
    for task in view["response"]:
        console.print(Rule(_title(f"{task['agent']} ({task['action_type']})"), style="dim"))
        messages = (task["payload"] or {}).get("messages") if isinstance(task["payload"], dict) else None
        for message in messages or ():
            _message(console, message, cut)
        rest = {k: v for k, v in (task["payload"] or {}).items() if k != "messages"} if isinstance(task["payload"], dict) else {}
        for key, value in rest.items():
            console.print(Text(f"{key:>9} {_cut(json.dumps(value, ensure_ascii=False), cut)}", style="dim"))
    if view["tool_calls"]:
        console.print(Rule("tool calls", style="dim"))
        for call in view["tool_calls"]:
            line = Text(f"{call['name']}", style="bold yellow")
            line.append(f"({json.dumps(call['arguments'], ensure_ascii=False)})  [{call['id']}]")
            line.append("\n  -> " + (str(call["result"]) if call["answered"] else "(no result in this run)"))
            console.print(line)
    for interrupt in view["interrupts"]:
        console.print(Rule("interrupt", style="magenta"))
        console.print(Text(json.dumps(interrupt, ensure_ascii=False, indent=2)))
    for error in view["errors"]:
        console.print(Rule(_title(f"error in {error['agent']}"), style="red"))
        console.print(Text(f"{error.get('type', '')}: {error.get('message', '')}", style="bold red"))
        if error.get("traceback"):
            console.print(Text(str(error["traceback"]), style="dim"))
