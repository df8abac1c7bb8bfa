"""`lgpd diff`: what changed between two checkpoints, message by message.

A side is `THREAD` or `THREAD@CHECKPOINT_ID`. With one side, the thread's step `--to`
(default: the newest) is compared with step `--from` (default: its parent). Exit status
as `diff`'s: 0 the same, 1 different, 2 trouble (a bad option, a step not there).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from .app import app, failing_cleanly
from .render import Format, console_for
from .reading import read_diff
from .listing import InternalsOption
from .state_diff import StateDiff
from .target import Target


def _side(text: str) -> tuple[str, str | None]:
    thread, sep, checkpoint = text.rpartition("@")
    return (thread, checkpoint) if sep and thread else (text, None)


@app.command()
@failing_cleanly(trouble=2)
def diff(
    ctx: typer.Context,
    first: Annotated[str, typer.Argument(metavar="A", help="THREAD or THREAD@CHECKPOINT_ID")],
    second: Annotated[str | None, typer.Argument(metavar="[B]", help="THREAD or THREAD@CHECKPOINT_ID (default: A's thread)")] = None,
    from_step: Annotated[int | None, typer.Option("--from", help="A's step (default: the parent of B's)")] = None,
    to_step: Annotated[int | None, typer.Option("--to", help="B's step (default: the newest)")] = None,
    namespace: Annotated[str, typer.Option("--ns", help="a subgraph's namespace (default: the root graph)")] = "",
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table: a summary; json: an RFC 6902 patch from A to B")] = Format.table,
    internals: InternalsOption = False,
) -> None:
    """What changed from A to B: messages added, removed and edited (matched by id), other
    channels by JSON path. Exits 0 when the same, 1 when they differ, 2 on trouble."""
    target: Target = ctx.obj
    thread_a, checkpoint_a = _side(first)
    thread_b, checkpoint_b = _side(second) if second is not None else (thread_a, None)
    with target.saver() as saver:
        checkpoint_a, checkpoint_b, found = read_diff(
            saver,
            thread_a,
            checkpoint_a,
            thread_b,
            checkpoint_b,
            namespace=namespace,
            from_step=from_step,
            to_step=to_step,
            internals=internals,
        )
    if fmt is Format.json:
        print(json.dumps(found.patch, ensure_ascii=False, indent=2))
    elif fmt is Format.jsonl:
        for op in found.patch:
            print(json.dumps(op, ensure_ascii=False))
    else:
        _print_diff(found, f"{thread_a}@{checkpoint_a}", f"{thread_b}@{checkpoint_b}")
    if found:
        raise typer.Exit(1)


def _brief(message: Any) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    calls = [c.get("function", {}).get("name") for c in message.get("tool_calls") or ()]
    tail = f" calls {', '.join(str(c) for c in calls)}" if calls else ""
    ident = f"  [id {message['id']}]" if message.get("id") is not None else ""
    return f"{message.get('role', '?')}: {text}{tail}{ident}"


def _print_diff(found: StateDiff, a: str, b: str) -> None:
    console = console_for(sys.stdout, piped_width=100)
    console.print(Text(f"--- {a}\n+++ {b}", style="bold"))
    if not found:
        console.print(Text("no difference", style="dim"))
    for channel, changes in found.messages.items():
        counts = f"{len(changes.added)} added, {len(changes.removed)} removed, {len(changes.edited)} edited"
        console.print(Text(f"{channel}: {counts}", style="bold"))
        for message in changes.removed:
            console.print(Text(f"- {_brief(message)}", style="red"))
        for before, after in changes.edited:
            console.print(Text(f"~ {_brief(before)}", style="yellow"))
            console.print(Text(f"  {_brief(after)}", style="yellow"))
        for message in changes.added:
            console.print(Text(f"+ {_brief(message)}", style="green"))
    for change in found.changes:
        before, after = (json.dumps(change[k], ensure_ascii=False) for k in ("before", "after"))
        shown_change = {"added": f"+ {after}", "removed": f"- (was {before})", "changed": f"{before} -> {after}"}[change["change"]]
        console.print(Text(f"{change['path']}: {shown_change}", style="cyan"))
