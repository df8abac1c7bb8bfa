"""`Fence.taken`: the hot path's copy keeps every other field."""

from __future__ import annotations

import dataclasses

from langgraph_pg_durable.core.fencing import Fence


def test_a_fence_taken_differs_from_its_fence_only_in_taking() -> None:
    fence = Fence("wait", "writer", "run", True)
    assert fence.taken() == dataclasses.replace(fence, taking=False)
