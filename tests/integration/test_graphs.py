"""Real compiled StateGraphs on our savers: resume, history, forks, interrupts, subgraphs, fan-out.

No LLM: nodes are deterministic functions shaped like an agent's plan / tool-call loop.
Every test runs twice, on DurablePostgresSaver (graph.invoke) and on
AsyncDurablePostgresSaver (await graph.ainvoke), through the small `Driver` below.
"""

from __future__ import annotations

import operator
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths

TOOL_CALLS = 3  # rounds of plan -> tool before the final answer


# -- graphs -------------------------------------------------------------------------------


class AgentState(TypedDict):
    messages: Annotated[list[str], operator.add]
    calls: int


def plan(state: AgentState) -> dict[str, Any]:
    calls = state.get("calls", 0)
    if calls < TOOL_CALLS:
        return {"messages": [f"call:square({calls})"]}
    return {"messages": [f"answer:{state['messages'][-1]}"]}


def tool(state: AgentState) -> dict[str, Any]:
    calls = state.get("calls", 0)
    return {"messages": [f"result:{calls * calls}"], "calls": calls + 1}


def route(state: AgentState) -> str:
    return "tool" if state["messages"][-1].startswith("call:") else END


def agent_graph(checkpointer: Any, **compile_kwargs: Any) -> Any:
    """START -> plan -> tool -> plan ... -> END: 2 * TOOL_CALLS + 1 node steps."""
    builder = StateGraph(AgentState)
    builder.add_node("plan", plan)
    builder.add_node("tool", tool)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, ["tool", END])
    builder.add_edge("tool", "plan")
    return builder.compile(checkpointer=checkpointer, **compile_kwargs)


AGENT_MESSAGES = [
    "ask",
    "call:square(0)", "result:0",
    "call:square(1)", "result:1",
    "call:square(2)", "result:4",
    "answer:result:4",
]  # fmt: skip
# Checkpoints with source "loop": one for __start__, then one per plan / tool step.
AGENT_LOOP_STEPS = 2 * TOOL_CALLS + 2


class ApprovalState(TypedDict):
    request: str
    log: Annotated[list[str], operator.add]


def propose(state: ApprovalState) -> dict[str, Any]:
    return {"log": [f"proposed:rm {state['request']}"]}


def approve(state: ApprovalState) -> dict[str, Any]:
    answer = interrupt({"tool": "rm", "path": state["request"]})
    return {"log": [f"approved:{answer}"]}


def execute(state: ApprovalState) -> dict[str, Any]:
    return {"log": [f"executed:{state['log'][-1].split(':', 1)[1]}"]}


def approval_graph(checkpointer: Any) -> Any:
    builder = StateGraph(ApprovalState)
    builder.add_node("propose", propose)
    builder.add_node("approve", approve)
    builder.add_node("execute", execute)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "approve")
    builder.add_edge("approve", "execute")
    builder.add_edge("execute", END)
    return builder.compile(checkpointer=checkpointer)


class ResearchState(TypedDict):
    topic: str
    findings: Annotated[list[str], operator.add]


class ReportState(TypedDict):
    topic: str
    notes: Annotated[list[str], operator.add]
    findings: list[str]  # the subgraph's findings, replaced as a whole when it returns


def research_subgraph() -> Any:
    """search -> review (asks a human) -> END; compiled without a checkpointer, so it inherits."""

    def search(state: ResearchState) -> dict[str, Any]:
        return {"findings": [f"found:{state['topic']}"]}

    def review(state: ResearchState) -> dict[str, Any]:
        verdict = interrupt({"review": state["findings"]})
        return {"findings": [f"reviewed:{verdict}"]}

    builder = StateGraph(ResearchState)
    builder.add_node("search", search)
    builder.add_node("review", review)
    builder.add_edge(START, "search")
    builder.add_edge("search", "review")
    builder.add_edge("review", END)
    return builder.compile()


def parent_graph(checkpointer: Any) -> Any:
    def kickoff(state: ReportState) -> dict[str, Any]:
        return {"notes": ["kickoff"]}

    def report(state: ReportState) -> dict[str, Any]:
        return {"notes": [f"report:{len(state['findings'])}"]}

    builder = StateGraph(ReportState)
    builder.add_node("kickoff", kickoff)
    builder.add_node("research", research_subgraph())
    builder.add_node("report", report)
    builder.add_edge(START, "kickoff")
    builder.add_edge("kickoff", "research")
    builder.add_edge("research", "report")
    builder.add_edge("report", END)
    return builder.compile(checkpointer=checkpointer)


class FanOutState(TypedDict):
    queries: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


FETCHERS = ("weather", "stocks", "news", "sports")


def fan_out_graph(checkpointer: Any, executions: Counter[str], *, ask_human: bool) -> Any:
    """dispatch -> four fetchers in one super-step (+ one Send per query) -> join.

    With `ask_human`, the "news" fetcher interrupts, so the others' writes become
    the checkpoint's pending writes until it is resumed.
    """

    def dispatch(state: FanOutState) -> dict[str, Any]:
        executions["dispatch"] += 1
        return {"results": ["dispatched"]}

    def fetcher(name: str) -> Any:
        def fetch(state: FanOutState) -> dict[str, Any]:
            executions[name] += 1
            if ask_human and name == "news":
                return {"results": [f"{name}:{interrupt('which paper?')}"]}
            return {"results": [f"{name}:ok"]}

        return fetch

    def lookup(query: str) -> dict[str, Any]:
        executions[f"lookup:{query}"] += 1
        return {"results": [f"lookup:{query}"]}

    def fan_out(state: FanOutState) -> list[Any]:
        return [*FETCHERS, *(Send("lookup", q) for q in state["queries"])]

    def join(state: FanOutState) -> dict[str, Any]:
        executions["join"] += 1
        return {"summary": f"{len(state['results'])} results"}

    builder = StateGraph(FanOutState)
    builder.add_node("dispatch", dispatch)
    for name in FETCHERS:
        builder.add_node(name, fetcher(name))
        builder.add_edge(name, "join")
    builder.add_node("lookup", lookup)
    builder.add_node("join", join)
    builder.add_edge(START, "dispatch")
    builder.add_conditional_edges("dispatch", fan_out, [*FETCHERS, "lookup"])
    builder.add_edge("lookup", "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=checkpointer)


# -- one API over the sync and async savers ------------------------------------------------


class Driver:
    """The graph calls a test makes, sent through the sync or the async API."""

    def __init__(self, mode: str, dsn: str, schema: str) -> None:
        self.mode = mode
        self.dsn = dsn
        self.schema = schema

    @asynccontextmanager
    async def saver(self) -> AsyncIterator[Any]:
        """A new saver on its own new pool, with the schema set up."""
        if self.mode == "sync":
            with DurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema) as saver:
                saver.setup()
                yield saver
        else:
            async with AsyncDurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema) as saver:
                await saver.setup()
                yield saver

    async def invoke(self, graph: Any, input: Any, config: dict[str, Any]) -> Any:
        if self.mode == "sync":
            return graph.invoke(input, config, durability="sync")
        return await graph.ainvoke(input, config, durability="sync")

    async def state(self, graph: Any, config: dict[str, Any], *, subgraphs: bool = False) -> Any:
        if self.mode == "sync":
            return graph.get_state(config, subgraphs=subgraphs)
        return await graph.aget_state(config, subgraphs=subgraphs)

    async def history(self, graph: Any, config: dict[str, Any], **kwargs: Any) -> list[Any]:
        if self.mode == "sync":
            return list(graph.get_state_history(config, **kwargs))
        return [s async for s in graph.aget_state_history(config, **kwargs)]

    async def update(self, graph: Any, config: dict[str, Any], values: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return graph.update_state(config, values, **kwargs)
        return await graph.aupdate_state(config, values, **kwargs)

    async def get_tuple(self, saver: Any, config: dict[str, Any]) -> Any:
        if self.mode == "sync":
            return saver.get_tuple(config)
        return await saver.aget_tuple(config)


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest, pg_dsn: str, schema_name: str) -> Driver:
    return Driver(request.param, pg_dsn, schema_name)


def thread(thread_id: str | None = None) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id or f"t-{uuid.uuid4().hex[:8]}"}}


def steps(snapshots: list[Any]) -> list[int]:
    return [s.metadata["step"] for s in snapshots]


def reference_history(graph_factory: Any, input: Any) -> list[tuple[int, str, dict[str, Any], tuple[str, ...]]]:
    """(step, source, values, next) of each checkpoint of a run on InMemorySaver, newest first."""
    graph = graph_factory(InMemorySaver())
    config = thread()
    graph.invoke(input, config, durability="sync")
    return [(s.metadata["step"], s.metadata["source"], s.values, s.next) for s in graph.get_state_history(config)]


# -- tests ----------------------------------------------------------------------------------


async def test_resume_thread_from_a_new_saver(driver: Driver) -> None:
    config = thread()
    async with driver.saver() as first:
        graph = agent_graph(first, interrupt_before=["tool"])
        await driver.invoke(graph, {"messages": ["ask"], "calls": 0}, config)
        paused = await driver.state(graph, config)
        assert paused.next == ("tool",)
        assert paused.values["messages"] == ["ask", "call:square(0)"]

    # A new saver on a new pool: nothing is shared with the first but the database.
    async with driver.saver() as second:
        graph = agent_graph(second)
        reloaded = await driver.state(graph, config)
        assert reloaded.config["configurable"]["checkpoint_id"] == paused.config["configurable"]["checkpoint_id"]
        assert reloaded.values == paused.values
        assert reloaded.next == ("tool",)

        final = await driver.invoke(graph, None, config)
        assert final == {"messages": AGENT_MESSAGES, "calls": TOOL_CALLS}
        assert (await driver.state(graph, config)).next == ()

        # The same thread goes on with a new input and keeps what it had.
        again = await driver.invoke(graph, {"messages": ["ask again"]}, config)
        assert again["messages"][: len(AGENT_MESSAGES)] == AGENT_MESSAGES
        assert again["messages"][len(AGENT_MESSAGES) :] == ["ask again", "answer:ask again"]
        assert again["calls"] == TOOL_CALLS


async def test_history_filter_before_limit(driver: Driver) -> None:
    config = thread()
    async with driver.saver() as saver:
        graph = agent_graph(saver)
        await driver.invoke(graph, {"messages": ["ask"], "calls": 0}, config)

        history = await driver.history(graph, config)
        # One input checkpoint (step -1), then one per super-step, newest first.
        assert steps(history) == list(range(AGENT_LOOP_STEPS - 1, -2, -1))
        assert [s.metadata["source"] for s in history] == ["loop"] * AGENT_LOOP_STEPS + ["input"]
        expected = reference_history(agent_graph, {"messages": ["ask"], "calls": 0})
        assert [(s.metadata["step"], s.metadata["source"], s.values, s.next) for s in history] == expected
        for newer, older in zip(history, history[1:]):
            assert newer.parent_config["configurable"]["checkpoint_id"] == older.config["configurable"]["checkpoint_id"]

        loops = await driver.history(graph, config, filter={"source": "loop"})
        assert steps(loops) == list(range(AGENT_LOOP_STEPS - 1, -1, -1))

        (step3,) = await driver.history(graph, config, filter={"step": 3})
        assert step3.metadata["step"] == 3
        assert step3.values == history[AGENT_LOOP_STEPS - 1 - 3].values
        assert await driver.history(graph, config, filter={"step": 3, "source": "input"}) == []
        assert await driver.history(graph, config, filter={"source": "update"}) == []

        before3 = await driver.history(graph, config, before=step3.config)
        assert steps(before3) == [2, 1, 0, -1]
        assert steps(await driver.history(graph, config, limit=2)) == [AGENT_LOOP_STEPS - 1, AGENT_LOOP_STEPS - 2]
        assert steps(await driver.history(graph, config, before=step3.config, limit=3)) == [2, 1, 0]
        assert steps(await driver.history(graph, config, filter={"source": "loop"}, limit=100)) == steps(loops)
        assert steps(await driver.history(graph, config, filter={"source": "loop"}, before=step3.config)) == [2, 1, 0]

        # Another thread on the same saver does not leak into this one's history.
        await driver.invoke(graph, {"messages": ["other"], "calls": TOOL_CALLS}, thread())
        assert len(await driver.history(graph, config)) == AGENT_LOOP_STEPS + 1


async def test_update_state_forks_from_an_old_checkpoint(driver: Driver) -> None:
    config = thread()
    async with driver.saver() as saver:
        graph = agent_graph(saver)
        original = await driver.invoke(graph, {"messages": ["ask"], "calls": 0}, config)
        original_history = await driver.history(graph, config)
        original_head = original_history[0]

        # The checkpoint before the second tool call: next is "tool", calls == 1.
        (old,) = [s for s in original_history if s.next == ("tool",) and s.values["calls"] == 1]
        fork_config = await driver.update(graph, old.config, {"calls": 2})
        forked = await driver.state(graph, fork_config)
        assert forked.metadata["source"] == "update"
        assert forked.parent_config["configurable"]["checkpoint_id"] == old.config["configurable"]["checkpoint_id"]
        assert forked.next == ("tool",)
        assert forked.values["calls"] == 2

        fork_final = await driver.invoke(graph, None, fork_config)
        assert fork_final["messages"] == [*old.values["messages"], "result:4", "answer:result:4"]
        assert fork_final["calls"] == 3
        assert fork_final != original

        # The thread's head is now the fork's end; following parents leads back to `old`.
        head = await driver.state(graph, config)
        assert head.values == fork_final
        chain = [head]
        while chain[-1].config["configurable"]["checkpoint_id"] != old.config["configurable"]["checkpoint_id"]:
            assert chain[-1].parent_config is not None, "the fork's chain never reached the old checkpoint"
            chain.append(await driver.state(graph, chain[-1].parent_config))
        assert [s.metadata["source"] for s in chain] == ["loop", "loop", "update", "loop"]

        # The original branch is intact: every checkpoint still reads as before.
        for snapshot in original_history:
            again = await driver.state(graph, snapshot.config)
            assert (again.values, again.next, again.metadata, again.parent_config) == (
                snapshot.values,
                snapshot.next,
                snapshot.metadata,
                snapshot.parent_config,
            )
        assert (await driver.state(graph, original_head.config)).values == original
        assert len(await driver.history(graph, config)) == len(original_history) + 3


async def test_replay_from_an_old_checkpoint_forks(driver: Driver) -> None:
    config = thread()
    async with driver.saver() as saver:
        graph = agent_graph(saver)
        original = await driver.invoke(graph, {"messages": ["ask"], "calls": 0}, config)
        original_ids = [s.config["configurable"]["checkpoint_id"] for s in await driver.history(graph, config)]

        (old,) = await driver.history(graph, config, filter={"step": 2})
        replayed = await driver.invoke(graph, None, old.config)
        assert replayed == original  # deterministic nodes: the replay reaches the same end

        history = await driver.history(graph, config)
        new = [s for s in history if s.config["configurable"]["checkpoint_id"] not in original_ids]
        # LangGraph opens the new branch with a "fork" checkpoint whose parent is `old`.
        assert steps(new) == list(range(AGENT_LOOP_STEPS, 2, -1))
        assert [s.metadata["source"] for s in new] == ["loop"] * (len(new) - 1) + ["fork"]
        assert new[-1].parent_config["configurable"]["checkpoint_id"] == old.config["configurable"]["checkpoint_id"]
        assert new[0].values == replayed
        # The original branch is still listed, whole and in order.
        assert [s.config["configurable"]["checkpoint_id"] for s in history if s not in new] == original_ids


async def test_interrupt_then_resume(driver: Driver) -> None:
    config = thread()
    async with driver.saver() as saver:
        graph = approval_graph(saver)
        out = await driver.invoke(graph, {"request": "/tmp/x", "log": []}, config)
        assert [i.value for i in out["__interrupt__"]] == [{"tool": "rm", "path": "/tmp/x"}]

        paused = await driver.state(graph, config)
        assert paused.next == ("approve",)
        assert paused.values == {"request": "/tmp/x", "log": ["proposed:rm /tmp/x"]}
        (task,) = paused.tasks
        assert task.name == "approve"
        assert [i.value for i in task.interrupts] == [{"tool": "rm", "path": "/tmp/x"}]
        assert [i.value for i in paused.interrupts] == [{"tool": "rm", "path": "/tmp/x"}]
        stored = await driver.get_tuple(saver, config)
        assert [(t, c) for t, c, _ in stored.pending_writes] == [(task.id, "__interrupt__")]

    async with driver.saver() as saver:  # answered later, by another process's saver
        graph = approval_graph(saver)
        final = await driver.invoke(graph, Command(resume="yes"), config)
        assert final == {
            "request": "/tmp/x",
            "log": ["proposed:rm /tmp/x", "approved:yes", "executed:yes"],
        }
        done = await driver.state(graph, config)
        assert done.next == () and done.tasks == () and done.interrupts == ()


async def test_subgraph_state_and_interrupt(driver: Driver, pg_dsn: str) -> None:
    ref = parent_graph(InMemorySaver())
    ref_config = thread()
    ref.invoke({"topic": "pg", "notes": []}, ref_config)
    expected = ref.invoke(Command(resume="ok"), ref_config)

    config = thread()
    async with driver.saver() as saver:
        graph = parent_graph(saver)
        out = await driver.invoke(graph, {"topic": "pg", "notes": []}, config)
        assert [i.value for i in out["__interrupt__"]] == [{"review": ["found:pg"]}]

        parent = await driver.state(graph, config, subgraphs=True)
        assert parent.next == ("research",)
        assert parent.values == {"topic": "pg", "notes": ["kickoff"]}
        (task,) = parent.tasks
        assert task.name == "research"
        child = task.state
        assert child.values == {"topic": "pg", "findings": ["found:pg"]}
        assert child.next == ("review",)
        child_ns = child.config["configurable"]["checkpoint_ns"]
        assert child_ns.startswith("research:")
        assert [i.value for i in child.tasks[0].interrupts] == [{"review": ["found:pg"]}]
        assert [i.value for i in parent.interrupts] == [{"review": ["found:pg"]}]

        # The subgraph's own history is readable by its namespace.
        child_history = await driver.history(graph, child.config)
        assert child_history[0].values == child.values
        assert {s.config["configurable"]["checkpoint_ns"] for s in child_history} == {child_ns}

        with psycopg.connect(pg_dsn) as conn:
            namespaces = conn.execute(
                sql.SQL("SELECT DISTINCT checkpoint_ns FROM {}.checkpoints WHERE thread_id = %s").format(sql.Identifier(driver.schema)),
                (config["configurable"]["thread_id"],),
            ).fetchall()
        assert sorted(ns for (ns,) in namespaces) == ["", child_ns]

    async with driver.saver() as saver:
        graph = parent_graph(saver)
        final = await driver.invoke(graph, Command(resume="ok"), config)
        assert final == {
            "topic": "pg",
            "notes": ["kickoff", "report:2"],
            "findings": ["found:pg", "reviewed:ok"],
        }
        assert final == expected
        after = await driver.state(graph, config, subgraphs=True)
        assert after.next == () and after.tasks == () and after.interrupts == ()


async def test_parallel_branches_all_writes_land(driver: Driver) -> None:
    queries = ["a", "b", "c"]
    expected_ref = InMemorySaver()
    ref_executions: Counter[str] = Counter()
    ref_graph = fan_out_graph(expected_ref, ref_executions, ask_human=False)
    expected = ref_graph.invoke({"queries": queries, "results": []}, thread(), durability="sync")
    assert len(expected["results"]) == 1 + len(FETCHERS) + len(queries)

    config = thread()
    async with driver.saver() as saver:
        executions: Counter[str] = Counter()
        final = await driver.invoke(fan_out_graph(saver, executions, ask_human=False), {"queries": queries, "results": []}, config)
        assert final == expected
        assert final["summary"] == f"{1 + len(FETCHERS) + len(queries)} results"
        assert executions == ref_executions


async def test_parallel_branch_interrupt_keeps_the_others_writes(driver: Driver) -> None:
    queries = ["a", "b"]
    ref_executions: Counter[str] = Counter()
    ref_graph = fan_out_graph(InMemorySaver(), ref_executions, ask_human=True)
    ref_config = thread()
    ref_graph.invoke({"queries": queries, "results": []}, ref_config, durability="sync")
    expected = ref_graph.invoke(Command(resume="times"), ref_config, durability="sync")

    config = thread()
    executions: Counter[str] = Counter()
    async with driver.saver() as saver:
        graph = fan_out_graph(saver, executions, ask_human=True)
        await driver.invoke(graph, {"queries": queries, "results": []}, config)

        paused = await driver.state(graph, config)
        assert paused.next == ("news",)  # the only task of the super-step still to finish
        assert sorted(t.name for t in paused.tasks) == sorted([*FETCHERS, "lookup", "lookup"])
        assert [t.name for t in paused.tasks if t.result is None] == ["news"]
        stored = await driver.get_tuple(saver, config)
        by_task = {t.id: t.name for t in paused.tasks}
        landed = sorted((by_task[task_id], value) for task_id, channel, value in stored.pending_writes if channel == "results")
        # Every task but the interrupted one wrote its result before the interrupt.
        assert landed == sorted([(n, [f"{n}:ok"]) for n in FETCHERS if n != "news"] + [("lookup", [f"lookup:{q}"]) for q in queries])
        assert [c for _, c, _ in stored.pending_writes].count("__interrupt__") == 1

    async with driver.saver() as saver:
        graph = fan_out_graph(saver, executions, ask_human=True)
        final = await driver.invoke(graph, Command(resume="times"), config)

    assert final == expected
    assert "news:times" in final["results"]
    # Resuming re-ran only the interrupted task: the others' stored writes were reused.
    assert executions == ref_executions
    assert executions["news"] == 2
    assert all(executions[n] == 1 for n in ("dispatch", "weather", "stocks", "sports", "join"))
    assert all(executions[f"lookup:{q}"] == 1 for q in queries)


async def test_rows_are_human_readable(driver: Driver, pg_dsn: str) -> None:
    config = thread()
    run_id = uuid.uuid4()
    async with driver.saver() as saver:
        graph = agent_graph(saver)
        # As the LangGraph server does, the run's id rides in the config's metadata:
        # LangGraph drops the top-level config["run_id"] before a checkpointer sees it.
        await driver.invoke(graph, {"messages": ["ask"], "calls": 0}, {**config, "metadata": {"run_id": str(run_id)}})
        second_run = uuid.uuid4()
        await driver.invoke(graph, {"messages": ["more"]}, {**config, "metadata": {"run_id": str(second_run)}})

    query = sql.SQL("SELECT step, source, run_id FROM {}.checkpoints WHERE thread_id = %s ORDER BY step").format(
        sql.Identifier(driver.schema)
    )
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(query, (config["configurable"]["thread_id"],)).fetchall()
    first = [r for r in rows if r[2] == str(run_id)]
    assert [(step, source) for step, source, _ in first] == [(-1, "input")] + [(step, "loop") for step in range(AGENT_LOOP_STEPS)]
    # The second run continues the step count on the same thread.
    last = AGENT_LOOP_STEPS - 1
    second = [(step, source) for step, source, r in rows if r == str(second_run)]
    assert second == [(last + 1, "input"), (last + 2, "loop"), (last + 3, "loop")]
    assert len(rows) == len(first) + len(second)
