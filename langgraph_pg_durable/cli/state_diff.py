"""What changed between two states, without I/O: message channels compared message by
message (matched by id: added, removed, edited), other channels as JSON-path changes, and
the whole difference as an RFC 6902 patch that turns the first state into the second.

States arrive as LangGraph keeps them (channel -> value) and are compared in their JSON
form: messages in the OpenAI chat shape with their ids, other values as `readable` makes
them (so bytes and offloaded values compare by their markers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.actions import as_messages, message_json, readable

_MISSING = object()


def as_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """A state in the JSON form the diff compares; message lists as lists of messages."""
    out: dict[str, Any] = {}
    for channel, value in sorted(values.items()):
        messages = as_messages(channel, value) if isinstance(value, (list, tuple)) else None
        out[channel] = [message_json(m) for m in messages] if messages is not None else readable(value)
    return out


def pointer(path: tuple[Any, ...]) -> str:
    """An RFC 6901 JSON pointer."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def patch(before: Any, after: Any, path: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """RFC 6902 operations that turn `before` into `after` (applied in order)."""
    if type(before) is not type(after) and not (isinstance(before, (int, float)) and isinstance(after, (int, float))):
        return [{"op": "replace", "path": pointer(path), "value": after}]
    if isinstance(before, dict):
        ops: list[dict[str, Any]] = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": pointer((*path, key))})
        for key, value in after.items():
            if key not in before:
                ops.append({"op": "add", "path": pointer((*path, key)), "value": value})
            else:
                ops.extend(patch(before[key], value, (*path, key)))
        return ops
    if isinstance(before, list):
        ops = []
        for i in range(min(len(before), len(after))):
            ops.extend(patch(before[i], after[i], (*path, i)))
        for i in range(len(before), len(after)):
            ops.append({"op": "add", "path": pointer((*path, i)), "value": after[i]})
        for i in range(len(before) - 1, len(after) - 1, -1):
            ops.append({"op": "remove", "path": pointer((*path, i))})
        return ops
    return [] if before == after and type(before) is type(after) else [{"op": "replace", "path": pointer(path), "value": after}]


@dataclass
class MessageChanges:
    """One message channel's changes, messages matched by id (by position when they have none)."""

    added: list[Any] = field(default_factory=list)
    removed: list[Any] = field(default_factory=list)
    edited: list[tuple[Any, Any]] = field(default_factory=list)  # (before, after)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.edited)


def _key(message: Any, position: int) -> Any:
    return ("id", message["id"]) if isinstance(message, dict) and message.get("id") is not None else ("at", position)


def message_changes(before: list[Any], after: list[Any]) -> MessageChanges:
    old = {_key(m, i): m for i, m in enumerate(before)}
    new = {_key(m, i): m for i, m in enumerate(after)}
    changes = MessageChanges()
    for key, message in new.items():
        if key not in old:
            changes.added.append(message)
        elif old[key] != message:
            changes.edited.append((old[key], message))
    changes.removed = [m for key, m in old.items() if key not in new]
    return changes


@dataclass
class StateDiff:
    """Two states' differences: per message channel, per other channel, and as a patch."""

    messages: dict[str, MessageChanges]
    changes: list[dict[str, Any]]  # non-message channels: {"path", "change": added/removed/changed, "before", "after"}
    patch: list[dict[str, Any]]

    def __bool__(self) -> bool:
        return bool(self.patch)


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def _walk(before: Any, after: Any, path: tuple[Any, ...], out: list[dict[str, Any]]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted({*before, *after}, key=str):
            _walk(before.get(key, _MISSING), after.get(key, _MISSING), (*path, key), out)
    elif before != after or type(before) is not type(after):
        change = "added" if before is _MISSING else "removed" if after is _MISSING else "changed"
        out.append(
            {
                "path": pointer(path),
                "change": change,
                "before": None if before is _MISSING else before,
                "after": None if after is _MISSING else after,
            }
        )


def diff_states(before: Mapping[str, Any], after: Mapping[str, Any]) -> StateDiff:
    """The differences of two states (channel -> value, as LangGraph keeps them)."""
    a, b = as_json(before), as_json(after)
    messages: dict[str, MessageChanges] = {}
    changes: list[dict[str, Any]] = []
    for channel in sorted({*a, *b}):
        old, new = a.get(channel, _MISSING), b.get(channel, _MISSING)
        if isinstance(old, list) and isinstance(new, list) and (_is_messages(old) or _is_messages(new)):
            found = message_changes(old, new)
            if found:
                messages[channel] = found
        else:
            _walk(old, new, (channel,), changes)
    return StateDiff(messages, changes, patch(a, b))
