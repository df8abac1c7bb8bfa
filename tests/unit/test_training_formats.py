"""The fine-tuning formats without a server: each rule refuses what it should, with the
rule as the reason; redaction counts; the split is stable and near its fraction."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_pg_durable.cli.training import Invalid, Redactor, fingerprint, in_training, line_for
from langgraph_pg_durable.errors import ConfigError

CALL = {"id": "c1", "name": "add", "args": {"a": 1, "b": 2}}
GOOD = [
    SystemMessage("be brief"),
    HumanMessage("what is 1+2?"),
    AIMessage("", tool_calls=[CALL]),
    ToolMessage("3", tool_call_id="c1", name="add"),
    AIMessage("3"),
]


def test_a_good_conversation_in_each_format() -> None:
    openai = line_for("openai", GOOD, meta={})
    assert [m["role"] for m in openai["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert json.loads(openai["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"a": 1, "b": 2}
    trl = line_for("trl", GOOD, meta={})
    assert trl["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"a": 1, "b": 2} and trl["messages"][3]["name"] == "add"
    share = line_for("sharegpt", GOOD, meta={})
    assert [t["from"] for t in share["conversations"]] == ["human", "function_call", "observation", "gpt"]
    assert share["system"] == "be brief" and json.loads(share["conversations"][1]["value"])["name"] == "add"
    raw = line_for("raw", GOOD, meta={"run_id": "r"})
    assert raw["run_id"] == "r" and raw["messages"][2]["data"]["tool_calls"][0]["name"] == "add"


@pytest.mark.parametrize(
    ("messages", "rule"),
    [
        ([HumanMessage("hi")], "no assistant turn"),
        ([HumanMessage("hi"), AIMessage("yo"), HumanMessage("bye")], "ends on a user turn"),
        ([HumanMessage("hi"), AIMessage("", tool_calls=[CALL])], "ends on a tool call that has no result"),
        ([HumanMessage("hi"), AIMessage("", tool_calls=[CALL]), AIMessage("guess 3")], "'c1' has no result before the next assistant turn"),
        ([HumanMessage("hi"), ToolMessage("3", tool_call_id="zz"), AIMessage("3")], "answers no call ('zz')"),
        ([], "no messages"),
    ],
)
def test_each_chat_rule_refuses_with_its_reason(messages: list, rule: str) -> None:
    for fmt in ("openai", "trl", "sharegpt"):
        with pytest.raises(Invalid, match=rule.replace("(", r"\(").replace(")", r"\)")):
            line_for(fmt, messages, meta={})


def test_sharegpt_refuses_two_assistant_turns_in_a_row_and_merges_user_turns() -> None:
    with pytest.raises(Invalid, match="turn 3 is gpt"):
        line_for("sharegpt", [HumanMessage("a"), AIMessage("b"), AIMessage("c")], meta={})
    merged = line_for("sharegpt", [HumanMessage("a"), HumanMessage("b"), AIMessage("c")], meta={})
    assert merged["conversations"][0] == {"from": "human", "value": "a\nb"}


def test_content_that_is_not_text_is_refused_where_the_format_needs_text() -> None:
    image = HumanMessage(content=[{"type": "image_url", "image_url": {"url": "data:,"}}])
    with pytest.raises(Invalid, match="not text"):
        line_for("trl", [image, AIMessage("a cat")], meta={})


def test_redactor_rules_and_counts() -> None:
    redact = Redactor.parse("# emails\n[\\w.]+@[\\w.]+ => <EMAIL>\nsecret\n")
    assert redact({"a": ["mail me at ana@x.org", {"b": "secret secret"}], "n": 3}) == {
        "a": ["mail me at <EMAIL>", {"b": "[REDACTED] [REDACTED]"}],
        "n": 3,
    }
    assert redact.counts == {"[\\w.]+@[\\w.]+": 1, "secret": 2}
    with pytest.raises(ConfigError, match="line 2"):
        Redactor.parse("ok\n[unclosed\n", where="rules.txt")


def test_split_is_stable_and_near_its_fraction() -> None:
    keys = [f"run-{i}" for i in range(2000)]
    train = [k for k in keys if in_training(k, 0.9)]
    assert 0.87 < len(train) / len(keys) < 0.93
    assert train == [k for k in keys if in_training(k, 0.9)]
    assert not any(in_training(k, 0.0) for k in keys) and all(in_training(k, 1.0) for k in keys)


def test_fingerprint_ignores_run_metadata() -> None:
    line = line_for("openai", GOOD, meta={})
    assert fingerprint({**line, "run_id": "a"}) == fingerprint({**line, "run_id": "b"})
    assert fingerprint(line) != fingerprint(line_for("openai", GOOD[1:], meta={}))
