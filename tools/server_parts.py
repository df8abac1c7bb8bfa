"""What each part of a durable step costs the server: the writer lock, the guards, the indexes.

    .venv/bin/python tools/server_parts.py --workload chat [--style delta] [--rounds 20] [--churn 8]

Runs a workload of the benchmark's decomposition (benchmarks/decomposition.py) on our saver,
on a server started like the benchmark's, keeping every flight it sends; then replays the
whole run's flights, in order, on a new thread each time (only the thread id changes: every
row is new, as in the run), once per variant and round, the variants taken in turn so that
the machine's drift falls on each alike:

- as sent: each flight as the run sent it, the writer lock before its statement;
- without the writer lock (`pg_advisory_xact_lock`);
- without the lock and the fencing token's probe (`fence` NULL, as `fencing="allow"`);
- without the lock and the probe of the checkpoint a statement builds on (the put's
  parent, the writes' checkpoint: `check_parent` / `check_checkpoint` NULL, as when the
  saver has not seen it committed);
- without the lock and either probe.
The guards are taken away through their parameters, as the saver itself leaves them out,
so each variant sends the same statements with a probe that runs or does not. Then the
secondary indexes the official saver has no counterpart of (`checkpoints_root_step_idx`,
`checkpoints_run_step_idx`, `checkpoint_writes_run_idx`, `checkpoint_writes_agent_idx`)
are dropped from the scratch database and every variant is replayed again.

Per variant it prints the server's time a step (`pg_stat_statements`, execution and
planning, the statistics reset before each replay) split by kind of statement (`KINDS`),
and the WAL a step. Last, the official saver with the same workload in a `DeltaChannel`:
its run's statements recorded (cursor `execute` and `executemany`) and replayed the same
way, `--rounds` times on new threads. A replay sends one statement after another from one
connection, with no graph between them: its figures are the statements' own cost, below
what they cost inside a run (where the client's CPU work competes with the server's for
this VM's two cores); compare the variants and the two savers with each other, and a run's
totals with `tools/step_cost.py`. Replayed alike, a step's server time still moves by a
fifth to a third from one run of this tool to the next on this VM.

`--churn MB` writes a byte in every cache line of an MB-sized buffer before each of our
flights and before each of the official saver's puts and put_writes (two a step each), as
a graph's own work between a run's statements does: the server then runs each statement
on caches the client has churned. Both savers' statements get slower, ours (which touch
more: the lock, two probes, four more indexes) by more once the churn is large (chat in a
`DeltaChannel`, us a step, ours as sent against the official saver, and ours without the
four indexes, the lock and the probes: 0 MB 96.6 / 93.9 / 63.9, 8 MB 115.7 / 116.7 / 84.8,
24 MB 182.7 / 154.1 / 130.9).
"""

from __future__ import annotations

import argparse
import functools
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import decomposition  # noqa: E402
from benchmarks.env import OURS_SCHEMA, Bench, bench_env  # noqa: E402

from langgraph_pg_durable import wire  # noqa: E402

Flight = list[tuple[str, Mapping[str, Any]]]
EXTRA_INDEXES = ("checkpoints_root_step_idx", "checkpoints_run_step_idx", "checkpoint_writes_run_idx", "checkpoint_writes_agent_idx")
LOCK = "SELECT pg_advisory_xact_lock("
# A step's server time by kind of statement: the checkpoint row, the values a put stores
# beside it (ours: channel_values rows in the put's statement; official: checkpoint_blobs
# rows, its own statements), the task's writes, the writer lock, the rest (reads, the take).
KINDS = ("put", "put+values", "put_writes", "lock", "other")
STATEMENT_TIMES = """
SELECT query, calls, total_exec_time + total_plan_time FROM pg_stat_statements WHERE dbid = %s AND calls > 0"""


def recorded_run(bench: Bench, workload: str, delta: bool, steps: int) -> list[Flight]:
    """Every flight our saver sent in a run of `workload` on a new thread."""
    sent: list[Flight] = []
    real = wire.exchange

    def keep(conn: Any, statements: Sequence[tuple[str, Mapping[str, Any]]], timeout: float | None = None) -> Any:
        sent.append(list(statements))
        return (yield from real(conn, statements, timeout))

    build = decomposition.WORKLOADS[workload]
    wire.exchange = keep  # the saver's shells call it through the module
    try:
        with bench.saver("ours") as make:
            app = build.build(make(), steps, delta)
            config = {"configurable": {"thread_id": f"parts-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
            app.invoke(build.inputs, config, durability="sync")
    finally:
        wire.exchange = real
    # Not the run's own: a pool connection opened during the run is warmed up by running
    # each read it will serve six times in one flight (DurablePostgresSaver._warm_up).
    return [flight for flight in sent if len(flight) <= 3]


def variants() -> dict[str, Callable[[Flight, str], Flight]]:
    """Each variant as a change of a flight (and the new thread id it is sent for)."""

    def made(lock: bool, fence: bool, probe: bool) -> Callable[[Flight, str], Flight]:
        def change(flight: Flight, thread_id: str) -> Flight:
            out: Flight = []
            for sql, params in flight:
                if sql.startswith(LOCK) and not lock:
                    continue
                changed = {**params, "thread_id": thread_id} if "thread_id" in params else dict(params)
                probed = probe_of(sql)  # None: not a write (a read, the take of the thread)
                if probed is not None and not fence:
                    changed["fence"] = None
                if probed is not None and not probe:
                    changed[probed] = None
                out.append((sql, changed))
            return out

        return change

    return {
        "as sent": made(True, True, True),
        "without the lock": made(False, True, True),
        "  and without the fence probe": made(False, False, True),
        "  and without the checkpoint probe": made(False, True, False),
        "  and without either probe": made(False, False, False),
    }


def kind_of(sql: str) -> str:
    """Which part of a step a statement is."""
    if sql.startswith(LOCK):
        return "lock"
    if "INSERT INTO" in sql and ".checkpoint_writes(" in sql:
        return "put_writes"
    if "INSERT INTO" in sql and ".checkpoints(" in sql:
        return "put+values" if "stored_values AS" in sql else "put"
    return "other"


def probe_of(sql: str) -> str | None:
    """The parameter that turns a write's probe of the checkpoint it builds on off."""
    return {"put": "check_parent", "put+values": "check_parent", "put_writes": "check_checkpoint"}.get(kind_of(sql))


Replay = Callable[[], tuple[dict[str, float], int]]  # one replay: server seconds by kind, WAL bytes


def timed(
    meter: decomposition.ServerMeter, dsn: str, kind: Callable[[str], str], send: Callable[[str], None]
) -> tuple[dict[str, float], int]:
    """`send(thread_id)` for a new thread: the server's seconds per kind of statement
    (`kind` of its text), and the WAL."""
    started = meter.start(dsn)
    send(f"replay-{uuid.uuid4().hex[:12]}")
    _, wal = meter.stop(started)
    seconds: dict[str, float] = {}
    for text, _, ms in meter.conn.execute(STATEMENT_TIMES, (started.dbid,)).fetchall():
        seconds[kind(text)] = seconds.get(kind(text), 0.0) + float(ms) / 1e3
    return seconds, wal


def churner(megabytes: int) -> Callable[[], None]:
    """What `--churn` does before a flight: write a byte in every 64-byte cache line of a
    buffer of `megabytes` (nothing for 0)."""
    buffer = bytearray(megabytes << 20)
    zeros = bytes(len(buffer[::64]))

    def churn() -> None:
        if buffer:
            buffer[::64] = zeros

    return churn


def _idle() -> None:
    """No churn between flights."""


def replay(
    conn: psycopg.Connection,
    meter: decomposition.ServerMeter,
    dsn: str,
    flights: list[Flight],
    change: Callable[[Flight, str], Flight],
    churn: Callable[[], None] = _idle,
) -> tuple[dict[str, float], int]:
    """Our run's flights sent again on a new thread, each changed by `change`, `churn`
    before each."""

    def send(thread_id: str) -> None:
        for flight in flights:
            churn()
            conn.wait(wire.exchange(conn, change(flight, thread_id), 30.0))

    return timed(meter, dsn, kind_of, send)


def measure(cases: Mapping[str, Replay], steps: int, rounds: int) -> Iterator[str]:
    """A line per case: the server's microseconds a step by kind, and the WAL a step. Each
    case is replayed twice first (every statement prepared, and past its custom plans),
    then `rounds` times, the cases in turn."""
    for again in cases.values():
        for _ in range(2):
            again()
    spent: dict[str, dict[str, float]] = {name: {} for name in cases}
    wal: dict[str, int] = dict.fromkeys(cases, 0)
    for _ in range(rounds):
        for name, again in cases.items():
            seconds, bytes_ = again()
            for kind, s in seconds.items():
                spent[name][kind] = spent[name].get(kind, 0.0) + s
            wal[name] += bytes_
    per_step = 1e6 / (rounds * steps)
    for name in cases:
        by_kind = spent[name]
        total = sum(by_kind.values()) * per_step
        parts = ", ".join(f"{kind} {by_kind.get(kind, 0.0) * per_step:5.1f}" for kind in KINDS)
        yield f"    {total:6.1f} us a step ({parts}), WAL {wal[name] / (rounds * steps):6.0f} B  {name}"


Call = tuple[str, str, Any]  # (cursor method, query, parameters) as the official saver made it


def recorded_official(bench: Bench, meter: decomposition.ServerMeter, workload: str, steps: int) -> tuple[list[Call], int]:
    """Every statement the official saver executed in a run of `workload` in a DeltaChannel,
    and the run's WAL."""
    calls: list[Call] = []
    originals = {name: getattr(psycopg.Cursor, name) for name in ("execute", "executemany")}

    def keeping(name: str) -> Callable[..., Any]:
        def call(self: psycopg.Cursor, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, query, list(params) if name == "executemany" else params))
            return originals[name](self, query, calls[-1][2], *args, **kwargs)

        return call

    with bench.saver("official") as make:
        build = decomposition.WORKLOADS[workload]
        app = build.build(make(), steps, True)
        config = {"configurable": {"thread_id": f"parts-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
        started = meter.start(bench.dsn["official"])
        for name in originals:
            setattr(psycopg.Cursor, name, keeping(name))
        try:
            app.invoke(build.inputs, config, durability="sync")
        finally:
            for name, original in originals.items():
                setattr(psycopg.Cursor, name, original)
        _, wal = meter.stop(started)
    return calls, wal


def _on_thread(params: Any, thread_id: str) -> Any:
    """The official saver's parameters (a tuple, the thread id first) for another thread."""
    return (thread_id, *params[1:]) if isinstance(params, (tuple, list)) and params else params


def official_kind_of(sql: str) -> str:
    """Which part of a step one of the official saver's statements is (see KINDS)."""
    for table, kind in (("checkpoint_writes", "put_writes"), ("checkpoint_blobs", "put+values"), ("checkpoints", "put")):
        if f"INTO {table}" in sql:
            return kind
    return "other"


def replay_official(
    conn: psycopg.Connection, meter: decomposition.ServerMeter, dsn: str, calls: list[Call], churn: Callable[[], None] = _idle
) -> tuple[dict[str, float], int]:
    """The official run's statements sent again on a new thread, as its saver sends them;
    `churn` before each put (before its values' statement when it has one) and put_writes."""

    def send(thread_id: str) -> None:
        with conn.cursor(binary=True) as cur:
            previous = "other"
            for method, query, params in calls:
                kind = official_kind_of(query)
                if not (kind == "put" and previous == "put+values"):  # (a put's values, then its row)
                    churn()
                previous = kind
                if method == "executemany":
                    cur.executemany(query, [_on_thread(p, thread_id) for p in params])
                else:
                    cur.execute(query, _on_thread(params, thread_id))

    return timed(meter, dsn, official_kind_of, send)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--style", choices=decomposition.STYLES, default="delta")
    parser.add_argument("--workload", choices=sorted(decomposition.WORKLOADS), default="chat")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--churn", type=int, default=0, metavar="MB", help="churn MB of memory before each flight (see above)")
    args = parser.parse_args()
    churn = churner(args.churn)
    with bench_env() as bench:
        meter = decomposition.ServerMeter(bench.server.dsn)
        try:
            flights = recorded_run(bench, args.workload, args.style == "delta", args.steps)
            bench.truncate("ours")
            dsn = bench.dsn["ours"]
            churned = f", {args.churn} MB churned before each flight" if args.churn else ""
            title = decomposition.WORKLOADS[args.workload].title
            print(f"ours, {args.style}, {title}: {args.steps} steps replayed {args.rounds} times{churned}")
            with psycopg.connect(dsn, autocommit=True, prepare_threshold=5) as conn:
                cases = {name: functools.partial(replay, conn, meter, dsn, flights, change, churn) for name, change in variants().items()}
                print("  with every index:")
                for line in measure(cases, args.steps, args.rounds):
                    print(line)
                for name in EXTRA_INDEXES:
                    conn.execute(f"DROP INDEX IF EXISTS {OURS_SCHEMA}.{name}")
                print("  without " + ", ".join(EXTRA_INDEXES) + ":")
                for line in measure(cases, args.steps, args.rounds):
                    print(line)
            calls, wal = recorded_official(bench, meter, args.workload, args.steps)
            print(f"official, delta: {args.steps} steps (WAL {wal / args.steps:,.0f} B a step in the run)")
            official_dsn = bench.dsn["official"]
            with psycopg.connect(official_dsn, autocommit=True, prepare_threshold=0) as conn:
                for line in measure(
                    {"replayed": functools.partial(replay_official, conn, meter, official_dsn, calls, churn)}, args.steps, args.rounds
                ):
                    print(line)
        finally:
            meter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
