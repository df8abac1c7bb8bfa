"""The action log: what one task did, as a row a person can read in SQL.

`describe` turns a task's pending writes into its action: the agent (the node, under
its subgraph path), the action type, and a JSON payload. Messages take the OpenAI chat
shape (langchain-core's converter), other values their natural JSON form; what has none
(bytes, an offloaded value, an arbitrary object) becomes a marker object naming its kind
and size, never a silent truncation. A state write whose JSON passes `STATE_VALUE_BYTES`
is shown by its size and its first characters (a marker too): the log says what a node
did, the write itself holds the value, and a copy of every large value in the log would
double what a step stores. Pure: values in, JSON text out.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import decimal
import enum
import math
import operator
import re
import traceback
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, convert_to_openai_messages
from langgraph.checkpoint.base import WRITES_IDX_MAP

from .codec import dump_json, dump_json_bytes

# The action types, most specific first: a task that wrote several kinds gets the first.
ACTION_TYPES: Final = ("error", "interrupt", "tool_call", "llm_call", "observation", "human", "decision")

NULL_TASK_ID: Final = "00000000-0000-0000-0000-000000000000"  # writes of the caller (Command, resume)
INPUT_AGENT: Final = "__input__"  # the agent of the caller's writes
UPDATE_AGENT: Final = "__update__"  # the agent of an update_state edit
_START: Final = "__start__"  # the node that takes a graph's input
_ERROR: Final = "__error__"
_INTERRUPT: Final = "__interrupt__"
_RESUME: Final = "__resume__"
_TASKS: Final = "__pregel_tasks"
_BRANCH: Final = "branch:to:"
_BRANCH_CHARS: Final = len(_BRANCH)
# LangGraph's fixed write indexes of its special channels (`__error__` -1, ...), held as a
# constant of this module: compiled, an imported name is a dict lookup at every use.
SPECIAL_WRITE_IDX: Final[dict[str, int]] = WRITES_IDX_MAP
_INTERNAL: Final = frozenset({"__no_writes__"})  # LangGraph's marker of a task that wrote nothing
_PULL: Final = "~__pregel_pull, "
_PUSH: Final = "~__pregel_push, "
_PULL_CHARS: Final = len(_PULL)
_PULL_START: Final = _PULL + _START  # the task path of a graph's input
_UPDATE: Final = "~__interrupt__, "  # the task path LangGraph gives the writes of update_state (its as_node is not passed on)
MARKER: Final = "$lgpd"  # the key of a marker object: {"$lgpd": "bytes", "size": 12}
_ROLES: Final = frozenset({"human", "user", "ai", "assistant", "system", "developer", "tool", "function"})
_SURROGATE: Final = re.compile("[" + chr(0xD800) + "-" + chr(0xDFFF) + "]")  # (mypyc refuses surrogates in a literal)
# A task's writes as put_writes gets them: (channel, value) pairs, tuples as a rule, lists
# from LangGraph's task cache. Annotated as any sequence: compiled code checks a tuple's
# type and would refuse the lists.
TaskWrites = Sequence[Sequence[Any]]
_ERROR_REPR: Final = re.compile(r"([A-Za-z_][\w.]*)\((.*)\)", re.S)
_MAX_DEPTH: Final = 64
_INT64: Final = 1 << 63  # an int jsonb holds as a number: -_INT64 <= n < _INT64 (see `_int_json`)
_MAX_TRACEBACK_CHARS: Final = 16 << 10
# A state write (not a message, error or interrupt) whose JSON is longer is shown by its size
# and its first STATE_HEAD_CHARS characters: {"$lgpd": "value", "size": n, "head": "..."}.
STATE_VALUE_BYTES: Final = 512
STATE_HEAD_CHARS: Final = 160


# Whether a type is a message, by type: BaseMessage is a pydantic model, whose metaclass makes
# `isinstance(x, BaseMessage)` an ABCMeta check (~0.3 us, a negative one as much), and a
# task's writes are checked a dozen times. Bounded: a program that makes types without end
# goes back to isinstance past this many.
_MESSAGE_TYPES: Final[dict[type, bool]] = {}
_MESSAGE_TYPES_HELD: Final = 512


def is_message(value: Any) -> TypeGuard[BaseMessage]:
    """`isinstance(value, BaseMessage)`, remembered by the value's type."""
    kind = type(value)
    known = _MESSAGE_TYPES.get(kind)
    if known is None:
        known = issubclass(kind, BaseMessage)
        if len(_MESSAGE_TYPES) < _MESSAGE_TYPES_HELD:
            _MESSAGE_TYPES[kind] = known
    return known


@dataclass(slots=True)  # made on every put or put_writes: not frozen (see core.plan.Query)
class Action:
    """One action row: who (`agent`), what kind (`action_type`), and the payload as JSON text."""

    agent: str
    action_type: str
    payload: str
    idx: int  # the index of the task's first write, as the writes table keys it


def agent_name(checkpoint_ns: str, task_id: str, task_path: str, sends: Sequence[str] | None, label: str | None = None) -> str:
    """The node that ran, under its subgraph path: `researcher/tools` for the node `tools`
    of the subgraph the node `researcher` runs. In a subgraph that is a named agent
    (`label`: the `lc_agent_name` LangChain's agents put in their config's metadata), the
    name follows the node that runs it unless it is that node's own: deepagents' sub-agent
    `researcher`, run by the node `tools`, is `tools/researcher/model`.

    A Send's task names only its index among the checkpoint's pending Sends (`sends`, the
    node of each, when the saver knows them); a task of the functional API names none.
    """
    if task_id != NULL_TASK_ID and task_path[:_PULL_CHARS] == _PULL:  # a node's task: by its path alone
        known = _PULLED_AGENTS.get((checkpoint_ns, task_path, label))
        if known is None:
            known = _agent_at(checkpoint_ns, task_path[_PULL_CHARS:], label)
            if len(_PULLED_AGENTS) >= _PULLED_AGENTS_HELD:
                _PULLED_AGENTS.clear()
            _PULLED_AGENTS[(checkpoint_ns, task_path, label)] = known
        return known
    if task_id == NULL_TASK_ID:
        node = INPUT_AGENT
    elif task_path.startswith(_UPDATE):
        node = UPDATE_AGENT
    elif task_path.startswith(_PUSH):
        index = send_index(task_path)
        if index is not None:
            node = sends[index] if sends is not None and index < len(sends) else UNKNOWN_SEND
        else:
            node = "__task__"
    else:
        node = task_path or "__unknown__"
    return _agent_at(checkpoint_ns, node, label)


def _agent_at(checkpoint_ns: str, node: str, label: str | None) -> str:
    """`node` under its subgraph path (see `agent_name`)."""
    path = subgraph_path(checkpoint_ns)
    if path and label and label != path[-1]:
        path.append(label)
    return "/".join([*path, node])


# A node task's agent by (namespace, task path, label): the same few for every step of a
# run. Bounded: emptied when full (a namespace names a task id, new at each subgraph call).
_PULLED_AGENTS: Final[dict[tuple[str, str, str | None], str]] = {}
_PULLED_AGENTS_HELD: Final = 1024


UNKNOWN_SEND: Final = "__send__"  # the node of a Send task whose checkpoint's Sends are not known (yet)


def is_update(task_path: str) -> bool:
    """Whether a task path is the one LangGraph gives an update_state edit's writes."""
    return task_path.startswith(_UPDATE)


def send_index(task_path: str) -> int | None:
    """The index among its checkpoint's pending Sends that a Send task's path names, or None
    for any other task."""
    if not task_path.startswith(_PUSH):
        return None
    first = task_path[len(_PUSH) :].split(", ", 1)[0]
    return int(first) if first.isdigit() else None


@dataclass(frozen=True)
class SendToName:
    """An action row stored as `.../__send__` (its checkpoint's Sends were not known when its
    writes were), to be named when they are: the row's key, and the Send index it ran."""

    task_id: str
    idx: int
    run_id: str
    agent: str
    send_index: int

    def named(self, sends: Sequence[str]) -> str | None:
        """The agent the row should have, given the checkpoint's Sends (None: still unknown)."""
        if self.send_index >= len(sends) or not self.agent.endswith(UNKNOWN_SEND):
            return None
        return self.agent[: -len(UNKNOWN_SEND)] + sends[self.send_index]


def send_nodes(checkpoint: Mapping[str, Any]) -> tuple[str, ...]:
    """The node of each pending Send of a checkpoint, in order: a Send's task names only its
    index among them (see `agent_name`)."""
    sends = (checkpoint.get("channel_values") or {}).get(_TASKS) or ()
    return tuple(str(getattr(send, "node", "__send__")) for send in sends) if isinstance(sends, (list, tuple)) else ()


def run_status(action_type: str, checkpoint_ns: str) -> str | None:
    """The status a root task's action gives its run (an error, an interrupt), else None."""
    return None if checkpoint_ns else {"error": "error", "interrupt": "interrupted"}.get(action_type)


def subgraph_path(checkpoint_ns: str) -> list[str]:
    """The nodes whose subgraphs a namespace is in: 'a:<task id>|b:<task id>' is [a, b]."""
    return [part.split(":", 1)[0] for part in checkpoint_ns.split("|")] if checkpoint_ns else []


def describe(
    writes: TaskWrites,
    *,
    checkpoint_ns: str,
    task_id: str,
    task_path: str,
    sends: Sequence[str] | None = None,
    offloaded: Mapping[int, tuple[str, int]] | None = None,
    encrypted: bool = False,
    prior_messages: Mapping[str, Any] | None = None,
    agent_label: str | None = None,
    found: Sequence[list[Any] | None] | None = None,
) -> Action:
    """The action of a task that wrote `writes`.

    A task is typed and shown by what is new in its writes. A message whose id is in
    `prior_messages` (already in the channel the task was handed, mapped to what it was)
    is not new work and does not type the task: changed, it goes under `rewritten` (the
    message `HumanInTheLoopMiddleware` writes back with the reviewer's edit is a decision,
    not a second tool call); unchanged, it is only counted (`unchanged`), so an agent
    subgraph that returns the whole conversation is typed and shown by its own reply, and
    its row does not grow with the conversation.

    `found`: the messages of each write (`as_messages`), when the caller has them already
    (`messages_of`). `agent_label` names the agent a subgraph is (see `agent_name`). `offloaded` maps the
    position of a write stored in the object store to its (key,
    size): its payload is a marker. With `encrypted`, the payload says so and holds
    nothing written (agent and type stay readable).
    """
    agent = agent_name(checkpoint_ns, task_id, task_path, sends, agent_label)
    kinds: set[str] = set()
    payload: dict[str, Any] = {}
    messages: list[Any] = []
    rewritten: list[Any] = []
    unchanged = 0
    prior = prior_messages or {}
    state: dict[str, Any] = {}
    repeated: list[str] = []
    for position, (channel, value) in enumerate(writes):
        if offloaded and position in offloaded:
            key, size = offloaded[position]
            marker = {MARKER: "offloaded", "size": size, "object_key": key}
            _put(state, repeated, channel, marker)
            continue
        if channel[:2] == "__":  # LangGraph's own channels (a state channel may be named so too)
            if channel == _ERROR:
                kinds.add("error")
                payload["error"] = _error(value)
                continue
            if channel == _INTERRUPT:
                kinds.add("interrupt")
                payload["interrupts"] = [_interrupt(i) for i in (value if isinstance(value, (list, tuple)) else [value])]
                continue
            if channel == _RESUME:
                payload["resume"] = readable(value)
                continue
            if channel == _TASKS:
                payload.setdefault("sends", []).append(_send(value))
                continue
            if channel in _INTERNAL:
                continue
        elif channel[:_BRANCH_CHARS] == _BRANCH:
            payload.setdefault("goto", []).append(channel[_BRANCH_CHARS:])
            continue
        if (held := as_messages(channel, value) if found is None else found[position]) is not None:
            for message in held:
                message_id = _message_id(message) if prior else None
                if message_id is None or message_id not in prior:
                    messages.append(message_json(message))
                    kinds.add(_message_kind(message))
                elif _same(message, prior[message_id]):
                    unchanged += 1
                else:
                    rewritten.append(message_json(message))
        else:
            kind = type(value)
            # A step counter, a flag, a branch's None (most state writes of a step) are their
            # own JSON: `readable` of them, without its calls.
            if (kind is int and -_INT64 <= value < _INT64) or value is None or kind is bool:
                shown = value
            else:
                shown = _state_value(value)
            if channel in state:
                _put(state, repeated, channel, shown)
            else:
                state[channel] = shown
    if task_id == NULL_TASK_ID or task_path.startswith(_UPDATE) or (task_path == _PULL_START and not checkpoint_ns):
        action_type = "human"  # the caller's input, its Command, a resume value, or an update_state edit
    elif is_subgraph_input(checkpoint_ns, task_path):
        action_type = "decision"  # what a parent graph handed its subgraph
    elif not kinds:
        action_type = "decision"
    elif len(kinds) == 1:
        (action_type,) = kinds
    else:
        action_type = next(kind for kind in ACTION_TYPES if kind in kinds)
    if messages:
        payload["messages"] = messages
    if rewritten:
        payload["rewritten"] = rewritten
    if unchanged:
        payload["unchanged"] = unchanged
    if state:
        payload["state"] = state
    if repeated:
        payload["repeated"] = repeated
    idx = SPECIAL_WRITE_IDX.get(writes[0][0], 0) if writes else 0
    if encrypted:
        payload = {MARKER: "encrypted"}
    return Action(agent, action_type, dump_json(payload), idx)


def is_subgraph_input(checkpoint_ns: str, task_path: str) -> bool:
    """Whether a task's writes are a subgraph's input: what its parent graph handed it."""
    return bool(checkpoint_ns) and task_path == _PULL_START


UNSAVED_AGENT: Final = "__unsaved__"  # the agent of a run whose tasks were not saved (durability="exit")


def steps_unsaved(step: Any, parent_step: int | None, has_parent: bool) -> int:
    """How many super-steps a run took whose puts LangGraph skipped (durability="exit": it
    puts only a run's last checkpoint, and its tasks' writes are never saved), from a root
    checkpoint's step and its parent's; 0 for a put that follows its parent step by step."""
    if not isinstance(step, int) or isinstance(step, bool):
        return 0
    if not has_parent:
        return step + 1 if step >= 0 else 0  # a thread's first checkpoint is otherwise its input, at step -1
    return step - parent_step if parent_step is not None and step - parent_step > 1 else 0


def describe_unsaved(messages: Sequence[Any], steps: int) -> Action:
    """What the log can say of a run whose tasks were not saved (durability="exit"): the
    messages new in its last checkpoint, typed by them, and how many steps it took."""
    kinds = {_message_kind(m) for m in messages}
    action_type = next((kind for kind in ACTION_TYPES if kind in kinds), "decision")
    payload = {"messages": [message_json(m) for m in messages], "unsaved_steps": steps}
    return Action(UNSAVED_AGENT, action_type, dump_json(payload), 0)


def _send(send: Any) -> Any:
    """A Send as the log keeps it. A ToolNode's Send (`create_react_agent`) carries the tool
    call and the whole state it hands the tool: the state is named by its channels, not
    copied, so a row is bounded by what the task added, not by the conversation so far."""
    arg = getattr(send, "arg", None)
    if isinstance(arg, Mapping) and "tool_call" in arg and "state" in arg:
        state = arg["state"]
        named = (
            {MARKER: "state", "channels": sorted(map(_key, state))}
            if isinstance(state, Mapping)
            else {MARKER: "state", "type": _type_name(state)}
        )
        return {"node": readable(getattr(send, "node", None)), "arg": readable({**arg, "state": named})}
    return readable(send)


def _put(state: dict[str, Any], repeated: list[str], channel: str, value: Any) -> None:
    """One write into `state`: a channel written twice by one task holds a list of its
    values, and is named in `repeated`."""
    if channel not in state:
        state[channel] = value
    elif channel in repeated:
        state[channel].append(value)
    else:
        state[channel] = [state[channel], value]
        repeated.append(channel)


def _state_value(value: Any) -> Any:
    """A state write as JSON, or past STATE_VALUE_BYTES its size and head (see the module)."""
    shown = readable(value)
    if isinstance(shown, (dict, list, str)):
        data = dump_json_bytes(shown)
        if len(data) > STATE_VALUE_BYTES:
            # The head from the first bytes alone: STATE_HEAD_CHARS characters take at most
            # four bytes each, and "ignore" drops only a character the cut split.
            head = data[: STATE_HEAD_CHARS * 4].decode(errors="ignore")[:STATE_HEAD_CHARS]
            return {MARKER: "value", "size": len(data), "head": head}
    return shown


def as_messages(channel: str, value: Any) -> list[Any] | None:
    """The messages a write holds, or None if it is not messages: a message, a list of
    them (or of LangChain's message-like forms: (role, text) pairs, role dicts), or a str
    written to a channel named `messages` (which `add_messages` takes for a human turn)."""
    kind = type(value)
    if kind is str:  # before the check against BaseMessage
        return [("human", value)] if channel == "messages" else None
    if kind in _NOT_MESSAGES:  # a step counter, a flag, a branch's None: most writes of a step
        return None
    if kind is list and value and type(value[0]) in _NOT_MESSAGE_ITEMS:  # a list of text, numbers: not messages
        return None
    if is_message(value):
        return [value]
    if isinstance(value, str):
        return [("human", value)] if channel == "messages" else None
    if isinstance(value, (list, tuple)) and value and all(_message_like(v) for v in value):
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            return [value]  # one (role, text) pair
        return list(value)
    return None


def _message_id(message: Any) -> str | None:
    """The id of a message (a BaseMessage's, or a role dict's `id`), None if it has none."""
    found = message.id if is_message(message) else message.get("id") if isinstance(message, Mapping) else None
    return found if isinstance(found, str) else None


KNOWN: Final = object()  # a message known to be in the channel, whose content the saver no longer keeps


def _same(message: Any, before: Any) -> bool:
    """Whether a message written again is the message it was (an error comparing: not; one
    whose earlier content is not kept, `KNOWN`: taken as the same)."""
    if message is before or before is KNOWN:
        return True
    try:
        return bool(message == before)
    except Exception:
        return False


def messages_of(writes: TaskWrites) -> list[list[Any] | None]:
    """The messages each of a task's writes holds (`as_messages`), found once for both
    `written_messages` and `describe`; a number, a flag or None without the call."""
    return [None if type(value) in _NOT_MESSAGES else as_messages(channel, value) for channel, value in writes]


def written_messages(writes: TaskWrites, found: Sequence[list[Any] | None] | None = None) -> dict[str, Any]:
    """The messages a task's writes hold that have an id, by id (`found`: see `messages_of`)."""
    out: dict[str, Any] = {}
    for held in messages_of(writes) if found is None else found:
        for message in held or ():
            message_id = _message_id(message)
            if message_id is not None:
                out[message_id] = message
    return out


_ID: Final = operator.attrgetter("id")


def held_message_ids(channel_values: Mapping[str, Any]) -> frozenset[str]:
    """The ids of the messages a checkpoint's channels hold (see `held_messages`)."""
    found: list[frozenset[Any]] = []
    for value in channel_values.values():
        if isinstance(value, list) and value and is_message(value[0]) and is_message(value[-1]):
            try:  # at C speed: a put of a long chat sends every message it holds
                found.append(frozenset(map(_ID, value)))
            except AttributeError:  # not messages all through
                found.append(frozenset(getattr(m, "id", None) for m in value))
    if not found:
        return frozenset()
    out = found[0] if len(found) == 1 else frozenset().union(*found)
    # Text ids as a rule; None is a message add_messages has not given an id yet.
    return out if set(map(type, out)) <= {str} else frozenset(i for i in out if isinstance(i, str))


def held_messages(channel_values: Mapping[str, Any]) -> dict[str, BaseMessage]:
    """The messages a checkpoint's channels hold, by id: those of every channel whose value
    is a list of messages (a list whose first and last items are messages)."""
    out: dict[str, BaseMessage] = {}
    for value in channel_values.values():
        if isinstance(value, list) and value and is_message(value[0]) and is_message(value[-1]):
            try:  # the common case, at a third of the checked loop's cost (a put of a long chat sends one)
                found = {m.id: m for m in value}
            except AttributeError:  # not messages all through
                found = {m.id: m for m in value if is_message(m)}
            found.pop(None, None)  # a message add_messages has not given an id yet
            out.update(found)
    return out


def replayed_messages(history: Mapping[str, Any]) -> dict[str, Any]:
    """The messages a DeltaChannel's history replays (its seed value, then its writes, oldest
    first), by id, each in its latest form: what the channel held at the checkpoint, less
    what a RemoveMessage took out (still known, which is all the action log asks)."""
    out: dict[str, Any] = {}
    seed = history.get("seed")
    seed = getattr(seed, "value", seed)  # a _DeltaSnapshot holds the value it snapshots
    for message in seed if isinstance(seed, list) else ():
        if isinstance(message, BaseMessage) and isinstance(message.id, str):
            out[message.id] = message
    writes = history.get("writes") or ()
    out.update(written_messages([(w[1], w[2]) for w in writes if isinstance(w, (tuple, list)) and len(w) >= 3 and isinstance(w[1], str)]))
    return out


# Types whose values are never messages nor message-like forms, by exact type (a subclass
# of one, a str enum say, takes the checks below).
_NOT_MESSAGES: Final = frozenset({int, float, bool, type(None), bytes})
# A list whose first item is of one of these is not a list of messages (its first item is
# not message-like: a str is a human turn only written alone to `messages`).
_NOT_MESSAGE_ITEMS: Final = _NOT_MESSAGES | {str}


def _message_like(value: Any) -> bool:
    if is_message(value):
        return True
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str):
        return value[0] in _ROLES
    if isinstance(value, Mapping):
        return "content" in value and (value.get("role") in _ROLES or value.get("type") in _ROLES)
    return False


_OPENAI_ROLES: Final[dict[type, str]] = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool", SystemMessage: "system"}


def _openai_text_message(message: Any) -> dict[str, Any] | None:
    """What LangChain's `convert_to_openai_messages` makes of one of its four common
    messages with text content and no tool calls (most of a chat), without its general
    walk (~16 us a message, the action log's largest share); None for any other message,
    which goes to the converter. tests/unit/test_actions_core.py holds it to the converter."""
    role = _OPENAI_ROLES.get(type(message))
    content = message.content if role is not None else None
    if type(content) is not str or (role == "assistant" and message.tool_calls):
        return None
    if role == "system":
        given: Any = message.additional_kwargs.get("__openai_role__", "system")
        if type(given) is not str:
            return None  # the converter raises on it
        role = given
    out: dict[str, Any] = {"role": role}
    if message.name:
        out["name"] = message.name
    refusal = message.additional_kwargs.get("refusal")
    if refusal:
        out["refusal"] = refusal
    if role == "tool":
        out["tool_call_id"] = message.tool_call_id
    out["content"] = content
    return out


def message_json(message: Any) -> Any:
    """A message in the OpenAI chat shape, with LangChain's id, usage_metadata and
    response_metadata under their own keys; a message the converter refuses keeps its
    LangChain type and content."""
    converted = _openai_text_message(message)
    if converted is not None:
        # Its keys are our own literals and most of its values text: `readable` without its
        # walk (which took a third of a text message's 1.7 us).
        out = converted  # (our own dict: its values are made readable in place)
        for key, value in out.items():
            out[key] = _text(value) if type(value) is str else readable(value, 1)
    else:
        try:
            # In a list: the converter takes a lone (role, text) pair for two messages.
            converted = convert_to_openai_messages([message])[0]
        except Exception:  # a RemoveMessage, a malformed dict: still shown, by type
            converted = {"type": getattr(message, "type", type(message).__name__), "content": readable(getattr(message, "content", None))}
        out = readable(converted)
    if is_message(message) and isinstance(out, dict):
        if message.id is not None:
            out["id"] = message.id
        # usage_metadata is asked of an AIMessage only: another message has none, and
        # pydantic's miss of an attribute raises inside getattr (~2 us).
        kind = type(message)  # one of the four common types by itself, else by isinstance (an ABCMeta check)
        common = kind in _OPENAI_ROLES
        for extra in (
            ("usage_metadata", "response_metadata")
            if (kind is AIMessage if common else isinstance(message, AIMessage))
            else ("response_metadata",)
        ):
            found = getattr(message, extra, None)
            if found:
                out[extra] = readable(found)
        # Asked of a ToolMessage only: another message has no `status`, and pydantic's
        # miss of an attribute raises inside getattr (~2 us).
        if kind is ToolMessage if common else isinstance(message, ToolMessage):
            status = cast(ToolMessage, message).status
            if status != "success":
                out["status"] = readable(status)  # "error": the tool failed, or a reviewer rejected the call
    return out


# The kind of each of LangChain's common message types but the AI's (which turns on its calls).
_KIND_OF_TYPE: Final[dict[type, str]] = {HumanMessage: "human", ToolMessage: "observation", SystemMessage: "decision"}


def _message_kind(message: Any) -> str:
    kind = type(message)  # the common types by themselves: their `type` is fixed
    if kind is AIMessage:
        return "tool_call" if message.tool_calls else "llm_call"
    known = _KIND_OF_TYPE.get(kind)
    if known is not None:
        return known
    role = _role(message)
    if role in ("ai", "assistant"):
        calls = getattr(message, "tool_calls", None) if is_message(message) else None
        if calls is None and isinstance(message, Mapping):
            calls = message.get("tool_calls")
        return "tool_call" if calls else "llm_call"
    if role in ("tool", "function"):
        return "observation"
    if role in ("human", "user"):
        return "human"
    return "decision"


def _role(message: Any) -> str | None:
    if is_message(message):
        return message.type
    if isinstance(message, (list, tuple)):
        return str(message[0])
    if isinstance(message, Mapping):
        return str(message.get("role") or message.get("type"))
    return None


def _error(value: Any) -> dict[str, Any]:
    """An error write as {type, message, traceback}: the traceback when the exception has one."""
    if isinstance(value, BaseException):
        out: dict[str, Any] = {"type": type(value).__name__, "message": _text(str(value))}
        if value.__traceback__ is not None:
            text = "".join(traceback.format_exception(value))
            if len(text) > _MAX_TRACEBACK_CHARS:
                out["traceback_chars"] = len(text)
                text = text[-_MAX_TRACEBACK_CHARS:]
                out[MARKER] = "traceback cut to its last 16 KiB"
            out["traceback"] = _text(text)
        return out
    if isinstance(value, str) and (match := _ERROR_REPR.fullmatch(value[:_MAX_TRACEBACK_CHARS])):
        # As stored, an error is its repr, `ValueError('...')`: read back, it keeps its
        # type and message (its traceback was never stored).
        return {"type": match[1].rpartition(".")[2], "message": _text(_literal_text(match[2]))}
    return {"type": type(value).__name__, "message": readable(value)}


def _literal_text(args: str) -> str:
    """The message of an error's repr: its one string argument, read as a literal (never
    evaluated), else the arguments as written."""
    try:
        found = ast.literal_eval(args)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return args
    return found if isinstance(found, str) else args


def _interrupt(value: Any) -> Any:
    if hasattr(value, "value") and hasattr(value, "id"):
        return {"id": readable(value.id), "value": readable(value.value)}
    return readable(value)


def readable(value: Any, depth: int = 0) -> Any:
    """A value as JSON-ready data, or a marker object saying what it is when it has no
    JSON form. Never calls anything but pydantic's and the message converter's dumps."""
    # The plain types first, by exact type (what the chain below does for them, without
    # its isinstance checks): a message's JSON is a dict of str, dicts, lists and numbers.
    kind = type(value)
    if kind is str:
        return _text(value)
    if kind is dict and depth < _MAX_DEPTH:
        return _mapping_json(value, depth)
    if kind is list and depth < _MAX_DEPTH:
        return _items_json(value, depth)
    if kind is int:
        return _int_json(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _int_json(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return _text(value)
    if depth >= _MAX_DEPTH:
        return {MARKER: "too deep", "type": _type_name(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {MARKER: "bytes", "size": len(value)}
    if isinstance(value, BaseMessage):
        return message_json(value)
    if isinstance(value, Mapping):
        return _mapping_json(value, depth)
    if isinstance(value, (set, frozenset)):  # in a stable order: a set's own changes with the hash seed
        return sorted((readable(v, depth + 1) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return _items_json(value, depth)
    if isinstance(value, enum.Enum):
        return readable(value.value, depth + 1)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": _text(str(value))}
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic
        try:
            return readable(dump(mode="json"), depth + 1)
        except Exception:
            return {MARKER: "object", "type": _type_name(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: readable(getattr(value, f.name, None), depth + 1) for f in dataclasses.fields(value)}
    if hasattr(value, "node") and hasattr(value, "arg"):  # a Send
        return {"node": readable(value.node), "arg": readable(value.arg, depth + 1)}
    return {MARKER: "object", "type": _type_name(value)}


def _int_json(value: int) -> int | str:
    """An int as jsonb keeps it: as text past 64 bits."""
    return value if -_INT64 <= value < _INT64 else str(value)


def _mapping_json(value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
    return {_key(k): readable(v, depth + 1) for k, v in value.items()}


def _items_json(value: Sequence[Any], depth: int) -> list[Any]:
    return [readable(v, depth + 1) for v in value]


def _key(key: Any) -> str:
    return _text(key if isinstance(key, str) else str(key))


def _text(text: str) -> str:
    """Text jsonb can hold: NUL (which jsonb refuses) and lone surrogates (which UTF-8
    cannot encode) become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return text


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def agent_label(metadata: Any) -> str | None:
    """The agent name LangChain's agents (`create_agent(name=...)`, deepagents' sub-agents)
    put in their config's metadata, and so in their checkpoints' (`lc_agent_name`)."""
    label = metadata.get("lc_agent_name") if isinstance(metadata, Mapping) else None
    return _text(label) if isinstance(label, str) and label and "/" not in label else None
