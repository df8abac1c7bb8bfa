"""Quickstart: a small agent-like graph made durable by langgraph-pg-durable.

Run it with no setup: without DATABASE_URL it starts an embedded PostgreSQL in
./.langgraph-pg-durable/pgdata (kept for the next run), and values past 1 MiB go to
./.langgraph-pg-durable/objects (or to $OBJECT_STORE_URL, e.g. s3://bucket/prefix).
With DATABASE_URL set, it uses that server. No LLM: the nodes are deterministic
stand-ins for tool calls.

    python examples/quickstart.py
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.embedded import resolve_conn_string, resolve_object_store


class TripState(TypedDict):
    request: str
    log: Annotated[list[str], operator.add]
    approved: bool


def search_flights(state: TripState) -> dict:
    """A stand-in for a flight-search tool call."""
    return {"log": [f"tool:search_flights({state['request']!r}) -> 3 offers, best 412 EUR"]}


def check_weather(state: TripState) -> dict:
    """A stand-in for a weather API call."""
    return {"log": ["tool:check_weather('Lisbon') -> 21C, sunny"]}


def ask_human(state: TripState) -> dict:
    """Pause the run until a person approves the booking."""
    answer = interrupt({"question": "Book the 412 EUR flight?"})
    return {"approved": answer == "yes", "log": [f"human:{answer}"]}


def book(state: TripState) -> dict:
    outcome = "booked flight LX1234" if state["approved"] else "booking cancelled"
    return {"log": [f"tool:book() -> {outcome}"]}


def build_graph():
    graph = StateGraph(TripState)
    graph.add_node("search_flights", search_flights)
    graph.add_node("check_weather", check_weather)
    graph.add_node("ask_human", ask_human)
    graph.add_node("book", book)
    graph.add_edge(START, "search_flights")
    graph.add_edge(START, "check_weather")  # two "tools" in the same super-step
    graph.add_edge(["search_flights", "check_weather"], "ask_human")
    graph.add_edge("ask_human", "book")
    graph.add_edge("book", END)
    return graph


def main() -> None:
    conn_string = resolve_conn_string()
    store = resolve_object_store()
    thread = {"configurable": {"thread_id": f"trip-{uuid.uuid4().hex[:8]}"}}

    # First process: run until the graph asks a human, then "crash" (drop the saver).
    with DurablePostgresSaver.from_conn_string(conn_string, object_store=store) as saver:
        saver.setup()
        app = build_graph().compile(checkpointer=saver)
        app.invoke({"request": "ZRH->LIS, Friday", "log": [], "approved": False}, thread, durability="sync")
        waiting = app.get_state(thread)
        print(f"paused on {waiting.next} asking: {waiting.interrupts[0].value['question']}")

    # A new saver (as after a restart) resumes the same thread by its id.
    with DurablePostgresSaver.from_conn_string(conn_string, object_store=store) as saver:
        app = build_graph().compile(checkpointer=saver)
        final = app.invoke(Command(resume="yes"), thread, durability="sync")
        print("final log:")
        for line in final["log"]:
            print(f"  {line}")
        print(f"history of thread {thread['configurable']['thread_id']} (newest first):")
        for snapshot in app.get_state_history(thread):
            step = snapshot.metadata.get("step")
            print(f"  step {step:>2}  source={snapshot.metadata.get('source'):<6} next={snapshot.next}")
        thread_id = thread["configurable"]["thread_id"]
        print(f"see it step by step: run `lgpd serve` here, open the link it prints (it carries its token), then thread {thread_id}")


if __name__ == "__main__":
    main()
