"""Putting checkpoints by hand, as LangGraph would, for tests that work below the graph API."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint


def first_put(saver: BaseCheckpointSaver, thread_id: Any, values: dict[str, Any]) -> dict:
    """The first checkpoint of a thread, holding `values`, each at a new version; its config."""
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    return next_put(
        saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, values, versions, versions, step=-1, source="input"
    )


def next_put(
    saver: BaseCheckpointSaver,
    config: dict,
    values: dict[str, Any],
    versions: dict[str, str],
    new: dict[str, str],
    *,
    step: int,
    source: str = "loop",
) -> dict:
    """A checkpoint after `config` holding `values` at `versions`, of which `new` are new; its config."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    return saver.put(config, checkpoint, {"source": source, "step": step}, new)
