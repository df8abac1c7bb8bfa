"""A scripted chat model for the frameworks corpus: the frameworks run unchanged, and the
model they are handed answers with a fixed list of AIMessages, one per call, in order.

Every answer carries its own id (so state compares across savers without renaming) and
`usage_metadata` (so token usage lands in state as a real model's would). `bind_tools` and
`with_config` return the model itself, so an agent that binds its tools still reads the
script; the tools a framework offers do not change what the model says.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """One tool call, as a model's AIMessage carries it."""
    return {"id": call_id, "name": name, "args": args, "type": "tool_call"}


def usage(inputs: int, outputs: int) -> dict[str, int]:
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}


def ai(message_id: str, content: str = "", *calls: dict[str, Any], tokens: tuple[int, int] = (10, 5), **extra: Any) -> AIMessage:
    """An answer of the script: its id, text, tool calls and token usage."""
    return AIMessage(content, id=message_id, tool_calls=list(calls), usage_metadata=usage(*tokens), **extra)  # type: ignore[arg-type]


def human(message_id: str, content: str) -> HumanMessage:
    """A user's message with a fixed id (add_messages would give it a random one)."""
    return HumanMessage(content, id=message_id)


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next AIMessage of `answers`; raises, naming the model and
    the call, once the script is spent (a graph that calls its model more often than the
    scenario planned has diverged, which is what the corpus looks for)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    answers: list[AIMessage]
    label: str = "scripted"
    _next: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> int:
        """How many answers the model has given."""
        return self._next

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """The messages of each call, in order."""
        return self._prompts

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            index = self._next
            if index >= len(self.answers):
                last = messages[-1].content if messages else None
                given = len(self.answers)
                raise AssertionError(f"{self.label}: call {index + 1} has no scripted answer ({given} given); last message: {last!r}")
            self._next += 1
            self._prompts.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.answers[index].model_copy(deep=True))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self
