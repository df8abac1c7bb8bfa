"""Workload 4: many threads through ONE saver instance, 8 at a time, sync and async.

Both Postgres savers get a pool of 8 connections (one per worker), so any
difference is in how the saver shares them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from typing import Any

from . import graphs
from .env import KINDS, Bench
from .stats import alternate, rotation

ITEM_BYTES = 64


def run(bench: Bench, threads: int, steps: int, workers: int, reps: int) -> dict[str, Any]:
    sync = _sync(bench, threads, steps, workers, reps)
    aio = asyncio.run(_async(bench, threads, steps, workers, reps))
    return {kind: {"sync": sync[kind], "async": aio[kind]} for kind in KINDS}


def _check(kind: str, results: list[dict], steps: int) -> None:
    bad = [r["step"] for r in results if r["step"] != steps]
    if bad:
        raise AssertionError(f"concurrency on {kind}: threads ended at steps {bad[:5]}, want {steps}")


def _config(tag: str, i: int, steps: int) -> dict:
    return {"configurable": {"thread_id": f"w4-{tag}-{i}"}, "recursion_limit": steps + 10}


def _sync(bench: Bench, threads: int, steps: int, workers: int, reps: int) -> dict[str, list[float]]:
    with ExitStack() as stack:
        savers = {k: stack.enter_context(bench.saver(k, pool_size=workers)) for k in KINDS}

        def one(kind: str, rep: int, threads: int = threads) -> float:
            app = graphs.growing(savers[kind](), steps, ITEM_BYTES)
            tag = f"sync-{kind}-{rep}-{uuid.uuid4().hex[:8]}"
            inputs = {"items": [], "step": 0}
            start = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                results = list(pool.map(lambda i: app.invoke(inputs, _config(tag, i, steps), durability="sync"), range(threads)))
            seconds = time.perf_counter() - start
            _check(kind, results, steps)
            return threads * steps / seconds

        for kind in KINDS:
            one(kind, -1, threads=workers)  # warm-up: fills the pool, prepares statements
        return alternate(KINDS, reps, one)


async def _async(bench: Bench, threads: int, steps: int, workers: int, reps: int) -> dict[str, list[float]]:
    async with AsyncExitStack() as stack:
        savers = {k: await stack.enter_async_context(bench.async_saver(k, pool_size=workers)) for k in KINDS}

        async def one(kind: str, rep: int, threads: int = threads) -> float:
            app = graphs.growing(savers[kind](), steps, ITEM_BYTES)
            tag = f"async-{kind}-{rep}-{uuid.uuid4().hex[:8]}"
            gate = asyncio.Semaphore(workers)

            async def thread(i: int) -> dict:
                async with gate:
                    return await app.ainvoke({"items": [], "step": 0}, _config(tag, i, steps), durability="sync")

            start = time.perf_counter()
            results = await asyncio.gather(*(thread(i) for i in range(threads)))
            seconds = time.perf_counter() - start
            _check(kind, results, steps)
            return threads * steps / seconds

        for kind in KINDS:
            await one(kind, -1, threads=workers)
        out: dict[str, list[float]] = {k: [] for k in KINDS}
        for rep in range(reps):
            for kind in rotation(KINDS, rep):
                out[kind].append(await one(kind, rep))
        return out
