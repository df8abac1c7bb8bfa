"""The compiled LangGraph graphs the workloads drive: deterministic nodes, no LLM.

Each graph loops one node; every pass of the node is one super-step and one checkpoint.
"""

from __future__ import annotations

import operator
import random
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
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


def growing(checkpointer: BaseCheckpointSaver, steps: int, item_bytes: int = 1024) -> CompiledStateGraph:
    """A list channel (`operator.add`) that grows by one `item_bytes` string per step."""
    return _loop(Growing, _grow(item_bytes), lambda s: s["step"] < steps, checkpointer)


def growing_delta(checkpointer: BaseCheckpointSaver, steps: int, item_bytes: int = 1024) -> CompiledStateGraph:
    """`growing` with the list in a DeltaChannel: the user's own opt-in to delta storage."""
    return _loop(DeltaGrowing, _grow(item_bytes), lambda s: s["step"] < steps, checkpointer)


def _grow(item_bytes: int) -> Callable[[Any], dict]:
    def grow(state: Any) -> dict:
        # Seeded random words: text that compresses about as well as real messages do,
        # unlike a run of one letter, which TOAST would shrink to nothing.
        rng = random.Random(state["step"])
        text = " ".join(rng.choice(WORDS) for _ in range(item_bytes // 4))[:item_bytes]
        return {"items": [text], "step": state["step"] + 1}

    return grow


class LargeValue(TypedDict):
    blob: bytes
    step: int


def large_value(checkpointer: BaseCheckpointSaver, steps: int, size: int = 2 << 20) -> CompiledStateGraph:
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


def stream_step_times(app: CompiledStateGraph, inputs: dict, config: dict) -> tuple[list[float], float]:
    """Seconds between successive super-step updates (the first from the call), and the total."""
    times: list[float] = []
    start = last = time.perf_counter()
    for _ in app.stream(inputs, config, durability="sync", stream_mode="updates"):
        now = time.perf_counter()
        times.append(now - last)
        last = now
    return times, time.perf_counter() - start
