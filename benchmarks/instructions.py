"""Client instructions a step, counted by valgrind's callgrind: the decomposition's client
CPU without the noise of this VM's clock.

The decomposition's client CPU is `time.process_time` over a run less InMemorySaver's: the
difference of two ~1 ms figures a step, on a VM whose CPU speed moves by a fifth from one
run to the next (InMemorySaver alone, 30 runs of 200 steps of the words workload in a row:
505-879 us a step). Callgrind counts the user-space instructions a run executes, every
thread of the process: a run's total the same to a percent from run to run (the threads'
interleaving and the I/O waits move it a little), a saver's count above InMemorySaver's, the
difference of two totals, to a few percent (chat in a `DeltaChannel`, two runs: the official
saver 658 k and 641 k a step, ours 793 k and 802 k). It leaves out the
kernel's work (socket I/O: a Postgres saver's system calls) and what an instruction costs
(cache misses), so it is a count of the client's work, not of its time; both are reported.

Every counted process hashes strings with the same seed (`HASH_SEED`). With Python's random
seed per process, dict and set lookups probe in another order in each process, and a
saver's count above InMemorySaver's (three processes, one seed each) moved by ~3 % between
runs of the same code (the chat in a `DeltaChannel`, two runs: the official saver 623 k and
644 k a step); with one seed for all, by ~0.2 % (the official saver 633.2 k and 634.5 k,
ours 633.3 k and 633.7 k). Under each of four seeds, 0 to 3, our count over the official
saver's was 0.996 to 1.000: the ratio hardly depends on which seed, only on both savers
having the same one.

A count runs the saver in a child process under callgrind with its instrumentation off:
for each workload, a short run on a new thread first (the prepared statements and the
server's plans of a saver on steady traffic, as `decomposition.run_once` measures CPU on a
second run), then the measured run on another new thread, between two handshakes at which
this process turns callgrind's instrumentation on, then off, and dumps the counts (a dump
starts the next count from zero; nothing is counted while the instrumentation is off).
The same driver counts `tools/step_instructions.py`'s replays.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from .env import SaverSpec

ROOT = Path(__file__).resolve().parent.parent
COUNTED_OUT = "callgrind.out"  # the child's callgrind output; each dump adds ".<n>"
HASH_SEED = "0"  # PYTHONHASHSEED of every counted process (see the module)


def missing() -> str | None:
    """What this machine lacks to count instructions (None: nothing)."""
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (Debian: apt-get install valgrind)"
    return None


def handshake(directory: Path, name: str) -> None:
    """In the counted process: tell the driver it reached `name`, and wait until the driver
    has toggled callgrind (`counted`)."""
    (directory / name).write_text(str(os.getpid()))
    while not (directory / f"{name}.ok").exists():
        time.sleep(0.02)


def counted(command: Sequence[str], directory: Path, parts: int, *, env: dict[str, str] | None = None) -> list[int]:
    """Run `command` under callgrind (instrumentation off at start, its output
    `directory`/COUNTED_OUT) and count the instructions of each of its `parts` parts: what
    it executes between `handshake(directory, f"start{i}")` and `handshake(directory,
    f"stop{i}")`, every thread, its strings hashed with `HASH_SEED`. Raises SystemExit with
    the child's output if it fails."""
    env = {**(os.environ if env is None else env), "PYTHONHASHSEED": HASH_SEED}
    log = directory / "child.log"
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={directory / COUNTED_OUT}"]
    counts: list[int] = []
    with open(log, "w") as sink:
        proc = subprocess.Popen([*valgrind, *command], stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            for part in range(parts):
                for name, switches in ((f"start{part}", (("-i", "on"),)), (f"stop{part}", (("-i", "off"), ("-d",)))):
                    while not (directory / name).exists():
                        if proc.poll() is not None:
                            raise SystemExit(f"the counted process ended before '{name}':\n{log.read_text()[-3000:]}")
                        time.sleep(0.05)
                    for switch in switches:
                        subprocess.run(["callgrind_control", *switch, str(proc.pid)], check=True, capture_output=True)
                    (directory / f"{name}.ok").touch()
                # Each dump is the next numbered file, holding what ran since the last one.
                counts.append(_totals(directory / f"{COUNTED_OUT}.{part + 1}"))
            if proc.wait() != 0:
                raise SystemExit(f"the counted process failed:\n{log.read_text()[-3000:]}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return counts


def _totals(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"no totals in callgrind's dump {path}")


def count(spec: SaverSpec, runs: Sequence[tuple[str, bool]], steps: int) -> list[int]:
    """The instructions of one `steps`-step run of each (workload, delta) of `runs`
    (`decomposition.WORKLOADS`), on the saver `spec` opens, in one child process."""
    with tempfile.TemporaryDirectory(prefix="lgpd-instructions-") as tmp:
        command = [
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--handshake",
            tmp,
            "--spec",
            json.dumps(asdict(spec)),
            "--steps",
            str(steps),
            *(f"{workload}:{'delta' if delta else 'plain'}" for workload, delta in runs),
        ]
        return counted(command, Path(tmp), len(runs), env={**os.environ, "PYTHONPATH": str(ROOT)})


def _child(args: argparse.Namespace) -> None:
    """The counted process (see the module): each run, warmed up, between its handshakes."""
    from . import decomposition

    directory = Path(args.handshake)
    spec = SaverSpec(**json.loads(args.spec))
    with spec.open() as make:
        for part, run in enumerate(args.runs):
            name, style = run.split(":")
            workload = decomposition.WORKLOADS[name]
            saver = make()
            warm = workload.build(saver, decomposition.WARMUP_STEPS, style == "delta")
            warm.invoke(workload.inputs, decomposition.run_config(spec.kind, decomposition.WARMUP_STEPS), durability="sync")
            app = workload.build(saver, args.steps, style == "delta")
            config = decomposition.run_config(spec.kind, args.steps)
            handshake(directory, f"start{part}")
            app.invoke(workload.inputs, config, durability="sync")
            handshake(directory, f"stop{part}")
            final = app.get_state(config).values["step"]
            if final != args.steps:
                raise AssertionError(f"instructions on {spec.kind}, {run}: {final} steps, want {args.steps}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the counted process of `count` (not run by hand)")
    parser.add_argument("--handshake", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("runs", nargs="+", help="workload:plain or workload:delta")
    _child(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
