"""The item cache's snapshots of a lane's groups (memory.ItemCache): handed out again while
the lane's groups do not change, with their key columns made once."""

from __future__ import annotations

from langgraph_pg_durable.core.history import lane_key_columns
from langgraph_pg_durable.memory import ItemCache


def _group(n: int) -> dict[int, tuple[str, bytes]]:
    return {0: ("msgpack", bytes([n]))}


def test_a_lanes_groups_are_handed_out_again_until_one_comes() -> None:
    cache = ItemCache(max_bytes=1 << 20)
    cache.add_groups("t", "", {("messages", "v1"): _group(1), ("messages", "v2"): _group(2)})
    first = cache.held("t", "")
    assert first == {("messages", "v1"): _group(1), ("messages", "v2"): _group(2)}
    assert cache.held("t", "") is first
    cache.add_groups("t", "", {("messages", "v2"): _group(2)})  # held already: nothing changes
    assert cache.held("t", "") is first
    cache.add_groups("t", "", {("messages", "v3"): _group(3)})
    assert cache.held("t", "") is not first and ("messages", "v3") in cache.held("t", "")
    assert ("messages", "v3") not in first  # what was handed out is not changed


def test_a_walk_gets_the_groups_key_columns_made_once() -> None:
    cache = ItemCache(max_bytes=1 << 20)
    cache.add_groups("t", "ns", {("messages", "v1"): _group(1)})
    groups, columns = cache.held_for_walk("t", "ns")
    assert columns == lane_key_columns(("t", "ns"), groups)
    again, columns_again = cache.held_for_walk("t", "ns")
    assert again is groups and columns_again is columns
    assert cache.held_for_walk("u", "") == ({}, None)


def test_an_evicted_group_is_not_handed_out() -> None:
    cache = ItemCache(max_bytes=16)  # eight two-byte groups (a group past an eighth is not kept)
    cache.add_groups("t", "", {("messages", f"v{n}"): {0: ("msgpack", bytes([n, n]))} for n in range(8)})
    before = cache.held("t", "")
    assert len(before) == 8
    cache.add_groups("u", "", {("messages", "w1"): {0: ("msgpack", b"xx")}})  # past 16 bytes: t's oldest goes
    after = cache.held("t", "")
    assert after is not before and ("messages", "v0") not in after and len(after) == 7
