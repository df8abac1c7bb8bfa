"""Conversations as fine-tuning lines, without I/O: the four formats `lgpd export` writes,
each line checked against its format's rules first; the redaction applied to a
conversation before it becomes a line; the dedupe and train/validation split of lines.

- openai: OpenAI's chat fine-tuning JSONL: `messages` (system, user, assistant with
  `tool_calls[].function.arguments` as a JSON string, tool with `tool_call_id`), `tools`.
- trl: Hugging Face TRL's conversational format: the same roles, arguments as objects,
  `tools` as JSON schemas.
- sharegpt: LLaMA-Factory's ShareGPT: `conversations` of human / gpt / function_call /
  observation turns, human or observation at odd positions and gpt or function_call at
  even ones, `system` and `tools` as strings.
- raw: LangChain's own `messages_to_dict` form, lossless, with the run's metadata.

A conversation that breaks a rule raises `Invalid` with the rule; it is skipped, never
written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_openai_messages, messages_to_dict

from ..errors import ConfigError

FORMATS = ("openai", "trl", "sharegpt", "raw")


class Invalid(ValueError):
    """A conversation its format cannot hold; the message is the rule it breaks."""


# -- redaction -------------------------------------------------------------------------------


# What a message keeps as it is: its kind, the ids that pair a tool call with its result, and
# token counts. Every other field (text, names, arguments, provider data) is redacted.
MESSAGE_STRUCTURE = frozenset({"type", "id", "tool_call_id", "status", "usage_metadata", "role", "chunk_position"})
CALL_FIELDS = frozenset({"tool_calls", "invalid_tool_calls", "tool_call_chunks"})
CALL_STRUCTURE = frozenset({"id", "type", "index"})


@dataclass
class Redactor:
    """Regex rules applied to a conversation before it becomes a line: to every string and
    key of its messages (a JSON text as the data it encodes) and of the run's metadata;
    counts what each rule replaced.

    A rules file has one rule a line: `PATTERN` (replaced by [REDACTED]) or
    `PATTERN => REPLACEMENT`; blank lines and lines starting with # are ignored."""

    rules: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, *, where: str = "the rules") -> Redactor:
        rules = []
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, sep, replacement = line.partition(" => ")
            try:
                rules.append((re.compile(pattern), replacement if sep else "[REDACTED]"))
            except re.error as exc:
                raise ConfigError(f"{where}, line {number}: {pattern!r} is not a regular expression ({exc})") from None
        return cls(rules)

    def __call__(self, value: Any) -> Any:
        """`value` with every string, key and number the rules match replaced, at any depth."""
        if not self.rules or value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, (int, float)):
            return self._number(value)
        if isinstance(value, Mapping):
            return self._mapping(value)
        if isinstance(value, (list, tuple)):
            return [self(item) for item in value]
        return value

    def message(self, message: BaseMessage) -> BaseMessage:
        """A copy of `message` with its data redacted: content, name, tool calls' names and
        arguments, provider data. Ids and kinds stay, so each call still meets its result."""
        if not self.rules:
            return message
        update = {
            name: self._calls(value) if name in CALL_FIELDS else self(value)
            for name in type(message).model_fields
            if name not in MESSAGE_STRUCTURE and (value := getattr(message, name, None)) is not None
        }
        return message.model_copy(update=update)

    def fields(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A record's values redacted (keys and all, at any depth); its field names, which
        the format defines, kept."""
        return {name: self(value) for name, value in record.items()}

    def _calls(self, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{key: value if key in CALL_STRUCTURE else self(value) for key, value in call.items()} for call in calls]

    def _string(self, text: str) -> str:
        """A JSON object or array (tool arguments, a tool's dict result) is redacted as the data
        it encodes first, where an escaped secret no longer hides; then as text."""
        data = _json_data(text)
        if data is not None:
            redacted = self(data)
            if redacted != data:
                text = json.dumps(redacted, ensure_ascii=False)
        return self._text(text)

    def _text(self, text: str) -> str:
        for pattern, replacement in self.rules:
            text, n = pattern.subn(replacement, text)
            if n:
                self.counts[pattern.pattern] = self.counts.get(pattern.pattern, 0) + n
        return text

    def _number(self, number: int | float) -> int | float | str:
        """A number a rule matches (a card, a phone number) becomes the redacted text."""
        text = str(number)
        redacted = self._text(text)
        return number if redacted == text else redacted

    def _mapping(self, mapping: Mapping[Any, Any]) -> dict[Any, Any]:
        """Keys redacted too. A key that redacts to a name already taken gets `#2`, `#3`...
        appended, so no value is dropped; keys the rules leave alone keep their names."""
        names = {key: self(key) if isinstance(key, str) else key for key in mapping}
        taken = {key for key, name in names.items() if name == key}
        out = {}
        for key, value in mapping.items():
            name = names[key]
            if name != key:
                name = _free_name(name, taken)
                taken.add(name)
            out[name] = self(value)
        return out


def _json_data(text: str) -> Any:
    """The object or array `text` encodes, or None when it is not JSON of that kind."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, (dict, list)) else None


def _free_name(name: str, taken: set[Any]) -> str:
    if name not in taken:
        return name
    n = 2
    while f"{name}#{n}" in taken:
        n += 1
    return f"{name}#{n}"


# -- the formats -----------------------------------------------------------------------------


def _text(content: Any, *, role: str) -> str:
    """A message's content as text: a string, or text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, Mapping) and b.get("type") == "text" for b in content):
        return "".join(str(b.get("text", "")) for b in content)
    raise Invalid(f"a {role} message's content is not text")


def _openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    try:
        converted = convert_to_openai_messages(list(messages))
    except Exception as exc:
        raise Invalid(f"a message cannot be put in the chat shape ({type(exc).__name__})") from None
    out = []
    for message in converted:
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise Invalid(f"a message has role {role!r}, not system, user, assistant or tool")
        kept: dict[str, Any] = {"role": role, "content": message.get("content", "")}
        if role == "assistant" and message.get("tool_calls"):
            kept["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                for c in message["tool_calls"]
            ]
        if role == "tool":
            kept["tool_call_id"] = message.get("tool_call_id")
            if message.get("name"):
                kept["name"] = message["name"]
        out.append(kept)
    return out


def _check_chat(messages: list[dict[str, Any]]) -> None:
    """The rules every chat format shares: calls answered, arguments JSON, an assistant last."""
    if not any(m["role"] == "assistant" for m in messages):
        raise Invalid("no assistant turn")
    if messages[-1]["role"] != "assistant":
        raise Invalid(f"the conversation ends on a {messages[-1]['role']} turn, not the assistant's")
    if messages[-1].get("tool_calls"):
        raise Invalid("the conversation ends on a tool call that has no result")
    open_calls: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            try:
                json.loads(call["function"]["arguments"])
            except (TypeError, ValueError):
                raise Invalid(f"the arguments of tool call {call.get('id')!r} are not JSON") from None
            if not call.get("id"):
                raise Invalid("a tool call has no id")
            open_calls[call["id"]] = call["function"]["name"]
        if message["role"] == "tool":
            if message.get("tool_call_id") not in open_calls:
                raise Invalid(f"a tool result answers no call ({message.get('tool_call_id')!r})")
            del open_calls[message["tool_call_id"]]
        elif message["role"] == "assistant" and open_calls and not message.get("tool_calls"):
            raise Invalid(f"tool call {next(iter(open_calls))!r} has no result before the next assistant turn")
    if open_calls:
        raise Invalid(f"tool call {next(iter(open_calls))!r} has no result")


def openai_line(messages: Sequence[BaseMessage], tools: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    chat = _openai_messages(messages)
    _check_chat(chat)
    for message in chat:
        if message["role"] != "assistant" or not message.get("tool_calls"):
            message["content"] = _text(message["content"], role=message["role"])
    line: dict[str, Any] = {"messages": chat}
    if tools:
        line["tools"] = list(tools)
    return line


def trl_line(messages: Sequence[BaseMessage], tools: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    chat = _openai_messages(messages)
    _check_chat(chat)
    out = []
    for message in chat:
        entry: dict[str, Any] = {"role": message["role"], "content": _text(message["content"], role=message["role"])}
        if message.get("tool_calls"):
            entry["tool_calls"] = [
                {"type": "function", "function": {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}}
                for c in message["tool_calls"]
            ]
        if message["role"] == "tool":
            entry["name"] = message.get("name") or ""
        out.append(entry)
    line: dict[str, Any] = {"messages": out}
    if tools:
        line["tools"] = list(tools)
    return line


def sharegpt_line(messages: Sequence[BaseMessage], tools: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    chat = _openai_messages(messages)
    _check_chat(chat)
    system = [_text(m["content"], role="system") for m in chat if m["role"] == "system"]
    turns: list[dict[str, str]] = []
    results: list[str] = []

    def flush_results() -> None:
        if results:
            turns.append({"from": "observation", "value": results[0] if len(results) == 1 else json.dumps(results, ensure_ascii=False)})
            results.clear()

    for message in chat:
        role = message["role"]
        if role == "system":
            continue
        if role == "tool":
            results.append(_text(message["content"], role="tool"))
            continue
        flush_results()
        if role == "user":
            text = _text(message["content"], role="user")
            if turns and turns[-1]["from"] == "human":  # consecutive user turns are one
                turns[-1]["value"] += "\n" + text
            else:
                turns.append({"from": "human", "value": text})
        elif message.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])} for c in message["tool_calls"]]
            turns.append({"from": "function_call", "value": json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)})
        else:
            turns.append({"from": "gpt", "value": _text(message["content"], role="assistant")})
    flush_results()
    for position, turn in enumerate(turns):
        wanted = ("human", "observation") if position % 2 == 0 else ("gpt", "function_call")
        if turn["from"] not in wanted:
            raise Invalid(f"turn {position + 1} is {turn['from']}; ShareGPT wants {' or '.join(wanted)} there")
    line: dict[str, Any] = {"conversations": turns}
    if system:
        line["system"] = "\n".join(system)
    if tools:
        line["tools"] = json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)
    return line


def raw_line(messages: Sequence[BaseMessage], meta: Mapping[str, Any]) -> dict[str, Any]:
    if not messages:
        raise Invalid("no messages")
    return {**meta, "messages": messages_to_dict(list(messages))}


def line_for(
    fmt: str,
    messages: Sequence[BaseMessage],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    meta: Mapping[str, Any],
    redact: Redactor | None = None,
) -> dict[str, Any]:
    """The line of one conversation in `fmt`; Invalid when the format cannot hold it.

    `redact` runs on the messages (and the raw format's metadata) before the line is built
    and checked, so tool arguments are encoded once, after redaction. The tool schemas are
    not redacted: they come from the user's code (`--tools`), not from a run."""
    if not messages:
        raise Invalid("no messages")
    if redact is not None:
        messages = [redact.message(m) for m in messages]
    if fmt == "openai":
        return openai_line(messages, tools)
    if fmt == "trl":
        return trl_line(messages, tools)
    if fmt == "sharegpt":
        return sharegpt_line(messages, tools)
    return raw_line(messages, redact.fields(meta) if redact is not None else meta)


# -- dedupe and split ------------------------------------------------------------------------


def fingerprint(line: Mapping[str, Any]) -> str:
    """What identical conversations share (the line's JSON, run metadata left out)."""
    body = {k: v for k, v in line.items() if k in ("messages", "conversations", "system", "tools")}
    return hashlib.blake2b(json.dumps(body, sort_keys=True, ensure_ascii=False).encode(), digest_size=16).hexdigest()


def in_training(key: str, fraction: float) -> bool:
    """Whether the run (or thread) `key` goes to the training file: by its hash, so the same
    key always lands on the same side whatever else is exported."""
    value = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return value < fraction * 2**64
