"""The README's "Query your agents in SQL" queries, run as written through psql against a
database the agent graphs populated; each answer is checked."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import agents
from langgraph_pg_durable import DurablePostgresSaver, once

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_queries() -> list[str]:
    """The sql blocks of the README's section, in order."""
    text = README.read_text()
    section = text.split("### Query your agents in SQL", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


def psql_binary() -> str:
    found = shutil.which("psql") or next((str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))), None)
    if found is None:
        pytest.fail("psql is not installed: the README's queries are psql scripts (apt-get install postgresql-client)")
    return found


def psql(dsn: str, schema: str, query: str, **variables: Any) -> list[dict[str, str]]:
    """Run one README query with psql (its variables set with -v), on `schema` instead of
    the default one; the rows as dicts of text."""
    script = query.replace("langgraph_durable.", f"{schema}.")
    args = [psql_binary(), dsn, "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1"]
    for name, value in variables.items():
        args += ["-v", f"{name}={value}"]
    done = subprocess.run(args, input=script, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return list(csv.DictReader(io.StringIO(done.stdout)))


@pytest.fixture
def populated(pg_dsn: str, schema_name: str) -> dict[str, Any]:
    """A tool agent's two turns, a run that failed, and a supervisor's run."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        agent = {"configurable": {"thread_id": f"calc-{uuid.uuid4().hex[:6]}"}}
        graph = agents.tool_agent(saver, agents.calculator_replies())
        graph.invoke({"messages": [("user", "what is 1+2?")]}, agent, durability="sync")
        graph.invoke({"messages": [("user", "thanks")]}, agent, durability="sync")
        failed = {"configurable": {"thread_id": f"flaky-{uuid.uuid4().hex[:6]}"}}
        with pytest.raises(ValueError):
            agents.failing_tool(saver).invoke({"messages": [("user", "weather?")]}, failed, durability="sync")
        team = {"configurable": {"thread_id": f"team-{uuid.uuid4().hex[:6]}"}}
        agents.supervisor(saver).invoke({"messages": [("user", "write about tides")]}, team, durability="sync")
        # A person retargets the pending tool call at a breakpoint: same message, same call id.
        edited = {"configurable": {"thread_id": f"edited-{uuid.uuid4().hex[:6]}"}}
        stepwise = agents.tool_agent(saver, agents.calculator_replies())
        stepwise.interrupt_before_nodes = ["tools"]
        stepwise.invoke({"messages": [("user", "what is 1+2?")]}, edited, durability="sync")
        call = stepwise.get_state(edited).values["messages"][-1]
        retargeted = call.model_copy(update={"tool_calls": [{**call.tool_calls[0], "args": {"a": 2, "b": 2}}]})
        stepwise.update_state(edited, {"messages": [retargeted]})
        stepwise.invoke(None, edited, durability="sync")
        # A node whose side effect is recorded with once().
        charged = {"configurable": {"thread_id": f"shop-{uuid.uuid4().hex[:6]}"}}
        _charging(saver).invoke({"order": "lamp"}, charged, durability="sync")
    with psycopg.connect(pg_dsn) as conn:
        runs = conn.execute(
            f'SELECT thread_id, run_id FROM "{schema_name}".runs ORDER BY started_at',
        ).fetchall()
    named = (("agent", agent), ("failed", failed), ("team", team), ("edited", edited), ("charged", charged))
    ids = {name: config["configurable"]["thread_id"] for name, config in named}
    return {**ids, "runs": runs}


class Order(TypedDict, total=False):
    order: str
    receipt: dict[str, Any]


def _charging(saver: Any) -> Any:
    def charge(state: Order, config: RunnableConfig) -> dict[str, Any]:
        return {"receipt": once(config, "charge", lambda order: {"charged": order, "amount": 12}, state["order"])}

    graph = StateGraph(Order)
    graph.add_node("charge", charge)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", END)
    return graph.compile(checkpointer=saver)


def test_the_readme_has_six_queries() -> None:
    assert len(readme_queries()) == 6


def test_each_readme_query_answers_on_a_populated_database(populated: dict[str, Any], pg_dsn: str, schema_name: str) -> None:
    steps, tool_calls, prompt, failed, tokens, effects = readme_queries()
    first_run = next(run for thread_id, run in populated["runs"] if thread_id == populated["agent"])

    rows = psql(pg_dsn, schema_name, steps, run=first_run)
    assert [(r["step"], r["agent"], r["action_type"]) for r in rows] == [
        ("0", "__start__", "human"),
        ("1", "agent", "tool_call"),
        ("2", "tools", "observation"),
        ("3", "agent", "llm_call"),
    ]

    rows = psql(pg_dsn, schema_name, tool_calls, agent="agent")
    by_thread = {r["thread_id"]: r for r in rows}
    calc = by_thread[populated["agent"]]
    assert (calc["tool"], calc["arguments"], calc["ran_with"], calc["result"]) == ("add", '{"a": 1, "b": 2}', '{"a": 1, "b": 2}', "3")
    edited = by_thread[populated["edited"]]  # the model's arguments, the edited ones it ran with, and their result
    assert (edited["arguments"], edited["ran_with"], edited["result"]) == ('{"a": 1, "b": 2}', '{"a": 2, "b": 2}', "4")
    flaky = by_thread[populated["failed"]]
    assert (flaky["tool"], flaky["result"]) == ("flaky", "")  # it raised: no result
    rows = psql(pg_dsn, schema_name, tool_calls, agent="researcher/model")
    assert [(r["tool"], r["result"]) for r in rows] == [("search", "results for tides")]

    rows = psql(pg_dsn, schema_name, prompt, thread=populated["agent"], step=3)
    assert [(r["part"], r["role"], r["content"]) for r in rows] == [
        ("prompt", "user", "what is 1+2?"),
        ("prompt", "assistant", ""),
        ("prompt", "tool", "3"),
        ("response", "assistant", "1 + 2 = 3"),
    ]
    assert "call-1" in rows[1]["tool_calls"]

    rows = psql(pg_dsn, schema_name, failed)
    assert [(r["thread_id"], r["agent"], r["error"], r["message"]) for r in rows] == [
        (populated["failed"], "tools", "ValueError", "service down for 'weather'")
    ]

    rows = psql(pg_dsn, schema_name, tokens)
    totals = {
        (r["thread_id"], r["run_id"]): (r["input_tokens"], r["output_tokens"], r["total_tokens"])
        for r in rows
        if r["thread_id"] == populated["agent"]
    }
    second_run = [run for thread_id, run in populated["runs"] if thread_id == populated["agent"]][1]
    assert totals == {(populated["agent"], first_run): ("32", "11", "43"), (populated["agent"], second_run): ("30", "4", "34")}

    rows = psql(pg_dsn, schema_name, effects, thread=populated["charged"])
    assert [(r["step"], r["agent"], r["action_type"], r["key"], r["result"]) for r in rows] == [
        ("1", "charge", "decision", "charge#0", '{"amount": 12, "charged": "lamp"}')
    ]
