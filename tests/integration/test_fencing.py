"""One writer per thread inside one process (README, "Exactly once"): two savers stand for two
processes (each names its runs' tokens itself). A run is held inside a node by an Event
while the other writes, so every interleaving is forced. Checked through both write paths
(the statements, and the write functions Citus runs).

Also: a run's own subgraphs, Send tasks and every durability mode are never refused; an
update_state from another process takes the thread; a thread deleted under a run refuses
its next write; a bad policy is named; `allow` sends no token at all.
"""

from __future__ import annotations

import operator
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Annotated, Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from psycopg import sql
from typing_extensions import TypedDict

from fencing_worker import Marks, build, forks

from langgraph_pg_durable import ConfigError, DurablePostgresSaver, ThreadBusyError, ThreadTakenError, once

pytestmark = pytest.mark.both_write_paths


def _held_graph(saver: DurablePostgresSaver, name: str, reached: threading.Event | None, go_on: threading.Event | None) -> Any:
    """fencing_worker's graph, its first node held until `go_on` once it set `reached`."""

    def hold() -> None:
        assert reached is not None and go_on is not None
        reached.set()
        assert go_on.wait(60)

    return build(saver, name, hold if reached is not None else None)


def _holder(dsn: str, schema: str, thread: str) -> tuple[str, str] | None:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT run_id, writer FROM {}.thread_holders WHERE thread_id = %s").format(sql.Identifier(schema))
        row = conn.execute(query, (thread,)).fetchone()
    return (row[0], row[1]) if row else None


def _while_held(pg_dsn: str, schema_name: str, policy: str, interfere: Any) -> tuple[BaseException | None, str]:
    """Run a graph on a new thread with saver A, held in its first node while `interfere(saver_b,
    thread)` runs; return what A's run raised (None: nothing) and the thread."""
    thread = f"t-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread}}
    reached, go_on = threading.Event(), threading.Event()
    with (
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, fencing=policy) as a,
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, fencing=policy) as b,
        ThreadPoolExecutor(1) as pool,
    ):
        a.setup()
        held = pool.submit(_held_graph(a, "a", reached, go_on).invoke, {"marks": ["a:input"]}, config, durability="sync")
        assert reached.wait(60)
        try:
            interfere(b, thread)
        finally:
            go_on.set()
        return held.exception(timeout=60), thread


def test_takeover_fences_the_old_run_in_process(pg_dsn: str, schema_name: str) -> None:
    def second_run(b: DurablePostgresSaver, thread: str) -> None:
        assert (
            _held_graph(b, "b", None, None).invoke({"marks": ["b:input"]}, {"configurable": {"thread_id": thread}})["marks"][-1]
            == "b:second"
        )

    raised, thread = _while_held(pg_dsn, schema_name, "takeover", second_run)
    assert isinstance(raised, ThreadTakenError) and raised.thread_id == thread
    holder = _holder(pg_dsn, schema_name, thread)
    assert holder is not None and raised.holder_run_id == holder[0]
    assert forks(pg_dsn, schema_name, thread) == 0


def test_reject_refuses_the_second_run_in_process(pg_dsn: str, schema_name: str) -> None:
    refused: list[ThreadBusyError] = []

    def second_run(b: DurablePostgresSaver, thread: str) -> None:
        with pytest.raises(ThreadBusyError) as caught:
            _held_graph(b, "b", None, None).invoke({"marks": ["b:input"]}, {"configurable": {"thread_id": thread}})
        refused.append(caught.value)

    raised, thread = _while_held(pg_dsn, schema_name, "reject", second_run)
    assert raised is None
    holder = _holder(pg_dsn, schema_name, thread)
    assert holder is not None and refused[0].holder_run_id == holder[0] and refused[0].held_since is not None
    assert forks(pg_dsn, schema_name, thread) == 0


def test_a_per_call_policy_overrides_the_savers(pg_dsn: str, schema_name: str) -> None:
    """A saver set to reject lets one call take over through config["configurable"]."""

    def second_run(b: DurablePostgresSaver, thread: str) -> None:
        config = {"configurable": {"thread_id": thread, "lgpd_fencing": "takeover"}}
        assert _held_graph(b, "b", None, None).invoke({"marks": ["b:input"]}, config)["marks"][-1] == "b:second"

    raised, thread = _while_held(pg_dsn, schema_name, "reject", second_run)
    assert isinstance(raised, ThreadTakenError)
    assert forks(pg_dsn, schema_name, thread) == 0


def test_an_update_state_from_another_process_takes_the_thread(pg_dsn: str, schema_name: str) -> None:
    """An update_state is a writer of its own: under takeover it takes the thread, and the
    run it took it from is refused its next write rather than writing over the edit."""

    def edit(b: DurablePostgresSaver, thread: str) -> None:
        _held_graph(b, "b", None, None).update_state({"configurable": {"thread_id": thread}}, {"marks": ["edited"]})

    raised, thread = _while_held(pg_dsn, schema_name, "takeover", edit)
    assert isinstance(raised, ThreadTakenError)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        state = _held_graph(saver, "c", None, None).get_state({"configurable": {"thread_id": thread}})
    assert state.values["marks"][-1] == "edited"


def test_a_thread_deleted_under_a_run_refuses_its_next_write(pg_dsn: str, schema_name: str) -> None:
    """langchain-ai/langgraph#7206: a thread deleted while a run writes no longer comes back."""

    def delete(b: DurablePostgresSaver, thread: str) -> None:
        b.delete_thread(thread)

    raised, thread = _while_held(pg_dsn, schema_name, "takeover", delete)
    assert isinstance(raised, ThreadTakenError) and raised.holder_run_id is None and "was deleted" in str(raised)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": thread}}) is None


class Fan(TypedDict, total=False):
    items: list[str]
    done: Annotated[list[str], operator.add]


@pytest.mark.parametrize("policy", ["takeover", "reject", "wait"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_runs_own_subgraphs_and_sends_are_never_refused(pg_dsn: str, schema_name: str, policy: str, durability: str) -> None:
    inner = StateGraph(Fan)
    inner.add_node("work", lambda state: {"done": ["inner"]})
    inner.add_edge(START, "work")
    inner.add_edge("work", END)
    sub = inner.compile()

    outer = StateGraph(Fan)
    outer.add_node("plan", lambda state: {"items": ["x", "y", "z"]})
    outer.add_node("each", lambda item: {"done": [item["items"][0]]})
    outer.add_node("sub", sub)
    outer.add_edge(START, "plan")
    outer.add_conditional_edges("plan", lambda state: [Send("each", {"items": [i]}) for i in state["items"]], ["each"])
    outer.add_edge("each", "sub")
    outer.add_edge("sub", END)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, fencing=policy) as saver:
        saver.setup()
        app = outer.compile(checkpointer=saver)
        for _turn in range(2):  # the second run takes the thread from the first, which is done
            config = {"configurable": {"thread_id": f"fan-{policy}-{durability}"}}
            result = app.invoke({"items": []}, config, durability=durability)
            assert {"x", "y", "z", "inner"} <= set(result["done"])  # every task ran, and no write was refused


def test_a_bad_policy_is_named(pg_dsn: str, schema_name: str) -> None:
    with pytest.raises(ConfigError, match="fencing must be one of 'takeover', 'reject', 'wait', 'allow', got 'first'"):
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, fencing="first").__enter__()
    with pytest.raises(ConfigError, match="fencing_window must be a positive datetime.timedelta, got 5"):
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, fencing_window=5).__enter__()  # type: ignore[arg-type]
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        app = _held_graph(saver, "a", None, None)
        config = {"configurable": {"thread_id": "bad", "lgpd_fencing": "nobody"}}
        with pytest.raises(ConfigError, match=r"config\['configurable'\]\['lgpd_fencing'\] must be one of .* got 'nobody'"):
            app.invoke({"marks": []}, config)
        assert saver.get_tuple({"configurable": {"thread_id": "bad"}}) is None
        # A thread that holds a history keeps it whole when a call names a bad policy.
        kept = {"configurable": {"thread_id": "kept"}}
        before = app.invoke({"marks": ["first"]}, kept)["marks"]
        with pytest.raises(ConfigError, match="lgpd_fencing"):
            app.invoke({"marks": ["second"]}, {"configurable": {**kept["configurable"], "lgpd_fencing": 7}})
        assert app.get_state(kept).values["marks"] == before == ["first", "a:first", "a:second"]


def test_allow_takes_nothing(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, fencing="allow") as saver:
        saver.setup()
        _held_graph(saver, "a", None, None).invoke({"marks": []}, {"configurable": {"thread_id": "free"}})
    assert _holder(pg_dsn, schema_name, "free") is None


def test_wait_gives_up_after_its_bound_naming_the_holder(pg_dsn: str, schema_name: str) -> None:
    def second_run(b: DurablePostgresSaver, thread: str) -> None:
        b.fencing_wait = timedelta(milliseconds=200)  # a bound to reach: the holder stays held meanwhile
        with pytest.raises(ThreadBusyError, match=r"is busy after waiting 0\.\d s: run '"):
            _held_graph(b, "b", None, None).invoke({"marks": ["b:input"]}, {"configurable": {"thread_id": thread}})

    raised, thread = _while_held(pg_dsn, schema_name, "wait", second_run)
    assert raised is None and forks(pg_dsn, schema_name, thread) == 0


def test_a_run_that_lost_its_thread_makes_no_new_side_effect(pg_dsn: str, schema_name: str) -> None:
    """once() in a run whose thread another run took is refused before it calls: the charge
    the zombie was about to make is not made (the run taking over makes its own)."""
    charges: list[str] = []
    reached, go_on = threading.Event(), threading.Event()

    def build(saver: DurablePostgresSaver, name: str, hold: bool) -> Any:
        def pay(state: Marks, config: RunnableConfig) -> Marks:
            if hold:
                reached.set()
                assert go_on.wait(60)
            once(config, "charge", charges.append, name)
            return {"marks": [f"{name}:paid"]}

        graph = StateGraph(Marks)
        graph.add_node("pay", pay)
        graph.add_edge(START, "pay")
        graph.add_edge("pay", END)
        return graph.compile(checkpointer=saver)

    config: RunnableConfig = {"configurable": {"thread_id": f"pay-{uuid.uuid4().hex[:8]}"}}
    with (
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as a,
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as b,
        ThreadPoolExecutor(1) as pool,
    ):
        a.setup()
        held = pool.submit(build(a, "zombie", True).invoke, {"marks": []}, config, durability="sync")
        assert reached.wait(60)
        try:
            assert build(b, "new", False).invoke({"marks": []}, config)["marks"] == ["new:paid"]
        finally:
            go_on.set()
        raised = held.exception(timeout=60)
    assert isinstance(raised, ThreadTakenError) and raised.thread_id == config["configurable"]["thread_id"]
    assert charges == ["new"]


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_a_run_takes_the_thread_before_it_reads_it(pg_dsn: str, schema_name: str, durability: str) -> None:
    """The new run takes the thread with its first read, not its first write: with
    durability="exit" its first write is its last, and the old run, let go while the new
    one is still in its node, would otherwise write on, and the new run's checkpoint would
    fork from the state it read. Here the old run is refused, and the history is one line."""
    old_reached, old_go_on = threading.Event(), threading.Event()
    new_reached, new_go_on = threading.Event(), threading.Event()
    thread = f"read-{durability}-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread}}
    with (
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as a,
        DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as b,
        ThreadPoolExecutor(2) as pool,
    ):
        a.setup()
        old = pool.submit(_held_graph(a, "old", old_reached, old_go_on).invoke, {"marks": ["old:input"]}, config, durability="sync")
        assert old_reached.wait(60)
        new = pool.submit(_held_graph(b, "new", new_reached, new_go_on).invoke, {"marks": ["new:input"]}, config, durability=durability)
        assert new_reached.wait(60)  # the new run read the thread, and is inside its first node
        old_go_on.set()
        refused = old.exception(timeout=60)
        new_go_on.set()
        result = new.result(timeout=60)
    assert isinstance(refused, ThreadTakenError)
    assert result["marks"] == ["old:input", "new:input", "new:first", "new:second"]
    assert forks(pg_dsn, schema_name, thread) == 0
