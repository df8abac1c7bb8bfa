"""The one way the commands and the replay page read a checkpoint's state: the saver's
`get_tuple`, then, for the channels a `DeltaChannel` keeps out of the checkpoint, the
saver's `get_delta_channel_history` (what LangGraph asks the saver for when it loads
such a channel), folded as `delta_values` says. `_DeltaSnapshot` blobs are unwrapped.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from ..errors import shown
from .delta_values import delta_channels, rebuilt, unwrapped


# LangGraph's own channels: the edges it tracks (`branch:to:node`, `join:a+b:node`,
# `start:node` in older graphs), its task queue, its input and control markers. Not the
# graph's state as its author wrote it: the commands and the page leave them out unless
# asked (`--internals`, `?internals=1`).
_INTERNAL_PREFIXES = ("branch:", "join:", "start:", "__pregel_")
_INTERNAL_NAMES = frozenset({"__start__", "__end__", "__interrupt__", "__resume__", "__error__", "__no_writes__", "__scheduled__"})


def is_internal(channel: str) -> bool:
    """Whether a channel is LangGraph's own (an edge, its task queue, its input)."""
    return channel in _INTERNAL_NAMES or channel.startswith(_INTERNAL_PREFIXES)


def without_internals(values: dict[str, Any], *, internals: bool = False) -> dict[str, Any]:
    """The state as its graph's author sees it (`internals`: every channel)."""
    return values if internals else {k: v for k, v in values.items() if not (isinstance(k, str) and is_internal(k))}


def checkpoint_config(thread: str, namespace: str, checkpoint_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": namespace, "checkpoint_id": checkpoint_id}}


def read_checkpoint(saver: Any, thread: str, namespace: str, checkpoint_id: str) -> CheckpointTuple:
    """The checkpoint's tuple; LookupError naming it when there is none."""
    found = saver.get_tuple(checkpoint_config(thread, namespace, checkpoint_id))
    if found is None:
        raise LookupError(f"thread {shown(thread)} has no checkpoint {shown(checkpoint_id)}")
    return found  # type: ignore[no-any-return]


def values_of(saver: Any, found: CheckpointTuple) -> dict[str, Any]:
    """The state a checkpoint holds, channel -> value, as LangGraph would load it:
    DeltaChannel values rebuilt from their history through the saver."""
    stored = found.checkpoint["channel_values"]
    values = {channel: unwrapped(value) for channel, value in stored.items()}
    channels = delta_channels(stored, found.metadata)
    if channels:
        histories = saver.get_delta_channel_history(config=found.config, channels=channels)
        for channel in channels:
            present, value = rebuilt(histories.get(channel) or {})
            if present:
                values[channel] = value
    return values


def state_at(saver: Any, thread: str, namespace: str, checkpoint_id: str) -> dict[str, Any]:
    """`values_of` the checkpoint named."""
    return values_of(saver, read_checkpoint(saver, thread, namespace, checkpoint_id))
