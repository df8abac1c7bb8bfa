"""What a chat turn costs when each turn is an `invoke` of its own, on both savers.

    .venv/bin/python tools/turn_cost.py [--turns 100] [--rounds 2]

The benchmark's decomposition runs one long invoke; a chat application invokes its graph
once per user message, on the same thread: the saver reads the thread, stores the input,
then each step. This runs W3's conversation graph (benchmarks/graphs.conversation: the
input and nine passes of a node, ten checkpoints a turn) on a server started like the
benchmark's, ten turns untimed, then `--turns` turns measured, the official saver and ours
in turn, `--rounds` times, and prints per turn:
- the server's time (`pg_stat_statements`, execution and planning) and the process CPU;
- the WAL;
- the statements that took the most server time, with their calls and planning time a
  turn (a statement planned at every call shows its planning near its total).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import decomposition, graphs  # noqa: E402
from benchmarks.env import Bench, bench_env  # noqa: E402

WARM_TURNS = 10
STATEMENTS = """
SELECT calls, total_exec_time + total_plan_time, total_plan_time, left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
FROM pg_stat_statements WHERE dbid = %s ORDER BY 2 DESC LIMIT 8"""


def turns(bench: Bench, meter: decomposition.ServerMeter, kind: str, count: int) -> list[str]:
    """`count` measured turns of the conversation on a new thread of `kind`'s saver."""
    with bench.saver(kind) as make:
        app = graphs.conversation(make())
        config = {"configurable": {"thread_id": f"turns-{kind}-{uuid.uuid4().hex[:8]}"}}

        def turn(n: int) -> None:
            app.invoke({"messages": [f"user turn {n}"], "hops": 0}, config, durability="sync")

        for n in range(WARM_TURNS):
            turn(n)
        started = meter.start(bench.dsn[kind])
        cpu = time.process_time()
        for n in range(count):
            turn(WARM_TURNS + n)
        cpu = time.process_time() - cpu
        server, wal = meter.stop(started)
        rows = meter.conn.execute(STATEMENTS, (started.dbid,)).fetchall()
    per_turn = f"server {(server or 0.0) / count * 1e3:.3f} ms a turn, process CPU {cpu / count * 1e3:.2f} ms, WAL {wal / count:,.0f} B"
    lines = [f"{kind}: {per_turn}"]
    for calls, ms, plan_ms, text in rows:
        lines.append(
            f"    {ms / count * 1e3:7.1f} us a turn (planning {plan_ms / count * 1e3:5.1f}), {calls / count:4.1f} calls a turn  {text}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with bench_env() as bench:
        with decomposition.ServerMeter(bench.server.dsn) as meter:
            if not meter.statements:
                raise SystemExit("the server has no pg_stat_statements: no server time to show")
            for _ in range(args.rounds):
                for kind in ("official", "ours"):
                    print("\n".join(turns(bench, meter, kind, args.turns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
