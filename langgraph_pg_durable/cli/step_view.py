"""What `lgpd show` tells about one step, built without I/O from what the commands read: the
step's row (`StepRecord`), the action rows of its run, and its parent's state.

- prompt: the messages in state before the step (its parent checkpoint's `messages`);
- response: what each task that made the step wrote (the action log's payloads);
- tool calls: each call the response asks for, paired by id with its result wherever the
  run has one (usually the next step's tool task);
- interrupts and errors: of the tasks that ran from the step.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.actions import as_messages, describe, message_json, readable
from ..core.logs import ActionRecord
from ..core.steps import StepRecord
from .state import without_internals


def prompt_of(values: Mapping[str, Any] | None) -> list[Any]:
    """The messages of a state (its `messages` channel, or any channel of messages), as JSON."""
    if not values:
        return []
    for channel in ("messages", *sorted(k for k in values if k != "messages")):
        messages = as_messages(channel, values.get(channel)) if channel in values else None
        if messages is not None and channel != "__start__":
            return [message_json(m) for m in messages]
    return []


def _messages(payload: Any) -> list[dict[str, Any]]:
    found = payload.get("messages") if isinstance(payload, Mapping) else None
    return [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []


def _function(call: Mapping[str, Any]) -> Mapping[str, Any]:
    found = call.get("function")
    return found if isinstance(found, Mapping) else {}


def _arguments(call: Mapping[str, Any]) -> Any:
    raw = _function(call).get("arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def step_view(
    step: StepRecord,
    actions: Iterable[ActionRecord],
    parent_values: Mapping[str, Any] | None,
    *,
    full_writes: Sequence[tuple[str, str, Any]] | None = None,
    internals: bool = False,
    answers: Iterable[ActionRecord] | None = None,
) -> dict[str, Any]:
    """The step as `lgpd show --format json` prints it (README, "Command line"). A task's
    writes to LangGraph's own channels (`payload.state`) are left out unless `internals`.
    `answers`: more actions to find the tool calls' results in (the thread's: a reviewed call
    runs in the run after its review), after the step's run's own.

    With `full_writes` (the parent checkpoint's pending writes, as read with their values),
    each response is described again from them: a value the log shows by size (it lives
    in the object store) is then there whole."""
    runs = list(actions)
    made = [a for a in runs if a.checkpoint_ns == step.checkpoint_ns and a.checkpoint_id == step.parent_checkpoint_id]
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in full_writes or ():
        by_task.setdefault(task_id, []).append((channel, value))
    response = []
    for a in made:
        payload = a.payload
        if a.task_id in by_task:
            payload = json.loads(describe(by_task[a.task_id], checkpoint_ns=a.checkpoint_ns, task_id=a.task_id, task_path="").payload)
        response.append({"agent": a.agent, "action_type": a.action_type, "task_id": a.task_id, "payload": _shown(payload, internals)})
    results: dict[str, Any] = {}
    for action in runs if answers is None else [*runs, *answers]:
        for message in _messages(action.payload):
            if message.get("role") == "tool" and message.get("tool_call_id") is not None:
                results.setdefault(str(message["tool_call_id"]), message.get("content"))
    tool_calls = []
    for task in response:
        for message in _messages(task["payload"]):
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    call_id = call.get("id")
                    tool_calls.append(
                        {
                            "id": call_id,
                            "name": _function(call).get("name"),
                            "arguments": _arguments(call),
                            "result": results.get(str(call_id)),
                            "answered": str(call_id) in results,
                        }
                    )
    pending = [t for t in step.ran_from if t.action_type in ("error", "interrupt")]
    return {
        "thread_id": step.thread_id,
        "checkpoint_ns": step.checkpoint_ns,
        "checkpoint_id": step.checkpoint_id,
        "run_id": step.run_id,
        "step": step.step,
        "source": step.source,
        "created_at": step.created_at,
        "prompt": prompt_of(parent_values),
        "response": response,
        "tool_calls": tool_calls,
        "interrupts": [i for t in pending if t.action_type == "interrupt" for i in _details(t.detail, "interrupts")],
        "errors": [{"agent": t.agent, "task_id": t.task_id, **_error(t.detail)} for t in pending if t.action_type == "error"],
    }


def _shown(payload: Any, internals: bool) -> Any:
    """A payload without the writes to LangGraph's own channels (unless `internals`)."""
    state = payload.get("state") if isinstance(payload, Mapping) else None
    if internals or not isinstance(state, Mapping):
        return payload
    kept = without_internals(dict(state))
    out = {k: v for k, v in payload.items() if k != "state"}
    if kept:
        out["state"] = kept
    return out


def _details(detail: Any, key: str) -> Sequence[Any]:
    found = detail.get(key) if isinstance(detail, Mapping) else None
    return found if isinstance(found, list) else []


def _error(detail: Any) -> dict[str, Any]:
    found = detail.get("error") if isinstance(detail, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {"error": readable(found)}
