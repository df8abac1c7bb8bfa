"""Side effects recorded once: `once()` and `aonce()` for tools and nodes, and
`idempotency_key()` for the APIs that take one (README, "Exactly once").

LangGraph runs a task again when its writes were not committed: after a crash, a retry,
or a resume. A tool that charged a card before the crash charges it again. Wrapped in
`once(config, "charge", charge_card, order)`, the call's result is committed (in the saver's
`effects` table) as soon as the call returns, before the task goes on; when the task runs
again, `once` finds it and returns it without calling `charge_card`.

What stays at-least-once: a process that dies after the call returned and before its result
committed calls it again on the next run. For that window, hand the external API
`idempotency_key(config, "charge")`, the same text in every run of the task.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .core.effects import EffectKey, effect_key
from .errors import ConfigError

__all__ = ["aonce", "idempotency_key", "once"]

T = TypeVar("T")
_CHECKPOINTER = "__pregel_checkpointer"  # langgraph._internal._constants.CONFIG_KEY_CHECKPOINTER
_SCRATCHPAD = "__pregel_scratchpad"  # CONFIG_KEY_SCRATCHPAD: one per run of a task (a retry gets a new one)
_MAX_TASKS = 4096  # runs of tasks whose call counts are remembered (the oldest are forgotten)


class _CallCounts:
    """How many calls of each name a run of a task made, for the `#n` of the next one's key.

    A run of a task is known by its scratchpad, which LangGraph makes anew for each run
    (and each retry): the object is held, so its id is not reused while remembered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: OrderedDict[int, tuple[object, dict[str, int]]] = OrderedDict()

    def next(self, config: Mapping[str, Any], name: str, *, take: bool) -> int:
        configurable = config.get("configurable") or {}
        scratchpad = configurable.get(_SCRATCHPAD) if isinstance(configurable, Mapping) else None
        if scratchpad is None:
            raise ConfigError("once() without key= needs the config LangGraph gave the task (it has no scratchpad); or give key=")
        with self._lock:
            held = self._runs.get(id(scratchpad))
            if held is None or held[0] is not scratchpad:
                held = self._runs[id(scratchpad)] = (scratchpad, {})
                while len(self._runs) > _MAX_TASKS:
                    self._runs.popitem(last=False)
            counts = held[1]
            ordinal = counts.get(name, 0)
            if take:
                counts[name] = ordinal + 1
            return ordinal


_counts = _CallCounts()


def _key(config: Mapping[str, Any], name: str, key: Any, *, take: bool) -> EffectKey:
    return effect_key(config, name, key=key, ordinal=0 if key is not None else _counts.next(config, name, take=take))


def _saver(config: Mapping[str, Any], saver: Any) -> Any:
    found = saver or (config.get("configurable") or {}).get(_CHECKPOINTER)
    if found is None or not hasattr(found, "record_effect"):
        raise ConfigError(
            "once() records into langgraph-pg-durable's saver: compile the graph with checkpointer=DurablePostgresSaver(...) "
            f"(or AsyncDurablePostgresSaver), or pass saver=; this task's checkpointer is {type(found).__name__}"
        )
    return found


def once(config: Mapping[str, Any], name: str, fn: Callable[..., T], *args: Any, key: Any = None, saver: Any = None, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` the first time this task makes this call; its recorded result
    every time the task runs again. `name` names the call in the task (the n-th call of a
    name is `name#n`), or `key=` does (`name/key`: a call in a loop, by what it is for).
    `config` is the one LangGraph gave the node or tool. The result must be something the
    saver stores (the types a checkpoint may hold); it is committed before `once` returns.
    An exception from `fn` is not recorded: the next run of the task calls again. A run
    whose thread another run has taken since (one writer per thread) is refused the call,
    a ThreadTakenError, unless its result is recorded."""
    effect = _key(config, name, key, take=True)
    target = _saver(config, saver)
    found, result = target.find_effect(effect, config)
    if found:
        return result  # type: ignore[no-any-return]
    return target.record_effect(effect, config, fn(*args, **kwargs))  # type: ignore[no-any-return]


async def aonce(
    config: Mapping[str, Any], name: str, fn: Callable[..., Awaitable[T]], *args: Any, key: Any = None, saver: Any = None, **kwargs: Any
) -> T:
    """`once` for an async node or tool: `await fn(*args, **kwargs)` the first time."""
    effect = _key(config, name, key, take=True)
    target = _saver(config, saver)
    if hasattr(target, "afind_effect"):
        found, result = await target.afind_effect(effect, config)
    else:  # the sync saver in an async graph
        found, result = await asyncio.to_thread(target.find_effect, effect, config)
    if found:
        return result  # type: ignore[no-any-return]
    value = await fn(*args, **kwargs)
    if hasattr(target, "arecord_effect"):
        return await target.arecord_effect(effect, config, value)  # type: ignore[no-any-return]
    return await asyncio.to_thread(target.record_effect, effect, config, value)


def idempotency_key(config: Mapping[str, Any], name: str, *, key: Any = None) -> str:
    """The idempotency key of the next `once(config, name, ...)` call of this task (with the
    same `key=`), the same text in every run of the task: for an external API that accepts
    one (Stripe's `Idempotency-Key`), which then covers the window between the call and the
    commit of its result."""
    return _key(config, name, key, take=False).idempotency_key()
