"""`lgpd fork` and `lgpd replay`: a thread's history up to a step, copied into a new thread,
and that copy resumed with the user's graph.

The copy holds every checkpoint (of every namespace) up to the chosen one, with the
pending writes of those before it; the chosen checkpoint's own writes are left out, so
the step after it runs again when the copy is resumed. The source is never changed.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Annotated, Any

import typer

from ..errors import ConfigError, shown
from ..importer import put_history, writer_for
from .app import app, failing_cleanly
from .filters import import_attribute
from .reading import find_step
from .target import Target
from .terminal import safe_text


def fork_thread(saver: Any, thread: str, new_thread: str, *, step: int | None, checkpoint: str | None) -> dict[str, Any]:
    """Copy `thread` up to its checkpoint at `step` (root graph) or `checkpoint` into
    `new_thread`, which must have no checkpoint yet; returns the config that resumes it."""
    if next(iter(saver.list_steps(new_thread, limit=1)), None) is not None:
        raise ConfigError(f"thread {shown(new_thread)} already has checkpoints; fork into a new thread")
    chosen = find_step(saver, thread, "", step, checkpoint, None)
    history = [
        t for t in saver.list({"configurable": {"thread_id": thread}}) if t.config["configurable"]["checkpoint_id"] <= chosen.checkpoint_id
    ]
    put_history(writer_for(saver), history, thread_id=new_thread, skip_writes_of=("", chosen.checkpoint_id))
    if saver.action_log:
        saver.backfill_actions(thread_ids=[new_thread])
    return {"configurable": {"thread_id": new_thread, "checkpoint_ns": "", "checkpoint_id": chosen.checkpoint_id}}


def load_graph(spec: str, saver: Any) -> Any:
    """`module:attr` naming a StateGraph (compiled here with `saver`) or a compiled graph (given `saver`)."""
    found = import_attribute(spec, "--graph")
    if callable(getattr(found, "compile", None)):
        return found.compile(checkpointer=saver)
    if callable(getattr(found, "copy", None)) and hasattr(found, "checkpointer"):
        return found.copy(update={"checkpointer": saver})
    raise ConfigError(f"--graph {shown(spec)} is neither a StateGraph nor a compiled graph")


StepOption = Annotated[int | None, typer.Option(help="the step to fork at (root graph)")]
CheckpointOption = Annotated[str | None, typer.Option(help="the checkpoint to fork at, instead of a step")]
ToOption = Annotated[str | None, typer.Option("--to", help="the new thread's id (default: THREAD-fork-<random>)")]


@app.command()
@failing_cleanly
def fork(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="the thread to copy from")],
    step: StepOption = None,
    checkpoint: CheckpointOption = None,
    to: ToOption = None,
) -> None:
    """Copy a thread up to a step into a new thread (writes the new thread only) and print
    the config that resumes it there."""
    if step is None and checkpoint is None:
        raise ConfigError("fork needs --step or --checkpoint")
    target: Target = ctx.obj
    new_thread = to or f"{thread}-fork-{uuid.uuid4().hex[:8]}"
    with target.saver() as saver:
        config = fork_thread(saver, thread, new_thread, step=step, checkpoint=checkpoint)
    print(json.dumps(config))


@app.command()
@failing_cleanly
def replay(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="the thread to replay from")],
    graph: Annotated[
        str,
        typer.Option(
            "--graph",
            help="module:attribute of your StateGraph or compiled graph; imports and runs MODULE (its top-level code runs): "
            "only name code you trust",
        ),
    ],
    step: StepOption = None,
    checkpoint: CheckpointOption = None,
    to: ToOption = None,
) -> None:
    """Fork a thread at a step and run your graph on from there (your nodes run again:
    models and tools are called). The source thread is not changed."""
    if step is None and checkpoint is None:
        raise ConfigError("replay needs --step or --checkpoint")
    target: Target = ctx.obj
    new_thread = to or f"{thread}-replay-{uuid.uuid4().hex[:8]}"
    with target.saver() as saver:
        app_graph = load_graph(graph, saver)
        config = fork_thread(saver, thread, new_thread, step=step, checkpoint=checkpoint)
        app_graph.invoke(None, {"configurable": {"thread_id": new_thread}}, durability="sync")
        newest = next(iter(saver.list_steps(new_thread, checkpoint_ns="", limit=1)))
    print(json.dumps({**config, "replayed_to_step": newest.step}))
    print(f"lgpd history {safe_text(new_thread)}  # to see what ran", file=sys.stderr)
