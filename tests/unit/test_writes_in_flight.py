"""The bounded wait of a put for its parent's writes (inflight.py), per checkpoint."""

from __future__ import annotations

import asyncio
import threading

from langgraph_pg_durable.inflight import AsyncWritesInFlight, WritesInFlight

PARENT = ("thread", "", "parent")
OTHER = ("thread", "", "other")


def test_a_wait_returns_at_once_without_writes_and_times_out_while_they_are_under_way() -> None:
    flight = WritesInFlight(wait=0.0)
    assert flight.wait(PARENT)
    flight.begin(PARENT)
    flight.begin(PARENT)
    assert not flight.wait(PARENT)  # under way, and no time to wait
    assert flight.wait(OTHER)  # another checkpoint's writes are not waited for
    flight.end(PARENT)
    assert not flight.wait(PARENT)  # one of two still under way
    flight.end(PARENT)
    assert flight.wait(PARENT)


def test_a_waiting_put_is_woken_by_the_end_of_its_parents_writes() -> None:
    flight = WritesInFlight(wait=600.0)
    flight.begin(PARENT)
    flight.begin(OTHER)
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(flight.wait(PARENT)))
    waiter.start()
    flight.end(OTHER)  # not the waited-for writes: the waiter stays
    assert results == []
    flight.end(PARENT)
    waiter.join()
    assert results == [True]


def test_every_put_waiting_at_one_checkpoint_is_woken() -> None:
    flight = WritesInFlight(wait=600.0)
    flight.begin(PARENT)
    results: list[bool] = []
    waiters = [threading.Thread(target=lambda: results.append(flight.wait(PARENT))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    flight.end(PARENT)  # the one release opens the gate for all three, whenever each reached it
    for waiter in waiters:
        waiter.join()
    assert results == [True, True, True]
    flight.max_wait = 0.0
    flight.begin(PARENT)  # new writes of the same checkpoint close a new gate
    assert not flight.wait(PARENT)


def test_the_async_twin_waits_the_same_way() -> None:
    async def scenario() -> list[bool]:
        flight = AsyncWritesInFlight(wait=600.0)
        flight.begin(PARENT)
        waiting = asyncio.ensure_future(flight.wait(PARENT))
        await asyncio.sleep(0)  # let it start waiting (a yield to the loop, not a timed wait)
        assert not waiting.done()
        flight.end(PARENT)
        return [await waiting, await AsyncWritesInFlight(wait=0.0).wait(PARENT)]

    assert asyncio.run(scenario()) == [True, True]
