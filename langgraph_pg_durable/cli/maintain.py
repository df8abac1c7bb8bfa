"""`lgpd prune`, `lgpd gc`, `lgpd backfill`, `lgpd import-official` and `lgpd distribute`
(the commands that write), and `lgpd doctor`.

Each works through the threads page by page, with a progress bar on a terminal, and can
be stopped (Ctrl-C) and run again: what it already did is not done twice.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from ..core.durability import Durability
from ..errors import ConfigError
from ..sql import distribute as distribute_sql
from ..sql import routed as routed_sql
from .app import app, errors, failing_cleanly
from .filters import metadata_filter, moment
from .listing import WhereOption
from .render import Column, Format, console_for, emit, fields_of, plain, progress, when
from .target import Target

NoProgress = Annotated[bool, typer.Option("--no-progress", help="no progress bar (there is none when stderr is not a terminal)")]
BatchOption = Annotated[int, typer.Option("--batch", min=1, help="threads per statement")]
ThreadsOption = Annotated[list[str] | None, typer.Option("--thread", help="only this thread (repeat for more)")]


def _chunks(ids: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for thread_id in ids:
        chunk.append(thread_id)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _interrupted(done: int, what: str) -> typer.Exit:
    errors.print(f"interrupted after {done} threads {what}; run the same command again to go on")
    return typer.Exit(130)


@app.command()
@failing_cleanly
def prune(
    ctx: typer.Context,
    older_than: Annotated[str | None, typer.Option(help="only threads idle this long (30d, 12h) or since before this time")] = None,
    keep_latest: Annotated[bool, typer.Option("--keep-latest", help="keep each thread's latest checkpoint (and what it needs)")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="delete the threads whole")] = False,
    threads: ThreadsOption = None,
    where: WhereOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would go; change nothing")] = False,
    batch: BatchOption = 100,
    no_progress: NoProgress = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="how --dry-run lists the threads")] = Format.table,
) -> None:
    """Retention (writes): compact or delete the threads chosen by age, id or metadata.
    `--keep-latest` keeps what the latest checkpoint needs (list versions, DeltaChannel
    writes); `--delete` removes the threads' rows. Say which: there is no default."""
    if keep_latest == delete:
        raise ConfigError("prune needs exactly one of --keep-latest and --delete")
    strategy = "keep_latest" if keep_latest else "delete"
    cutoff = moment(older_than, "--older-than")
    metadata = metadata_filter(where)
    wanted = set(threads or ())
    target: Target = ctx.obj
    with target.saver() as saver:
        chosen = (t for t in saver.list_threads(metadata=metadata, until=cutoff) if not wanted or t.thread_id in wanted)
        if dry_run:
            columns = [
                Column("thread", "thread_id", style="cyan"),
                Column("checkpoints", "checkpoints"),
                Column("last activity", "last_activity", when),
            ]
            shown = emit(
                ({"thread_id": t.thread_id, "checkpoints": t.checkpoints, "last_activity": t.last_activity} for t in chosen), fmt, columns
            )
            errors.print(f"dry run: {shown} threads would be pruned ({strategy}); nothing was changed")
            return
        done = 0
        with progress(f"prune ({strategy})", enabled=not no_progress) as advance:
            try:
                for chunk in _chunks((t.thread_id for t in chosen), batch):
                    saver.prune(chunk, strategy=strategy)
                    done += len(chunk)
                    advance(len(chunk))
            except KeyboardInterrupt:
                raise _interrupted(done, "pruned") from None
    print(f"pruned {done} threads ({strategy})")


@app.command()
@failing_cleanly
def gc(
    ctx: typer.Context,
    grace: Annotated[str, typer.Option(help="spare objects written this recently (uploads whose rows may not be committed yet)")] = "1h",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="count what would go; delete nothing")] = False,
) -> None:
    """Delete the object-store objects no row references any more (writes)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    since = moment(grace, "--grace", now=now)
    assert since is not None
    target: Target = ctx.obj
    with target.saver() as saver:
        count = saver.gc(grace_period=now - since, dry_run=dry_run)
    print(f"{count} unreferenced objects {'would be deleted (dry run)' if dry_run else 'deleted'}")


@app.command()
@failing_cleanly
def backfill(
    ctx: typer.Context,
    threads: ThreadsOption = None,
    batch: BatchOption = 100,
    no_progress: NoProgress = False,
) -> None:
    """Fill the action log and run ids of threads written without them (writes): before
    migration 0007 or with action_log=False. Threads that have their log are skipped."""
    target: Target = ctx.obj
    with target.saver() as saver:
        ids: Any = iter(threads) if threads else (t.thread_id for t in saver.list_threads())
        filled = seen = 0
        with progress("backfill", enabled=not no_progress, total=len(threads) if threads else None) as advance:
            try:
                for chunk in _chunks(ids, batch):
                    filled += saver.backfill_actions(thread_ids=chunk, batch_size=batch)
                    seen += len(chunk)
                    advance(len(chunk))
            except KeyboardInterrupt:
                raise _interrupted(seen, "looked at") from None
    print(f"filled the log of {filled} of {seen} threads")


@app.command("import-official")
@failing_cleanly
def import_official_command(
    ctx: typer.Context,
    from_dsn: Annotated[str, typer.Option("--from-dsn", help="the database the official saver wrote to")],
    from_schema: Annotated[str, typer.Option("--from-schema", help="the schema of its tables")] = "public",
    threads: ThreadsOption = None,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help="read every imported thread back from both and compare")] = True,
    no_progress: NoProgress = False,
) -> None:
    """Copy threads from the official langgraph-checkpoint-postgres tables into ours
    (writes; a schema not there yet is created, as `lgpd setup` does), then check they read
    back equal. Run it again after an interruption: complete threads are skipped."""
    from ..importer import import_official

    target: Target = ctx.obj
    with target.saver(need_schema=False) as saver, progress("import", enabled=not no_progress) as advance:
        saver.setup()  # it writes anyway: the schema it writes to is made or brought up to date first
        try:
            report = import_official(
                from_dsn, saver, source_schema=from_schema, thread_ids=threads, verify=verify, on_thread=lambda _t, _i: advance(1)
            )
        except KeyboardInterrupt:
            errors.print("interrupted; run the same command again to go on (complete threads are skipped)")
            raise typer.Exit(130) from None
    counts = f"{report.checkpoints} checkpoints, {report.writes} writes"
    print(f"imported {len(report.imported)} threads ({counts}); {len(report.skipped)} already here")
    if verify:
        if report.mismatches:
            for line in report.mismatches:
                errors.print(f"[red]mismatch:[/red] {escape(line)}")
            raise typer.Exit(1)
        print("verified: every imported thread reads back equal")


def _size(n: Any) -> str:
    value = float(n or 0)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


@app.command()
@failing_cleanly
def doctor(
    ctx: typer.Context,
    top: Annotated[int, typer.Option(min=1, help="how many of the oldest and largest threads")] = 5,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table for a person; json for a program")] = Format.table,
) -> None:
    """The server, its durability settings (primary or standby, its standbys), the schema
    against this package, table and index sizes, the oldest and largest threads, and whether
    the object store answers. Exits 1 when something needs doing (a schema behind, a setting
    that can lose commits, a synchronous standby missing); notes are not failures."""
    target: Target = ctx.obj
    with target.saver(need_schema=False) as saver:
        found = saver.diagnose(top=top)
    problems = []
    if found["schema_version"] is None:
        problems.append(f"schema {found['schema']!r} has no saver tables: run `lgpd setup`")
    elif found["schema_version"] < found["package_schema_version"]:
        behind = f"schema {found['schema']!r} is at version {found['schema_version']}"
        problems.append(f"{behind}, the package at {found['package_schema_version']}: run `lgpd setup`")
    durability: Durability = found["durability"]
    problems += durability.problems
    if isinstance(found["object_store"], str) and found["object_store"] != "reachable":
        problems.append(f"the object store is {found['object_store']}")
    found["problems"] = problems
    found["notes"] = list(durability.notes)
    if fmt is not Format.table:
        print(json.dumps(plain(found), ensure_ascii=False, indent=2))
    else:
        console = console_for(sys.stdout, piped_width=100)
        console.print(Text(f"PostgreSQL {found['server']['version']}", style="bold"))
        console.print(Text("settings: " + ", ".join(f"{k}={v!s}" for k, v in found["settings"].items())))
        role = {True: "a standby (in recovery)", False: "a primary", None: "unknown"}[durability.in_recovery]
        console.print(Text(f"server: {role}" + ("" if durability.in_recovery else f", standbys connected: {len(durability.standbys)}")))
        if durability.standbys:
            emit(
                (fields_of(standby) for standby in durability.standbys),
                Format.table,
                [
                    Column("standby", "application_name", style="cyan"),
                    Column("state", "state"),
                    Column("sync state", "sync_state"),
                    Column("replay lag", "replay_lag", lambda lag: "" if lag is None else f"{lag:.3f} s"),
                ],
                console=console,
            )
        console.print(Text("extensions: " + ", ".join(f"{k} {v}" for k, v in found["extensions"].items())))
        console.print(
            Text(f"schema {found['schema']}: version {found['schema_version']} (this package: {found['package_schema_version']})")
        )
        console.print(Text(f"object store: {found['object_store'] or 'none configured'}"))
        tables = [
            Column("relation", "relname"),
            Column("kind", "relkind", lambda k: {"r": "table", "p": "table", "i": "index"}.get(k, k)),
            Column("size", "total_bytes", _size),
            Column("rows (estimate)", "rows_estimate"),
        ]
        emit(found["relations"], Format.table, tables, console=console)
        for key, title in (("oldest_threads", "oldest threads"), ("largest_threads", "largest threads")):
            if found.get(key):
                console.print(Text(title, style="bold"))
                emit(
                    found[key],
                    Format.table,
                    [
                        Column("thread", "thread_id", style="cyan"),
                        Column("checkpoints", "checkpoints"),
                        Column("last activity", "last_activity", when),
                    ],
                    console=console,
                )
        for note in durability.notes:
            console.print(Text(f"note: {note}", style="yellow"))
        for problem in problems:
            console.print(Text(f"! {problem}", style="bold red"))
        if not problems:
            console.print(Text("no problem found", style="green"))
    if problems:
        raise typer.Exit(1)


@app.command()
@failing_cleanly
def distribute(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", "--print", help="print the statements (a psql script) and run nothing; needs no database")
    ] = False,
) -> None:
    """Scale out on Citus (writes): distribute the schema's tables by thread_id, co-located,
    make the migrations ledger a reference table and the write functions distributed
    functions, in one transaction (what saver.distribute() does). Run on the coordinator,
    after `lgpd setup`; what is distributed already is skipped. Refused, nothing changed,
    without the citus extension."""
    target: Target = ctx.obj
    if dry_run:
        print(distribute_sql.script(target.schema), end="")
        errors.print("dry run: nothing was run")
        return
    with target.saver(need_schema=False) as saver:
        done = saver.distribute()
    steps = distribute_sql.steps(target.schema)
    for step in steps:
        if step.function:
            what = f"write function, run by the worker of its {routed_sql.DISTRIBUTION_ARGUMENT}"
        else:
            what = "reference table" if step.reference else f"distributed by {distribute_sql.DISTRIBUTION_COLUMN}"
        print(f"{step.table}: {what}{'' if step.table in done else ' (already)'}")
    tables = [step for step in steps if not step.function]
    functions = [step for step in steps if step.function]
    print(
        f"schema {target.schema!r}: {sum(step.table in done for step in tables)} of {len(tables)} tables and "
        f"{sum(step.table in done for step in functions)} of {len(functions)} write functions distributed now"
    )
