"""Runs: which invocation a call belongs to, a new run's id, and whether a checkpoint
leaves work to do (a run whose last checkpoint leaves none is done).

A run is one `invoke`/`stream` call (or its async twin), subgraphs included. LangGraph
does not tell a saver which call a put belongs to, so the saver recognises the call by
the run-scoped object LangGraph creates once per call and hands down to every subgraph:
the `RunControl` of the runtime in the config (`invocation_of`). The caller's metadata
`run_id` (the LangGraph server sets one) always wins over that.
"""

from __future__ import annotations

import datetime
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any, Final

from .keys import is_mapping

RUN_STATUSES: Final = ("running", "done", "interrupted", "error")
_RUNTIME_KEY: Final = "__pregel_runtime"  # langgraph._internal._constants.CONFIG_KEY_RUNTIME
_TASKS: Final = "__pregel_tasks"  # the channel of pending Sends
_START: Final = "__start__"
_INTERRUPT: Final = "__interrupt__"
_JOIN: Final = "join:"
_BRANCH: Final = "branch:to:"


def new_run_id(at: datetime.datetime | None = None) -> str:
    """A UUIDv7 as text: unique, and sorting by creation time (newest runs last); `at`
    dates it (a backfilled run takes its first checkpoint's time)."""
    millis = int(at.timestamp() * 1000) if at is not None else time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def invocation_of(config: Mapping[str, Any]) -> object | None:
    """The object that stands for the graph invocation a config comes from, or None for a
    call made outside one (a saver called directly, `update_state`).

    LangGraph builds a runtime per invoke/stream call; its `control` is created once per
    call and passed unchanged to every subgraph the call runs, so it names the call.
    """
    configurable = config.get("configurable")
    runtime = configurable.get(_RUNTIME_KEY) if is_mapping(configurable) else None
    if runtime is None:
        return None
    control = getattr(runtime, "control", None)
    return control if control is not None else None


def caller_run_id(config: Mapping[str, Any]) -> str | None:
    """The run id the caller gave LangChain (`config["run_id"]`), which its tracing uses
    for the root run: a run the saver names takes it, so the two agree."""
    given = config.get("run_id")
    return str(given) if isinstance(given, (str, uuid.UUID)) and str(given) else None


def has_next_tasks(checkpoint: Mapping[str, Any]) -> bool:
    """Whether a checkpoint leaves a task to run: a pending Send, or a node that has not
    seen the latest version of a channel it is triggered by, while that channel holds a
    value (a trigger a node consumed is emptied, and its version moves on).

    A node's triggers are the channels in its `versions_seen` entry once it has run; a
    node that never ran is known by the edge channel LangGraph names after it
    (`branch:to:NODE`, or the join `join:A+B:NODE`), and the input node by `__start__`.
    """
    values = checkpoint.get("channel_values") or {}
    if values.get(_TASKS):
        return True
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    for node, node_seen in seen.items():
        if node == _INTERRUPT or not is_mapping(node_seen):
            continue
        for channel, version in node_seen.items():
            if channel in values and _holds_trigger(channel, values[channel]) and _newer(versions.get(channel), version):
                return True
    for channel in versions:
        if not isinstance(channel, str) or channel not in values:
            continue
        if channel.startswith(_BRANCH):
            target: str | None = channel[len(_BRANCH) :]
        elif channel.startswith(_JOIN) and _holds_trigger(channel, values[channel]):
            target = channel.rpartition(":")[2]  # join:A+B:NODE
        else:
            target = _START if channel == _START else None
        if target is not None and channel not in (seen.get(target) or {}):
            return True
    return False


def _holds_trigger(channel: str, value: Any) -> bool:
    """Whether a stored channel value can trigger its node. A join barrier
    (`join:A+B:NODE`, from `add_edge([A, B], NODE)`) keeps its (emptied) set of seen
    sources after it fired, and its version moves on: it triggers only once every source
    named in it is seen (and, for the kind that waits, the step is finished)."""
    if not channel.startswith(_JOIN):
        return True
    sources = set(channel[len(_JOIN) :].rpartition(":")[0].split("+"))
    seen, finished = (value[0], value[1]) if isinstance(value, tuple) and len(value) == 2 else (value, True)
    try:
        return bool(finished) and sources <= set(seen)
    except TypeError:  # not a barrier's value after all: take it as a trigger
        return True


def _newer(current: Any, seen: Any) -> bool:
    """Whether a channel's version is past the one a node saw (versions of one saver
    compare by their own type; a mix of types is not taken for news)."""
    if current is None or seen is None or type(current) is not type(seen):
        return False
    try:
        return bool(current > seen)
    except TypeError:
        return False
