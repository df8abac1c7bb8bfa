"""Workload 6: one thread of many super-steps, each adding a chat message (`add_messages`).

Database bytes are sampled along the thread, so the growth shows; then the finished
thread is read: `get_state` and the full `get_state_history`.
"""

from __future__ import annotations

import random
import time
import uuid
from contextlib import ExitStack
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from .env import KINDS, OURS_NO_LOG, Bench
from .graphs import WORDS
from .stats import alternate, summary

MESSAGE_CHARS = 300


class Chat(TypedDict):
    messages: Annotated[list, add_messages]
    step: int


def chat(checkpointer: Any, steps: int) -> Any:
    def answer(state: Chat) -> dict:
        step = state["step"] + 1
        # Seeded random words: text that compresses about as well as real messages do.
        rng = random.Random(step)
        text = f"answer {step}: " + " ".join(rng.choice(WORDS) for _ in range(MESSAGE_CHARS // 4))[:MESSAGE_CHARS]
        return {"messages": [AIMessage(text, id=f"m{step}")], "step": step}

    graph = StateGraph(Chat)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_conditional_edges("answer", lambda s: "answer" if s["step"] < steps else END, ["answer", END])
    return graph.compile(checkpointer=checkpointer)


def run(bench: Bench, steps: int, sample_every: int, reps: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        apps, configs = {}, {}
        # Our saver with the log off first: its bytes are measured, then "ours" empties the
        # database they share. Reads are timed on KINDS.
        for kind in (OURS_NO_LOG, *KINDS):
            bench.truncate(kind)
            saver = stack.enter_context(bench.saver(kind))()
            apps[kind] = app = chat(saver, steps)
            configs[kind] = config = {"configurable": {"thread_id": f"w6-{kind}-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
            sizes = []
            start = time.perf_counter()
            for update in app.stream({"messages": [], "step": 0}, config, durability="sync", stream_mode="updates"):
                step = update["answer"]["step"]
                if step % sample_every == 0:
                    sizes.append((step, bench.db_bytes(kind)))
            out[kind] = {"build_seconds": time.perf_counter() - start, "bytes_by_step": sizes, "db_bytes": bench.db_bytes(kind)}
            if kind == OURS_NO_LOG:
                continue
            bench.analyze(kind)
            if len(app.get_state(config).values["messages"]) != steps:
                raise AssertionError(f"long thread on {kind}: wrong number of messages")

        ops = {
            "get_state": lambda k: apps[k].get_state(configs[k]),
            "full_history": lambda k: sum(1 for _ in apps[k].get_state_history(configs[k])),
        }
        for op, op_reps in reps.items():

            def one(kind: str, rep: int, op: str = op) -> float:
                start = time.perf_counter()
                ops[op](kind)
                return time.perf_counter() - start

            for kind, samples in alternate(KINDS, op_reps, one).items():
                out[kind][op] = {"ms": summary(samples, 1e3), "seconds": samples}
    return out
