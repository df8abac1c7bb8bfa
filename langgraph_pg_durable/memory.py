"""The in-process caches a saver keeps: what it knows of recent list versions (to write
deltas), the stored bytes of recent list items (to skip fetching them), and verified
object-store payloads (to fetch a shared object once).

Each is bounded and only saves work: correctness never depends on what they hold. They
are the only stateful, locked part below the shells; the core they feed is pure.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .core.actions import KNOWN, SendToName
from .core.fencing import new_writer
from .core.history import lane_key_columns
from .core.item_group import ItemGroup
from .core.lists import ListState, Location, OfferedObject, RawItems
from .core.offload import sha256_hex

DEFAULT_ITEM_CACHE_BYTES = 64 << 20
MAX_OFFERED_OBJECTS = 64  # the pending writes (by checkpoint and channel) whose item objects are kept
DEFAULT_SEEN_BYTES = 64 << 20
_DATA = operator.itemgetter(1)  # the bytes of a (type, bytes) item


class ListMemory:
    """Recent list versions stored or read, and which version of each channel recent
    checkpoints hold. Bounded; it only saves work: without it a put writes a snapshot.

    A new version only ever extends the version its parent checkpoint holds: that row
    and its chain are kept by prune as long as the parent survives, which a version
    that merely looks like a prefix (another branch, a pruned one) does not promise.
    """

    def __init__(
        self, max_states: int = 1024, max_checkpoints: int = 4096, max_locations: int = 1 << 20, max_seen_bytes: int = DEFAULT_SEEN_BYTES
    ) -> None:
        self._states: OrderedDict[tuple[str, str, str, str], ListState] = OrderedDict()
        self._locations = 0
        self._max_locations = max_locations
        # The newest state of each list (thread, namespace, channel) keeps the item objects
        # it was made of (ListState.seen), least recently stored dropped first past
        # `max_seen_bytes` of their stored size: they would otherwise outlive the run.
        self._seen: OrderedDict[tuple[str, str, str], tuple[tuple[str, str, str, str], int]] = OrderedDict()
        self._seen_bytes = 0
        self._max_seen_bytes = max_seen_bytes
        self._held: OrderedDict[tuple[str, str, str], dict[str, str]] = OrderedDict()
        self._offers: OrderedDict[tuple[str, str, str, str], dict[bytes, Location]] = OrderedDict()
        self._offered_objects: OrderedDict[tuple[str, str, str, str], dict[int, OfferedObject]] = OrderedDict()
        self._max_states = max_states
        self._max_checkpoints = max_checkpoints
        self._lock = threading.Lock()

    def holds(self, thread_id: str, ns: str, checkpoint_id: str, versions: Mapping[str, Any]) -> None:
        """Record the channel versions a checkpoint holds."""
        # (Versions are text as a rule: copied at C speed then, not converted one by one.)
        held = dict(versions) if set(map(type, versions.values())) <= {str} else {k: str(v) for k, v in versions.items()}
        with self._lock:
            self._held[(thread_id, ns, checkpoint_id)] = held
            while len(self._held) > self._max_checkpoints:
                self._held.popitem(last=False)

    def forget(self, thread_id: str, ns: str) -> None:
        """Drop what is known of a thread's lists (a base turned out to be gone)."""
        with self._lock:
            for key in [k for k in self._states if k[:2] == (thread_id, ns)]:
                self._locations -= len(self._states.pop(key).locations)
                self._unsee(key)
            for key in [k for k in self._offers if k[:2] == (thread_id, ns)]:
                del self._offers[key]
            for key in [k for k in self._offered_objects if k[:2] == (thread_id, ns)]:
                del self._offered_objects[key]

    def forget_threads(self, thread_ids: Sequence[str]) -> None:
        """Drop everything known of these threads, in every namespace: the versions their
        checkpoints hold too (they were deleted or pruned)."""
        threads = set(thread_ids)
        with self._lock:
            for key in [k for k in self._states if k[0] in threads]:
                self._locations -= len(self._states.pop(key).locations)
                self._unsee(key)
            for offer in [k for k in self._offers if k[0] in threads]:
                del self._offers[offer]
            for offer in [k for k in self._offered_objects if k[0] in threads]:
                del self._offered_objects[offer]
            for held in [k for k in self._held if k[0] in threads]:
                del self._held[held]

    def base(self, thread_id: str, ns: str, parent_id: str | None, channel: str) -> ListState | None:
        """The state of the channel's version in the parent checkpoint, if known."""
        return self.bases_of(thread_id, ns, parent_id, (channel,)).get(channel)

    def bases_of(self, thread_id: str, ns: str, checkpoint_id: str | None, channels: Iterable[str]) -> dict[str, ListState]:
        """The known states of the list versions the checkpoint holds of `channels`, by
        channel: what a task's writes to it extend (one look under the lock for them all)."""
        if checkpoint_id is None or not self._states:  # (no list in the layout yet: most DeltaChannel graphs)
            return {}
        found: dict[str, ListState] = {}
        with self._lock:
            held = self._held.get((thread_id, ns, checkpoint_id))
            if not held:
                return found
            for channel in channels:
                version = held.get(channel)
                state = self._states.get((thread_id, ns, channel, version)) if version is not None else None
                if state is not None:
                    found[channel] = state
        return found

    def versions_of(self, thread_id: str, ns: str, checkpoint_id: str | None) -> Mapping[str, str] | None:
        """The channel versions of a checkpoint stored or read, if known."""
        if checkpoint_id is None:
            return None
        with self._lock:
            return self._held.get((thread_id, ns, checkpoint_id))

    def offer(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        channel: str,
        offered: Sequence[tuple[bytes, Location]],
        objects: Sequence[OfferedObject] = (),
    ) -> None:
        """Record items a pending write of a checkpoint stored, for its child's delta, and
        the item objects (see `lists.plan`; kept for the last `MAX_OFFERED_OBJECTS` offers
        only: they hold the graph's own objects, which a delta needs only at the next put)."""
        with self._lock:
            key = (thread_id, ns, checkpoint_id, channel)
            self._offers.setdefault(key, {}).update(offered)
            self._offers.move_to_end(key)
            while len(self._offers) > self._max_checkpoints:
                self._offers.popitem(last=False)
            if objects:
                self._offered_objects.setdefault(key, {}).update((id(entry[0]), entry) for entry in objects)
                self._offered_objects.move_to_end(key)
                while len(self._offered_objects) > MAX_OFFERED_OBJECTS:
                    self._offered_objects.popitem(last=False)

    def offered(self, thread_id: str, ns: str, checkpoint_id: str | None, channel: str) -> dict[bytes, Location]:
        """Items the checkpoint's pending writes to the channel stored, by digest."""
        with self._lock:
            return dict(self._offers.get((thread_id, ns, checkpoint_id or "", channel), {}))

    def offered_objects(self, thread_id: str, ns: str, checkpoint_id: str | None, channel: str) -> Mapping[int, OfferedObject]:
        """The item objects the checkpoint's pending writes to the channel stored, by id."""
        with self._lock:
            return dict(self._offered_objects.get((thread_id, ns, checkpoint_id or "", channel), {}))

    def recent(self, thread_id: str, ns: str, *, limit: int = 4, scan: int = 64) -> list[tuple[str, ListState]]:
        """(channel, state) of the lane's most recently stored or read list versions: the
        newest checkpoint usually holds one of them."""
        out: list[tuple[str, ListState]] = []
        with self._lock:
            for i, key in enumerate(reversed(self._states)):
                if i >= scan or len(out) >= limit:
                    break
                if key[:2] == (thread_id, ns):
                    out.append((key[2], self._states[key]))
        return out

    def remember(self, thread_id: str, ns: str, channel: str, state: ListState) -> None:
        """Keep a version's state, most recent last; the oldest go past `max_states`, or
        past `max_locations` items in all (a state holds a reference per item, and a long
        thread stores a version per step)."""
        key = (thread_id, ns, channel, state.version)
        with self._lock:
            old = self._states.pop(key, None)
            if old is not None:
                self._locations -= len(old.locations)
            self._states[key] = state
            self._locations += len(state.locations)
            if state.seen is not None:
                self._see(key, state.seen.weight)
            while len(self._states) > 1 and (len(self._states) > self._max_states or self._locations > self._max_locations):
                gone_key, gone = self._states.popitem(last=False)
                self._locations -= len(gone.locations)
                self._unsee(gone_key)

    def _see(self, key: tuple[str, str, str, str], weight: int) -> None:
        """Let the state at `key` keep its objects: the list's earlier state lets go of its own."""
        lane = key[:3]
        earlier = self._seen.pop(lane, None)
        if earlier is not None:
            self._seen_bytes -= earlier[1]
            if earlier[0] != key and (state := self._states.get(earlier[0])) is not None:
                state.seen = None
        self._seen[lane] = (key, weight)
        self._seen_bytes += weight
        while self._seen_bytes > self._max_seen_bytes and self._seen:
            _, (dropped, dropped_weight) = self._seen.popitem(last=False)
            self._seen_bytes -= dropped_weight
            if (state := self._states.get(dropped)) is not None:
                state.seen = None

    def _unsee(self, key: tuple[str, str, str, str]) -> None:
        held = self._seen.get(key[:3])
        if held is not None and held[0] == key:
            del self._seen[key[:3]]
            self._seen_bytes -= held[1]

    @property
    def seen_bytes(self) -> int:
        """The stored size of the item objects the remembered states keep, in all."""
        return self._seen_bytes

    @property
    def locations(self) -> int:
        """Item references the remembered states hold, in all."""
        return self._locations


def _weight(items: RawItems) -> int:
    """The stored bytes of a group's items (an ItemGroup knows them without cutting its runs)."""
    return items.nbytes if type(items) is ItemGroup else sum(map(len, map(_DATA, items.values())))


class ItemCache:
    """Stored bytes of recent list items, by (thread, namespace), then (channel, version).

    A version's items never change once written, so a read can skip fetching the groups
    it holds (get_tuple sends their keys) and decode them from here. Bounded by bytes,
    least recently used thread first; a group it lacks is simply fetched.
    """

    def __init__(self, max_bytes: int = DEFAULT_ITEM_CACHE_BYTES, max_keys_per_read: int = 5000) -> None:
        self.max_bytes = max_bytes
        self.max_keys_per_read = max_keys_per_read
        self._threads: OrderedDict[tuple[str, str], OrderedDict[tuple[str, str], RawItems]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        # What `held` last handed out for a lane, with its groups' `lane_key_columns` once a
        # walk asked (see `held_for_walk`), until a group of the lane comes or goes: a
        # history walk of a long chat read 175 groups, and made their key columns, each time.
        self._held: dict[tuple[str, str], _Held] = {}

    def add_groups(self, thread_id: str, ns: str, groups: Mapping[tuple[str, str], RawItems]) -> None:
        """Hold these groups' items (by (channel, version)), as serialized, not as stored
        compressed (every caller has them so: a write keeps the form it compressed, a read
        inflates what it fetched), so a warm read never inflates them; one lock for them all."""
        if not groups or not self.max_bytes:
            return
        limit = self.max_bytes // 8
        ready = []
        for key, items in groups.items():
            if not items:
                continue
            size = _weight(items)
            if size <= limit:
                ready.append((key, items, size))
        if not ready:
            return
        with self._lock:
            lane = self._threads.setdefault((thread_id, ns), OrderedDict())
            self._threads.move_to_end((thread_id, ns))
            for key, items, size in ready:
                if key not in lane:
                    lane[key] = items
                    self._bytes += size
                    self._held.pop((thread_id, ns), None)
            while self._bytes > self.max_bytes and self._threads:
                oldest_thread, oldest_groups = next(iter(self._threads.items()))
                _, old = oldest_groups.popitem(last=False)
                self._bytes -= _weight(old)
                self._held.pop(oldest_thread, None)
                if not oldest_groups:
                    del self._threads[oldest_thread]

    def held(self, thread_id: str, ns: str) -> dict[tuple[str, str], RawItems]:
        """The newest groups held for one thread and namespace: (channel, version) -> items.
        The same dict while the lane's groups do not change: a caller reads it, never
        changes it."""
        held = self._snapshot(thread_id, ns)
        return held.groups if held is not None else {}

    def held_for_walk(self, thread_id: str, ns: str) -> tuple[dict[tuple[str, str], RawItems], list[str] | None]:
        """`held`, with the groups' `history.lane_key_columns` (made once per snapshot)."""
        held = self._snapshot(thread_id, ns)
        if held is None:
            return {}, None
        if not held.made:  # outside the lock: a few hundred keys
            held.columns, held.made = lane_key_columns((thread_id, ns), held.groups), True
        return held.groups, held.columns

    def _snapshot(self, thread_id: str, ns: str) -> _Held | None:
        with self._lock:
            groups = self._threads.get((thread_id, ns))
            if not groups:
                return None
            self._threads.move_to_end((thread_id, ns))
            held = self._held.get((thread_id, ns))
            if held is None:
                keys = list(groups)[-self.max_keys_per_read :]
                held = self._held[(thread_id, ns)] = _Held({key: groups[key] for key in keys})
            return held


class _Held:
    """A lane's groups as `ItemCache.held` hands them out, and their key columns once made
    (two threads that make them at once make the same)."""

    __slots__ = ("groups", "columns", "made")

    def __init__(self, groups: dict[tuple[str, str], RawItems]) -> None:
        self.groups = groups
        self.columns: list[str] | None = None
        self.made = False


class RecentDigests:
    """The SHA-256 of the last large payloads named, by object identity: a checkpoint's
    value that is the very bytes object its task's write offloaded (a node's `bytes`
    serialize as themselves) is not hashed again (1.6 ms for 2 MB). Only `bytes`, which
    cannot change; at most `max_bytes` of them are kept alive, newest first."""

    def __init__(self, max_bytes: int = 32 << 20, max_entries: int = 8) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._recent: OrderedDict[int, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def sha256(self, data: bytes) -> str:
        if type(data) is not bytes or len(data) > self.max_bytes:
            return sha256_hex(data)
        with self._lock:
            held = self._recent.get(id(data))
            if held is not None and held[0] is data:
                self._recent.move_to_end(id(data))
                return held[1]
        digest = sha256_hex(data)
        with self._lock:
            old = self._recent.pop(id(data), None)
            if old is not None:
                self._bytes -= len(old[0])
            self._recent[id(data)] = (data, digest)
            self._bytes += len(data)
            while self._bytes > self.max_bytes or len(self._recent) > self.max_entries:
                _, (gone, _) = self._recent.popitem(last=False)
                self._bytes -= len(gone)
        return digest


class RecordedEffects:
    """The keys of the effects this saver saw recorded (`once()`), the newest `max_keys`: one
    of them not found later means the server's history went back, and the call is refused
    rather than made again (HistoryRewoundError)."""

    def __init__(self, max_keys: int = 16384) -> None:
        self.max_keys = max_keys
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, key: Hashable) -> None:
        with self._lock:
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._keys


class PayloadCache:
    """A bounded LRU of verified payloads by SHA-256: reads of shared objects fetch once."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, sha256: str) -> bytes | None:
        with self._lock:
            data = self._items.get(sha256)
            if data is not None:
                self._items.move_to_end(sha256)
            return data

    def add(self, sha256: str, data: bytes) -> None:
        if len(data) > self.max_bytes // 4:  # one huge value must not flush everything else
            return
        with self._lock:
            if sha256 in self._items:
                return
            self._items[sha256] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old)


class RunRegistry:
    """The run id of each recent graph invocation, by the object that stands for it
    (`core.runs.invocation_of`), with its fencing token (core/fencing.py), the threads
    it took, and its run_log row on each thread as this saver last wrote it (`RunRow`: a
    write that would change nothing in it leaves the row out). The object is held, so its
    id is not reused while its entry lives; the oldest entries go past `max_runs` (an
    invocation idle that long and then resumed in the same call would start a new run id,
    take its thread again, and write its row again)."""

    def __init__(self, max_runs: int = 16384) -> None:
        self._runs: OrderedDict[int, RunEntry] = OrderedDict()
        self._max_runs = max_runs
        self._lock = threading.Lock()

    def entry(self, invocation: object, new: Callable[[], str]) -> RunEntry:
        """The invocation's entry; `new()` names its run the first time it is seen. A call
        looks it up once and reads its run id, token and rows from it (see `RunEntry`)."""
        key = id(invocation)
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry.invocation is invocation:
                self._runs.move_to_end(key)
                return entry
            entry = RunEntry(invocation, new(), new_writer(), set(), {})
            self._runs[key] = entry
            while len(self._runs) > self._max_runs:
                self._runs.popitem(last=False)
            return entry

    def run_id(self, invocation: object, new: Callable[[], str]) -> str:
        """The invocation's run id; `new()` names it the first time it is seen."""
        return self.entry(invocation, new).run_id

    def took(self, entry: RunEntry, thread_id: str) -> None:
        """The invocation's take of `thread_id` committed: its writes no longer take it."""
        with self._lock:
            entry.taken.add(thread_id)

    def wrote_row(self, entry: RunEntry, thread_id: str, *, status: str | None = None, agent: str | None = None) -> None:
        """A write of the invocation's run_log row on `thread_id` committed: it holds
        `status` (None: whatever it held) and `agent` among its agents (under the lock:
        parallel tasks of one invocation write their rows from several threads)."""
        with self._lock:
            known = entry.rows.get(thread_id, _NO_ROW)
            entry.rows[thread_id] = RunRow(status or known.status, known.agents | {agent} if agent is not None else known.agents)


class RunRow(NamedTuple):
    """What a run's row in run_log holds, as far as this saver wrote it."""

    status: str | None  # None: the row is there, its status not known here
    agents: frozenset[str]


_NO_ROW = RunRow(None, frozenset())


class RunEntry(NamedTuple):
    """One invocation's run: its id, its fencing token, the threads it took, and its rows
    in run_log by thread_id as this saver last wrote them. Read without the registry's lock
    (a lookup in a set or a dict is atomic); changed through the registry, under it. An
    entry evicted while a call holds it is still right for that call."""

    invocation: object
    run_id: str
    writer: str
    taken: set[str]
    rows: dict[str, RunRow]


class CheckpointNotes:
    """What the action log needs of recent checkpoints the saver stored or read: the step,
    and the node of each pending Send (a Send's task names only its index). Bounded; a
    checkpoint it lacks gets its step from the database and its Sends as `__send__`.

    LangGraph calls a checkpoint's put only after the previous one's is done, and its tasks
    may finish first: a Send's action row stored before its checkpoint's Sends were known is
    kept here (`later`) until the put notes them, and then named. Checking and keeping are
    one step under the lock, as are noting and taking, so each row is named exactly once:
    by its own put_writes, when the note came first, or by the put."""

    def __init__(self, max_checkpoints: int = 4096) -> None:
        self._notes: OrderedDict[tuple[str, str, str], tuple[int | None, tuple[str, ...]]] = OrderedDict()
        self._waiting: OrderedDict[tuple[str, str, str], list[SendToName]] = OrderedDict()
        self._max = max_checkpoints
        self._lock = threading.Lock()

    def note(
        self, thread_id: str, ns: str, checkpoint_id: str, step: int | None, sends: tuple[str, ...], *, take: bool = False
    ) -> list[SendToName]:
        """Note a checkpoint; with `take`, return (and forget) the rows waiting for its Sends."""
        key = (thread_id, ns, checkpoint_id)
        with self._lock:
            self._notes[key] = (step, sends)
            self._notes.move_to_end(key)
            while len(self._notes) > self._max:
                self._notes.popitem(last=False)
            return self._waiting.pop(key, []) if take else []

    def later(self, thread_id: str, ns: str, checkpoint_id: str, row: SendToName) -> tuple[str, ...] | None:
        """The checkpoint's Sends if noted by now; else keep the row for its put to name."""
        key = (thread_id, ns, checkpoint_id)
        with self._lock:
            note = self._notes.get(key)
            if note is not None:
                return note[1]
            self._waiting.setdefault(key, []).append(row)
            self._waiting.move_to_end(key)
            while len(self._waiting) > self._max:
                self._waiting.popitem(last=False)
            return None

    def get(self, thread_id: str, ns: str, checkpoint_id: str) -> tuple[int | None, tuple[str, ...]] | None:
        with self._lock:
            return self._notes.get((thread_id, ns, checkpoint_id))


# What `MessageMemory.prior` looks a message up in: the ids a checkpoint holds, the key its
# messages are kept under (None: none), a lane's writes (id to the first checkpoint and the
# message), and the checkpoint a lane's write must precede.
_Source = tuple[frozenset[str], "tuple[str, str, str] | None", Mapping[str, tuple[str, Any]], str]
_NOT_FOUND = object()  # `MessageMemory._look_up` found nothing (None could be a message)


class MessageMemory:
    """The messages the action log takes as already in a channel when a task writes them
    again (`core.actions.describe`), by id: those a recent checkpoint's message lists held
    (a checkpoint this saver stored or read: exact, as the task was handed them), and those a
    lane's pending writes held, each with the earliest checkpoint a write of it went to, in
    its latest written form: a message counts for the tasks of later checkpoints only (ids
    sort by time), so a task sending its writes again, or late, is not taken to re-write
    itself. The second covers the channels a checkpoint does not carry (a DeltaChannel's).

    Of the last `max_checkpoints` checkpoints it keeps the message ids (strings); of the
    last `max_objects`, the messages themselves (the graph's own objects, not copied), to
    tell a message written back changed from one written back as it was. Keeping a long
    chat's messages alive for every recent checkpoint costs the collector more than the
    log saves. A known message whose object it no longer has counts as written back as it
    was (`KNOWN`). Bounded; a message it does not know is taken as new, as if the saver had
    just started."""

    def __init__(self, max_checkpoints: int = 64, max_objects: int = 2, max_lanes: int = 256, max_ids_per_lane: int = 1 << 16) -> None:
        self._ids: OrderedDict[tuple[str, str, str], frozenset[str]] = OrderedDict()
        # The messages, or the function that finds them in the checkpoint's values: most
        # checkpoints' are never asked for (only a task that writes messages asks).
        self._held: OrderedDict[tuple[str, str, str], Mapping[str, Any] | Callable[[], Mapping[str, Any]]] = OrderedDict()
        self._written: OrderedDict[tuple[str, str], dict[str, tuple[str, Any]]] = OrderedDict()
        self._max_checkpoints = max_checkpoints
        self._max_objects = max_objects
        self._max_lanes = max_lanes
        self._max_ids = max_ids_per_lane
        self._lock = threading.Lock()

    def hold(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        ids: frozenset[str],
        messages: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    ) -> None:
        """The ids of the messages a checkpoint's channels hold, and the messages by id (or
        how to find them when asked)."""
        if not ids:
            return
        key = (thread_id, ns, checkpoint_id)
        with self._lock:
            self._keep(key, ids, messages)

    def also_held(self, thread_id: str, ns: str, checkpoint_id: str, messages: Mapping[str, Any]) -> None:
        """More messages a checkpoint holds: a DeltaChannel's, which its put and get_tuple
        do not carry, learned from the history LangGraph reads to rebuild it."""
        if not messages:
            return
        key = (thread_id, ns, checkpoint_id)
        with self._lock:
            self._keep(key, self._ids.get(key, frozenset()) | messages.keys(), {**(self._found(key) or {}), **messages})

    def _keep(self, key: tuple[str, str, str], ids: frozenset[str], messages: Mapping[str, Any] | Callable[[], Mapping[str, Any]]) -> None:
        self._ids[key] = ids
        self._ids.move_to_end(key)
        while len(self._ids) > self._max_checkpoints:
            self._ids.popitem(last=False)
        self._held[key] = messages
        self._held.move_to_end(key)
        while len(self._held) > self._max_objects:
            self._held.popitem(last=False)

    def held_ids(self, thread_id: str, ns: str, checkpoint_id: str) -> frozenset[str] | None:
        """The ids of the messages a checkpoint's channels hold, if known (one holding none is not)."""
        with self._lock:
            return self._ids.get((thread_id, ns, checkpoint_id))

    def held(self, thread_id: str, ns: str, checkpoint_id: str) -> Mapping[str, Any] | None:
        """The messages (by id) a checkpoint's channels hold, if they are still kept."""
        with self._lock:
            return self._found((thread_id, ns, checkpoint_id))

    def _found(self, key: tuple[str, str, str]) -> Mapping[str, Any] | None:
        """A checkpoint's messages, found now if they were not yet (under the lock)."""
        entry = self._held.get(key)
        if callable(entry):
            entry = self._held[key] = entry()
        return entry

    def wrote(self, thread_id: str, ns: str, checkpoint_id: str, messages: Mapping[str, Any]) -> None:
        """The messages (by id) a task's writes to a checkpoint held."""
        if not messages:
            return
        with self._lock:
            lane = self._written.setdefault((thread_id, ns), {})
            self._written.move_to_end((thread_id, ns))
            for message_id, message in messages.items():
                first = lane.get(message_id)
                lane[message_id] = (checkpoint_id if first is None else min(first[0], checkpoint_id), message)
            while len(lane) > self._max_ids:
                del lane[next(iter(lane))]
            while len(self._written) > self._max_lanes:
                self._written.popitem(last=False)

    def prior(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        ids: Iterable[str],
        parents: Mapping[str, str] | None = None,
        *,
        handed: bool = False,
    ) -> dict[str, Any]:
        """Those of `ids`, written by a task to the checkpoint, that were there before it,
        each with the message it was (`KNOWN` when that is no longer kept). In a subgraph,
        the messages its parent graphs' tasks were handed (`parents`: namespace to
        checkpoint id, LangGraph's `checkpoint_map`) count too: a subgraph's input is not
        its own work.

        With `handed` (the writes are a subgraph's input), a message known anywhere in the
        thread before the checkpoint counts as well. Under `durability="async"` a subgraph
        can start before its parent's checkpoint, or the writes of the parent task that
        made a message, reach the saver (LangGraph sends them from other threads); the
        message is then known only from the graph that made it (an agent subgraph's own
        lane), and without this the input row would count it as new, depending on which
        thread ran first."""
        with self._lock:
            sources = [self._source(thread_id, ns, checkpoint_id)]
            if parents:  # a subgraph's task: its parent graphs' checkpoints too
                sources += [self._source(thread_id, p_ns, p_id) for p_ns, p_id in parents.items() if p_ns != ns]
            out: dict[str, Any] = {}
            missing: list[str] = []
            for message_id in ids:
                found = self._look_up(message_id, sources)
                if found is not _NOT_FOUND:
                    out[message_id] = found
                else:
                    missing.append(message_id)
            if handed and missing:
                anywhere = self._thread_sources(thread_id, checkpoint_id)
                for message_id in missing:
                    found = self._look_up(message_id, anywhere)
                    if found is not _NOT_FOUND:
                        out[message_id] = found
            return out

    def _source(self, thread_id: str, ns: str, checkpoint_id: str) -> _Source:
        """What is known of a checkpoint's messages and its graph's writes (under the lock)."""
        key = (thread_id, ns, checkpoint_id)
        return self._ids.get(key, frozenset()), key, self._written.get((thread_id, ns), {}), checkpoint_id

    def _thread_sources(self, thread_id: str, before: str) -> list[_Source]:
        """Every checkpoint of the thread older than `before` whose messages are known, and
        every lane of its writes, each lane's entries counting from `before` (under the lock)."""
        held: list[_Source] = [(ids, key, {}, before) for key, ids in self._ids.items() if key[0] == thread_id and key[2] < before]
        lanes: list[_Source] = [
            (frozenset(), None, lane, before) for (lane_thread, _), lane in self._written.items() if lane_thread == thread_id
        ]
        return [*held, *lanes]

    def _look_up(self, message_id: str, sources: Sequence[_Source]) -> Any:
        """The message a source knows by `message_id`, first source first, or `_NOT_FOUND`
        (under the lock). A checkpoint's messages are found by id only for an id it holds:
        a task that writes only new messages (most steps of a chat) makes no map of the
        conversation (a put of a plain list of messages carries all of them)."""
        for known, key, lane, before in sources:
            entry = lane.get(message_id)
            if message_id in known:
                held = (self._found(key) if key is not None else None) or {}
                return held[message_id] if message_id in held else entry[1] if entry is not None else KNOWN
            if entry is not None and entry[0] < before:
                return entry[1]
        return _NOT_FOUND

    def forget_threads(self, thread_ids: Sequence[str]) -> None:
        """Drop what is known of deleted threads (their ids may come back as new)."""
        gone = set(thread_ids)
        with self._lock:
            for key in [k for k in self._ids if k[0] in gone]:
                del self._ids[key]
            for key in [k for k in self._held if k[0] in gone]:
                del self._held[key]
            for lane_key in [k for k in self._written if k[0] in gone]:
                del self._written[lane_key]
