"""The reads behind `show` and `diff`, shared by the command line and the replay page: a
step found by number, checkpoint or run; its view; two checkpoints' differences.

Each drives the saver's API only; what is not there raises LookupError naming it.
"""

from __future__ import annotations

from typing import Any

from ..core.logs import ActionRecord
from ..core.safe_serde import lenient_reads
from ..core.steps import StepRecord
from ..errors import shown
from .state import checkpoint_config, state_at, values_of, without_internals
from .state_diff import StateDiff, diff_states
from .step_view import step_view


# Action rows from a step's parent on searched for its tool calls' results: a result comes
# in the next step's rows (a task a call), or a reviewed call's a few steps on, never past
# a model turn; a subgraph's rows are in its own namespace, not these.
ANSWER_WINDOW = 64


def find_step(saver: Any, thread: str, namespace: str, step: int | None, checkpoint: str | None, run: str | None) -> StepRecord:
    """The newest checkpoint of the namespace matching what is given (nothing: the newest).
    A checkpoint or run id may be given by a prefix, as the tables show them; one that
    fits several is refused, naming them. A step number and a whole checkpoint id are
    found by an index (`list_steps`), whatever the thread's length."""
    if checkpoint is not None:
        exact = saver.list_steps(thread, checkpoint_ns=namespace, step=step, checkpoint_id=checkpoint, run_prefix=run, limit=1)
        for record in exact:
            return record  # type: ignore[no-any-return]
    found: StepRecord | None = None
    candidates = saver.list_steps(
        thread,
        checkpoint_ns=namespace,
        step=step,
        checkpoint_prefix=checkpoint,
        run_prefix=run,
        limit=2 if checkpoint is not None else None,
    )
    for record in candidates:
        if found is None:
            found = record
            if checkpoint is None and (run is None or record.run_id == run):
                return record  # type: ignore[no-any-return]
        elif checkpoint is not None and found.checkpoint_id != record.checkpoint_id:
            raise LookupError(
                f"checkpoint {shown(checkpoint)} of thread {shown(thread)} is ambiguous: it begins "
                f"{shown(found.checkpoint_id)} and {shown(record.checkpoint_id)}; give more of it"
            )
        elif checkpoint is None and found.run_id != record.run_id:
            raise LookupError(
                f"run {shown(run)} of thread {shown(thread)} is ambiguous: it begins "
                f"{shown(found.run_id)} and {shown(record.run_id)}; give more of it"
            )
    if found is not None:
        return found
    wanted = [
        f"step {step}" if step is not None else "",
        f"checkpoint {shown(checkpoint)}" if checkpoint else "",
        f"run {shown(run)}" if run else "",
    ]
    what = ", ".join(w for w in wanted if w) or "checkpoints"
    place = f"namespace {shown(namespace)}" if namespace else "the root graph"
    raise LookupError(f"thread {shown(thread)} has no {what} in {place}")


def step_actions(saver: Any, record: StepRecord) -> list[ActionRecord]:
    """The action rows of a step's namespace from its parent checkpoint on, ANSWER_WINDOW
    rows in all, or more when the rows that made the step (however many tasks ran) need
    more: those first, then the rows after them."""
    start = record.parent_checkpoint_id or record.checkpoint_id
    limit = ANSWER_WINDOW
    while True:
        rows: list[ActionRecord] = saver.actions_from(
            record.thread_id, checkpoint_ns=record.checkpoint_ns, checkpoint_id=start, limit=limit
        )
        if len(rows) < limit or rows[-1].checkpoint_id != start:
            return rows
        limit *= 2


def read_step_view(saver: Any, record: StepRecord, *, full: bool = False, internals: bool = False) -> dict[str, Any]:
    """`step_view` of a step: the rows that made it (of its run), its tool calls' results
    from the rows after it (a reviewed call runs in the run after its review), and its
    parent's state (and writes, with `full`); what the tasks wrote to LangGraph's own
    channels only with `internals`. Every read is indexed: the cost does not grow with
    the thread."""
    thread, namespace = record.thread_id, record.checkpoint_ns
    rows = step_actions(saver, record)
    made = [a for a in rows if a.checkpoint_id == record.parent_checkpoint_id and (not record.run_id or a.run_id == record.run_id)]
    parent = found = None
    # What a person reads: a value of a type this process would not rebuild shows as its
    # fields, and the view names the type (`unreadable_types`), rather than nothing at all.
    with lenient_reads() as unreadable:
        if record.parent_checkpoint_id:
            found = saver.get_tuple(checkpoint_config(thread, namespace, record.parent_checkpoint_id))
            parent = values_of(saver, found) if found is not None else None
    view = step_view(
        record,
        made,
        parent,
        full_writes=found.pending_writes if full and found is not None else None,
        internals=internals,
        answers=rows,
    )
    view["unreadable_types"] = unreadable
    return view


def state_of(saver: Any, thread: str, namespace: str, checkpoint_id: str, *, internals: bool = False) -> dict[str, Any]:
    """The state at a checkpoint, as LangGraph loads it (`state.values_of`); LangGraph's
    own channels only with `internals`."""
    return without_internals(state_at(saver, thread, namespace, checkpoint_id), internals=internals)


def read_diff(
    saver: Any,
    thread_a: str,
    checkpoint_a: str | None,
    thread_b: str,
    checkpoint_b: str | None,
    *,
    namespace: str = "",
    from_step: int | None = None,
    to_step: int | None = None,
    internals: bool = False,
) -> tuple[str, str, StateDiff]:
    """(A's checkpoint, B's checkpoint, their diff). B defaults to the step `to_step` (else
    the newest); A to the step `from_step`, else B's parent in the same thread, else A's
    newest. LangGraph's own channels are compared only with `internals`."""
    parent_b = None
    if checkpoint_b is None:
        record = find_step(saver, thread_b, namespace, to_step, None, None)
        checkpoint_b, parent_b = record.checkpoint_id, record.parent_checkpoint_id
    else:  # given, perhaps by a prefix as the tables show it
        checkpoint_b = find_step(saver, thread_b, namespace, None, checkpoint_b, None).checkpoint_id
    if checkpoint_a is None:
        if from_step is not None:
            checkpoint_a = find_step(saver, thread_a, namespace, from_step, None, None).checkpoint_id
        elif thread_a == thread_b and parent_b is not None:
            checkpoint_a = parent_b
        else:
            checkpoint_a = find_step(saver, thread_a, namespace, None, None, None).checkpoint_id
    else:
        checkpoint_a = find_step(saver, thread_a, namespace, None, checkpoint_a, None).checkpoint_id
    with lenient_reads():  # a type this process does not rebuild is compared by its fields
        found = diff_states(
            state_of(saver, thread_a, namespace, checkpoint_a, internals=internals),
            state_of(saver, thread_b, namespace, checkpoint_b, internals=internals),
        )
    return checkpoint_a, checkpoint_b, found
