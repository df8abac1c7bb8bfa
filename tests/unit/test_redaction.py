"""`--redact` without a server: the rules run on a conversation before it becomes a line, so a
secret is found where a line would carry it escaped (JSON arguments, a tool's JSON result,
\\u escapes), keys are redacted without losing a value, and ids still pair calls with results."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from json_strings import strings_in
from langgraph_pg_durable.cli.training import FORMATS, Invalid, Redactor, line_for

SECRET = 'sk-"tok\\en\n€ü-42'
RULES = re.escape(SECRET).replace("\n", "n")  # a rule is one line: the newline as \n
ARGS = {"query": SECRET, SECRET: "key", "nested": {"deeper": [f"at {SECRET}"]}}


def conversation() -> list[Any]:
    """SECRET in every place: system, user parts, assistant text, the tool's name, an argument's
    key, value and nested value (and the provider's JSON copy of them, \\u-escaped), the result."""
    provider = {"tool_calls": [{"id": "c1", "type": "function", "function": {"name": SECRET, "arguments": json.dumps(ARGS)}}]}
    return [
        SystemMessage(f"never say {SECRET}"),
        HumanMessage([{"type": "text", "text": f"my key: {SECRET}"}], name=SECRET),
        AIMessage(f"opening {SECRET}", tool_calls=[{"id": "c1", "name": SECRET, "args": ARGS}], additional_kwargs=provider),
        ToolMessage(json.dumps({"token": SECRET}, ensure_ascii=False), tool_call_id="c1", name=SECRET),
        AIMessage(f"the token is {SECRET}"),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_secret_is_redacted_wherever_a_line_carries_it(fmt: str) -> None:
    redact = Redactor.parse(RULES)
    line = line_for(fmt, conversation(), meta={"metadata": {SECRET: [SECRET, 1]}}, redact=redact)
    text = json.dumps(line, ensure_ascii=False)
    assert "ü-42" not in text and "\\u00fc-42" not in text
    found = list(strings_in(line))
    assert not [s for s in found if "ü-42" in s] and "[REDACTED]" in found
    assert any("never say [REDACTED]" in s for s in found) and any("the token is [REDACTED]" in s for s in found)
    assert redact.counts[RULES] >= 8
    if fmt == "raw":
        assert line["metadata"] == {"[REDACTED]": ["[REDACTED]", 1]}


def test_arguments_are_redacted_as_data_and_stay_json() -> None:
    line = line_for("openai", conversation(), meta={}, redact=Redactor.parse(f"{RULES}\n\\d => N"))
    [call] = line["messages"][2]["tool_calls"]
    assert call["id"] == "c1" and line["messages"][3]["tool_call_id"] == "c1"  # ids kept: the call still meets its result
    assert call["function"]["name"] == "[REDACTED]"
    assert json.loads(call["function"]["arguments"]) == {
        "query": "[REDACTED]",
        "[REDACTED]": "key",
        "nested": {"deeper": ["at [REDACTED]"]},
    }


def test_a_redacted_key_that_collides_is_suffixed_and_no_value_is_lost() -> None:
    redact = Redactor.parse("sk-\\w+")
    assert redact({"sk-a": 1, "[REDACTED]": 0, "sk-b": 2, "[REDACTED]#2": 9}) == {
        "[REDACTED]#3": 1,
        "[REDACTED]": 0,
        "[REDACTED]#4": 2,
        "[REDACTED]#2": 9,
    }
    assert redact.counts == {"sk-\\w+": 2}


def test_numbers_a_rule_matches_become_text_and_json_text_is_left_alone_when_nothing_matches() -> None:
    redact = Redactor.parse("4111\\d{12} => <CARD>")
    assert redact({"card": 4111111111111111, "n": 7, "ok": True}) == {"card": "<CARD>", "n": 7, "ok": True}
    untouched = '{"a":  1}'  # not re-encoded, spacing and all
    assert redact(untouched) == untouched
    assert redact('{"card": 4111111111111111}') == '{"card": "<CARD>"}'


def test_tool_schemas_are_not_redacted_and_no_rules_change_nothing() -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "description": "find sk-1", "parameters": {}}}]
    line = line_for("trl", conversation(), tools=tools, meta={}, redact=Redactor.parse("sk-1"))
    assert line["tools"] == tools
    messages = conversation()
    assert [Redactor().message(m) for m in messages] == messages


def test_a_rule_that_breaks_the_structure_is_a_reason_to_skip() -> None:
    with pytest.raises(Invalid):
        line_for("trl", conversation(), meta={}, redact=Redactor.parse("^text$"))
