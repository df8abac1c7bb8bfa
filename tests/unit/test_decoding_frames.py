"""Bounded decoding without a server: each item decodes from exactly its own msgpack frame,
and a compressed item inflates to exactly its stated size."""

from __future__ import annotations

import zlib
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langgraph_pg_durable.core.codec import COMPRESSED, LEGACY_COMPRESSED, packed, unpacked
from langgraph_pg_durable.core.msgpack_frame import is_one_object, object_end

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=300)
    | st.binary(max_size=300),
    lambda children: st.lists(children, max_size=20) | st.dictionaries(st.text(max_size=10), children, max_size=20),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(msgpack_values, msgpack_values)
def test_the_frame_of_one_object_is_exactly_its_bytes(first: Any, second: Any) -> None:
    a, b = ormsgpack.packb(first), ormsgpack.packb(second)
    assert object_end(a) == len(a) and is_one_object(a)
    assert object_end(a + b) == len(a)  # two objects: the first ends where the second begins
    assert not is_one_object(a + b)
    assert not is_one_object(a[:-1]) or len(a) == 0


def test_ext_types_are_framed_by_their_length() -> None:
    for size in (1, 2, 4, 8, 16, 3, 300, 70_000):
        data = ormsgpack.packb(ormsgpack.Ext(5, b"x" * size))
        assert is_one_object(data) and not is_one_object(data + b"\xc0")


@pytest.mark.parametrize("garbage", [b"", b"\xc1", b"\xdd\xff\xff\xff\xff", b"\xc6\x00\x10\x00\x00ab", b"\x92\x01"])
def test_bytes_that_are_not_one_object(garbage: bytes) -> None:
    assert not is_one_object(garbage)


def test_a_compressed_item_inflates_to_exactly_its_stated_size() -> None:
    data = b"hello world " * 500
    type_, stored = packed("msgpack", data)
    assert type_ == "msgpack" + COMPRESSED and int.from_bytes(stored[:4], "big") == len(data)
    assert unpacked(type_, stored) == ("msgpack", data)
    bomb = zlib.compress(b"\x00" * (64 << 20), 9)  # 64 MiB of zeros in ~65 KB
    with pytest.raises(ValueError, match="past its size"):
        unpacked(type_, (1000).to_bytes(4, "big") + bomb)  # states 1,000 bytes: inflation stops there
    with pytest.raises(ValueError, match="not the 9,999"):
        unpacked(type_, (9999).to_bytes(4, "big") + stored[4:])
    with pytest.raises(ValueError, match="past"):
        unpacked(type_, (2**31).to_bytes(4, "big") + stored[4:])
    with pytest.raises(ValueError):
        unpacked(type_, stored + b"trailing")


def test_an_item_compressed_before_sizes_were_stored_still_reads() -> None:
    data = b"legacy " * 400
    assert unpacked("msgpack" + LEGACY_COMPRESSED, zlib.compress(data)) == ("msgpack", data)
