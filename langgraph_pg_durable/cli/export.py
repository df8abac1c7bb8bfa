"""`lgpd export`: successful runs as fine-tuning data, straight off the database.

Threads are read in thread_id order; after each, the output files' sizes and the thread
are recorded in `OUT.lgpd-export` so that `--resume` after an interruption truncates the
files to the last whole thread and goes on from there (the record goes once it is done).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import DeserializationError, shown
from .app import app, errors, failing_cleanly
from .filters import import_attribute, metadata_filter, moment
from .listing import SinceOption, WhereOption
from .maintain import NoProgress, ThreadsOption
from .render import plain, progress
from .state import values_of
from .target import Target
from .training import Invalid, Redactor, fingerprint, in_training, line_for

STATE_SUFFIX = ".lgpd-export"


class ExportFormat(str, Enum):
    openai = "openai"
    trl = "trl"
    sharegpt = "sharegpt"
    raw = "raw"


class Per(str, Enum):
    run = "run"
    thread = "thread"


def load_tools(spec: str | None) -> list[dict[str, Any]]:
    """`module:attr` naming a list of tools (LangChain tools, functions, pydantic models), as
    OpenAI tool schemas."""
    if spec is None:
        return []
    found = import_attribute(spec, "--tools")
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return [convert_to_openai_tool(t) for t in (found if isinstance(found, (list, tuple)) else [found])]


@dataclass
class Outputs:
    """The file(s) lines go to (one, or train and validation with a split), and the record
    `--resume` reads."""

    out: Path
    split: float | None
    files: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.split is None:
            self.files = {"all": self.out}
        else:
            stem, suffix = self.out.stem, self.out.suffix or ".jsonl"
            self.files = {"train": self.out.with_name(f"{stem}.train{suffix}"), "valid": self.out.with_name(f"{stem}.valid{suffix}")}
        self.state_path = self.out.with_name(self.out.name + STATE_SUFFIX)

    def open(self, resume: bool) -> tuple[dict[str, Any], str]:
        """The open files and the thread to go on after ('' from the start)."""
        after = ""
        sizes: dict[str, int] = {}
        if resume and self.state_path.exists():
            state = json.loads(self.state_path.read_text())
            after, sizes = state["after"], state["sizes"]
        handles = {}
        for side, path in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = path.open("r+b" if side in sizes and path.exists() else "wb")
            if side in sizes:
                handle.truncate(sizes[side])
                handle.seek(sizes[side])
            handles[side] = handle
        return handles, after

    def record(self, handles: Mapping[str, Any], after: str) -> None:
        for handle in handles.values():
            handle.flush()
        state = {"after": after, "sizes": {side: handle.tell() for side, handle in handles.items()}}
        self.state_path.write_text(json.dumps(state))

    def done(self) -> None:
        self.state_path.unlink(missing_ok=True)


@dataclass
class Counts:
    written: dict[str, int] = field(default_factory=dict)
    unsuccessful: int = 0
    duplicates: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # thread id -> why its state could not be read

    def summary(self, redactor: Redactor) -> str:
        parts = [
            f"wrote {sum(self.written.values())} lines"
            + (f" ({', '.join(f'{k} {v}' for k, v in self.written.items())})" if len(self.written) > 1 else "")
        ]
        if self.unsuccessful:
            parts.append(f"skipped {self.unsuccessful} not successful")
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicates")
        for reason, n in sorted(self.invalid.items()):
            parts.append(f"{n} invalid: {reason}")
        if self.unreadable:
            reasons = "; ".join(f"{shown(t)}: {why}" for t, why in sorted(self.unreadable.items()))
            parts.append(f"skipped {len(self.unreadable)} unreadable threads ({reasons})")
        for pattern, n in redactor.counts.items():
            parts.append(f"redacted {n} matches of {pattern!r}")
        return "; ".join(parts)


def _conversations(
    saver: Any, thread: Any, per: Per, success_only: bool, since: Any
) -> Iterator[tuple[str, bool, dict[str, Any], str | None]]:
    """(key, successful, metadata, checkpoint id) of each conversation of a thread: its runs'
    last root checkpoints, or the thread's newest."""
    if per is Per.thread:
        if since is None or thread.last_activity >= since:
            yield (
                thread.thread_id,
                thread.status == "done",
                {"thread_id": thread.thread_id, "status": thread.status},
                thread.last_checkpoint_id,
            )
        return
    runs = [r for r in saver.list_runs(thread.thread_id, since=since)]
    if not runs:
        return
    last: dict[str, Any] = {}
    wanted = {r.run_id for r in runs}
    for step in saver.list_steps(thread.thread_id, checkpoint_ns=""):
        if step.run_id in wanted and step.run_id not in last:
            last[step.run_id] = step
            if len(last) == len(wanted):
                break
    for run in reversed(runs):  # oldest first
        step = last.get(run.run_id)
        stopped = step is None or any(t.action_type in ("error", "interrupt") for t in step.ran_from)
        meta = {
            "thread_id": run.thread_id,
            "run_id": run.run_id,
            "status": run.status,
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "checkpoint_id": step.checkpoint_id if step else None,
        }
        yield run.run_id, run.status == "done" and not stopped, meta, step.checkpoint_id if step else None


@app.command()
@failing_cleanly
def export(
    ctx: typer.Context,
    as_: Annotated[ExportFormat, typer.Option("--as", help="the training format")],
    out: Annotated[Path, typer.Option("--out", help="the JSONL file (with --split: OUT's .train and .valid siblings)")],
    per: Annotated[Per, typer.Option("--per", help="a line per run (the conversation when the run ended) or per thread")] = Per.run,
    success_only: Annotated[
        bool, typer.Option("--success-only", help="only runs that finished: no error, no interrupt, nothing left to run")
    ] = False,
    since: SinceOption = None,
    where: WhereOption = None,
    threads: ThreadsOption = None,
    dedupe: Annotated[bool, typer.Option("--dedupe", help="identical conversations once")] = False,
    redact: Annotated[Path | None, typer.Option("--redact", help="a file of regex rules: PATTERN or PATTERN => REPLACEMENT a line")] = None,
    split: Annotated[
        float | None, typer.Option("--split", min=0.0, max=1.0, help="the training fraction; the rest is validation (by run id)")
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            help="module:attribute naming the tools, for the tools field; imports and runs MODULE (its top-level code runs): "
            "only name code you trust",
        ),
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="go on from where an interrupted export stopped")] = False,
    no_progress: NoProgress = False,
) -> None:
    """Write conversations as fine-tuning data. Every line is checked against its format
    first (each tool call answered, arguments JSON, an assistant turn last); a
    conversation that breaks a rule is skipped and counted, never written."""
    started = moment(since, "--since")
    metadata = metadata_filter(where)
    redactor = Redactor.parse(redact.read_text(encoding="utf-8"), where=str(redact)) if redact is not None else Redactor()
    tool_schemas = load_tools(tools)
    outputs = Outputs(out, split)
    wanted = set(threads or ())
    counts = Counts({side: 0 for side in outputs.files})
    target: Target = ctx.obj
    handles, after = outputs.open(resume)
    seen: set[str] = set()
    if dedupe and resume:
        for path in outputs.files.values():
            seen.update(fingerprint(json.loads(line)) for line in path.read_text().splitlines() if line.strip())
    try:
        with target.saver() as saver, progress("export", enabled=not no_progress) as advance:
            for thread in saver.list_threads(metadata=metadata):
                if thread.thread_id <= after or (wanted and thread.thread_id not in wanted):
                    continue
                for key, successful, meta, checkpoint_id in _conversations(saver, thread, per, success_only, started):
                    if success_only and not successful:
                        counts.unsuccessful += 1
                        continue
                    try:
                        found = checkpoint_id and saver.get_tuple(
                            {"configurable": {"thread_id": thread.thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
                        )
                        messages = (values_of(saver, found).get("messages") if found else None) or []
                    except DeserializationError as exc:
                        # Counted with its reason and skipped, whole: a training line is never
                        # made of a state read in part. The rest of the export goes on.
                        counts.unreadable[thread.thread_id] = str(exc)
                        break
                    try:
                        run = plain({**meta, "metadata": found.metadata if found else None})
                        line = plain(line_for(as_.value, messages, tools=tool_schemas, meta=run, redact=redactor))
                    except Invalid as exc:
                        counts.invalid[str(exc)] = counts.invalid.get(str(exc), 0) + 1
                        continue
                    if dedupe:
                        mark = fingerprint(line)
                        if mark in seen:
                            counts.duplicates += 1
                            continue
                        seen.add(mark)
                    side = "all" if split is None else ("train" if in_training(key, split) else "valid")
                    handles[side].write((json.dumps(line, ensure_ascii=False) + "\n").encode())
                    counts.written[side] += 1
                    advance(1)
                outputs.record(handles, thread.thread_id)
    except KeyboardInterrupt:
        errors.print(f"interrupted; {counts.summary(redactor)}. Run it again with --resume to go on")
        raise typer.Exit(130) from None
    finally:
        for handle in handles.values():
            handle.close()
    outputs.done()
    errors.print(counts.summary(redactor))
