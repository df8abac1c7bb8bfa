"""Value placement without a store: an oversized value is refused, naming its channel."""

from __future__ import annotations

import pytest

from langgraph_pg_durable import SerializationError
from langgraph_pg_durable.core.offload import Placement


def test_without_a_store_an_oversized_value_is_refused_by_channel() -> None:
    placement = Placement(enabled=False, max_inline=1000)
    assert placement.place(b"x" * 1000, where="w") == (b"x" * 1000, None)
    with pytest.raises(SerializationError, match="channel 'big'.*object_store="):
        placement.place(b"x" * 1001, where="the value of channel 'big'")
