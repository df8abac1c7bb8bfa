"""Bounded decoding without a server: a compressed item inflates to exactly its stated size.
(That each item decodes from exactly its own bytes is test_codec's.)"""

from __future__ import annotations

import zlib

import pytest

from langgraph_pg_durable.core.codec import COMPRESSED, LEGACY_COMPRESSED, packed, unpacked


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
