"""Where `once()` records a call, from the config LangGraph gives a task, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_pg_durable import ConfigError
from langgraph_pg_durable.core.effects import EffectKey, effect_key, task_key


def _config(namespace_map: dict[str, str], task: str = "task-1", thread: Any = "t-1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "__pregel_task_id": task, "checkpoint_map": namespace_map}}


def test_a_root_task_is_keyed_by_the_checkpoint_it_runs_from() -> None:
    assert task_key(_config({"": "c-9"})) == ("t-1", "", "c-9", "task-1")


def test_a_subgraph_task_is_keyed_in_its_own_namespace() -> None:
    nested = {"": "c-root", "agent:abc": "c-agent", "agent:abc|tools:def": "c-tools"}
    assert task_key(_config(nested, task="t-x")) == ("t-1", "agent:abc|tools:def", "c-tools", "t-x")


def test_a_call_is_named_by_its_ordinal_or_its_key() -> None:
    config = _config({"": "c"})
    assert effect_key(config, "charge").key == "charge#0"
    assert effect_key(config, "charge", ordinal=2).key == "charge#2"
    assert effect_key(config, "charge", key="order-7").key == "charge/order-7"


def test_the_idempotency_key_is_stable_and_differs_by_call() -> None:
    config = _config({"": "c"})
    first, again = effect_key(config, "charge").idempotency_key(), effect_key(config, "charge").idempotency_key()
    assert first == again and first.startswith("lgpd-") and len(first) == 45
    assert effect_key(config, "charge", ordinal=1).idempotency_key() != first
    assert EffectKey("t-1", "", "c", "task-2", "charge#0").idempotency_key() != first


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({}, "configurable"),
        ({"configurable": {"thread_id": "t"}}, "task id"),
        ({"configurable": {"thread_id": "t", "__pregel_task_id": "x"}}, "checkpoint_map"),
        ({"configurable": {"__pregel_task_id": "x", "checkpoint_map": {"": "c"}}}, "thread_id"),
    ],
)
def test_a_config_that_is_not_a_tasks_is_refused_by_what_it_lacks(config: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        task_key(config)


@pytest.mark.parametrize("name", ["", "x" * 201, None, 1.5])
def test_a_bad_name_is_refused(name: Any) -> None:
    with pytest.raises(ConfigError, match="once\\(\\) name"):
        effect_key(_config({"": "c"}), name)
