"""Sans-I/O paging for `list()`: which page to fetch next, and tuples from fetched rows.

History streams: pages are fetched by keyset (`checkpoint_id` below the last one
seen), starting small so the first item costs little, growing for long scans.
Each page costs two statements: its checkpoint rows, then the channel values the
page needs that the previous page did not already decode, and its pending writes; the
first page of one thread's walk comes with those in one (`sql.reads.first_page`).
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Mapping, Sequence
from functools import partial
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from ..errors import ConfigError, shown
from . import lists as list_layout
from .arrays import TextArray
from .lists import Location
from .codec import Codec, dump_json
from .decode import (
    DETAIL_REFS,
    CheckpointRow,
    ValueKey,
    WriteRow,
    build_tuple,
    gather_details,
    page_references,
    resolve_writes,
    unpack_writes,
    value_named,
)
from .keys import before_checkpoint_id, parse_config
from .metadata import filter_for_sql, filter_needs_recheck, load_metadata, metadata_contains
from .encode import task_named
from .offload import ObjectRef, references
from ..sql.reads import CHECKPOINT_IN_DETAIL, Detail, Part


# What a stored thing is, for an error message: built only when one is raised (`partial` of
# these, and of encode's `task_named`).
def _write_named(thread_id: str, checkpoint_id: str, write: WriteRow) -> str:
    return f"thread {shown(thread_id)}, checkpoint {shown(checkpoint_id)}, write of task {shown(write[0])} to channel {shown(write[1])}"


def _channel_named(thread_id: str, channel: str) -> str:
    return f"thread {shown(thread_id)}, channel {shown(channel)}"


def _of_channel(decoded: Mapping[str, dict[Location, Any]], channel: str) -> Mapping[Location, Any]:
    return decoded.get(channel, {})


_KEY_SEPARATOR: Final = "\x1f"
_KNOWN_COLUMNS: Final = ("known_threads", "known_namespaces", "known_channels", "known_versions")


def key_columns(groups: Collection[tuple[str, str, str, str]]) -> list[str] | None:
    """The item groups' keys (thread, namespace, channel, version) as `sql.reads.page_details`
    takes them: each key column joined by \x1f behind a leading one, which the server splits
    (`string_to_array(...)[2:]`: an empty namespace stays an element). Parsing them as one
    JSON array took the server 0.28 ms of a page's 0.75 for W3's 175 groups. Two such
    columns joined end to end are the columns of both sets. None when a thread id or
    channel name (the user's) holds \x1f itself."""
    columns = list(zip(*groups)) or [(), (), (), ()]
    joined = [_KEY_SEPARATOR.join(("", *column)) for column in columns]
    return joined if all(text.count(_KEY_SEPARATOR) == len(groups) for text in joined) else None


def lane_key_columns(lane: tuple[str, str], groups: Collection[tuple[str, str]]) -> list[str] | None:
    """`key_columns` of one lane's groups, by (channel, version)."""
    return key_columns([(*lane, channel, version) for channel, version in groups])


def known_groups(groups: Collection[tuple[str, str, str, str]]) -> dict[str, str]:
    """`sql.reads.page_details`' parameters for the item groups a walk holds: their
    `key_columns`, or, when a key holds \x1f, every group as JSON (`known`), and nothing
    split."""
    columns = key_columns(groups)
    return _split_params([columns]) if columns is not None else _json_params(groups)


def _split_params(parts: Sequence[list[str]]) -> dict[str, str]:
    """The parameters of groups given as several sets of `key_columns`, joined end to end."""
    return {**{name: "".join(part[i] for part in parts) for i, name in enumerate(_KNOWN_COLUMNS)}, "known": "[]"}


def _json_params(groups: Collection[tuple[str, str, str, str]]) -> dict[str, str]:
    return {**dict.fromkeys(_KNOWN_COLUMNS, ""), "known": dump_json(list(groups))}


_PLACE: Final = operator.itemgetter(Detail.IDX)


def _first_page_of(rows: Sequence[Sequence[Any]]) -> list[CheckpointRow]:
    """The checkpoint rows of `sql.reads.first_page`'s result (part 'c'), in the page's
    order (IDX: their place in it, by the server's collation)."""
    page_rows = sorted((r for r in rows if r[Detail.PART] == Part.CHECKPOINT), key=_PLACE)
    return [CheckpointRow.from_row(r, CHECKPOINT_IN_DETAIL) for r in page_rows]


FIRST_PAGE: Final = 8
# A metadata filter's first page: its matches are sparse, so each page scans many rows for
# a few, and a walk that starts at 8 and grows scanned the thread again for the rest
# (W3's 1 % filter: four statements, two pages of two, for ten checkpoints).
FILTERED_FIRST_PAGE: Final = 64
LARGEST_PAGE: Final = 256


class HistoryScan:
    """The state of one `list()` call between pages."""

    def __init__(
        self,
        codec: Codec,
        config: RunnableConfig | None,
        *,
        filter: Any,
        before: RunnableConfig | None,
        limit: Any,
    ) -> None:
        # (`filter` and `limit` as the caller gave them, checked here: a compiled core
        # checks annotations, with a TypeError that names nothing.)
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ConfigError(f"list() limit must be a whole number >= 0 or None, got {shown(limit)}")
        if filter is not None and not isinstance(filter, Mapping):
            raise ConfigError(f"list() filter must be a mapping of metadata keys to values, got {shown(filter)}")
        self.codec = codec
        self.filter = dict(filter) if filter else None
        self.recheck_all = filter_needs_recheck(self.filter)
        self.remaining = limit
        # A limit within one page is one page (two statements); an unlimited walk starts
        # small, for a caller that breaks out early, and grows.
        first = FILTERED_FIRST_PAGE if self.filter else FIRST_PAGE
        self.page_size = first if limit is None else max(1, min(limit, LARGEST_PAGE))
        self.cursor: tuple[str, str, str] | None = None
        self.done = limit is not None and limit <= 0
        self.values: dict[ValueKey, Any] = {}
        self.payloads: dict[str, bytes] = {}  # offloaded bytes of the last page, by object key
        # Decoded list items by (thread, namespace), then channel: decoded once per scan;
        # the groups (thread, namespace, channel, version) they came in are not fetched again.
        self.items: dict[tuple[str, str], dict[str, dict[tuple[str, int], Any]]] = {}
        self.item_groups: set[tuple[str, str, str, str]] = set()  # fetched by this walk's pages
        # Item groups the saver holds the bytes of (see `seed`), decoded into `items` the
        # first time a page of their lane is read; and, by lane, their keys and `key_columns`.
        self.seeded: dict[tuple[str, str], Mapping[tuple[str, str], list_layout.RawItems]] = {}
        self.held: list[tuple[tuple[str, str], Collection[tuple[str, str]], list[str] | None]] = []
        # By checkpoint id, the channels whose values a read fetched when it fetched only
        # some (get_delta_channel_history's seeds); None: every value the rows hold.
        self.required: dict[str, set[str]] | None = None
        self._requested = 0

        wheres: list[str] = []
        self.params: dict[str, Any] = {}
        self.single_lane = False  # one (thread, namespace): the key order is checkpoint_id alone
        self.one_thread = False  # one thread (and every namespace, unless single_lane)
        if config:  # an empty config lists every thread, as with the official saver
            key = parse_config(config)
            wheres.append("thread_id = %(thread_id)s")
            self.params["thread_id"] = key.thread_id
            self.one_thread = True
            if config["configurable"].get("checkpoint_ns") is not None:
                wheres.append("checkpoint_ns = %(checkpoint_ns)s")
                self.params["checkpoint_ns"] = key.checkpoint_ns
                self.single_lane = True
            if key.checkpoint_id:
                wheres.append("checkpoint_id = %(checkpoint_id)s")
                self.params["checkpoint_id"] = key.checkpoint_id
        if self.filter:
            wheres.append("metadata @> %(filter)s::jsonb")
            self.params["filter"] = filter_for_sql(self.filter)
        if before is not None:
            # Read for its checkpoint id alone, as the official saver does: LangGraph passes
            # a `before` of a subgraph's checkpoint with no thread_id in it, and the Agent
            # Server passes the id at the top level. A `before` naming no id is refused
            # (the official saver compares with NULL and returns an empty page).
            before_id = before_checkpoint_id(before)
            wheres.append("checkpoint_id < %(before_id)s")
            self.params["before_id"] = before_id
        self.base_where = wheres
        # A walk of a thread or a lane, nothing else in its where but a lane's metadata filter:
        # the wheres the saver's warm-up plans on each new connection (see `first_in_one`).
        self.whole_thread = (
            self.one_thread and "checkpoint_id" not in self.params and before is None and (not self.filter or self.single_lane)
        )

    def seed(self, lane: tuple[str, str], groups: Mapping[tuple[str, str], list_layout.RawItems], columns: list[str] | None = None) -> None:
        """Item groups of `lane` whose stored bytes the caller holds, by (channel, version):
        no page fetches them; they are decoded (once per scan) when a page needs its lane.
        `columns`: their `lane_key_columns`, when the caller has them made already."""
        if groups:
            self.seeded[lane] = groups
            self.held.append((lane, groups.keys(), columns if columns is not None else lane_key_columns(lane, groups)))

    def known_params(self) -> dict[str, str]:
        """`known_groups` of every group the walk holds, seeded and fetched by its pages: the
        seeded groups' key columns as the item cache made them, joined with the fetched ones'."""
        parts = [columns for _, _, columns in self.held] + [key_columns(self.item_groups)]
        split = [part for part in parts if part is not None]
        if len(split) == len(parts):
            return _split_params(split)
        return _json_params([*((*lane, channel, version) for lane, keys, _ in self.held for channel, version in keys), *self.item_groups])

    # -- page of checkpoint rows --------------------------------------------------------

    @property
    def across_lanes(self) -> bool:
        """Whether the walk is of one thread's every namespace: its pages are the newest of
        the root graph's lane and of the subgraphs' checkpoints (`sql.reads.list_page`)."""
        return self.one_thread and not self.single_lane

    def page_where(self) -> str:
        wheres = list(self.base_where)
        if self.cursor is not None:
            if self.single_lane:
                wheres.append("checkpoint_id < %(cursor_id)s")
            elif self.one_thread:
                # The first term bounds the index scan; the row comparison breaks ties
                # between namespaces that share a checkpoint id.
                wheres.append("checkpoint_id <= %(cursor_id)s AND (checkpoint_id, checkpoint_ns) < (%(cursor_id)s, %(cursor_ns)s)")
            else:
                wheres.append("(checkpoint_id, thread_id, checkpoint_ns) < (%(cursor_id)s, %(cursor_thread)s, %(cursor_ns)s)")
        return "WHERE " + " AND ".join(wheres) if wheres else ""

    def page_params(self) -> dict[str, Any]:
        size = self.page_size
        if self.remaining is not None:
            size = min(size, self.remaining)
        self._requested = size
        params = dict(self.params, page_size=size)
        if self.cursor is not None:
            params["cursor_id"], params["cursor_thread"], params["cursor_ns"] = self.cursor
        return params

    def take_page(self, rows: Sequence[Sequence[Any]]) -> list[CheckpointRow]:
        """Advance the cursor past a fetched page; returns its rows."""
        return self._took([CheckpointRow.from_row(r) for r in rows])

    def _took(self, page: list[CheckpointRow]) -> list[CheckpointRow]:
        if len(page) < self._requested:
            self.done = True
        if page:
            last = page[-1]
            self.cursor = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)
        self.page_size = min(self.page_size * 4, LARGEST_PAGE)
        return page

    # -- the first page and its details, in one statement ---------------------------------------

    @property
    def first_in_one(self) -> bool:
        """Whether the next page is the walk's first of a whole thread or lane (filtered by
        metadata or not, for a lane), and its details can come with it
        (`sql.reads.first_page`): nothing of the walk is held yet but what `seed` gave, and
        every table is read anchored on the thread.

        Any other walk keeps the two statements (a whole thread's with a filter, one with a
        `before` or a checkpoint id): the merged one takes ~0.9 ms to plan, and a where the
        warm-up has not planned is planned at each of its first runs on every pool
        connection (W3's 1 % filter went from 1.06 to 1.25-1.39 of the official saver's
        time, its cold read from 0.83 to 1.04, before the warm-up planned its where)."""
        return self.whole_thread and not self.done and self.cursor is None and not self.values and self.required is None

    def first_params(self) -> dict[str, Any]:
        """`sql.reads.first_page`'s parameters: the page's and the held item groups."""
        return {**self.page_params(), **self.known_params()}

    def first_tuples(self, rows: Sequence[Sequence[Any]]) -> list[CheckpointTuple]:
        """The first page's CheckpointTuples from `first_page`'s rows: its checkpoint rows
        advance the cursor; the rest are its details."""
        page = self._took(_first_page_of(rows))
        return self.tuples(page, [r for r in rows if r[Detail.PART] != Part.CHECKPOINT])

    def first_references(self, rows: Sequence[Sequence[Any]]) -> list[tuple[ObjectRef, str]]:
        """The objects `first_page`'s details reference (see `references`). The shell asks
        at every first page; the checkpoint rows (which reference none) are parsed only when
        one does."""
        if not references(rows, DETAIL_REFS):
            return []
        return page_references(_first_page_of(rows), rows)

    # -- values and writes of a page ----------------------------------------------------------

    def details_params(self, page: Sequence[CheckpointRow]) -> dict[str, Any]:
        wanted = {k for row in page for k in row.value_keys if k not in self.values}
        v_threads, v_namespaces, v_channels, v_versions = (
            (TextArray(c) for c in zip(*wanted)) if wanted else (TextArray() for _ in range(4))
        )
        return {
            "v_threads": v_threads,
            "v_namespaces": v_namespaces,
            "v_channels": v_channels,
            "v_versions": v_versions,
            "w_threads": TextArray(r.thread_id for r in page),
            "w_namespaces": TextArray(r.checkpoint_ns for r in page),
            "w_checkpoints": TextArray(r.checkpoint_id for r in page),
            **self.known_params(),
        }

    def references(self, page: Sequence[CheckpointRow], detail_rows: Sequence[Sequence[Any]]) -> list[tuple[ObjectRef, str]]:
        """The objects the page's details reference, each with what it is for errors."""
        return page_references(page, detail_rows)

    def tuples(self, page: Sequence[CheckpointRow], detail_rows: Sequence[Sequence[Any]]) -> list[CheckpointTuple]:
        """The page's CheckpointTuples, decoding each value (and each list item) once per scan."""
        details = gather_details(self.codec, detail_rows)
        for lane in [lane for lane in self.seeded if lane in details.wanted or any(k[:2] == lane for k in details.writes)]:
            self._decoded_items(lane, self.seeded.pop(lane))
        fresh = details.values
        writes = details.writes
        raw_items = details.raw_items
        for lane in details.raw_items:
            self.item_groups.update((*lane, channel, version) for channel, version in details.raw_items[lane])
        for (thread_id, ns), keys in details.wanted.items():
            restored = list_layout.restore(
                self.codec,
                wanted=keys,
                rows=details.list_rows.get((thread_id, ns), {}),
                raw_items=raw_items.get((thread_id, ns), {}),
                where=partial(value_named, thread_id),
                decoded=self.items.setdefault((thread_id, ns), {}),
            )
            for (channel, version), (value, _state) in restored.items():
                fresh[(thread_id, ns, channel, version)] = value
        lanes_decoded: dict[tuple[str, str], dict[str, dict[list_layout.Location, Any]]] = {}
        for (thread_id, ns, checkpoint_id), lane_writes in writes.items():
            lane_writes = writes[(thread_id, ns, checkpoint_id)] = unpack_writes(lane_writes, partial(task_named, thread_id, checkpoint_id))
            if any(w[4] == list_layout.WRITE_ITEMS_TYPE for w in lane_writes):
                if (thread_id, ns) not in lanes_decoded:
                    lanes_decoded[(thread_id, ns)] = self._decoded_items((thread_id, ns), raw_items.get((thread_id, ns), {}))
                decoded = lanes_decoded[(thread_id, ns)]
                writes[(thread_id, ns, checkpoint_id)] = resolve_writes(
                    self.codec,
                    lane_writes,
                    partial(_of_channel, decoded),
                    decoded=True,
                    where=partial(_write_named, thread_id, checkpoint_id),
                )
        # Keep what this page used: the next (older) page mostly holds the same versions.
        known = {**self.values, **fresh}
        self.values = {k: known[k] for row in page for k in row.value_keys if k in known}
        out = []
        for row in page:
            if not self._passes_recheck(row):
                continue
            values = {(k[2], k[3]): self.values[k] for k in row.value_keys if k in self.values}
            required = None if self.required is None else self.required.get(row.checkpoint_id, set())
            lane_writes = writes.get((row.thread_id, row.checkpoint_ns, row.checkpoint_id), [])
            out.append(build_tuple(self.codec, row, values, lane_writes, required=required))
            if self.remaining is not None:
                self.remaining -= 1
                if self.remaining <= 0:
                    self.done = True
                    break
        return out

    def _decoded_items(
        self, lane: tuple[str, str], groups: Mapping[tuple[str, str], list_layout.RawItems]
    ) -> dict[str, dict[list_layout.Location, Any]]:
        """The walk's decoded items of a lane, by channel, with this page's groups in them
        (each item decoded once per walk)."""
        by_channel: dict[str, dict[str, list_layout.RawItems]] = {}
        for (channel, version), group in groups.items():
            by_channel.setdefault(channel, {})[version] = group
        decoded = self.items.setdefault(lane, {})
        for channel, channel_groups in by_channel.items():
            list_layout.decode_into(
                self.codec, decoded.setdefault(channel, {}), channel_groups, where=partial(_channel_named, lane[0], channel)
            )
        return decoded

    def _passes_recheck(self, row: CheckpointRow) -> bool:
        """SQL matched the jsonb projection; where that is lossy, match the exact metadata."""
        if not self.filter or not (self.recheck_all or row.metadata_exact is not None):
            return True
        where = f"thread {shown(row.thread_id)}, checkpoint {shown(row.checkpoint_id)}"
        return metadata_contains(load_metadata(self.codec, row.metadata, row.metadata_exact, where=where), self.filter)
