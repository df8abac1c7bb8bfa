"""The benchmark's instruction counter (benchmarks/instructions.py) against a real callgrind:
each part of a counted process is counted on its own, between its handshakes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    instructions.missing() is not None and not os.environ.get("LGPD_REQUIRE_VALGRIND"),
    reason=f"{instructions.missing()} (set LGPD_REQUIRE_VALGRIND=1 to fail instead)",
)

# Part i loops `size * (i + 1)` times between its handshakes, and as long again outside them.
CHILD = """
import sys
from pathlib import Path
from benchmarks.instructions import handshake
directory, size = Path(sys.argv[1]), int(sys.argv[2])
def spin(n):
    total = 0
    for i in range(n):
        total += i
    return total
for part in range(2):
    spin(size * (part + 1))
    handshake(directory, f"start{part}")
    spin(size * (part + 1))
    handshake(directory, f"stop{part}")
    spin(size * (part + 1))
"""


def test_each_part_is_counted_alone(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first, second = instructions.counted([sys.executable, "-c", CHILD, str(tmp_path), "300000"], tmp_path, 2, env=env)
    # The second part spins twice as long as the first, with as much again before and after
    # it: counted with the first part's count or with what ran outside its handshakes, it
    # would come to three times the first or more.
    assert 1.8 < second / first < 2.2, (first, second)


# Writes the hash of a string, as the process saw it, beside its one counted part.
HASHING_CHILD = """
import sys
from pathlib import Path
from benchmarks.instructions import handshake
directory = Path(sys.argv[1])
handshake(directory, "start0")
(directory / "hash").write_text(str(hash("langgraph-pg-durable")))
handshake(directory, "stop0")
"""


def test_every_counted_process_hashes_with_the_same_seed(tmp_path: Path) -> None:
    # A caller's own seed ("random": a new one per process) does not reach the counted
    # process: dict and set probes then go alike in every count, whichever saver it runs.
    seen = []
    for run in range(2):
        directory = tmp_path / str(run)
        directory.mkdir()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "random"}
        instructions.counted([sys.executable, "-c", HASHING_CHILD, str(directory)], directory, 1, env=env)
        seen.append((directory / "hash").read_text())
    assert seen[0] == seen[1]
    seeded = {**os.environ, "PYTHONHASHSEED": instructions.HASH_SEED}
    command = [sys.executable, "-c", "print(hash('langgraph-pg-durable'))"]
    assert seen[0] == subprocess.run(command, capture_output=True, text=True, check=True, env=seeded).stdout.strip()
