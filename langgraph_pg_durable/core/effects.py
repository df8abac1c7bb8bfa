"""Sans-I/O of `once()` (langgraph_pg_durable/effects.py): where a task's side effect is
recorded, from the config LangGraph hands the task, and the row that records it.

A task is known by what LangGraph puts in its config: the thread, the task's id, and the
checkpoint it runs from (the deepest entry of `checkpoint_map`, in that entry's
namespace), so a task re-run after a crash, a retry or a resume has the same key as the
run that was cut short. Within a task, a call is named by the caller (`name`), then by its
own `key`, or else by how many calls of that name the task made before it in this run of
the task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import CheckpointIntegrityError, ConfigError, shown
from ..sql.effects import EffectColumn as E
from .keys import id_text

_TASK_ID: Final = "__pregel_task_id"  # langgraph._internal._constants.CONFIG_KEY_TASK_ID
_CHECKPOINT_MAP: Final = "checkpoint_map"  # CONFIG_KEY_CHECKPOINT_MAP
_NS_SEP: Final = "|"
MAX_NAME: Final = 200  # characters of a name or key: what a person reads in SQL, not a payload


@dataclass(frozen=True)
class EffectKey:
    """Where one call's result is recorded."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    key: str

    def params(self) -> dict[str, str]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_ns": self.checkpoint_ns,
            "checkpoint_id": self.checkpoint_id,
            "task_id": self.task_id,
            "key": self.key,
        }

    def idempotency_key(self) -> str:
        """A stable text for this call, the same in every run of the task: to hand to an
        external API that accepts one (Stripe's Idempotency-Key), for the window between the
        call and the commit of its result."""
        digest = hashlib.sha256("\x1f".join(self.params().values()).encode()).hexdigest()
        return f"lgpd-{digest[:40]}"


def _text(value: Any, what: str) -> str:
    text = id_text(value, what)
    if not text or len(text) > MAX_NAME:
        raise ConfigError(f"{what} must be 1 to {MAX_NAME} characters, got {shown(text)}")
    return text


def task_key(config: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(thread, namespace, checkpoint id, task id) of the task whose config this is; a
    ConfigError naming what is missing when it is not a graph task's config."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(configurable, Mapping):
        raise ConfigError("once() needs the config LangGraph gave the node or tool (it has no 'configurable')")
    task_id = configurable.get(_TASK_ID)
    checkpoints = configurable.get(_CHECKPOINT_MAP)
    if task_id is None or not isinstance(checkpoints, Mapping) or not checkpoints:
        raise ConfigError(
            "once() runs inside a graph's task, with the config LangGraph gave the node or tool: "
            f"this config has no {'task id' if task_id is None else 'checkpoint_map'}"
        )
    namespace = max(checkpoints, key=lambda ns: (len(ns.split(_NS_SEP)) if ns else 0, ns))
    thread = configurable.get("thread_id")
    if thread is None:
        raise ConfigError("once() needs the config's configurable['thread_id']")
    return (
        id_text(thread, "thread_id"),
        id_text(namespace, "checkpoint_ns"),
        id_text(checkpoints[namespace], "checkpoint_id"),
        id_text(task_id, "task id"),
    )


def effect_key(config: Mapping[str, Any], name: Any, *, key: Any = None, ordinal: int = 0) -> EffectKey:
    """The key of a call: `name/key` when the caller gives a key, else `name#ordinal` (the
    ordinal-th call of that name in this run of the task, from 0)."""
    thread, namespace, checkpoint, task = task_key(config)
    label = _text(name, "once() name")
    call = f"{label}/{_text(key, 'once() key')}" if key is not None else f"{label}#{ordinal}"
    return EffectKey(thread, namespace, checkpoint, task, call)


def record_params(key: EffectKey, run_id: str | None, stored: tuple[str, bytes], readable_json: str) -> dict[str, Any]:
    """The parameters of `record_effect`."""
    type_, value = stored
    return {**key.params(), "run_id": run_id or "", "type": type_, "value": value, "result": readable_json}


TAKEN: Final = ("", b"")  # what `stored_of` gives for find_effect's row of NULLs: the run lost the thread


def stored_of(rows: Sequence[Sequence[Any]]) -> tuple[str, bytes] | None:
    """The (type, bytes) a `find_effect` / `record_effect` row holds, None for no row, TAKEN
    for find_effect's row saying the run's token is no longer the thread's."""
    if not rows:
        return None
    if rows[0][E.TYPE] is None and rows[0][E.VALUE] is None:
        return TAKEN
    type_, value = rows[0][E.TYPE], rows[0][E.VALUE]
    if not isinstance(type_, str) or not isinstance(value, (bytes, memoryview, type(None))):
        raise CheckpointIntegrityError("an effect row read back malformed (its type or value is not what the saver writes)")
    return type_, bytes(value or b"")
