"""Order of runs, and the figures we report from samples."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def alternate(kinds: Sequence[str], reps: int, run: Callable[[str, int], T]) -> dict[str, list[T]]:
    """Run every saver once per repetition, rotating the order (ABC, BCA, CAB, ...).

    Interleaving puts machine drift (thermal, page cache, autovacuum) on every saver alike.
    """
    results: dict[str, list[T]] = {k: [] for k in kinds}
    for rep in range(reps):
        for kind in rotation(kinds, rep):
            results[kind].append(run(kind, rep))
    return results


def rotation(kinds: Sequence[str], rep: int) -> list[str]:
    """The savers' order in repetition `rep`: each one leads in turn."""
    shift = rep % len(kinds)
    return [*kinds[shift:], *kinds[:shift]]


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks."""
    ordered = sorted(samples)
    if not ordered:
        return math.nan
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(samples: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    """Median, p99 and interquartile range, times `scale` (1e3 turns seconds into ms)."""
    return {
        "n": len(samples),
        "median": percentile(samples, 50) * scale,
        "p99": percentile(samples, 99) * scale,
        "p25": percentile(samples, 25) * scale,
        "p75": percentile(samples, 75) * scale,
    }
