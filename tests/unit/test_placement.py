"""Value placement without a store: an oversized value is refused, naming its channel."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langgraph_pg_durable import SerializationError
from langgraph_pg_durable.core.offload import Placement


def test_without_a_store_an_oversized_value_is_refused_by_channel() -> None:
    placement = Placement(enabled=False, max_inline=1000)
    assert placement.place(b"x" * 1000, where="w") == (b"x" * 1000, None)
    with pytest.raises(SerializationError, match="channel 'big'.*object_store="):
        placement.place(b"x" * 1001, where="the value of channel 'big'")


def test_a_callable_where_is_called_only_when_a_value_is_refused() -> None:
    placement = Placement(enabled=False, max_inline=1000)
    calls: list[str] = []

    def where() -> str:
        calls.append("named")
        return "item 3 of channel 'big'"

    assert placement.place(b"x" * 1000, where=where) == (b"x" * 1000, None)
    assert calls == []
    with pytest.raises(SerializationError, match="item 3 of channel 'big'.*object_store="):
        placement.place(b"x" * 1001, where=where)
    assert calls == ["named"]


@given(st.booleans(), st.integers(0, 64), st.integers(1, 64), st.integers(0, 80))
def test_a_value_up_to_inline_up_to_is_one_place_keeps_inline(enabled: bool, threshold: int, max_inline: int, size: int) -> None:
    """The callers skip `place` up to `inline_up_to`: exactly the sizes it keeps inline."""
    placement = Placement(enabled=enabled, threshold=threshold, max_inline=max_inline, prefix="p")
    data = b"x" * size
    try:
        kept_inline = placement.place(data, where="w") == (data, None)
    except SerializationError:
        kept_inline = False
    assert kept_inline == (size <= placement.inline_up_to)
    named: list[str] = []

    def name(part: str) -> str:
        named.append(part)
        return f"the value of channel {part!r}"

    try:  # place_named places as place does, and makes the name only for the error it raises
        placed = placement.place_named(data, name, "c")
    except SerializationError as exc:
        assert not kept_inline and "channel 'c'" in str(exc) and named == ["c"]
    else:
        assert placed == placement.place(data, where="w") and named == []
