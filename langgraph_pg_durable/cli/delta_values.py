"""Rebuilding a `DeltaChannel`'s value without the graph's code, as the commands read state.

A `DeltaChannel` (deepagents keeps `messages` and `files` in one) stores nothing in most
checkpoints: LangGraph rebuilds its value by asking the saver for the channel's history
(`get_delta_channel_history`: the nearest stored value, the seed, and the writes since)
and folding the writes through the channel's reducer. `lgpd` has no graph, so no reducer:
it folds them the way the reducers LangGraph and its frameworks use on such channels do,
chosen by what the values are:

- messages (a seed or a write of messages): `add_messages` (by id, `RemoveMessage` too);
- a dict: merged key by key, a `None` value deleting its key (deepagents' `files`);
- a list: concatenated (`operator.add`);
- anything else: the last write.

An `Overwrite` write resets the value, as `DeltaChannel.replay_writes` does. Which channels
need rebuilding is read from the checkpoint alone: the ones its metadata's
`counters_since_delta_snapshot` names and its values do not hold. Without I/O.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langgraph.channels.binop import _get_overwrite
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph.message import add_messages

from ..core.actions import as_messages


def unwrapped(value: Any) -> Any:
    """A stored channel value as the state has it: a `_DeltaSnapshot` blob is its value."""
    return value.value if isinstance(value, _DeltaSnapshot) else value


def delta_channels(channel_values: Mapping[str, Any], metadata: Any) -> list[str]:
    """The channels whose value at this checkpoint is rebuilt from their history."""
    counters = metadata.get("counters_since_delta_snapshot") if isinstance(metadata, Mapping) else None
    if not isinstance(counters, Mapping):
        return []
    return sorted(str(channel) for channel in counters if channel not in channel_values)


def _is_messages(value: Any) -> bool:
    if isinstance(value, BaseMessage):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and as_messages("", value) is not None


def rebuilt(history: Mapping[str, Any]) -> tuple[bool, Any]:
    """(whether the channel has a value, the value) from one channel's
    `DeltaChannelHistory` (`{"seed"?: value, "writes": [(task_id, channel, value), ...]}`)."""
    has_seed = "seed" in history
    value = unwrapped(history.get("seed"))
    writes = [(str(w[0]), w[2]) for w in history.get("writes") or () if isinstance(w, Sequence) and len(w) >= 3]
    if not writes:
        return has_seed, value
    start = 0
    for i, (_, write) in enumerate(writes):
        is_overwrite, replacement = _get_overwrite(write)
        if is_overwrite:
            value, start = copy.copy(replacement), i + 1
    return True, fold(value, writes[start:])


def _with_ids(task_id: str, write: Any) -> list[Any]:
    """A write's messages, each without an id given one made from the task and its place:
    LangGraph gives such a message (an input's `("user", "hi")`) a random id each time it
    replays the write, and two reads of one state must match message by message."""
    messages = convert_to_messages(write if isinstance(write, list) else [write])
    return [
        m if m.id is not None else m.model_copy(update={"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"lgpd:{task_id}:{i}"))})
        for i, m in enumerate(messages)
    ]


def fold(base: Any, writes: Sequence[tuple[str, Any]]) -> Any:
    """`base` with `writes` ((task id, value), oldest first) applied, by the reducer their
    shape names."""
    if not writes:
        return base
    values = [value for _, value in writes]
    if _is_messages(base) or any(_is_messages(w) for w in values):
        messages: Any = list(base or ())
        for task_id, write in writes:
            messages = add_messages(messages, _with_ids(task_id, write))
        return messages
    if all(isinstance(w, Mapping) for w in values) and (base is None or isinstance(base, Mapping)):
        merged = dict(base or {})
        for write in values:
            for key, item in write.items():
                if item is None:
                    merged.pop(key, None)
                else:
                    merged[key] = item
        return merged
    if all(isinstance(w, (list, tuple)) for w in values) and (base is None or isinstance(base, (list, tuple))):
        joined = list(base or ())
        for write in values:
            joined.extend(write)
        return joined
    return values[-1]
