"""Sans-I/O `get_delta_channel_history`: the parent chain from pages of checkpoint rows.

LangGraph's default walks the chain with one get_tuple per ancestor, each reading every
value. Here the chain is followed through keyset pages of bare checkpoint rows, then one
statement reads the chain's pending writes and only the seed values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from .arrays import TextArray
from .codec import Codec
from .decode import CheckpointRow
from .history import HistoryScan, known_groups
from .keys import parse_config


class DeltaWalk:
    """The state of one get_delta_channel_history call between statements."""

    def __init__(self, codec: Codec, config: RunnableConfig, channels: Sequence[str]) -> None:
        key = parse_config(config)
        self.codec = codec
        self.lane: RunnableConfig = {"configurable": {"thread_id": key.thread_id, "checkpoint_ns": key.checkpoint_ns}}
        self.channels = list(channels)
        self.remaining = set(channels)
        # First the target row alone, then the lane's older rows page by page.
        self.scan = HistoryScan(codec, key.config() if key.checkpoint_id else self.lane, filter=None, before=None, limit=1)
        self.started = False
        self.finished = False
        self.rows: dict[str, CheckpointRow] = {}
        self.next_id: str | None = None  # the ancestor to visit next
        self.path: list[CheckpointRow] = []  # ancestors visited, nearest first
        self._visited: set[str] = set()
        self.seeds: dict[str, CheckpointRow] = {}

    def needs_rows(self) -> bool:
        return not self.finished and (not self.started or (self.next_id is not None and bool(self.remaining)))

    def take(self, page: Sequence[CheckpointRow]) -> None:
        """The target row, then a page of older rows: follow parent pointers through it."""
        if not self.started:
            self.started = True
            if not page:
                self.finished = True  # no such checkpoint: every channel starts empty
                return
            target = page[0]
            self.next_id = target.parent_checkpoint_id
            before: RunnableConfig = {"configurable": {**self.lane["configurable"], "checkpoint_id": target.checkpoint_id}}
            self.scan = HistoryScan(self.codec, self.lane, filter=None, before=before, limit=None)
            return
        for row in page:
            self.rows[row.checkpoint_id] = row
        # A parent seen before ends the walk: rows read from the database may point in a
        # circle (a checkpoint put as its own parent), and a walk must not follow it forever.
        # The walk visits each row it holds at most once, so it takes at most that many steps.
        for _ in range(len(self.rows)):
            if self.next_id is None or not self.remaining or self.next_id not in self.rows or self.next_id in self._visited:
                break
            row = self.rows[self.next_id]
            self._visited.add(row.checkpoint_id)
            self.path.append(row)
            for channel in list(self.remaining):
                if row.holds(channel):
                    self.seeds[channel] = row
                    self.remaining.discard(channel)
            self.next_id = row.parent_checkpoint_id
        if not page or self.scan.done:
            self.finished = True

    def details_params(self) -> dict[str, Any]:
        """`sql.reads.page_details` parameters for the path's writes and the seed values only."""
        seeds = [(row, channel) for channel, row in self.seeds.items() if channel in row.value_channels]
        versions = [row.value_versions[row.value_channels.index(channel)] for row, channel in seeds]
        self.scan.required = {}
        for row, channel in seeds:
            self.scan.required.setdefault(row.checkpoint_id, set()).add(channel)
        return {
            "v_threads": TextArray(row.thread_id for row, _ in seeds),
            "v_namespaces": TextArray(row.checkpoint_ns for row, _ in seeds),
            "v_channels": TextArray(channel for _, channel in seeds),
            "v_versions": TextArray(versions),
            "w_threads": TextArray(row.thread_id for row in self.path),
            "w_namespaces": TextArray(row.checkpoint_ns for row in self.path),
            "w_checkpoints": TextArray(row.checkpoint_id for row in self.path),
            **known_groups(()),
        }

    def result(self, path_tuples: Sequence[CheckpointTuple]) -> dict[str, Any]:
        """The same answer as LangGraph's default walk, from the path's tuples (nearest first)."""
        collected: dict[str, list[Any]] = {c: [] for c in self.channels}
        seed: dict[str, Any] = {}
        remaining = set(self.channels)
        for tup in path_tuples:
            if not remaining:
                break
            for write in reversed(tup.pending_writes or []):
                if write[1] in remaining:
                    collected[write[1]].append(write)
            for channel in list(remaining):
                if channel in tup.checkpoint["channel_values"]:
                    seed[channel] = tup.checkpoint["channel_values"][channel]
                    remaining.discard(channel)
        out: dict[str, Any] = {}
        for channel in self.channels:
            entry: dict[str, Any] = {"writes": list(reversed(collected[channel]))}
            if channel in seed:
                entry["seed"] = seed[channel]
            out[channel] = entry
        return out


def replay_ancestors(rows: Sequence[tuple[str, str, str, str | None, bool, list[str], Any]]) -> set[tuple[str, str, str]]:
    """The doomed checkpoints that a surviving DeltaChannel checkpoint replays.

    `rows` are (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, doomed,
    held channels, counters_since_delta_snapshot) for every checkpoint of the affected
    lanes. A survivor replays, for each channel its counters name and it holds no value
    for, its ancestors' writes up to the nearest one holding the channel's value.
    """
    by_key = {(r[0], r[1], r[2]): r for r in rows}
    keep: set[tuple[str, str, str]] = set()
    for thread_id, ns, _, parent_id, doomed, held, counters in rows:
        if doomed or not isinstance(counters, dict):
            continue
        remaining = {c for c in counters if c not in held}
        node = parent_id
        visited: set[str] = set()  # parents read from rows may point in a circle
        while remaining and node is not None and (thread_id, ns, node) in by_key and node not in visited:
            visited.add(node)
            row = by_key[(thread_id, ns, node)]
            if row[4]:
                keep.add((thread_id, ns, node))
            remaining -= set(row[5])
            node = row[3]
    return keep
