"""`Query.carrying` and `Fence.taken`: the hot path's copies keep every other field."""

from __future__ import annotations

import dataclasses
from typing import Any

from langgraph_pg_durable.core.fencing import Fence
from langgraph_pg_durable.core.plan import Query


def test_carrying_changes_the_params_and_the_statements_before_and_keeps_every_other_field() -> None:
    """Every field set to an object of its own, so a field added later that `carrying` does
    not pass on shows as its default here."""
    given: dict[str, Any] = {field.name: object() for field in dataclasses.fields(Query)}
    query: Query[Any] = Query(**given)
    params, before = {"a": 2}, [("SELECT 2", {})]
    carried = query.carrying(params, before)
    for name, value in given.items():
        want = {"params": params, "before": before}.get(name, value)
        assert getattr(carried, name) is want, name


def test_a_fence_taken_differs_from_its_fence_only_in_taking() -> None:
    fence = Fence("wait", "writer", "run", True)
    assert fence.taken() == dataclasses.replace(fence, taking=False)
