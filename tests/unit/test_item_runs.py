"""Cutting a run of stored items (a cold get_tuple's 'r' rows) back into items: each item
goes to the idx its cut names, and cuts that do not cover the bytes exactly are refused,
naming the thread, channel and version."""

from __future__ import annotations

import struct
import zlib

import pytest

from langgraph_pg_durable.core.codec import COMPRESSED
from langgraph_pg_durable.core.decode import item_run
from langgraph_pg_durable.errors import DeserializationError
from langgraph_pg_durable.sql.reads import Detail, Part


def _row(type_: str, data: bytes, cuts: list[tuple[int, int]]) -> tuple:
    row: list = [None] * len(Detail.names())
    row[Detail.PART], row[Detail.CHANNEL], row[Detail.VERSION] = Part.ITEM_RUN, "messages", "v7"
    row[Detail.TYPE], row[Detail.VALUE] = type_, data
    row[Detail.ITEM_CUTS] = b"".join(struct.pack(">iI", idx, size) for idx, size in cuts)
    return tuple(row)


def test_each_item_goes_where_its_cut_says_in_any_order() -> None:
    row = _row("msgpack", b"aaBcccc", [(5, 2), (2, 1), (9, 4)])
    assert item_run(row, "t") == {5: ("msgpack", b"aa"), 2: ("msgpack", b"B"), 9: ("msgpack", b"cccc")}


def test_compressed_items_are_inflated_each() -> None:
    plain = b"x" * 3000
    stored = len(plain).to_bytes(4, "big") + zlib.compress(plain)
    row = _row("msgpack" + COMPRESSED, stored + stored, [(0, len(stored)), (1, len(stored))])
    assert item_run(row, "t") == {0: ("msgpack", plain), 1: ("msgpack", plain)}


@pytest.mark.parametrize(
    "cuts",
    [b"", b"\x00\x00\x00\x01\x00\x00", struct.pack(">iI", 0, 3), struct.pack(">iIiI", 0, 4, 1, 9)],
    ids=["none", "not-whole-words", "short", "past-the-end"],
)
def test_cuts_that_do_not_cover_the_bytes_are_refused_by_name(cuts: bytes) -> None:
    row = list(_row("msgpack", b"abcd", []))
    row[Detail.ITEM_CUTS] = cuts
    with pytest.raises(DeserializationError, match=r"thread 'doomed', channel 'messages', version 'v7'.*do not cut"):
        item_run(tuple(row), "doomed")
