"""`lgpd threads` and `lgpd runs`: listings from checkpoint and run rows, no value read."""

from __future__ import annotations

import itertools
from enum import Enum
from typing import Annotated, Any

import typer

from .app import app, failing_cleanly
from .filters import metadata_filter, moment
from .render import Column, Format, emit, fields_of, when
from .target import Target

FormatOption = Annotated[Format, typer.Option("--format", "-f", help="table for a person; json or jsonl for a program")]
LimitOption = Annotated[int | None, typer.Option(min=0, help="at most this many (default: all)")]
SinceOption = Annotated[str | None, typer.Option(help="from this time, or this long ago (30m, 2h, 7d)")]
UntilOption = Annotated[str | None, typer.Option(help="before this time, or this long ago")]
WhereOption = Annotated[list[str] | None, typer.Option(help="metadata filter meta.KEY=VALUE (repeat to combine)")]
InternalsOption = Annotated[
    bool, typer.Option("--internals", help="LangGraph's own channels too (branch:to:*, join:*, __pregel_*, __start__)")
]
FullIdsOption = Annotated[bool, typer.Option("--full-ids", help="ids whole in the table (it shows each by its shortest unique prefix)")]


class Status(str, Enum):
    """A run's status, as the `runs` view has it."""

    done = "done"
    interrupted = "interrupted"
    error = "error"
    running = "running"


THREAD_COLUMNS = [
    Column("thread", "thread_id", style="cyan"),
    Column("checkpoints", "checkpoints"),
    Column("last step", "last_step"),
    Column("status", "status", lambda s: s or "-"),
    Column("last run", "last_run_id", lambda r: r or "-", short_id=True),
    Column("held by", "held_by", lambda r: r or "-", short_id=True),
    Column("last activity", "last_activity", when),
]

RUN_COLUMNS = [
    Column("thread", "thread_id", style="cyan"),
    Column("run", "run_id", short_id=True),
    Column("started", "started_at", when),
    Column("ended", "ended_at", when),
    Column("steps", "steps"),
    Column("status", "status"),
    Column("holds", "holds_thread", lambda held: "yes" if held else ""),
    Column("tokens", "tokens", lambda n: "" if n is None else f"{n:,}"),
    Column("agents", "agents", lambda agents: ", ".join(agents or ()), width=40),
]


@app.command()
@failing_cleanly
def threads(
    ctx: typer.Context,
    status: Annotated[Status | None, typer.Option(help="only threads whose last run has this status")] = None,
    run: Annotated[str | None, typer.Option(help="only the thread that ran this run id")] = None,
    where: WhereOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: LimitOption = None,
    fmt: FormatOption = Format.table,
    full_ids: FullIdsOption = False,
) -> None:
    """Every thread: its checkpoints, last step, last run and its status, the run that holds it, last activity."""
    target: Target = ctx.obj
    metadata, start, end = metadata_filter(where), moment(since, "--since"), moment(until, "--until")  # refused before connecting
    with target.saver() as saver:
        records = saver.list_threads(
            status=status.value if status else None, run_id=run, metadata=metadata, since=start, until=end, limit=limit
        )
        emit((fields_of(r) for r in records), fmt, THREAD_COLUMNS, empty="no threads", full_ids=full_ids)


@app.command()
@failing_cleanly
def runs(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Argument(help="only this thread's runs")] = None,
    status: Annotated[Status | None, typer.Option(help="only runs with this status")] = None,
    where: WhereOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: LimitOption = None,
    fmt: FormatOption = Format.table,
    full_ids: FullIdsOption = False,
) -> None:
    """Runs (one per invoke or stream call), newest first, with the tokens their model replies report."""
    target: Target = ctx.obj
    start, end, metadata = moment(since, "--since"), moment(until, "--until"), metadata_filter(where)
    with target.saver() as saver:
        among = threads_matching(saver, metadata)
        records: Any = saver.list_runs(
            thread, status=status.value if status else None, since=start, until=end, limit=None if among else limit
        )
        if among is not None:
            records = itertools.islice((r for r in records if r.thread_id in among), limit)
        emit((fields_of(r) for r in records), fmt, RUN_COLUMNS, empty="no runs", full_ids=full_ids)


def threads_matching(saver: Any, metadata: dict[str, Any] | None) -> set[str] | None:
    """The threads with a checkpoint whose metadata contains `metadata` (None: no filter)."""
    return None if metadata is None else {t.thread_id for t in saver.list_threads(metadata=metadata)}
