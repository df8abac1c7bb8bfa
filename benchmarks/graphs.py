"""The compiled LangGraph graphs the workloads drive: deterministic nodes, no LLM.

Each graph loops one node; every pass of the node is one super-step and one checkpoint.
"""

from __future__ import annotations

import base64
import operator
import random
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

try:  # deepagents' reducer for its messages (it needs Python 3.11+); else LangGraph's, which it adapts
    from deepagents._messages_reducer import _messages_delta_reducer
except ImportError:  # pragma: no cover - Python 3.10
    from langgraph.pregel._messages import _messages_delta_reducer
from langgraph.graph.state import CompiledStateGraph

WORDS = [
    w.strip()
    for w in """
    the a to of and in is that for it on with as was at by this be from or are an
    step graph node state value thread checkpoint write run task channel user agent tool
    result error retry plan search answer check order ticket refund account update
""".split()
]
TURN_HOPS = 8  # node passes per turn: with the input and first checkpoints, 10 checkpoints a turn


def _loop(state: type, node: Callable[[Any], dict], more: Callable[[Any], bool], checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    graph = StateGraph(state)
    graph.add_node("step", node)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if more(s) else END, ["step", END])
    return graph.compile(checkpointer=checkpointer)


class Growing(TypedDict):
    items: Annotated[list[str], operator.add]
    step: int


def _extend(state: list | None, writes: list[list]) -> list:
    """DeltaChannel's reducer for `operator.add` on lists: batches of appended items."""
    out = list(state or [])
    for batch in writes:
        out.extend(batch)
    return out


class DeltaGrowing(TypedDict):
    """`Growing` with LangGraph's DeltaChannel (beta; default snapshot_frequency)."""

    items: Annotated[list[str], DeltaChannel(_extend)]
    step: int


def growing(checkpointer: BaseCheckpointSaver, steps: int, item_bytes: int = 1024, content: str = "words") -> CompiledStateGraph:
    """A list channel (`operator.add`) that grows by one `item_bytes` item (see `item`) per step."""
    return _loop(Growing, _grow(item_bytes, content), lambda s: s["step"] < steps, checkpointer)


def turn(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """One pass of a node over `Growing` and done: each `invoke` is a turn of its own (its
    input appends to the list, as a user's message does), read from the saver first."""
    graph = StateGraph(Growing)
    graph.add_node("step", lambda s: {"step": s["step"] + 1})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=checkpointer)


def growing_delta(checkpointer: BaseCheckpointSaver, steps: int, item_bytes: int = 1024, content: str = "words") -> CompiledStateGraph:
    """`growing` with the list in a DeltaChannel: the user's own opt-in to delta storage."""
    return _loop(DeltaGrowing, _grow(item_bytes, content), lambda s: s["step"] < steps, checkpointer)


def _grow(item_bytes: int, content: str) -> Callable[[Any], dict]:
    def grow(state: Any) -> dict:
        return {"items": [item(content, len(state["items"]), item_bytes)], "step": state["step"] + 1}

    return grow


CONTENTS = ("words", "random", "mixed")


def item(content: str, index: int, size: int) -> str:
    """Item `index` of a list, `size` characters, the same every run.

    "words": seeded random words, text that compresses about as well as real messages do,
    unlike a run of one letter, which TOAST would shrink to nothing. "random": base64 of
    seeded random bytes, which no compressor shrinks by more than base64's quarter.
    "mixed": the two in turn.
    """
    if content == "mixed":
        content = ("words", "random")[index % 2]
    rng = random.Random(index)
    if content == "random":
        return base64.b64encode(rng.randbytes(-(-size * 3 // 4))).decode()[:size]
    if content == "words":
        return " ".join(rng.choice(WORDS) for _ in range(size // 4))[:size]
    raise ValueError(f"unknown item content {content!r}: want one of {CONTENTS}")


class LargeValue(TypedDict):
    blob: bytes
    step: int


LARGE_VALUE_BYTES = 2 << 20  # W2's value


def large_value(checkpointer: BaseCheckpointSaver, steps: int, size: int = LARGE_VALUE_BYTES) -> CompiledStateGraph:
    """A `size`-byte value, new random (incompressible) bytes every step of every thread."""

    def regenerate(state: LargeValue, config: RunnableConfig) -> dict:
        seed = f"{config['configurable']['thread_id']}/{state['step']}"
        return {"blob": random.Random(seed).randbytes(size), "step": state["step"] + 1}

    return _loop(LargeValue, regenerate, lambda s: s["step"] < steps, checkpointer)


class Conversation(TypedDict):
    messages: Annotated[list[str], operator.add]
    hops: int
    scratch: str


def conversation(checkpointer: BaseCheckpointSaver) -> CompiledStateGraph:
    """A chat-like turn: TURN_HOPS passes of a 'think' node, the last one answers."""

    def think(state: Conversation) -> dict:
        hops = state["hops"] + 1
        update: dict = {"hops": hops, "scratch": f"note {hops}: " + "y" * 200}
        if hops == TURN_HOPS:
            update["messages"] = [f"reply to {state['messages'][-1]!r}: " + "z" * 300]
        return update

    return _loop(Conversation, think, lambda s: s["hops"] < TURN_HOPS, checkpointer)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    step: int


class DeltaChat(TypedDict):
    """`Chat` with the messages in a DeltaChannel, declared as deepagents declares its own."""

    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=50)]
    step: int


CHAT_MESSAGE_CHARS = 300


def chat(checkpointer: BaseCheckpointSaver, steps: int, delta: bool = False) -> CompiledStateGraph:
    """An `add_messages` list that gains one ~300-character message a step, a user's and
    the assistant's in turn, each with its id (as LangGraph gives one to every message);
    `delta` declares the list in a DeltaChannel with deepagents' reducer."""

    def say(state: Any) -> dict:
        n = len(state["messages"])
        text = item("words", n, CHAT_MESSAGE_CHARS)
        message = AIMessage(content=text, id=f"m{n}") if n % 2 else HumanMessage(content=text, id=f"m{n}")
        return {"messages": [message], "step": state["step"] + 1}

    return _loop(DeltaChat if delta else Chat, say, lambda s: s["step"] < steps, checkpointer)


def stream_step_times(app: CompiledStateGraph, inputs: dict | None, config: dict) -> tuple[list[float], float]:
    """Seconds between successive super-step updates (the first from the call), and the total.

    `inputs` None resumes the thread where it stopped.
    """
    times: list[float] = []
    start = last = time.perf_counter()
    for _ in app.stream(inputs, config, durability="sync", stream_mode="updates"):
        now = time.perf_counter()
        times.append(now - last)
        last = now
    return times, time.perf_counter() - start
