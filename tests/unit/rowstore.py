"""An in-memory stand-in for the saver's tables, for unit tests of the core's contract: the
parameters `core.encode` builds go in, `sql.reads.Detail` rows come out as the statements
would return them, and `core.decode` reads them back. It answers only the statements a
put, a put_writes and a get_tuple send, and says so for any other.

What it emulates, per statement: the put's missing-bases guard (nothing written when a
value it relies on, or the parent standing for them, is gone), ON CONFLICT DO NOTHING /
DO UPDATE, the packed writes row only for a task with no writes yet, and get_tuple's
known / held exclusions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

from langgraph_pg_durable.core.codec import load_json
from langgraph_pg_durable.core.encode import PACKED_WRITES_TYPE
from langgraph_pg_durable.core.keys import parse_config
from langgraph_pg_durable.core.plan import Plan, Query
from langgraph_pg_durable.ops import SaverCore
from langgraph_pg_durable.sql.reads import Detail

SEP = "\x1f"


def _split(text: str | None) -> list[str] | None:
    return None if text is None else ([] if text == "" else text.split(SEP))


class RowStore:
    """channel_values, channel_items, checkpoint_writes and checkpoints as dicts."""

    def __init__(self) -> None:
        self.values: dict[tuple, dict[str, Any]] = {}  # (thread, ns, channel, version)
        self.items: dict[tuple, tuple[str, bytes | None]] = {}  # (thread, ns, channel, version, idx)
        self.writes: dict[tuple, dict[str, Any]] = {}  # (thread, ns, checkpoint, task, idx)
        self.checkpoints: dict[tuple, dict[str, Any]] = {}  # (thread, ns, checkpoint_id)

    # -- writes ---------------------------------------------------------------------------

    def _insert_items(self, p: Mapping[str, Any]) -> None:
        for ch, ver, idx, type_, value in zip(p["item_channels"], p["item_of"], p["item_idx"], p["item_types"], p["item_values"]):
            self.items.setdefault((p["thread_id"], p["checkpoint_ns"], ch, ver, idx), (type_, value))

    def put(self, p: Mapping[str, Any]) -> list[tuple]:
        lane = (p["thread_id"], p["checkpoint_ns"])
        if p.get("check_parent") is not None and (*lane, p["check_parent"]) not in self.checkpoints:
            return []
        if any((*lane, ch, ver) not in self.values for ch, ver in zip(p["base_channels"], p["base_versions"])):
            return []
        if any((*lane, ch, ver, 0) not in self.items for ch, ver in zip(p.get("base_item_channels", ()), p.get("base_item_versions", ()))):
            return []
        chains = p.get("list_chains") or [None] * len(p["channels"])
        item_versions = p.get("item_versions") or [None] * len(p["channels"])
        for ch, ver, type_, value, chain, used in zip(p["channels"], p["versions"], p["types"], p["values"], chains, item_versions):
            self.values.setdefault(
                (*lane, ch, ver), {"type": type_, "value": value, "list_chain": _split(chain), "item_versions": _split(used)}
            )
        if "item_channels" in p:
            self._insert_items(p)
        self.checkpoints[(*lane, p["checkpoint_id"])] = {
            "parent": p["parent_checkpoint_id"],
            "checkpoint": p["checkpoint"],
            "metadata": p["metadata"],
            "metadata_exact": p["metadata_exact"],
            "value_channels": list(p["value_channels"]),
            "value_versions": list(p["value_versions"]),
            "run_id": p["run_id"],
        }
        return [(1,)]

    def parent_status(self, p: Mapping[str, Any]) -> list[tuple]:
        lane = (p["thread_id"], p["checkpoint_ns"])
        ids = [k[2] for k in self.checkpoints if k[:2] == lane]
        return [((*lane, p["checkpoint_id"]) in self.checkpoints, max(ids) if ids else None)]

    def _task_rows(self, p: Mapping[str, Any]) -> list[tuple]:
        head = (p["thread_id"], p["checkpoint_ns"], p["checkpoint_id"], p["task_id"])
        return [k for k in self.writes if k[:4] == head]

    def _checkpoint_gone(self, p: Mapping[str, Any]) -> bool:
        seen = p.get("check_checkpoint")
        return seen is not None and (p["thread_id"], p["checkpoint_ns"], seen) not in self.checkpoints

    def put_packed(self, p: Mapping[str, Any]) -> list[tuple]:
        if self._checkpoint_gone(p) or any(k[4] >= 0 for k in self._task_rows(p)):
            return []
        if "item_channels" in p:
            self._insert_items(p)
        key = (p["thread_id"], p["checkpoint_ns"], p["checkpoint_id"], p["task_id"], p["packed_idx"])
        self.writes[key] = {
            "channel": p["packed_channel"],
            "type": PACKED_WRITES_TYPE,
            "value": p["packed_value"],
            "task_path": p["task_path"],
            "item_version": p["packed_item_version"],
        }
        return [(1,)]

    def put_writes(self, p: Mapping[str, Any], *, replace: bool) -> list[tuple]:
        if self._checkpoint_gone(p):
            return []
        if "item_channels" in p:
            self._insert_items(p)
        written: list[tuple] = []
        packed = [k[4] for k in self._task_rows(p) if self.writes[k]["type"] == PACKED_WRITES_TYPE]
        held = max(packed, default=-1)
        item_keys = p.get("write_item_versions") or [None] * len(p["idx"])
        for idx, ch, type_, value, item in zip(p["idx"], p["channels"], p["types"], p["values"], item_keys):
            if not replace and 0 <= idx <= held:
                continue
            key = (p["thread_id"], p["checkpoint_ns"], p["checkpoint_id"], p["task_id"], idx)
            row = {"channel": ch, "type": type_, "value": value, "task_path": p["task_path"], "item_version": item}
            if replace or key not in self.writes:
                self.writes[key] = row
                written.append((1,))
        return written

    # -- get_tuple -----------------------------------------------------------------------------

    def get_tuple(self, p: Mapping[str, Any]) -> list[tuple]:
        lane = (p["thread_id"], p["checkpoint_ns"])
        ids = sorted(k[2] for k in self.checkpoints if k[:2] == lane and p["checkpoint_id"] in (None, k[2]))
        if not ids:
            return []
        checkpoint_id = ids[-1]
        c = self.checkpoints[(*lane, checkpoint_id)]

        def detail(**columns: Any) -> tuple:
            row = [None] * len(Detail.names())
            for name, value in columns.items():
                row[Detail.position(name)] = value
            return tuple(row)

        out = [
            detail(
                part="c",
                thread_id=lane[0],
                checkpoint_ns=lane[1],
                checkpoint_id=checkpoint_id,
                parent_checkpoint_id=c["parent"],
                checkpoint=c["checkpoint"],
                metadata=c["metadata"],
                metadata_exact=c["metadata_exact"],
                value_channels=c["value_channels"],
                value_versions=c["value_versions"],
            )
        ]
        known = {tuple(k) for k in load_json(p["known"])}
        known_lists = {tuple(k) for k in load_json(p["known_lists"])}
        wanted_items: set[tuple[str, str]] = set()
        for ch, ver in zip(c["value_channels"], c["value_versions"]):
            v = self.values.get((*lane, ch, ver))
            if v is None:
                continue
            out.append(detail(part="v", channel=ch, version=ver, **v))
            if v["list_chain"] is None or (ch, ver) in known_lists:
                continue
            wanted_items.update((ch, used) for used in v["item_versions"])
            for link in v["list_chain"]:
                linked = self.values.get((*lane, ch, link))
                if linked is not None:
                    out.append(detail(part="l", channel=ch, version=link, **linked))
                    wanted_items.update((ch, used) for used in linked["item_versions"])
        for key, w in sorted(self.writes.items()):
            if key[:3] == (*lane, checkpoint_id):
                out.append(
                    detail(
                        part="w",
                        task_id=key[3],
                        task_path=w["task_path"],
                        channel=w["channel"],
                        idx=key[4],
                        type=w["type"],
                        value=w["value"],
                    )
                )
                if w["item_version"] is not None:
                    wanted_items.add((w["channel"], w["item_version"]))
        for (thread, ns, ch, ver, idx), (type_, value) in sorted(self.items.items()):
            if (thread, ns) == lane and (ch, ver) in wanted_items - known:
                out.append(detail(part="i", channel=ch, version=ver, idx=idx, type=type_, value=value))
        return out


class RowStoreSaver(SaverCore):
    """The saver operations of ops.py, driven against a RowStore instead of a server."""

    def __init__(self, **options: Any) -> None:
        # The statements, which RowStore emulates; one writer per thread is the server's to check
        # (tests/integration/test_fencing.py), so no fencing token here.
        super().__init__(**{"routed_writes": False, "fencing": "allow", **options})
        self.store = RowStore()
        self.sent: list[str] = []  # which statement each query was, in order

    def _send(self, query: Query[Any]) -> list[tuple]:
        sql, p = self.sql, query.params
        for name, handler in (
            ("put", self.store.put),
            ("put_packed_writes", self.store.put_packed),
            ("get_tuple", self.store.get_tuple),
        ):
            if query.sql in getattr(sql, name).values():
                self.sent.append(name)
                return handler(p)
        if query.sql == sql.parent_status:
            self.sent.append("parent_status")
            return self.store.parent_status(p)
        if query.sql in sql.put_writes_items.values() or query.sql in sql.put_writes.values():
            self.sent.append("put_writes")
            replace = any(query.sql == text for (replaces, *_), text in sql.put_writes.items() if replaces)
            return self.store.put_writes(p, replace=replace)
        raise NotImplementedError(f"RowStore does not answer {query.operation}: {query.sql[:60]}...")

    def _execute(self, query: Query[Any]) -> Any:
        return query.decode(self._send(query))

    def _run(self, plan: Plan[Any]) -> Any:
        try:
            query = next(plan)
            while True:
                query = plan.send(self._execute(query))
        except StopIteration as finished:
            return finished.value

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return self._run(self._put_plan(config, parse_config(config), checkpoint, metadata, new_versions, parent_writes_done=True))

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        self._run(self._put_writes_plan(config, parse_config(config, need_checkpoint_id=True), writes, task_id, task_path))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._execute(self._get_tuple_query(config))
