"""The saver operations, each built as a Query (one statement) or a Plan (several), for
both shells: `aio.py` and its generated twin `saver.py` only send them.

It ties the pure core (parameters, decoding, the list layout) to the statement text of
the saver's schema (`sql/`), the in-process caches (`memory.py`) and the object store.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import operator

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .core import decode, encode
from .core import lists as list_layout
from .core.arrays import Int4Array, Int8Array, TextArray
from .core.codec import Codec, dump_json, load_json
from .core.effects import TAKEN, EffectKey, record_params, stored_of
from .core.decode import DETAIL_REFS, CheckpointRow
from .core.delta_history import DeltaWalk, replay_ancestors
from .core.durability import Durability, check_synchronous_commit
from .core.actions import (
    MARKER,
    UNKNOWN_SEND,
    SendToName,
    agent_label,
    describe_unsaved,
    held_message_ids,
    held_messages,
    is_subgraph_input,
    readable,
    replayed_messages,
    send_index,
    send_nodes,
    steps_unsaved,
    messages_of,
    written_messages,
)
from .core.backfill import CheckpointFacts, Decoded, WriteFacts, decoded_for_backfill, store_params, thread_backfill
from .core.encode import PACKED_WRITES_TYPE
from .core.history import HistoryScan
from .core.logs import ActionRecord, ActionScan, RunRecord, RunScan, action_records, actions_from_params
from .core.steps import StepRecord, StepScan, neighbour_params, neighbours_of
from .core.threads import ThreadRecord, ThreadScan
from .core.keys import CHECKPOINT_MAP, CheckpointKey, id_text, next_version, parse_config
from .core.metadata import unchained
from .core.lists import DEFAULT_MIN_BYTES, DEFAULT_SNAPSHOT_EVERY, ListPolicy, ListState
from .core.offload import DEFAULT_THRESHOLD, ObjectRef, Placement, attach, check_reference, validate_prefix
from .core.plan import Pause, Plan, Query
from .core.fencing import DEFAULT_POLICY, DEFAULT_WAIT, DEFAULT_WINDOW, Fence, check_duration, check_policy, new_writer, pauses
from .core.fencing import policy_of, refusal
from .core.runs import caller_run_id, invocation_of, new_run_id
from .core.safe_serde import AllowedType, default_serializer, with_allowed_types
from .core.safe_serde import accept_plaintext as accept_plaintext_rows
from .errors import ConfigError, HistoryRewoundError, Where, named, shown
from .memory import (
    DEFAULT_ITEM_CACHE_BYTES,
    CheckpointNotes,
    ItemCache,
    ListMemory,
    MessageMemory,
    RecentDigests,
    RecordedEffects,
    RunEntry,
    RunRegistry,
)
from .store import DEFAULT_CACHE_BYTES, DEFAULT_REUSE_WINDOW, gc_cutoff, open_store
from .retry import RetryPolicy
from .sql.logs import ThreadNeed
from .sql.reads import RunLane
from .sql.writes import ParentStatus
from .sql.fencing import Holder
from .sql.schema import DEFAULT_SCHEMA, gc_lock_key, quote_schema, thread_lock_keys
from .sql.statements import RoutedWrites, Statements
from .sql import durability as durability_sql

T = TypeVar("T")
log = logging.getLogger("langgraph_pg_durable")
PRUNE_STRATEGIES = ("keep_latest", "delete")
GC_BATCH = 1000  # object keys checked against the tables per statement
TAKE_RACES = 5  # a take refused by a holder gone when asked is tried again at once, so often
# The thread a new connection's warm-up reads (see _warm_up_statements): none holds this id
# in practice, and a read of one that did would only return it.
WARM_UP_THREAD = "langgraph-pg-durable warm-up 8c1d0f4e"


def _keep_params(keep: Iterable[tuple[str, str, str]]) -> dict[str, TextArray]:
    """The `keep_*` parameters of a delete: checkpoints it must spare, by (thread, namespace, id)."""
    keep = list(keep)
    return {
        "keep_threads": TextArray(k[0] for k in keep),
        "keep_namespaces": TextArray(k[1] for k in keep),
        "keep_ids": TextArray(k[2] for k in keep),
    }


def _first_value(rows: Sequence[Any]) -> Any:
    return rows[0][0]


def _written(decode: Callable[[Sequence[Any]], T]) -> Callable[[Sequence[Any]], T]:
    """The decode of a write statement, for the call of its write function: the call's one
    row holds how many rows the statement would have returned (0: none)."""
    return lambda rows: decode([row for row in rows if row[0]])


def _is_none(value: Any) -> bool:
    return value is None


# What a write is, for an error message: built only when one is raised (`partial` of these).
def _put_named(checkpoint_id: Any, thread_id: str) -> str:
    return f"put of checkpoint {shown(checkpoint_id)} on thread {shown(thread_id)}"


def _put_writes_named(task_id: str, thread_id: str) -> str:
    return f"put_writes of task {shown(task_id)} on thread {shown(thread_id)}"


def _get_tuple_named(thread_id: str) -> str:
    return f"get_tuple on thread {shown(thread_id)}"


# The queues a thread's writes wait in within one saver, before taking a connection: LangGraph
# sends a task's writes and the next checkpoint's put from different threads (or tasks) at
# once, and the writer lock serializes them on the server, where the one that waits holds a
# connection, a backend and a lock-table wait, and the pool opens more connections (each
# warmed up by running six reads six times) to serve the others. Queued here first, the
# second flight finds the lock free: a chat whose every turn is an invoke
# (tools/turn_cost.py) cost the server 2.1-3.0 ms a turn, 1.4-1.6 queued. A flight's queue
# is its lock's key modulo this many: two threads whose keys share one wait for each
# other's flights, which the server would have run side by side; with this many, seldom.
THREAD_QUEUES = 256


class SaverCore(BaseCheckpointSaver[str]):
    """Configuration and Query builders shared by DurablePostgresSaver and its async twin."""

    _object_storage: type  # each shell's: ObjectStorage (saver.py) or AsyncObjectStorage (aio.py)
    # What `routed_writes=None` means: ask the server (None), or always True or False. The
    # tests set it to run the same cases through both write paths on plain PostgreSQL.
    routed_writes_default: bool | None = None

    def __init__(
        self,
        *,
        schema: str = DEFAULT_SCHEMA,
        serde: SerializerProtocol | None = None,
        retry: RetryPolicy | None = None,
        object_store: Any = None,
        object_store_options: Mapping[str, Any] | None = None,
        offload_threshold: int = DEFAULT_THRESHOLD,
        object_prefix: str | None = None,
        object_cache_bytes: int = DEFAULT_CACHE_BYTES,
        object_reuse_window: timedelta = DEFAULT_REUSE_WINDOW,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
        list_min_bytes: int = DEFAULT_MIN_BYTES,
        list_cache_bytes: int = DEFAULT_ITEM_CACHE_BYTES,
        allowed_types: Iterable[AllowedType] = (),
        accept_plaintext: bool = False,
        action_log: bool = True,
        synchronous_commit: str | None = None,
        routed_writes: bool | None = None,
        fencing: str = DEFAULT_POLICY,
        fencing_window: timedelta = DEFAULT_WINDOW,
        fencing_wait: timedelta = DEFAULT_WAIT,
    ) -> None:
        """Options every saver takes (the shells pass them through):

        - schema: the PostgreSQL schema of the saver's tables (a plain identifier).
        - serde: the serializer; default LangGraph's with its strict msgpack allowlist,
          widened by `allowed_types` (your own state classes).
        - retry: how long and how often transient database errors are retried.
        - object_store, object_store_options: where values past `offload_threshold` bytes
          go ('s3://bucket/prefix', 'file:///path', or an obstore store); `object_prefix`
          (default '{schema}/objects'), `object_cache_bytes` of fetched payloads kept, and
          `object_reuse_window`, for which an uploaded object is trusted to exist.
        - snapshot_every: a list channel is stored as a snapshot every this many versions
          and as deltas between (1 keeps lists whole); lists start in that layout past
          `list_min_bytes`; `list_cache_bytes` of recent items are kept for reads.
        - accept_plaintext: with an encrypting serde, also read rows written unencrypted.
        - action_log: keep the action log (the `actions` and `runs` views) as tasks write;
          off, checkpoints still carry their run ids, and `backfill_actions()` fills it later.
        - synchronous_commit: what every write the saver commits waits for, whatever the
          server's or the role's default: 'local' (the server's WAL flush), 'remote_write',
          'on' or 'remote_apply' (also the synchronous standbys'); None: the default.
        - routed_writes: write through the schema's write functions, one call that Citus
          sends whole to the worker holding the thread (see sql/routed.py), instead of one
          statement; None: when the schema's tables are distributed (asked once, at
          setup() or else at the first write).
        - fencing: one writer per thread (core/fencing.py): 'takeover' (a new run takes the
          thread; the run it took it from is refused its next write), 'reject' (a new run
          is refused while a live run holds the thread), 'wait' (it waits, at most
          `fencing_wait`), or 'allow' (no check); a call may override it with
          config["configurable"]["lgpd_fencing"]. A holder is live while its run is
          running and it wrote within `fencing_window`.
        """
        # Without a serde, LangGraph's strict msgpack allowlist (plus allowed_types): a
        # stored row never imports or calls anything else (see safe_serde.py).
        super().__init__(serde=with_allowed_types(serde, allowed_types) if serde is not None else default_serializer(allowed_types))
        # With an encrypting serde, rows that are not encrypted are refused unless asked for.
        self.accept_plaintext = accept_plaintext
        if accept_plaintext:
            accept_plaintext_rows(self.serde)
        quote_schema(schema)  # refuse a bad name before any I/O
        if not isinstance(offload_threshold, int) or offload_threshold < 0:
            raise ConfigError(f"offload_threshold must be a whole number of bytes >= 0, got {shown(offload_threshold)}")
        if not isinstance(snapshot_every, int) or isinstance(snapshot_every, bool) or snapshot_every < 1:
            raise ConfigError(f"snapshot_every must be a whole number >= 1 (1 keeps lists whole), got {shown(snapshot_every)}")
        if not isinstance(action_log, bool):
            raise ConfigError(f"action_log must be True or False, got {shown(action_log)}")
        self.action_log = action_log
        if routed_writes is not None and not isinstance(routed_writes, bool):
            raise ConfigError(f"routed_writes must be True, False or None, got {shown(routed_writes)}")
        self.routed_writes = routed_writes if routed_writes is not None else type(self).routed_writes_default
        self._routing_chosen = self.routed_writes is not None  # else setup(), distribute() or the first writes settle it
        self._citus_installed = False  # a write found Citus installed: the next one asks where the tables are
        self.fencing = check_policy(fencing)
        self.fencing_window = check_duration(fencing_window, "fencing_window")
        self.fencing_wait = check_duration(fencing_wait, "fencing_wait")
        self.synchronous_commit = check_synchronous_commit(synchronous_commit)
        # Built once: sent before each write, in its transaction (see _preamble).
        self._commit_setting: tuple[str, Mapping[str, Any]] | None = (
            (durability_sql.SET_SYNCHRONOUS_COMMIT, {"synchronous_commit": synchronous_commit}) if synchronous_commit is not None else None
        )
        # What the last setup() read of the server's durability settings (None: not read).
        self.durability: Durability | None = None
        # Set on the copy importer.import_official writes through: its puts (made outside any
        # invocation) get no run id, so backfill_actions gives them the runs LangGraph made.
        self.importing = False
        self.lists = ListPolicy(snapshot_every, list_min_bytes)
        self.memory = ListMemory()
        self.runs = RunRegistry()
        self.notes = CheckpointNotes()
        self.recorded_effects = RecordedEffects()
        self.messages = MessageMemory()
        self.items = ItemCache(list_cache_bytes)
        store = open_store(object_store, object_store_options)
        self.objects = (
            self._object_storage(store, cache_bytes=object_cache_bytes, reuse_window=object_reuse_window) if store is not None else None
        )
        # One prefix per schema by default; gc() collects only keys of its own prefix's shape,
        # so a saver whose prefix lies below another's keeps its objects.
        self.placement = Placement(
            threshold=offload_threshold,
            prefix=validate_prefix(object_prefix if object_prefix is not None else f"{schema}/objects"),
            enabled=self.objects is not None,
            sha256=RecentDigests().sha256,
        )
        self.schema = schema
        self.sql = Statements.of(schema)  # every statement's text, rendered once per schema
        self.retry = retry or RetryPolicy()
        self._gc_key = gc_lock_key(self.placement.prefix)
        self._codec = Codec(self.serde)

    @property
    def codec(self) -> Codec:
        """The serializer as the core uses it (rebuilt when LangGraph's with_allowlist swaps it)."""
        if self._codec.serde is not self.serde:
            self._codec = Codec(self.serde)
        return self._codec

    def with_allowlist(self, extra_allowlist: Any) -> Any:
        """LangGraph's strict mode adds a graph's state types here; the clone's serde keeps
        this saver's choice about unencrypted rows."""
        clone = super().with_allowlist(extra_allowlist)
        if clone is not self and self.accept_plaintext:
            accept_plaintext_rows(clone.serde)
        return clone

    def _locks(self, thread_ids: Iterable[str]) -> list[int]:
        """The writer locks a write or delete of these threads takes first (see Query.locks)."""
        return thread_lock_keys(self.schema, thread_ids)

    @staticmethod
    def _queue_of(query: Query[Any]) -> int | None:
        """The in-process queue a statement of one thread's writer waits in before it takes
        a connection (see `THREAD_QUEUES`), None for any other statement and for one that
        stores objects first: its uploads run alongside the thread's other flights, as they
        did before the writer lock, rather than in turn."""
        locks = query.locks
        return locks[0] % THREAD_QUEUES if len(locks) == 1 and not query.uploads else None

    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """A version sorting after `current` as text, with a random tail that keeps forks apart."""
        return next_version(current)

    # -- runs ---------------------------------------------------------------------------

    def _run_entry(self, config: RunnableConfig) -> RunEntry | None:
        """The entry of the graph invocation a call comes from (named the first time it is
        seen), or None for a call outside one. A write looks it up once and hands it on."""
        invocation = invocation_of(config)
        if invocation is None:
            return None
        return self.runs.entry(invocation, lambda: caller_run_id(config) or new_run_id())

    def _run_of(self, config: RunnableConfig, entry: RunEntry | None = None) -> str | None:
        """The run a call belongs to: the caller's metadata `run_id`, else the id of the graph
        invocation the call comes from (`entry`, looked up when not given), else None."""
        metadata = unchained(config.get("metadata"))
        given = metadata.get("run_id") if isinstance(metadata, (dict, Mapping)) else None
        if given is not None:
            return id_text(given, "metadata['run_id']")
        entry = entry or self._run_entry(config)
        return entry.run_id if entry is not None else None

    def _fence_for(self, config: RunnableConfig, thread_id: str, run_id: str | None, entry: RunEntry | None = None) -> Fence | None:
        """What a write of `thread_id` carries (core/fencing.py); None under `allow`, and for
        an import's puts. A call outside any invocation is a writer of its own. `entry`:
        the invocation's (`_run_entry`), looked up when not given."""
        policy = policy_of(config, self.fencing)
        if policy == "allow" or self.importing:
            return None
        entry = entry or self._run_entry(config)
        if entry is None:
            return Fence(policy, new_writer(), run_id or new_run_id(), taking=True)
        return Fence(policy, entry.writer, run_id or self._run_of(config, entry) or "", taking=thread_id not in entry.taken)

    def _fencing(self, params: dict[str, Any], fence: Fence | None) -> list[tuple[str, Mapping[str, Any]]]:
        """Put the run's token in a write's `params` (a dict the caller just built, for this
        write alone) and return the statements to send before the write: while the run has
        not taken the thread, its take (in the same transaction, after the writer lock)."""
        params["fence"] = fence.writer if fence is not None else None
        return [self._take(fence, params["thread_id"])] if fence is not None and fence.taking else []

    def _take(self, fence: Fence, thread_id: str) -> tuple[str, Mapping[str, Any]]:
        """The statement by which the run takes the thread, under its policy (sql/fencing.py)."""
        take = self.sql.take_over if fence.policy == "takeover" else self.sql.take_if_free
        return take, fence.take_params(thread_id, self.fencing_window)

    def _fenced(self, query: Query[T], entry: RunEntry | None, fence: Fence | None, failed: Callable[[T], bool]) -> Plan[T]:
        """Send a write under `fence`. When it stored nothing, the thread's holder says why:
        this run (then the result stands: something else was missing), or another run: a
        ThreadTakenError, or a ThreadBusyError for a take at the write refused (a run that
        did not read the thread first; it does not wait, whatever the policy: what it
        writes was made without the holder's state)."""
        result: T = yield query
        if fence is not None:
            if failed(result):
                yield from self._refuse_unless_held(query, fence)
            self._took(entry, query.params["thread_id"], fence)
        return result

    def _refuse_unless_held(self, query: Query[Any], fence: Fence) -> Plan[None]:
        """After a write under `fence` that stored nothing: raise the refusal its thread's
        holder gives (see `_fenced`), unless the run holds the thread."""
        thread_id = query.params["thread_id"]
        holder = yield self._holder_query(thread_id)
        error = refusal(named(query.operation), thread_id, fence, holder)
        if error is not None:
            raise error

    def _get_tuple_plan(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        """get_tuple; a run's first read of a thread also takes the thread (see `_reading_fence`)."""
        query = self._get_tuple_query(config)
        thread_id = query.params["thread_id"]
        entry = self._run_entry(config)
        fence = self._reading_fence(config, thread_id, entry)
        if fence is not None and fence.policy == "takeover":
            query = dataclasses.replace(query, before=[self._take(fence, thread_id)], locks=self._locks([thread_id]))
        elif fence is not None:
            yield from self._take_plan(fence, thread_id)
        found: CheckpointTuple | None = yield query
        self._took(entry, thread_id, fence)
        return found

    def _reading_fence(self, config: RunnableConfig, thread_id: str, entry: RunEntry | None) -> Fence | None:
        """The run's fence when this read is its first of the thread: a run takes the thread
        before it reads the state it will write on top of (under the thread's writer lock,
        so the read sees every write of the run it took it from, whose later writes are
        refused). Taken at the first write instead, a run would write on a state read
        before, and fork the history, whenever the old run wrote in between. None for a
        read outside a run, a run that took the thread already, and `allow`."""
        if entry is None:
            return None
        fence = self._fence_for(config, thread_id, None, entry)
        return fence if fence is not None and fence.taking else None

    def _take_plan(self, fence: Fence, thread_id: str) -> Plan[None]:
        """`reject` and `wait`: take the thread unless another live run holds it; then a
        ThreadBusyError, or, under `wait`, pauses and tries again until the holder is done
        or stale, at most `fencing_wait` (then a ThreadBusyError)."""
        operation = f"run {shown(fence.run_id)} on thread {shown(thread_id)}"
        take = Query(operation, *self._take(fence, thread_id), lambda fetched: bool(fetched), locks=self._locks([thread_id]))
        schedule = pauses(self.fencing_wait) if fence.policy == "wait" else []
        waited = 0.0
        races = 0  # the holder went or finished between the take and its check
        while not (yield take):
            holder = yield self._holder_query(thread_id)
            if holder is None or (not holder.live and holder.writer != fence.writer):
                races += 1
                if races <= TAKE_RACES:
                    continue  # try again at once
            error = refusal(operation, thread_id, fence, holder, waited if fence.policy == "wait" else None)
            if error is None:  # it holds the thread already
                return
            if not schedule:
                raise error
            if not waited:
                log.warning("%s: waiting for run %s, which holds the thread", operation, shown(holder.run_id if holder else None))
            pause = schedule.pop(0)
            yield Pause(pause)
            waited += pause

    def _took(self, entry: RunEntry | None, thread_id: str, fence: Fence | None) -> None:
        """A read or write that took the thread committed: the run's next calls need not take it."""
        if entry is not None and fence is not None and fence.taking:
            self.runs.took(entry, thread_id)

    def _holder_query(self, thread_id: str) -> Query[Holder | None]:
        return Query(
            f"check of the holder of thread {shown(thread_id)}",
            self.sql.holder,
            {"thread_id": thread_id, "window": self.fencing_window},
            lambda fetched: Holder(*fetched[0]) if fetched else None,
        )

    def _note_checkpoint(self, thread_id: str, ns: str, checkpoint: Checkpoint, metadata: Any, *, take: bool = False) -> list[SendToName]:
        """Remember a checkpoint's step and the node of each of its pending Sends, for the
        action rows of the tasks that run from it; with `take`, return the Send rows stored
        before, which wait for these names."""
        # (dict, Mapping) here and on the other hot paths: a dict passes at the first, without
        # ABCMeta's __instancecheck__, a call of its own (a step made twenty such checks).
        step = metadata.get("step") if isinstance(metadata, (dict, Mapping)) else None
        step = step if isinstance(step, int) and not isinstance(step, bool) else None
        waiting = self.notes.note(thread_id, ns, checkpoint["id"], step, send_nodes(checkpoint), take=take)
        if self.action_log:
            values = checkpoint.get("channel_values")
            ids = held_message_ids(values) if isinstance(values, (dict, Mapping)) else None
            if ids:  # (a DeltaChannel's messages are not in its checkpoints: most hold none)
                self.messages.hold(thread_id, ns, checkpoint["id"], ids, functools.partial(held_messages, values))
        return waiting

    def _note_put(self, key: CheckpointKey, checkpoint: Checkpoint, metadata: Any) -> list[SendToName]:
        """A put's checkpoint, noted as it arrives (see `_note_checkpoint`), and the Send rows
        that wait for it; a checkpoint put refuses is refused by the put itself."""
        if isinstance(checkpoint, (dict, Mapping)) and isinstance(checkpoint.get("id"), str):
            return self._note_checkpoint(key.thread_id, key.checkpoint_ns, checkpoint, metadata, take=True)
        return []

    def _task_log(
        self, config: RunnableConfig, key: CheckpointKey, writes: Sequence[tuple[str, Any]], task_path: str, entry: RunEntry | None
    ) -> encode.TaskLog | None:
        """What the action row of a put_writes to `config`'s checkpoint (`key`) needs (None:
        log off), the messages of `writes` taken as known from then on."""
        if not self.action_log:
            return None
        note = self.notes.get(key.thread_id, key.checkpoint_ns, key.checkpoint_id or "")
        step = note[0] + 1 if note is not None and note[0] is not None else None
        found = messages_of(writes)
        written = written_messages(writes, found)
        at = (key.thread_id, key.checkpoint_ns, key.checkpoint_id or "")
        parents = config.get("configurable", {}).get(CHECKPOINT_MAP) if key.checkpoint_ns else None
        if isinstance(parents, (dict, Mapping)):
            parents = {k: v for k, v in parents.items() if isinstance(k, str) and isinstance(v, str)}
        else:
            parents = None
        handed = is_subgraph_input(key.checkpoint_ns, task_path or "")
        prior = self.messages.prior(*at, written, parents, handed=handed) if written else None
        self.messages.wrote(*at, written)
        label = agent_label(config.get("metadata")) if key.checkpoint_ns else None
        return encode.TaskLog(self._run_of(config, entry), step, note[1] if note is not None else None, prior, label, found)

    # -- Query builders ---------------------------------------------------------------

    def _put_query(
        self,
        config: RunnableConfig,
        key: CheckpointKey,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        *,
        use_memory: bool = True,
        use_offers: bool = True,
        run_id: str | None = None,
        log_run: bool = True,
        entry: RunEntry | None = None,
        fence: Fence | None = None,
    ) -> Query[RunnableConfig | None]:
        """The put; its decode gives None when a value it holds without writing, a list
        version it extends, or the items of a pending write it uses, are not there.
        `_put_plan` then sends it again without the writes' items (`use_offers=False`: they
        may not be committed yet), then whole (`use_memory=False`: every value it holds
        written again, lists as snapshots; a delete or a prune may have taken them)."""
        if not use_memory:
            versions = checkpoint["channel_versions"]
            new_versions = {**new_versions, **{ch: versions[ch] for ch in checkpoint["channel_values"] if ch in versions}}
        built = encode.put_params(
            self.codec,
            config,
            checkpoint,
            metadata,
            new_versions,
            self.placement,
            self.lists,
            self.memory if use_memory else None,
            use_offers=use_offers and use_memory,
            run_id=run_id,
            key=key,
        )
        params, next_config, uploads, states = built.params, built.config, built.uploads, built.states
        used_offers = bool(params.get("base_item_channels"))
        where = functools.partial(_put_named, params["checkpoint_id"], params["thread_id"])
        thread_id, ns, checkpoint_id = params["thread_id"], params["checkpoint_ns"], params["checkpoint_id"]
        groups = built.item_groups

        root = params["run_step"] is not None
        # The run's row is left out when this saver wrote it with the status this put sets (a
        # root checkpoint's) already: its last step and time are its newest checkpoint's.
        log_run = self.action_log and log_run and self._run_row_changes(entry, thread_id, params["run_status"] if root else None)

        def stored(fetched: Sequence[Any]) -> RunnableConfig | None:
            if not fetched:
                if not used_offers:  # else the items may only be in flight: keep the memory
                    self.memory.forget(thread_id, ns)
                return None
            self._remember_lists(thread_id, ns, states)
            self.memory.holds(thread_id, ns, checkpoint_id, checkpoint["channel_versions"])
            self.items.add_groups(thread_id, ns, groups)
            if log_run:
                self._wrote_run_row(entry, thread_id, status=params["run_status"] if root else None)
            return next_config

        writes, decode = self._write_path(stored)
        plain = built.plain
        values = not plain or bool(params["channels"])
        bases = not plain or bool(params["base_channels"])
        before = self._fencing(params, fence)
        sql = writes.put[(plain, log_run, values, bases)]
        return Query(where, sql, params, decode, uploads, locks=self._locks([thread_id]), before=before)

    @staticmethod
    def _run_row_changes(entry: RunEntry | None, thread_id: str, status: str | None, agent: str | None = None) -> bool:
        """Whether a write would change the run's row in run_log on `thread_id` as this saver
        last wrote it: a row it has not written, another `status`, an agent not among its
        agents. A call outside an invocation (`entry` None: an import) always writes it."""
        row = entry.rows.get(thread_id) if entry is not None else None
        if row is None:
            return True
        return (status is not None and status != row.status) or (agent is not None and agent not in row.agents)

    def _wrote_run_row(self, entry: RunEntry | None, thread_id: str, *, status: str | None = None, agent: str | None = None) -> None:
        if entry is not None:
            self.runs.wrote_row(entry, thread_id, status=status, agent=agent)

    def _write_path(self, decode: Callable[[Sequence[Any]], T]) -> tuple[Statements | RoutedWrites, Callable[[Sequence[Any]], T]]:
        """The write statements and `decode`, or, with routed writes, the calls of the write
        functions and the decode that reads a call's row count as the statement's rows.

        While the saver does not know whether its tables are distributed, it writes with the
        statements (right on Citus too), and a put's row says whether Citus is installed:
        without it, the saver knows at its first put, at no round trip of its own; with it,
        its next write asks which tables are distributed (`_routing_plan`)."""
        if self.routed_writes:
            return self.sql.routed, _written(decode)
        if self.routed_writes is not None:
            return self.sql, decode

        def settling(rows: Sequence[Any]) -> T:
            if rows and len(rows[0]) > 1 and self.routed_writes is None:
                if rows[0][1]:
                    self._citus_installed = True
                else:
                    self.routed_writes = False
            return decode(rows)

        return self.sql, settling

    def _preamble(self, query: Query[Any]) -> list[tuple[str, Mapping[str, Any]]]:
        """The statements sent before `query` in its transaction (none without locks): the
        one taking its writer locks, the query's own (a take of the thread), then the
        saver's synchronous_commit for the commit
        (local to the transaction, which the shells commit after the write)."""
        locks = query.locks
        if not locks:
            return []
        if len(locks) == 1:
            lock: tuple[str, Mapping[str, Any]] = (self.sql.lock_thread, {"lock_key": locks[0]})
        else:
            lock = (self.sql.lock_threads, {"lock_keys": Int8Array(locks)})
        return [lock, *query.before] if self._commit_setting is None else [lock, *query.before, self._commit_setting]

    def _confirming(self, confirm: bool) -> list[tuple[str, Mapping[str, Any]]]:
        """A statement that gives the transaction an id when `confirm`: its commit then waits
        for the synchronous standby, which confirms the earlier commit the server did not."""
        return [(self.sql.CONFIRM_COMMIT, {})] if confirm else []

    def _flight(self, query: Query[Any], confirm: bool) -> list[tuple[str, Mapping[str, Any]]]:
        """The statements of `query`'s flight: its preamble and itself, after `_confirming`'s."""
        statements = self._preamble(query)
        statements.append((query.sql, query.params))
        if confirm:
            statements[:0] = self._confirming(confirm)
        return statements

    def _remember_lists(self, thread_id: str, ns: str, states: Sequence[tuple[str, ListState]]) -> None:
        for channel, state in states:
            self.memory.remember(thread_id, ns, channel, state)

    def _put_writes_plan(
        self,
        config: RunnableConfig,
        key: CheckpointKey,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        list_bases: Mapping[str, ListState] | None = None,
    ) -> Plan[None]:
        """put_writes to the checkpoint `config` names (`key`, parsed with its checkpoint id):
        one statement, or two when a task that already has writes at the checkpoint (a
        re-run, a retry) sends writes that could share a row. `list_bases`: see
        `_write_bases`, when the shell looked them up."""
        if not writes:
            return
        entry = self._run_entry(config)
        built = encode.put_writes_params(
            self.codec,
            config,
            writes,
            task_id,
            task_path,
            self.placement,
            self.lists,
            self.memory,
            self._task_log(config, key, writes, task_path, entry),
            key=key,
            list_bases=list_bases,
        )
        params = built.params
        where = functools.partial(_put_writes_named, task_id, params["thread_id"])
        thread_id, ns, checkpoint_id = params["thread_id"], params["checkpoint_ns"], params["checkpoint_id"]
        groups = built.item_groups
        # Offered now: the child's put waits for these writes (see inflight.py), and one
        # that uses items not committed after all finds them missing and stores its own.
        for channel, offered, objects in built.offers:
            self.memory.offer(thread_id, ns, checkpoint_id, channel, offered, objects)

        # The run's row is left out when the task sets no status and this saver wrote the row
        # with its agent already (see sql.writes._task_log).
        log = self.action_log
        run = (
            log
            and params["run_id"] is not None
            and (params["run_status"] is not None or self._run_row_changes(entry, thread_id, None, params["agent"]))
        )

        def stored(fetched: Sequence[Any]) -> bool:
            self.items.add_groups(thread_id, ns, groups)
            if fetched and run:  # a status it set may not stand (a later step's wins): a root put sends its own
                self._wrote_run_row(entry, thread_id, status=params["run_status"], agent=params["agent"])
            return bool(fetched)

        if self._citus_installed:  # settle routed_writes first (see `_write_path`)
            yield from self._routing_plan(where)
        s, decode = self._write_path(stored)
        fence = self._fence_for(config, thread_id, params.get("run_id"), entry)
        locks = self._locks([thread_id])
        wrote = False
        if built.packed is not None:
            sql = s.put_packed_writes[(built.has_items, log, run)]
            before = self._fencing(built.packed, fence)
            wrote = yield Query(where, sql, built.packed, decode, built.uploads, locks=locks, before=before)
            if wrote:
                self._took(entry, thread_id, fence)
        if not wrote:
            if built.has_items:
                sql = s.put_writes_items[(log, run)]
            else:
                sql = s.put_writes[(built.replace, bool(built.uploads), log, run)]
            rows = built.rows()
            query = Query(where, sql, rows, decode, built.uploads, locks=locks, before=self._fencing(rows, fence))
            wrote = yield from self._fenced(query, entry, fence, operator.not_)
            seen = params["check_checkpoint"]
            if not wrote and seen is not None:  # every write stored already, or the checkpoint gone
                yield from self._refuse_if_gone(named(where), thread_id, ns, "its checkpoint", seen)
        index = send_index(task_path or "")
        if self.action_log and index is not None and params["agent"].endswith(UNKNOWN_SEND):
            # Stored before its checkpoint's put told the saver the node: named now if it has since, else by that put.
            row = SendToName(params["task_id"], params["action_idx"], params["run_id"] or "", params["agent"], index)
            sends = self.notes.later(thread_id, ns, checkpoint_id, row)
            if sends is not None:
                yield from self._name_sends(thread_id, ns, checkpoint_id, [row], sends)

    def _name_sends(self, thread_id: str, ns: str, checkpoint_id: str, rows: Sequence[SendToName], sends: Sequence[str]) -> Plan[None]:
        """Name the Send rows stored as `__send__`, now that their checkpoint's Sends are known."""
        named = [(row, agent) for row in rows if (agent := row.named(sends)) is not None]
        if not named:
            return
        yield Query(
            f"naming the Send tasks of checkpoint {shown(checkpoint_id)} on thread {shown(thread_id)}",
            self.sql.name_sends,
            {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
                "task_ids": TextArray(row.task_id for row, _ in named),
                "idxs": Int4Array(row.idx for row, _ in named),
                "run_ids": TextArray(row.run_id for row, _ in named),
                "unknown": TextArray(row.agent for row, _ in named),
                "agents": TextArray(agent for _, agent in named),
            },
            lambda fetched: None,
            locks=self._locks([thread_id]),
        )

    def _get_tuple_query(self, config: RunnableConfig) -> Query[CheckpointTuple | None]:
        key = parse_config(config)
        # Recent list versions which hold their items as immutable objects, or whose every
        # item the cache holds: if the checkpoint holds one, its chain rows and items are
        # not read at all. A channel with a version of the first kind (its newest, as a
        # rule) does not have its older versions checked against the cache.
        known = {}
        rest = []
        for channel, state in self.memory.recent(key.thread_id, key.checkpoint_ns):
            state = state.pinned()
            if list_layout.holds_its_items(state):
                known[(channel, state.version)] = state
            else:
                rest.append((channel, state))
        channels_known = {channel for channel, _ in known}
        rest = [(channel, state) for channel, state in rest if channel not in channels_known]
        held = self.items.held(key.thread_id, key.checkpoint_ns) if rest or not known else {}
        for channel, state in rest:
            if {(channel, v) for v in state.item_versions} <= held.keys():
                known[(channel, state.version)] = state
        cold = not held and not known
        return Query(
            functools.partial(_get_tuple_named, key.thread_id),
            self.sql.get_tuple[(key.checkpoint_id is not None, cold)],
            encode.get_tuple_params(key, held, known),
            lambda fetched: self._restored(key, decode.decode_tuple(self.codec, key, fetched, held, known)),
            references=lambda fetched: decode.get_tuple_references(key, fetched),
            ref_columns=DETAIL_REFS,
        )

    def _restored(self, key: CheckpointKey, read: decode.TupleRead) -> CheckpointTuple | None:
        """A get_tuple's tuple, after the caches learned what the read brought."""
        self._remember_lists(key.thread_id, key.checkpoint_ns, read.states)
        self.items.add_groups(key.thread_id, key.checkpoint_ns, read.fetched)
        found = read.found
        if found is not None:
            self.memory.holds(key.thread_id, key.checkpoint_ns, found.checkpoint["id"], found.checkpoint["channel_versions"])
            self._note_checkpoint(key.thread_id, key.checkpoint_ns, found.checkpoint, found.metadata)
        return found

    def _history_scan(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> HistoryScan:
        scan = HistoryScan(self.codec, config, filter=filter, before=before, limit=limit)
        if scan.one_thread:
            # The item groups the saver holds the bytes of (of the root graph's lane, when
            # the walk covers every namespace) are not fetched again.
            lane = (scan.params["thread_id"], scan.params.get("checkpoint_ns", ""))
            scan.seed(lane, *self.items.held_for_walk(*lane))
        return scan

    def _warm_up_statements(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The reads a new saver's first calls send (get_tuple of a thread's newest
        checkpoint, cold and warm, the first history page of a lane, of a lane filtered by
        metadata and of a whole thread with its details, a later page's details), for a
        thread that holds nothing: run on a new pool connection, they leave it with these
        statements parsed and planned once, and the catalogs they touch loaded."""
        config: RunnableConfig = {"configurable": {"thread_id": WARM_UP_THREAD, "checkpoint_ns": ""}}
        key = parse_config(config)
        lane = HistoryScan(self.codec, config, filter=None, before=None, limit=None)
        filtered = HistoryScan(self.codec, config, filter={"source": "loop"}, before=None, limit=None)
        thread = HistoryScan(self.codec, {"configurable": {"thread_id": WARM_UP_THREAD}}, filter=None, before=None, limit=None)
        return [
            (self.sql.get_tuple[(False, True)], encode.get_tuple_params(key, {}, {})),
            (self.sql.get_tuple[(False, False)], encode.get_tuple_params(key, {}, {})),
            *(
                (self.sql.first_page(scan.page_where(), across_lanes=scan.across_lanes), scan.first_params())
                for scan in (lane, filtered, thread)
            ),
            (self.sql.page_details[True], {**lane.details_params([]), "thread_id": key.thread_id}),
        ]

    def _page_query(self, scan: HistoryScan) -> Query[list[CheckpointRow]]:
        return Query("list", self.sql.list_page(scan.page_where(), across_lanes=scan.across_lanes), scan.page_params(), scan.take_page)

    def _first_page_query(self, scan: HistoryScan) -> Query[list[CheckpointTuple]]:
        """`Statements.first_page`: a walk's first page of one thread with its details."""
        return Query(
            "list",
            self.sql.first_page(scan.page_where(), across_lanes=scan.across_lanes),
            scan.first_params(),
            scan.first_tuples,
            references=scan.first_references,
            ref_columns=DETAIL_REFS,
            memo=scan.payloads,
        )

    def _details_query(self, scan: HistoryScan, page: list[CheckpointRow]) -> Query[list[CheckpointTuple]]:
        return self._tuples_query("list", scan, page, scan.details_params(page))

    def _tuples_query(
        self, operation: str, scan: HistoryScan, page: list[CheckpointRow], params: Mapping[str, Any]
    ) -> Query[list[CheckpointTuple]]:
        """`Statements.page_details` for `page`, decoded into its CheckpointTuples by `scan`;
        anchored on the thread when the page is of one (see `sql.reads.page_details`)."""
        threads = {*params["v_threads"], *params["w_threads"]}
        if len(threads) == 1:
            params = {**params, "thread_id": threads.pop()}
        return Query(
            operation,
            self.sql.page_details["thread_id" in params],
            params,
            lambda fetched: scan.tuples(page, fetched),
            references=lambda fetched: scan.references(page, fetched),
            ref_columns=DETAIL_REFS,
            memo=scan.payloads,
        )

    # -- the action log ----------------------------------------------------------------

    def _runs_page_query(self, scan: RunScan) -> Query[list[RunRecord]]:
        return Query("list_runs", self.sql.runs_page(scan.page_where(), one_thread=scan.one_thread), scan.page_params(), scan.take_page)

    def _actions_page_query(self, scan: ActionScan) -> Query[list[ActionRecord]]:
        sql = self.sql.actions_page(scan.page_where(), one_thread=scan.one_thread)
        return Query("list_actions", sql, scan.page_params(), scan.take_page)

    def _steps_page_query(self, scan: StepScan) -> Query[list[StepRecord]]:
        sql = self.sql.steps_page(scan.page_where(), across_lanes=scan.across_lanes)
        return Query(f"list_steps of thread {shown(scan.thread_id)}", sql, scan.page_params(), scan.take_page)

    def _actions_from_query(self, thread_id: Any, checkpoint_ns: Any, checkpoint_id: Any, limit: Any) -> Query[list[ActionRecord]]:
        params = actions_from_params(thread_id, checkpoint_ns, checkpoint_id, limit)
        return Query(f"actions_from of thread {shown(params['thread_id'])}", self.sql.actions_from, params, action_records)

    # -- effects (once()) ------------------------------------------------------------------

    def _find_effect_plan(self, key: EffectKey, config: RunnableConfig | None) -> Plan[tuple[bool, Any]]:
        """(found, the result) of the call `key` names. A run that took its thread and has
        since lost it to another run (see `_fence_for`) is refused the call (a
        ThreadTakenError) when nothing is recorded: its writes would be refused anyway, and
        the call is not made."""
        fence = self._fence_for(config, key.thread_id, None) if config is not None else None
        token = fence.writer if fence is not None and not fence.taking else None
        where = f"once() {shown(key.key)} of thread {shown(key.thread_id)}"
        stored = yield Query(where, self.sql.find_effect, {**key.params(), "fence": token}, stored_of)
        if stored == TAKEN and fence is not None:  # (equal, not the same: compiled code copies tuples)
            error = refusal(where, key.thread_id, fence, (yield self._holder_query(key.thread_id)))
            if error is not None:
                raise error
            stored = None  # it holds the thread after all: nothing is recorded
        return self._effect_found(key, stored)

    def _effect_found(self, key: EffectKey, stored: tuple[str, bytes] | None) -> tuple[bool, Any]:
        """(found, the result) of a lookup; a key this saver saw recorded and the server no
        longer holds is a HistoryRewoundError: the call is not made a second time unawares."""
        if stored is None:
            if key in self.recorded_effects:
                raise HistoryRewoundError(
                    f"once() {shown(key.key)} of thread {shown(key.thread_id)}: the result this saver saw recorded is no longer "
                    "stored. The history was rewound (a failover to a standby that had not received the last commits) or another "
                    "process deleted or pruned the thread. The call was not made again; check whether it took effect, then run "
                    "the graph on the thread again.",
                    thread_id=key.thread_id,
                    checkpoint_ns=key.checkpoint_ns,
                    missing_checkpoint_id=key.checkpoint_id,
                    newest_checkpoint_id=None,
                )
            return False, None
        self.recorded_effects.add(key)
        return True, self._effect_result(key, stored)

    def _record_effect_query(self, key: EffectKey, config: RunnableConfig, result: Any) -> Query[tuple[str, bytes] | None]:
        """The result stored as the serializer writes it (refused, naming the call, when its
        read would refuse it) and as JSON for a person (a marker under encryption)."""
        where = f"once() {shown(key.key)} of thread {shown(key.thread_id)}"
        stored = self.codec.dump(result, channel=key.key, where=where)
        shown_json = dump_json({MARKER: "encrypted"} if self.codec.encrypted else readable(result))
        return Query(where, self.sql.record_effect, record_params(key, self._run_of(config), stored, shown_json), stored_of)

    def _effect_recorded(self, key: EffectKey, stored: tuple[str, bytes] | None, result: Any) -> Any:
        """What `record_effect` returns: the result recorded first under the key."""
        self.recorded_effects.add(key)
        return self._effect_result(key, stored) if stored is not None else result

    def _effect_result(self, key: EffectKey, stored: tuple[str, bytes]) -> Any:
        """A recorded result as the call returned it (the serializer's policy applies)."""
        return self.codec.load(*stored, where=lambda: f"the result once() recorded as {shown(key.key)} in thread {shown(key.thread_id)}")

    def _step_neighbours_query(self, thread_id: Any, step: Any) -> Query[tuple[int | None, int | None]]:
        params = neighbour_params(thread_id, step)
        return Query(f"step_neighbours of thread {shown(params['thread_id'])}", self.sql.step_neighbours, params, neighbours_of)

    def _threads_page_query(self, scan: ThreadScan) -> Query[list[ThreadRecord]]:
        sql = self.sql.threads_page(scan.rows_where(self.sql.q), scan.page_having())
        return Query("list_threads", sql, scan.page_params(), scan.take_page)

    def _backfill_plan(self, thread_ids: Sequence[str] | None, batch_size: int) -> Plan[int]:
        """backfill_actions: threads in keyset pages of `batch_size`; each one lacking its log
        is read (facts, writes, decoded checkpoints) and written back in one statement."""
        if type(batch_size) is not int or batch_size < 1:
            raise ConfigError(f"backfill_actions() batch_size must be a whole number >= 1, got {shown(batch_size)}")
        only = TextArray(id_text(t, "thread_id") for t in thread_ids) if thread_ids is not None else None
        after, filled = "", 0
        while True:
            page = yield Query(
                "backfill_actions",
                self.sql.backfill_threads,
                {"after": after, "only": only, "batch": batch_size},
                lambda rows: [(r[ThreadNeed.THREAD_ID], r[ThreadNeed.NEEDED]) for r in rows],
            )
            for thread_id, needed in page:
                if needed:
                    yield from self._backfill_thread_plan(thread_id)
                    filled += 1
            if len(page) < batch_size:
                return filled
            after = page[-1][0]

    def _backfill_thread_plan(self, thread_id: str) -> Plan[None]:
        where = f"backfill_actions of thread {shown(thread_id)}"
        facts = yield Query(where, self.sql.checkpoint_facts, {"thread_id": thread_id}, lambda rows: [CheckpointFacts(*r) for r in rows])
        writes = yield Query(
            where,
            self.sql.write_facts,
            {"thread_id": thread_id, "packed_type": PACKED_WRITES_TYPE},
            lambda rows: [WriteFacts(*r) for r in rows],
        )
        decoded: dict[tuple[str, str], Decoded] = {}
        wanted: dict[tuple[str, str], set[str]] = {}  # message ids a subgraph's tasks wrote, by parent checkpoint
        scan = self._history_scan({"configurable": {"thread_id": thread_id}}, None, None, None)
        while not scan.done:
            page = yield self._page_query(scan)
            if not page:
                break
            for found in (yield self._details_query(scan, page)):
                configurable = found.config["configurable"]
                key = (configurable["checkpoint_ns"], configurable["checkpoint_id"])
                read = decoded_for_backfill(found.checkpoint, found.pending_writes or [], found.metadata, wanted.pop(key, ()))
                decoded[key] = read
                for parent in (read.parents or {}).items():
                    if read.written_ids and parent[0] != key[0]:
                        wanted.setdefault(parent, set()).update(read.written_ids)
        built = thread_backfill(facts, writes, decoded, encrypted=self.codec.encrypted)
        yield Query(where, self.sql.backfill_store, store_params(thread_id, built), locks=self._locks([thread_id]))

    # -- get_delta_channel_history ----------------------------------------------------

    def _delta_walk(self, config: RunnableConfig, channels: Sequence[str]) -> DeltaWalk:
        return DeltaWalk(self.codec, config, channels)

    def _walk_details_query(self, walk: DeltaWalk) -> Query[list[CheckpointTuple]]:
        return self._tuples_query("get_delta_channel_history", walk.scan, walk.path, walk.details_params())

    # -- objects -------------------------------------------------------------------------

    def _wanted_objects(self, query: Query[Any], fetched: Sequence[Any]) -> list[tuple[ObjectRef, str]]:
        """The objects a result references that the call has not fetched yet; refuses when
        this saver has no store to read them from."""
        if query.references is None:
            return []
        wanted = query.references(fetched)
        if wanted and self.objects is None:
            ref, where = wanted[0]
            raise ConfigError(
                f"{where}: the value is stored in an object store (key {shown(ref.key)}), but this saver has no object_store configured"
            )
        memo = query.memo or {}
        prefix = self.placement.prefix
        return [(check_reference(prefix, ref, where), where) for ref, where in wanted if ref.key not in memo]

    def _attach_objects(self, query: Query[Any], fetched: Sequence[Any], payloads: Mapping[str, bytes]) -> Sequence[Any]:
        """The rows with their objects' bytes in place; remembers this statement's payloads."""
        if query.references is None or query.ref_columns is None:  # a Query with one has the other
            return fetched
        if query.memo is not None:
            payloads = {**query.memo, **payloads}
            query.memo.clear()
            query.memo.update(payloads)
        return attach(fetched, payloads, query.ref_columns)

    def _referenced_objects_query(self, keys: Sequence[str]) -> Query[set[str]]:
        return Query(
            "gc",
            self.sql.referenced_objects,
            {"keys": TextArray(keys)},
            lambda fetched: {row[0] for row in fetched},
        )

    def _gc_cutoff(self, grace_period: timedelta) -> Any:
        if self.objects is None:
            raise ConfigError("gc() collects objects, but this saver has no object_store configured")
        return gc_cutoff(grace_period, self.objects.reuse_window)

    def _delete_threads_query(self, thread_ids: Sequence[str]) -> Query[None]:
        ids = [id_text(t, "thread_id") for t in thread_ids]
        return Query(
            f"delete of threads {shown(ids)}", self.sql.delete_threads, {"thread_ids": ids}, self._forgetting(ids), locks=self._locks(ids)
        )

    def _forgetting(self, thread_ids: Sequence[str]) -> Callable[[Sequence[Any]], None]:
        """The decode of a delete or prune of these threads: what the saver saw of them is
        forgotten, so a run still writing to one of them is not taken for a rewound history
        (see HistoryRewoundError) and writes whole what it holds."""

        def forget(fetched: Sequence[Any]) -> None:
            self.memory.forget_threads(thread_ids)
            self.messages.forget_threads(thread_ids)

        return forget

    def _run_lanes_query(self, ids: Sequence[str], threads: Sequence[str]) -> Query[set[tuple[str, str, str]]]:
        """delete_for_runs, second: the runs' checkpoints (in `threads`) that surviving DeltaChannel ones replay."""
        return Query(
            f"delete_for_runs {shown(ids)}",
            self.sql.run_lanes,
            {"run_ids": ids, "thread_ids": list(threads)},
            lambda fetched: replay_ancestors(
                [
                    # The channels a checkpoint holds: values rows, and scalars in its own JSON.
                    (
                        r[RunLane.THREAD_ID],
                        r[RunLane.CHECKPOINT_NS],
                        r[RunLane.CHECKPOINT_ID],
                        r[RunLane.PARENT_CHECKPOINT_ID],
                        r[RunLane.DOOMED],
                        [*r[RunLane.VALUE_CHANNELS], *(load_json(r[RunLane.INLINE_VALUES]) or ())],
                        load_json(r[RunLane.DELTA_COUNTERS]),
                    )
                    for r in fetched
                ]
            ),
        )

    def _run_threads_query(self, ids: Sequence[str]) -> Query[list[str]]:
        """delete_for_runs, first: the threads the runs wrote to (their writer locks)."""
        return Query(f"delete_for_runs {shown(ids)}", self.sql.run_threads, {"run_ids": ids}, lambda fetched: [r[0] for r in fetched])

    def _delete_for_runs_query(self, ids: Sequence[str], keep: set[tuple[str, str, str]], threads: Sequence[str]) -> Query[None]:
        params = {"run_ids": ids, "thread_ids": list(threads), **_keep_params(keep)}
        return Query(
            f"delete_for_runs {shown(ids)}", self.sql.delete_for_runs, params, self._forgetting(threads), locks=self._locks(threads)
        )

    def _copy_thread_query(self, source_thread_id: str, target_thread_id: str) -> Query[None]:
        source = id_text(source_thread_id, "source thread_id")
        target = id_text(target_thread_id, "target thread_id")
        if source == target:
            raise ConfigError(f"copy_thread needs two different threads, got {shown(source)} twice")

        def copied(fetched: Sequence[Any]) -> None:
            if fetched and fetched[0][0]:
                raise ConfigError(
                    f"copy_thread {shown(source)} -> {shown(target)}: thread {shown(target)} has checkpoints "
                    "already, and a copy into it would replace its latest state; nothing was copied "
                    "(delete_thread it first to replace it)"
                )

        return Query(
            f"copy_thread {shown(source)} -> {shown(target)}",
            self.sql.copy_thread,
            {"source": source, "target": target},
            copied,
            locks=self._locks([source, target]),
        )

    def _prune_query(self, thread_ids: Sequence[str], strategy: str, keep: Sequence[CheckpointRow] = ()) -> Query[None]:
        if strategy not in PRUNE_STRATEGIES:
            raise ConfigError(f"unknown prune strategy {shown(strategy)}; use one of {PRUNE_STRATEGIES}")
        if strategy == "delete":
            return self._delete_threads_query(thread_ids)
        ids = [id_text(t, "thread_id") for t in thread_ids]
        params = {"thread_ids": ids, **_keep_params((r.thread_id, r.checkpoint_ns, r.checkpoint_id) for r in keep)}
        return Query(f"prune of threads {shown(ids)}", self.sql.prune_keep_latest, params, self._forgetting(ids), locks=self._locks(ids))

    def _latest_rows_query(self, thread_ids: Sequence[str]) -> Query[list[CheckpointRow]]:
        ids = [id_text(t, "thread_id") for t in thread_ids]
        return Query(
            f"prune of threads {shown(ids)}",
            self.sql.latest_checkpoints,
            {"thread_ids": ids},
            lambda fetched: [CheckpointRow.from_row(r) for r in fetched],
        )

    # -- plans: the operations of several statements --------------------------------------

    def _write_bases(self, key: CheckpointKey, writes: Sequence[tuple[str, Any]]) -> Mapping[str, ListState]:
        """The list versions a task's writes extend (`encode.write_bases`), looked up once."""
        return encode.write_bases(self.memory, self.lists, key, writes)

    def _may_use_offers(self, checkpoint: Checkpoint, new_versions: ChannelVersions) -> bool:
        """Whether the put of `checkpoint` may take a list's items from its parent's pending
        writes (see inflight.py): it writes a value that takes the list layout."""
        values = checkpoint.get("channel_values") if isinstance(checkpoint, (dict, Mapping)) else None
        if not isinstance(values, (dict, Mapping)):
            return False
        # Most puts write no list (the types of the values written, at C speed); a version
        # that is not text is left to the put's own check, which names it.
        if list not in set(map(type, map(values.get, new_versions))):
            return False
        return any(
            isinstance(version, str) and list_layout.usable(values.get(channel), version, self.lists.snapshot_every)
            for channel, version in new_versions.items()
        )

    def _put_plan(
        self,
        config: RunnableConfig,
        key: CheckpointKey,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        *,
        parent_writes_done: bool,
        waiting_sends: Sequence[SendToName] = (),
    ) -> Plan[RunnableConfig]:
        """put: one statement, sent again relying on less when what it relied on is missing.
        Outside a graph invocation, the checkpoint is a run of its own (an update_state),
        unless `importing`: then it has none, and backfill_actions assigns the runs.
        `waiting_sends`: action rows of its Send tasks stored before it, named after it."""
        entry = self._run_entry(config)
        invocation_run = self._run_of(config, entry)
        run_id = invocation_run or (None if self.importing else new_run_id())
        # An update_state (a put outside any invocation) is not a run of its own in run_log:
        # its checkpoint keeps a run id of its own (delete_for_runs can name it), its row is
        # the edit's action row, and it does not mark the runs before it interrupted.
        log_run = invocation_run is not None or self.importing
        if self._citus_installed:  # settle routed_writes first (see `_write_path`)
            checkpoint_id = checkpoint.get("id") if isinstance(checkpoint, (dict, Mapping)) else None
            yield from self._routing_plan(functools.partial(_put_named, checkpoint_id, key.thread_id))
        fence = self._fence_for(config, key.thread_id, run_id, entry)
        put = functools.partial(
            self._put_query, config, key, checkpoint, metadata, new_versions, run_id=run_id, log_run=log_run, entry=entry
        )
        query = put(use_offers=parent_writes_done, fence=fence)
        stored: RunnableConfig | None = yield query
        if fence is not None:  # (`_fenced`, inline: most puts are this one statement)
            if stored is None:
                yield from self._refuse_unless_held(query, fence)
            self._took(entry, key.thread_id, fence)
            fence = fence.taken()  # the run holds the thread now
        if stored is None:
            parent = query.params["check_parent"]
            if parent is not None:
                yield from self._refuse_if_gone(named(query.operation), key.thread_id, key.checkpoint_ns, "its parent checkpoint", parent)
            if query.params.get("base_item_channels"):
                # The items of a pending write it used were not committed yet: store them.
                stored = yield from self._fenced(put(use_offers=False, fence=fence), entry, fence, _is_none)
            if stored is None:  # a value it relied on was pruned or deleted meanwhile: write it whole
                stored = yield from self._fenced(put(use_memory=False, fence=fence), entry, fence, _is_none)
        assert stored is not None
        if waiting_sends:
            yield from self._name_sends(key.thread_id, key.checkpoint_ns, checkpoint["id"], waiting_sends, send_nodes(checkpoint))
        if self.action_log and invocation_run is not None and not key.checkpoint_ns:
            steps = self._unsaved_steps(key, metadata)
            if steps:
                yield from self._log_unsaved_run(key, checkpoint, metadata, run_id, steps)
        return stored

    def _unsaved_steps(self, key: CheckpointKey, metadata: Any) -> int:
        """How many super-steps the run took whose puts LangGraph skipped before this root
        put (see `actions.steps_unsaved`); 0 when the parent is not known to this saver:
        its messages are then unknown too."""
        parent_id = key.checkpoint_id
        parent = self.notes.get(key.thread_id, key.checkpoint_ns, parent_id) if parent_id else None
        if parent_id and parent is None:
            return 0
        step = metadata.get("step") if isinstance(metadata, (dict, Mapping)) else None
        return steps_unsaved(step, parent[0] if parent else None, parent_id is not None)

    def _log_unsaved_run(self, key: CheckpointKey, checkpoint: Checkpoint, metadata: Any, run_id: str | None, steps: int) -> Plan[None]:
        """After the put of a run's last checkpoint when LangGraph saved none before it
        (durability="exit", `steps` of them: `_unsaved_steps`): the run's action row, from
        what the checkpoint holds that its parent did not (see `actions.describe_unsaved`)."""
        parent_id = key.checkpoint_id
        step = metadata.get("step") if isinstance(metadata, (dict, Mapping)) else None
        before = (self.messages.held_ids(key.thread_id, key.checkpoint_ns, parent_id) if parent_id else None) or frozenset()
        now = self.messages.held(key.thread_id, key.checkpoint_ns, checkpoint["id"]) or {}
        action = describe_unsaved([m for i, m in now.items() if i not in before], steps)
        yield Query(
            f"action row of the run that made checkpoint {shown(checkpoint['id'])} on thread {shown(key.thread_id)}",
            self.sql.log_unsaved_run,
            {
                "thread_id": key.thread_id,
                "checkpoint_ns": key.checkpoint_ns,
                "checkpoint_id": parent_id or checkpoint["id"],
                "task_id": checkpoint["id"],
                "run_id": run_id or "",
                "action_step": step,
                "agent": action.agent,
                "action_type": action.action_type,
                "payload": action.payload,
            },
            lambda fetched: None,
            locks=self._locks([key.thread_id]),
        )

    def _routing_plan(self, operation: Where) -> Plan[None]:
        """Settle `routed_writes` when it is None (`operation`: the setup, or the write after
        one found Citus installed, see `_write_path`): whether the schema's tables are
        distributed (one statement, or two where Citus is installed and no write said so)."""
        if self.routed_writes is not None:
            return
        installed = self._citus_installed or (yield Query(operation, self.sql.citus_installed, {}, _first_value))
        distributed = False
        if installed:
            table = {"table": f"{self.sql.q}.checkpoints"}
            distributed = yield Query(operation, self.sql.tables_distributed, table, _first_value)
        self.routed_writes = bool(distributed)

    def _refuse_if_gone(self, operation: str, thread_id: str, ns: str, role: str, checkpoint_id: str) -> Plan[None]:
        """After a write that stored nothing, relying on a checkpoint seen committed (`role`):
        asks whether the server still has it, and raises HistoryRewoundError when it has not."""
        status: ParentStatus = yield Query(
            f"check of checkpoint {shown(checkpoint_id)} on thread {shown(thread_id)}",
            self.sql.parent_status,
            {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id},
            lambda fetched: ParentStatus(bool(fetched[0][0]), fetched[0][1]),
        )
        if not status.parent_stored:
            raise self._history_rewound(operation, thread_id, ns, role, checkpoint_id, status)

    def _history_rewound(
        self, operation: str, thread_id: str, ns: str, role: str, missing: str, status: ParentStatus
    ) -> HistoryRewoundError:
        """The error of a write whose checkpoint (`role`: the put's parent, the writes' own),
        seen committed, is gone; what the saver holds of the lane's lists is forgotten, so
        that reads and puts start again from the server."""
        self.memory.forget(thread_id, ns)
        newest = status.newest_checkpoint_id
        return HistoryRewoundError(
            f"{operation}" + (f" (namespace {shown(ns)})" if ns else "") + f": {role} {shown(missing)}, "
            "which this saver saw committed, is no longer stored; "
            + (
                f"the newest checkpoint the server holds for the thread is {shown(newest)}"
                if newest
                else "the server holds no checkpoint of the thread"
            )
            + ". The history was rewound (a failover to a standby that had not received the last commits) or another process "
            "deleted or pruned it. Nothing was written; run the graph on the thread again with input None to go on from what the "
            "server holds.",
            thread_id=thread_id,
            checkpoint_ns=ns,
            missing_checkpoint_id=missing,
            newest_checkpoint_id=newest,
        )

    def _delta_history_plan(self, config: RunnableConfig, channels: Sequence[str]) -> Plan[dict[str, Any]]:
        """get_delta_channel_history: pages of bare rows up the parent chain, then one read
        of the chain's writes and seed values (not one get_tuple per ancestor)."""
        if not channels:
            return {}
        walk = self._delta_walk(config, channels)
        while walk.needs_rows():
            walk.take((yield self._page_query(walk.scan)))
        tuples = (yield self._walk_details_query(walk)) if walk.path else []
        found = walk.result(tuples)
        key = parse_config(config)
        if self.action_log and key.checkpoint_id:
            # A resumed run's tasks will write some of these messages again (a reviewed call):
            # the action log must know them, though the checkpoint does not carry them.
            for history in found.values():
                self.messages.also_held(key.thread_id, key.checkpoint_ns, key.checkpoint_id, replayed_messages(history))
        return found

    def _delete_for_runs_plan(self, run_ids: Sequence[str]) -> Plan[None]:
        """delete_for_runs, sparing the checkpoints a surviving DeltaChannel one replays."""
        ids = [id_text(r, "run_id") for r in run_ids]
        if ids:
            threads = yield self._run_threads_query(ids)
            if threads:
                keep = yield self._run_lanes_query(ids, threads)
                yield self._delete_for_runs_query(ids, keep, threads)

    def _prune_plan(self, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
        """prune; `keep_latest` also keeps the ancestors whose writes a kept DeltaChannel
        checkpoint replays (up to the one holding the channel's value)."""
        query = self._prune_query(thread_ids, strategy)
        if not thread_ids:
            return
        if strategy == "keep_latest":
            keep = []
            for walk in self._replay_walks((yield self._latest_rows_query(thread_ids))):
                while walk.needs_rows():
                    walk.take((yield self._page_query(walk.scan)))
                keep.extend(walk.path)
            query = self._prune_query(thread_ids, strategy, keep)
        yield query

    def _replay_walks(self, latest: Sequence[CheckpointRow]) -> list[DeltaWalk]:
        """For prune: a walk per newest checkpoint that replays DeltaChannel writes from its
        ancestors (LangGraph names those channels in `counters_since_delta_snapshot`)."""
        walks = []
        for row in latest:
            counters = row.metadata.get("counters_since_delta_snapshot") if isinstance(row.metadata, dict) else None
            channels = [c for c in (counters or {}) if not row.holds(c)]
            if channels:
                config = CheckpointKey(row.thread_id, row.checkpoint_ns, row.checkpoint_id).config()
                walks.append(self._delta_walk(config, channels))
        return walks
