"""What W4's sync threads cost the process beyond their work: context switches and system CPU.

    .venv/bin/python tools/thread_switches.py [--savers memory,official,ours] [--threads 50]
        [--workers 8] [--steps 20] [--rounds 2]

Runs the benchmark's W4 graph (benchmarks/concurrency.py: `threads` invocations of
`steps` super-steps, `workers` at a time in a thread pool, one saver instance with a pool
of `workers` connections) on each saver in turn, `rounds` times, and prints per step the
throughput, the process's user and system CPU, and its voluntary and involuntary context
switches (`getrusage`). Under the GIL, a thread that lets go of it for a moment (a libpq
call, a lock wait) while others wait hands it over, and takes it back through the kernel:
the voluntary switches count those hand-overs, and the system CPU is what they cost. The
`memory` saver gives LangGraph's own share.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import concurrency, graphs  # noqa: E402
from benchmarks.env import Bench, bench_env  # noqa: E402


def _usage() -> tuple[float, float, int, int]:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime, used.ru_stime, used.ru_nvcsw, used.ru_nivcsw


def measure(bench: Bench, kind: str, threads: int, workers: int, steps: int) -> dict[str, float]:
    """One round on `kind`: per step, the throughput, CPU and context switches."""
    with bench.saver(kind, pool_size=workers) as make:
        app = graphs.growing(make(), steps, concurrency.ITEM_BYTES)

        def run(count: int) -> None:
            tag = uuid.uuid4().hex[:8]
            config = lambda i: {"configurable": {"thread_id": f"switches-{tag}-{i}"}, "recursion_limit": steps + 10}  # noqa: E731
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda i: app.invoke({"items": [], "step": 0}, config(i), durability="sync"), range(count)))

        run(workers)  # warm-up: the pool's connections, the prepared statements
        before, started = _usage(), time.perf_counter()
        run(threads)
        seconds, after = time.perf_counter() - started, _usage()
    n = threads * steps
    return {
        "steps/s": n / seconds,
        "user ms": (after[0] - before[0]) * 1e3 / n,
        "system ms": (after[1] - before[1]) * 1e3 / n,
        "voluntary": (after[2] - before[2]) / n,
        "involuntary": (after[3] - before[3]) / n,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--savers", default="memory,official,ours")
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    kinds = [k for k in args.savers.split(",") if k]
    with bench_env() as bench:
        print("| saver | round | steps/s | user CPU, ms a step | system CPU, ms a step | voluntary switches a step | involuntary |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for round_ in range(1, args.rounds + 1):
            for kind in kinds:
                row: dict[str, Any] = measure(bench, kind, args.threads, args.workers, args.steps)
                print(
                    f"| {kind} | {round_} | {row['steps/s']:.0f} | {row['user ms']:.3f} | {row['system ms']:.3f} "
                    f"| {row['voluntary']:.1f} | {row['involuntary']:.1f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
