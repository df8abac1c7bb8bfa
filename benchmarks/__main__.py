"""`python -m benchmarks [--quick] [--out DIR]`: run every workload on every saver, then report."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

from . import concurrency, decomposition, history, instructions, long_thread, per_step, report, round_trips
from . import scale as scale_run  # `scale` names the run's sizes below
from .env import bench_env

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Scale:
    w1_steps: int
    w1_reps: int
    w2_steps: int
    w2_reps: int
    w3_turns: int  # 10 checkpoints a turn
    w3_reps: dict[str, int]
    w4_threads: int
    w4_steps: int
    w4_workers: int
    w4_reps: int
    w5_steps: int
    w6_steps: int
    w6_sample_every: int
    w6_reps: dict[str, int]
    scale_sizes: tuple[int, ...]  # list lengths, in ascending order
    scale_steps: int  # appends after the seeding put
    scale_reads: int  # cold get_tuples
    scale_turns: int  # appends by an invoke each
    cost_steps: int
    cost_reps: int


FULL = Scale(
    w1_steps=200,
    w1_reps=5,
    w2_steps=100,
    w2_reps=3,
    w3_turns=100,
    w3_reps={
        "get_state": 200,
        "full_history": 7,
        "first_10_limit": 50,
        "first_10_break": 7,
        "filter_1pct": 30,
        "list_full": 7,
        "list_first_10_break": 15,
        "get_state_interleaved": 200,
        "cold_get_state": 30,
        "cold_first_10_limit": 30,
        "cold_filter_1pct": 30,
    },
    w4_threads=50,
    w4_steps=20,
    w4_workers=8,
    w4_reps=3,
    w5_steps=20,
    w6_steps=1000,
    w6_sample_every=50,
    w6_reps={"get_state": 30, "full_history": 3},
    scale_sizes=(1_000, 10_000, 100_000),
    scale_steps=20,
    scale_reads=5,
    scale_turns=5,
    cost_steps=200,
    cost_reps=5,  # client CPU is the noisiest measure: a saver's varies ~30 % from run to run here
)
QUICK = Scale(
    w1_steps=20,
    w1_reps=1,
    w2_steps=5,
    w2_reps=1,
    w3_turns=10,
    w3_reps={
        "get_state": 2,
        "full_history": 1,
        "first_10_limit": 2,
        "first_10_break": 1,
        "filter_1pct": 1,
        "list_full": 1,
        "list_first_10_break": 1,
        "get_state_interleaved": 2,
        "cold_get_state": 2,
        "cold_first_10_limit": 1,
        "cold_filter_1pct": 1,
    },
    w4_threads=8,
    w4_steps=5,
    w4_workers=8,
    w4_reps=1,
    w5_steps=6,
    w6_steps=30,
    w6_sample_every=10,
    w6_reps={"get_state": 2, "full_history": 1},
    scale_sizes=(100, 1_000),
    scale_steps=5,
    scale_reads=2,
    scale_turns=2,
    cost_steps=20,
    cost_reps=1,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="CI smoke mode: small workloads, checks every saver completes each one")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="directory for results.md, results.json and the chart (default: %(default)s)",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="also write the report into README.md's Benchmarks section and the chart "
        "into docs/benchmarks/ (for a full run that should be published)",
    )
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401 - fail now, not after the run
    except ImportError:
        parser.error("the chart needs matplotlib: pip install matplotlib")
    if args.publish and (missing := instructions.missing()):
        parser.error(f"a published run counts the client's instructions, and {missing}")

    scale = QUICK if args.quick else FULL
    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {message}", file=sys.stderr, flush=True)

    results: dict = {}
    with bench_env() as bench:
        log(f"PostgreSQL {bench.server_version} ({bench.server.kind})")
        workloads = {
            "cost": ("cost of a step, decomposed", lambda: decomposition.run(bench, scale.cost_steps, scale.cost_reps)),
            "w1": ("growing state", lambda: per_step.growing_state(bench, scale.w1_steps, scale.w1_reps)),
            "w1_random": (
                "growing state, incompressible items",
                lambda: per_step.growing_state(bench, scale.w1_steps, scale.w1_reps, content="random"),
            ),
            "w2": ("large value", lambda: per_step.large_value(bench, scale.w2_steps, scale.w2_reps)),
            "w3": ("long history", lambda: history.run(bench, scale.w3_turns, scale.w3_reps)),
            "w4": ("concurrency", lambda: concurrency.run(bench, scale.w4_threads, scale.w4_steps, scale.w4_workers, scale.w4_reps)),
            "w5": ("round trips", lambda: round_trips.run(bench, scale.w5_steps)),
            "w6": ("long chat thread", lambda: long_thread.run(bench, scale.w6_steps, scale.w6_sample_every, scale.w6_reps)),
            "scale": (
                "scale: long lists",
                lambda: scale_run.run(bench, scale.scale_sizes, scale.scale_steps, scale.scale_reads, scale.scale_turns),
            ),
        }
        for key, (name, run) in workloads.items():
            log(f"{key} {name}")
            results[key] = run()
        server_version, server_kind, store_kind = bench.server_version, bench.server.kind, bench.store_kind

    results["meta"] = {
        "mode": "quick" if args.quick else "full",
        "seconds": time.perf_counter() - start,
        "scale": asdict(scale),
        "server_version": server_version,
        "server_kind": server_kind,
        "object_store": store_kind,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {
            p: version(p) for p in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "langgraph-pg-durable", "psycopg")
        },
    }
    markdown = report.write(results, args.out)
    log(f"wrote {args.out}/results.md, results.json and the charts")
    if args.publish:
        readme = report.publish(results, args.out, REPO_ROOT)
        log(f"published into {readme}")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
