"""core/type_policy.py's write check without a server: `class_names` walks a msgpack value's
bytes for the names its extensions hold, and finds what unpacking it finds."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable.core.type_policy import (
    CLASS_NAMES_MAX_DEPTH,
    TypePolicy,
    _refused_by_unpacking,
    class_names,
    refused_names,
)

SERDE = JsonPlusSerializer()
POLICY = TypePolicy()


@dataclasses.dataclass
class Ticket:
    title: str
    tags: list[str]


class Colour(enum.Enum):
    RED = "red"


class NotData:
    """Stored by its `_asdict` (LangGraph's serializer stores such a class as its fields), but
    not a data type: a value holding one is refused on write."""

    def __init__(self, x: int = 0) -> None:
        self.x = x

    def _asdict(self) -> dict[str, int]:
        return {"x": self.x}


def local_class() -> Any:
    @dataclasses.dataclass
    class Inside:  # stored under its module, not found there: read back as its fields
        n: int

    return Inside(3)


def dumped(value: Any) -> bytes:
    """`value` as the serializer stores it, in a list (alone, None and bytes are not msgpack)."""
    kind, data = SERDE.dumps_typed([value])
    assert kind == "msgpack", kind
    return data


INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # what msgpack holds
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.binary(max_size=300),
    st.datetimes(),
    st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
    st.builds(lambda s: HumanMessage(content=s, id="h"), st.text(max_size=80)),
    st.builds(
        lambda s, n: AIMessage(content=s, tool_calls=[{"name": "search", "args": {"q": s, "n": n}, "id": "c1"}]),
        st.text(max_size=80),
        INTS,
    ),
    st.builds(lambda s: ToolMessage(content=s, tool_call_id="c1"), st.text(max_size=80)),
    st.builds(Ticket, st.text(max_size=20), st.lists(st.text(max_size=10), max_size=3)),
    st.just(Colour.RED),
    st.builds(NotData, st.integers(min_value=0, max_value=9)),
    st.builds(lambda: local_class()),
    st.frozensets(INTS, max_size=4),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=8), inner, max_size=5),
        st.dictionaries(INTS, inner, max_size=3),
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_walk_finds_what_unpacking_finds(value: Any) -> None:
    """Every value the serializer makes is walked (no fallback), and reports the same
    refusals, in the same order, as the check by unpacking."""
    data = dumped(value)
    assert class_names(data) is not None
    assert refused_names(data, POLICY) == _refused_by_unpacking(data, POLICY)


def test_the_names_come_nested_first_and_name_each_class() -> None:
    data = dumped({"m": [AIMessage(content="x", id="a")], "at": datetime.datetime(2026, 1, 2), "u": uuid.UUID(int=7)})
    assert class_names(data) == [
        (5, "langchain_core.messages.ai", "AIMessage", ""),
        (3, "datetime", "datetime", "fromisoformat"),
        (0, "uuid", "UUID", ""),
    ]
    assert class_names(dumped(Ticket("t", ["a"]))) == [(2, __name__, "Ticket", "")]
    assert class_names(dumped(NotData(1))) == [(2, __name__, "NotData", "")]


def test_a_refused_class_is_named_by_both_checks() -> None:
    data = dumped([decimal.Decimal("1.5"), NotData(2)])
    refused = refused_names(data, POLICY)
    assert refused == _refused_by_unpacking(data, POLICY)
    assert any(name.endswith("NotData") and "not a data type" in reason for name, reason in refused)


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_cut_or_altered_bytes_are_walked_alike_or_left_to_unpacking(data: st.DataObject) -> None:
    """Bytes the serializer never makes, cut short or with a byte changed: the walk returns
    names or leaves them to ormsgpack (None), never raises; and whatever it returns,
    ormsgpack, when it reads the bytes at all, finds the same refusals."""
    good = bytearray(dumped(data.draw(VALUES)))
    cut = data.draw(st.integers(min_value=0, max_value=len(good)))
    bad = good[:cut]
    if bad and data.draw(st.booleans()):
        bad[data.draw(st.integers(min_value=0, max_value=len(bad) - 1))] = data.draw(st.integers(0, 255))
    bad_bytes = bytes(bad)
    walked = class_names(bad_bytes)
    try:
        unpacked = _refused_by_unpacking(bad_bytes, POLICY)
    except (ormsgpack.MsgpackDecodeError, TypeError, ValueError):
        return
    if walked is not None:
        assert refused_names(bad_bytes, POLICY) == unpacked


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1",  # never used
        b"\xd4\xff\x00",  # fixext with a negative code (msgpack's timestamp is -1)
        b"\xd4\x08\x00",  # a code LangGraph does not use
        b"\xc7\x03\x05\x92\x01\x02",  # a constructor whose names are ints
        b"\x92\xa1a",  # an array that promises two items and holds one
        b"\xdb\xff\xff\xff\xff",  # a str 32 longer than the bytes
        b"\xa1a\x00",  # bytes after the value
    ],
)
def test_what_the_walk_cannot_read_is_left_to_unpacking(data: bytes) -> None:
    assert class_names(data) is None


def test_nesting_past_the_depth_is_left_to_unpacking() -> None:
    deep: Any = AIMessage(content="x")
    for _ in range(CLASS_NAMES_MAX_DEPTH):
        deep = [deep]
    data = dumped(deep)
    assert class_names(data) is None
    assert refused_names(data, POLICY) == _refused_by_unpacking(data, POLICY) == []
    shallow = dumped([[AIMessage(content="x")]])
    assert class_names(shallow) == [(5, "langchain_core.messages.ai", "AIMessage", "")]
