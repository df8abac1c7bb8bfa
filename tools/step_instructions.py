"""The instructions one durable step costs the client, counted exactly (valgrind's callgrind).

    .venv/bin/python tools/step_instructions.py --saver ours --style delta --workload chat
        [--steps 100] [--rounds 2] [--without log,fence,lock,check]

Runs a workload of the benchmark's decomposition (benchmarks/decomposition.py) once, on a
server started like the benchmark's, recording the saver's put and put_writes calls; then
replays those calls `--rounds` times, each time on a new thread, and counts the user-space
instructions of the replay alone (callgrind's instrumentation is on only then). The count
is the same from run to run to within half a percent, where this VM's CPU time varies by a
fifth: a change worth 2 % of a step shows here and nowhere else. It leaves out the kernel's
work (the socket I/O, about the same for both savers) and LangGraph's own.

`--without` takes parts away, to see what each costs:
- ours: `log` (action_log=False), `fence` (fencing="allow"), `lock` (no writer-lock
  statement), `check` (no read-back check of the types a value serializes to);
- official: `io` (the statements are not sent: what is left is its serialization and its
  own code, the part a saver cannot do without).
Each is a measurement: the saver is not safe to run that way.

`--lean` (ours) replays the calls through a bare write path instead of the saver's: the
same statements (the writer lock, then the put and the packed put_writes with the action
row), the saver's codec with its read-back type check, its metadata, the action row by
`actions.describe`; none of the saver's bookkeeping (what it remembers of lists,
checkpoints, messages and runs; plans, retries, the pool). With `--style plain` it stores
each list in the list layout as any design of ours must when LangGraph hands the saver the
whole list: a write's items in rows of their own (serialized, digested, compressed), and at
the put the identity pass over the list with the check that no item changed in place, the
appended items found among the write's, a delta row (a snapshot every `snapshot_every`).
What a design of ours with every part on could cost: the bar for the bookkeeping, not a
saver (it keeps no step, run or fencing token of its own, and nothing it writes is read
back here). With `--without log,check,lock` (any of them) the bare path leaves those parts
out too: what each costs at its leanest, against what it costs in the saver.

Needs valgrind (`apt-get install valgrind`); the replay runs ~50 times slower under it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.instructions import counted, handshake  # noqa: E402

PARTS = {"ours": ("log", "fence", "lock", "check"), "official": ("io",)}


def _take_away(saver: Any, kind: str, without: set[str]) -> None:
    """Turn off the parts named in `without` (see the module's docstring)."""
    if kind == "official":
        if "io" in without:
            from psycopg.types.json import Jsonb

            class Unsent:
                """A cursor that dumps its parameters' JSON, as psycopg would, and sends nothing."""

                def execute(self, query: Any, params: Any = None) -> None:
                    for param in params or ():
                        if isinstance(param, Jsonb):
                            json.dumps(param.obj)

                def executemany(self, query: Any, params_seq: Any) -> None:
                    for params in params_seq:
                        self.execute(query, params)

            saver._cursor = lambda *args, **kwargs: contextlib.nullcontext(Unsent())
        return
    from langgraph_pg_durable import ops
    from langgraph_pg_durable.core import safe_serde

    if "fence" in without:
        saver.fencing = "allow"
    if "lock" in without:
        ops.SaverCore._preamble = lambda self, query: list(query.before)  # type: ignore[method-assign]
    if "check" in without:
        safe_serde.refused_names = lambda data, policy: []  # type: ignore[assignment]


def _lean(saver: Any, *, plain_lists: bool = False, without: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The bare put and put_writes of `--lean` (see the module), on one connection of the
    saver's pool. With `plain_lists` (`--style plain`), each list value is stored in the
    list layout as any design of ours must store it when LangGraph hands the saver the whole
    list; else every value is stored whole, as a put of a `DeltaChannel` graph's are.
    `without`: `lock` sends no writer-lock statement, `log` neither describes the task nor
    sends the action row (the statement's form without it); `check` is `_take_away`'s."""
    import base64
    import hashlib
    import operator

    import ormsgpack
    import orjson

    from langgraph_pg_durable import wire
    from langgraph_pg_durable.core import actions
    from langgraph_pg_durable.core import lists as layout
    from langgraph_pg_durable.core.arrays import ByteaArray, TextArray
    from langgraph_pg_durable.core.codec import digest, dump_json
    from langgraph_pg_durable.core.encode import PACKED_WRITES_TYPE, _item_params
    from langgraph_pg_durable.core.metadata import dump_metadata, merge_metadata
    from langgraph_pg_durable.core.runs import new_run_id
    from langgraph_pg_durable.sql.schema import thread_lock_keys

    conn = saver.conn.getconn()
    statements, codec, run_id, placement = saver.sql, saver.codec, new_run_id(), saver.placement
    every = saver.lists.snapshot_every
    # Per (thread, channel): the list's last value, its items' marks, where each item is
    # stored, and the delta chain since its last snapshot. Per thread: the objects its
    # pending writes stored, by id, with their mark and location. (Empty without `plain_lists`.)
    lists: dict[tuple[str, str], tuple[list[Any], list[Any] | None, list[tuple[str, int]], tuple[str, ...], str]] = {}
    written: dict[str, dict[int, tuple[Any, Any, tuple[str, int]]]] = {}

    def flight(thread_id: str, sql: str, params: dict[str, Any]) -> None:
        sent: list[tuple[str, dict[str, Any]]] = [(sql, params)]
        if "lock" not in without:
            sent.insert(0, (statements.lock_thread, {"lock_key": thread_lock_keys(saver.schema, [thread_id])[0]}))
        conn.wait(wire.exchange(conn, sent))

    def list_row(
        thread_id: str, channel: str, version: str, value: list[Any], items: list[Any], used: set[tuple[str, str]]
    ) -> tuple[bytes, str, str]:
        last = lists.get((thread_id, channel))
        start = 0
        if last is not None:
            before, marks = last[0], last[1]
            if (
                len(value) >= len(before)
                and all(map(operator.is_, value, before))
                and (marks is None or layout._all_unchanged(value[: len(before)], marks))
            ):
                start = len(before)
        offers = written.get(thread_id, {})
        own: list[tuple[str, int]] = []
        for i in range(start, len(value)):
            item = value[i]
            offer = offers.get(id(item))
            if offer is not None and offer[0] is item and layout._unchanged(item, offer[1]):
                own.append(offer[2])
                used.add((channel, offer[2][0]))
                continue
            type_, data = codec.dump(item, channel=channel, where="put")
            row = layout._item_row(channel, version, len(items), type_, data, placement, where="put", number=i, uploads=[], call="put")
            own.append((version, row.idx))
            items.append(row)
        tail = value[start:]
        if (last is None or not start or last[1] is None) and set(map(type, tail)) <= layout._FROZEN:
            marks = None  # every item of a frozen type: nothing to check in place
        elif last is not None and start:
            marks = [*(last[1] or [None] * start)[:start], *map(layout.item_mark, tail)]
        else:
            marks = list(map(layout.item_mark, value))
        locations = [*last[2][:start], *own] if last is not None and start else own
        chain = (*last[3], last[4]) if last is not None and start and len(last[3]) + 1 < every else ()
        segments = layout._segments(own if chain else locations)
        item_versions = tuple(dict.fromkeys(s[0] for s in segments))
        lists[(thread_id, channel)] = (value, marks, locations, chain, version)
        sep = layout.CHAIN_SEPARATOR
        return layout.list_body(segments, item_versions), sep.join(chain), sep.join(item_versions)

    def put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        c = config["configurable"]
        thread_id, ns, parent = c["thread_id"], c.get("checkpoint_ns", ""), c.get("checkpoint_id")
        values = checkpoint["channel_values"]
        items: list[Any] = []
        used: set[tuple[str, str]] = set()
        channels, versions, types, blobs, chains, item_versions = [], [], [], [], [], []
        for ch, v in new_versions.items():
            if ch not in values:
                continue
            value = values[ch]
            if plain_lists and type(value) is list:
                blob, chain, held = list_row(thread_id, ch, v, value, items, used)
                type_ = layout.LIST_TYPE
            else:
                (type_, blob), chain, held = codec.dump(value, channel=ch, where="put"), None, None
            channels.append(ch)
            versions.append(v)
            types.append(type_)
            blobs.append(blob)
            chains.append(chain)
            item_versions.append(held)
        written.pop(thread_id, None)
        merged = merge_metadata(config, metadata)
        metadata_json, exact = dump_metadata(codec, merged)
        held_versions = [(ch, checkpoint["channel_versions"][ch]) for ch in values]
        params = {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": parent,
            "run_id": run_id,
            "step": merged.get("step"),
            "source": merged.get("source"),
            "checkpoint": dump_json({k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}),
            "value_channels": TextArray(ch for ch, _ in held_versions),
            "value_versions": TextArray(v for _, v in held_versions),
            "metadata": metadata_json,
            "metadata_exact": exact,
            "check_parent": parent,
            "fence": None,
            "base_channels": TextArray(()),
            "base_versions": TextArray(()),
            "channels": TextArray(channels),
            "versions": TextArray(versions),
            "types": TextArray(types),
            "values": ByteaArray(blobs),
        }
        if plain_lists:  # the full statement's list and object parameters (`put_plain` has none)
            params.update(
                {
                    "base_item_channels": TextArray(ch for ch, _ in used),
                    "base_item_versions": TextArray(key for _, key in used),
                    "object_keys": None,
                    "object_shas": None,
                    "object_sizes": None,
                    "list_chains": TextArray(chains),
                    "item_versions": TextArray(item_versions),
                    **_item_params(items),
                }
            )
        # (No carried-over value checked one by one: the plain statement's form without them.)
        flight(thread_id, statements.put[(not plain_lists, False, bool(channels), plain_lists)], params)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        c = config["configurable"]
        thread_id, ns, checkpoint_id = c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"]
        rows: list[list[Any]] = []
        items: list[Any] = []
        item_key = None
        for i, (ch, v) in enumerate(writes):
            if (thread_id, ch) not in lists:
                rows.append([i, ch, *codec.dump(v, channel=ch, where="put_writes")])
                continue
            values = v if type(v) is list else [v]
            dumped = [codec.dump(item, channel=ch, where="put_writes") for item in values]
            digests = [digest(t, d) for t, d in dumped]
            h = hashlib.blake2b(f"{checkpoint_id}\x00{task_id}\x00{i}".encode(), digest_size=9)
            for d in digests:
                h.update(d)
            item_key = layout.WRITE_KEY_PREFIX + base64.urlsafe_b64encode(h.digest()).decode()
            offers = written.setdefault(thread_id, {})
            for idx, (item, (t, d)) in enumerate(zip(values, dumped)):
                items.append(
                    layout._item_row(ch, item_key, idx, t, d, placement, where="put_writes", number=idx, uploads=[], call="put_writes")
                )
                offers[id(item)] = (item, layout.item_mark(item), (item_key, idx))
            body = orjson.dumps({"k": item_key, "n": len(values), "list": type(v) is list})
            rows.append([i, ch, layout.WRITE_ITEMS_TYPE, body])
        params = {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path,
            "packed_type": PACKED_WRITES_TYPE,
            "check_checkpoint": checkpoint_id,
            "packed_idx": rows[-1][0],
            "packed_channel": rows[0][1],
            "packed_value": ormsgpack.packb(rows),
            "packed_item_version": item_key,
            "fence": None,
            **(_item_params(items) if items else {}),
        }
        log = "log" not in without
        if log:
            action = actions.describe(writes, checkpoint_ns=ns, task_id=task_id, task_path=task_path)
            params.update(
                {
                    "run_id": run_id,
                    "action_step": None,
                    "action_idx": action.idx,
                    "agent": action.agent,
                    "action_type": action.action_type,
                    "payload": action.payload,
                    "run_status": None,
                }
            )
        flight(thread_id, statements.put_packed_writes[(bool(items), log, False)], params)

    return {"put": put, "put_writes": put_writes}


def child(args: argparse.Namespace) -> None:
    """Record the workload's calls, take the parts away, replay the calls once uncounted, then
    `rounds` times between two handshakes."""
    from benchmarks import decomposition
    from benchmarks.env import OURS_NO_LOG, bench_env

    directory = Path(args.handshake)
    without = set(filter(None, args.without.split(",")))
    kind = OURS_NO_LOG if args.saver == "ours" and "log" in without else args.saver
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    lock = threading.Lock()
    with bench_env() as bench:
        with decomposition.ServerMeter(bench.server.dsn) as meter:
            with bench.saver(kind) as make:
                saver = make()
                build = decomposition.WORKLOADS[args.workload]
                decomposition.run_once(bench, meter, saver, kind, build, args.style == "delta", decomposition.WARMUP_STEPS)
                original = {name: getattr(saver, name) for name in ("put", "put_writes")}

                def recording(name: str) -> Any:
                    # (wraps: LangGraph passes put_writes a task_path only if its signature names one.)
                    @functools.wraps(original[name])
                    def call(*a: Any, **k: Any) -> Any:
                        with lock:
                            calls.append((name, a, k))
                        return original[name](*a, **k)

                    return call

                for name in original:
                    setattr(saver, name, recording(name))
                app = build.build(saver, args.steps, args.style == "delta")
                app.invoke(build.inputs, {"configurable": {"thread_id": "recorded"}, "recursion_limit": args.steps + 10}, durability="sync")
                for name in original:
                    setattr(saver, name, original[name])
                _take_away(saver, args.saver, without)
                if args.lean:
                    original.update(_lean(saver, plain_lists=args.style == "plain", without=frozenset(without)))

                def replay() -> None:
                    thread_id = f"replay-{uuid.uuid4().hex[:8]}"
                    for name, a, k in calls:
                        config = {**a[0], "configurable": {**a[0]["configurable"], "thread_id": thread_id}}
                        original[name](config, *a[1:], **k)

                replay()  # the caches and prepared statements of a saver that has run a while
                handshake(directory, "start0")
                for _ in range(args.rounds):
                    replay()
                handshake(directory, "stop0")


def measure(args: argparse.Namespace) -> int:
    """Instructions per step of the replay, run under callgrind in a child process."""
    with tempfile.TemporaryDirectory(prefix="lgpd-instructions-") as tmp:
        command = [
            sys.executable,
            __file__,
            "--child",
            "--handshake",
            tmp,
            *(f"--{k}={v}" for k, v in (("saver", args.saver), ("style", args.style), ("workload", args.workload))),
            f"--steps={args.steps}",
            f"--rounds={args.rounds}",
            f"--without={args.without}",
            *(["--lean"] if args.lean else []),
        ]
        (total,) = counted(command, Path(tmp), 1, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return total // (args.steps * args.rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saver", choices=("ours", "official"), default="ours")
    parser.add_argument("--style", choices=("plain", "delta"), default="delta")
    parser.add_argument("--workload", choices=("words", "random", "chat"), default="chat")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--without", default="", help="comma-separated parts to take away (see above)")
    parser.add_argument("--lean", action="store_true", help="ours through a bare write path (see above)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--handshake", help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = set(filter(None, args.without.split(","))) - set(PARTS[args.saver])
    if unknown:
        parser.error(f"--without {sorted(unknown)[0]!r}: the {args.saver} saver's parts are {', '.join(PARTS[args.saver])}")
    if args.lean and (args.saver != "ours" or "fence" in args.without.split(",")):
        parser.error("--lean measures ours (its bare write path has no fencing token to take away)")
    if args.child:
        child(args)
        return 0
    per_step = measure(args)
    label = f"{args.saver}, {args.style}, {args.workload}" + (f", without {args.without}" if args.without else "")
    label += ", lean write path" if args.lean else ""
    print(f"{label}: {per_step:,} instructions a step ({args.steps} steps x {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
