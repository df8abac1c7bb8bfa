"""memory.RecentDigests: a payload that is the very same bytes object is hashed once; any
other payload (equal bytes in another object, a bytearray) is hashed, and the memory
keeps at most its byte budget alive."""

from __future__ import annotations

import hashlib

import pytest

from langgraph_pg_durable import memory
from langgraph_pg_durable.memory import RecentDigests


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []

    def counting(data: bytes) -> str:
        sizes.append(len(data))
        return hashlib.sha256(data).hexdigest()

    monkeypatch.setattr(memory, "sha256_hex", counting)
    return sizes


def test_the_same_bytes_object_is_hashed_once(hashed: list[int]) -> None:
    digests = RecentDigests()
    value = bytes(range(256)) * 4096
    assert digests.sha256(value) == digests.sha256(value) == hashlib.sha256(value).hexdigest()
    assert len(hashed) == 1
    equal = bytes(bytearray(value))  # equal bytes, another object: hashed again
    assert equal is not value and digests.sha256(equal) == hashlib.sha256(value).hexdigest()
    assert len(hashed) == 2


def test_a_mutable_payload_is_always_hashed(hashed: list[int]) -> None:
    digests = RecentDigests()
    data = bytearray(b"x" * 1000)
    first = digests.sha256(data)  # type: ignore[arg-type]
    data[0] = ord("y")
    assert digests.sha256(data) != first == hashlib.sha256(b"x" * 1000).hexdigest()  # type: ignore[arg-type]
    assert len(hashed) == 2


def test_it_keeps_at_most_its_budget_alive(hashed: list[int]) -> None:
    digests = RecentDigests(max_bytes=3000, max_entries=8)
    values = [bytes([i]) * 1000 for i in range(5)]
    for value in values:
        digests.sha256(value)
    digests.sha256(values[0])  # let go of: hashed again
    digests.sha256(values[4])  # still held
    assert len(hashed) == 6
