"""Conversations as fine-tuning lines, without I/O: the four formats `lgpd export` writes,
each line checked against its format's rules first, and the redaction, dedupe and
train/validation split applied to them.

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


@dataclass
class Redactor:
    """Regex rules applied to every string of a line; counts what each rule replaced.

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
        if not self.rules:
            return value
        if isinstance(value, str):
            for pattern, replacement in self.rules:
                value, n = pattern.subn(replacement, value)
                if n:
                    self.counts[pattern.pattern] = self.counts.get(pattern.pattern, 0) + n
            return value
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value


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
    fmt: str, messages: Sequence[BaseMessage], *, tools: Sequence[Mapping[str, Any]] = (), meta: Mapping[str, Any]
) -> dict[str, Any]:
    """The line of one conversation in `fmt`; Invalid when the format cannot hold it."""
    if not messages:
        raise Invalid("no messages")
    if fmt == "openai":
        return openai_line(messages, tools)
    if fmt == "trl":
        return trl_line(messages, tools)
    if fmt == "sharegpt":
        return sharegpt_line(messages, tools)
    return raw_line(messages, meta)


def recheck(fmt: str, line: Mapping[str, Any]) -> None:
    """What redaction may break: an OpenAI line's tool arguments must still be JSON."""
    if fmt != "openai":
        return
    for message in line["messages"]:
        for call in message.get("tool_calls") or ():
            try:
                json.loads(call["function"]["arguments"])
            except ValueError:
                raise Invalid("tool arguments are not JSON once redacted") from None


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
