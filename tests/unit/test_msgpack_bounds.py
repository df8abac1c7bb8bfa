"""`check_lengths`: msgpack that declares more than its bytes hold is refused before ormsgpack
sizes anything by it (ormsgpack 1.12, the last release for Python 3.10, segfaults on it),
and every value the saver's serializer writes passes."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Send

from langgraph_pg_durable.core.codec import Codec
from langgraph_pg_durable.core.msgpack_bounds import check_lengths
from langgraph_pg_durable.core.safe_serde import DurableSerializer

# Found by the codec's tests on ormsgpack 1.12.2: an array holding an array of 0xfcd4c99f elements.
CRASHED_ORMSGPACK_1_12 = bytes.fromhex("940102dc00c4107cf8ddfcd4c99f5d8af63004b3b1734d")

_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False), st.text(), st.binary()),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=8), inner, max_size=20),
    max_leaves=200,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_every_value_ormsgpack_writes_passes(value: Any) -> None:
    check_lengths(ormsgpack.packb(value))


def test_what_the_serializer_writes_for_agents_passes() -> None:
    codec = Codec(DurableSerializer())
    values = [
        [
            HumanMessage("hi", id="h"),
            AIMessage("", tool_calls=[{"id": "c", "name": "add", "args": {"a": 1}}]),
            ToolMessage("3", tool_call_id="c"),
        ],
        Send("tools", {"x": [1, 2, 3] * 50}),
        {"when": datetime.datetime(2026, 12, 4, tzinfo=datetime.timezone.utc), "id": uuid.uuid4(), "tags": {"a", "b"}},
        "x" * 70_000,
        [b"\x00" * 70_000, {"k": b"\x01" * 300}],
    ]
    for value in values:
        type_, data = codec.dump(value, channel="c", where="w")
        assert type_ == "msgpack"
        check_lengths(data)


@pytest.mark.parametrize(
    "data",
    [
        CRASHED_ORMSGPACK_1_12,
        b"\x91\xdd\xff\xff\xff\xff",  # an array in an array, four billion elements
        b"\x91\xdf\xff\xff\xff\xff",  # a map of four billion entries
        b"\x92\xdc\xff\xff\x01",
        b"\x91\xc6\xff\xff\xff\xff",  # a binary of 4 GiB
        b"\x91\xc9\xff\xff\xff\xff\x01",  # an extension of 4 GiB
        b"\xc7\x03\x01\x91\xdd\xff",  # a LangGraph extension whose payload declares too much
        b"\x91\xc1",
    ],
)
def test_a_length_past_the_bytes_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="msgpack"):
        check_lengths(data)


def test_extensions_nested_too_deep_are_refused() -> None:
    data = b"\xc0"
    for _ in range(40):
        data = b"\xc7" + bytes([len(data)]) + b"\x01" + data if len(data) < 256 else data
    with pytest.raises(ValueError, match="too deep"):
        check_lengths(data)
