"""The saver on a real Citus cluster, its tables distributed by thread_id: does every
operation work, how many commands does each send to the workers, and what does a step cost
beside the same statements on the coordinator's own (undistributed) tables.

    python tools/citus_trials.py --dsn postgresql://postgres@127.0.0.1:9700/lab

The cluster is yours to bring (the package neither builds nor starts one): a coordinator
with the `citus` and `pg_stat_statements` extensions in the database, its workers added,
pg_stat_statements in the same database on each worker. Each run makes its own schemas
(`citus_trials_*`) and drops them at the end.

- operations: a real graph (two nodes, a list channel, a tool-like write) on two threads,
  then every read and maintenance call of the saver, of `lgpd` and of the replay page's JSON
  API, each with the commands it sent to the workers (pg_stat_statements' calls of
  statements naming the schema, summed over the workers).
- conformance: LangGraph's conformance suite, every capability group, both savers.
- cost: a two-node graph calling a tool `--steps` times, medians of `--rounds`, ms per
  step (per checkpoint written: its put and its tasks' writes) and worker commands per
  step: on distributed tables with the write functions (what a saver does there) and with
  the write statements, and on the coordinator's plain tables with each; action log on
  and off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typing_extensions import TypedDict

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "tests" / "support"), str(ROOT / "tests" / "integration")):
    if path not in sys.path:
        sys.path.insert(0, path)

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver  # noqa: E402


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    count: int


def _graph(steps: int) -> StateGraph:
    """A model that calls a tool `steps` times, then answers; each message ~200 characters."""

    def think(state: State) -> dict[str, Any]:
        n = state["count"]
        if n >= steps:
            return {"messages": [AIMessage(f"done after {n} calls " + "w" * 180)], "count": n}
        call = {"id": f"call-{n}-{uuid.uuid4().hex[:6]}", "name": "lookup", "args": {"query": f"q{n} " + "a" * 100}}
        return {"messages": [AIMessage(f"thinking {n} " + "w" * 180, tool_calls=[call])], "count": n + 1}

    def act(state: State) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        return {"messages": [ToolMessage("tool result " + "r" * 190, tool_call_id=call["id"], name="lookup")]}

    builder = StateGraph(State)
    builder.add_node("think", think)
    builder.add_node("act", act)
    builder.add_edge(START, "think")
    builder.add_conditional_edges("think", lambda s: "act" if s["messages"][-1].tool_calls else END, ["act", END])
    builder.add_edge("act", "think")
    return builder


class Cluster:
    """The coordinator's DSN and its workers' (from pg_dist_node)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            version = conn.execute("SELECT citus_version()").fetchone()
            rows = conn.execute("SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0").fetchall()
        self.version = version[0].split(" on ")[0] if version else "?"
        base = conninfo_to_dict(dsn)
        self.workers = [make_conninfo(**{**base, "host": host, "port": str(port)}) for host, port in rows]
        if not self.workers:
            raise SystemExit("the cluster has no workers: add them with citus_add_node() first")

    def reset_counts(self) -> None:
        for worker in self.workers:
            with psycopg.connect(worker, autocommit=True) as conn:
                conn.execute("SELECT pg_stat_statements_reset()")

    def worker_commands(self, schema: str) -> int:
        total = 0
        for worker in self.workers:
            with psycopg.connect(worker, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE %s", [f"%{schema}.%"]
                ).fetchone()
                total += int(row[0]) if row else 0
        return total

    @contextmanager
    def schema(self, distributed: bool = True) -> Iterator[str]:
        name = f"citus_trials_{uuid.uuid4().hex[:8]}"
        with DurablePostgresSaver.from_conn_string(self.dsn, schema=name) as saver:
            saver.setup()
            if distributed:
                saver.distribute()
        try:
            yield name
        finally:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def operations(cluster: Cluster, tmp: Path) -> list[tuple[str, str, int]]:
    """Each operation's outcome ('ok' or the error) and the worker commands it sent."""
    from starlette.testclient import TestClient
    from typer.testing import CliRunner

    from langgraph_pg_durable.cli import app as cli
    from langgraph_pg_durable.cli.target import Target
    from langgraph_pg_durable.web import create_app

    results: list[tuple[str, str, int]] = []
    with cluster.schema() as schema:
        store = f"file://{tmp}/objects"
        with DurablePostgresSaver.from_conn_string(cluster.dsn, schema=schema, object_store=store, offload_threshold=4096) as saver:
            graph = _graph(4).compile(checkpointer=saver)
            one = {"configurable": {"thread_id": "trial-1"}, "recursion_limit": 100}
            two = {"configurable": {"thread_id": "trial-2"}, "recursion_limit": 100}
            big = "b" * 8192  # offloaded: past offload_threshold

            def step(name: str, call: Callable[[], Any]) -> Any:
                cluster.reset_counts()
                try:
                    value = call()
                    outcome = "ok"
                except Exception as exc:  # noqa: BLE001 - the finding is what it raised
                    value, outcome = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                results.append((name, outcome, cluster.worker_commands(schema)))
                return value

            step(
                "invoke (4 steps, durability=sync)",
                lambda: graph.invoke({"messages": [HumanMessage("hi")], "count": 0}, one, durability="sync"),
            )
            step("invoke, a second thread", lambda: graph.invoke({"messages": [HumanMessage(big)], "count": 0}, two, durability="sync"))
            step(
                "invoke again (resume the thread)",
                lambda: graph.invoke({"messages": [HumanMessage("again")], "count": 0}, one, durability="sync"),
            )
            step("one writer per thread: takeover refuses the old run", lambda: _fencing(cluster.dsn, schema, "takeover"))
            step("one writer per thread: reject refuses the new run", lambda: _fencing(cluster.dsn, schema, "reject"))
            with DurablePostgresSaver.from_conn_string(cluster.dsn, schema=schema, object_store=store, offload_threshold=4096) as fresh:
                step("get_state on a new saver (cold)", lambda: _graph(4).compile(checkpointer=fresh).get_state(one).values["count"])
            step("get_state", lambda: graph.get_state(one).values["count"])
            step("update_state", lambda: graph.update_state(one, {"messages": [HumanMessage("edited")]}, as_node="act"))
            history = step("get_state_history", lambda: list(graph.get_state_history(one)))
            if history:
                step("time travel (invoke from an old checkpoint)", lambda: graph.invoke(None, history[-3].config, durability="sync"))
            step("list() of every thread", lambda: len(list(saver.list(None))))
            step("list() with a metadata filter", lambda: len(list(saver.list(one, filter={"source": "loop"}))))
            step("list_threads()", lambda: len(list(saver.list_threads())))
            step("list_steps()", lambda: len(list(saver.list_steps("trial-1"))))
            step("list_runs() of a thread", lambda: len(list(saver.list_runs(thread_id="trial-1"))))
            step("list_runs() of every thread", lambda: len(list(saver.list_runs())))
            step("list_actions() of a thread", lambda: len(list(saver.list_actions(thread_id="trial-1"))))
            step("list_actions() of every thread", lambda: len(list(saver.list_actions())))
            step("backfill_actions()", lambda: saver.backfill_actions())
            runner = CliRunner()
            for args in (
                ["threads"],
                ["runs", "trial-1"],
                ["history", "trial-1"],
                ["show", "trial-1"],
                ["diff", "trial-1", "--from", "1", "--to", "3"],
                ["grep", "lookup"],
                ["doctor"],
                ["prune", "--keep-latest", "--where", "meta.never=x", "--dry-run"],
            ):
                full = ["--dsn", cluster.dsn, "--schema", schema, "--object-store", store, *args]
                # diff exits 1 when A and B differ; doctor when it finds a problem (here: fsync off)
                fine = (0, 1) if args[0] in ("diff", "doctor") else (0,)
                step(f"lgpd {' '.join(args)}", lambda full=full, fine=fine: _cli_ok(runner.invoke(cli, full), fine))
            out = tmp / "export.jsonl"
            full = ["--dsn", cluster.dsn, "--schema", schema, "--object-store", store, "export", "--as", "raw", "--out", str(out)]
            step("lgpd export", lambda: _cli_ok(runner.invoke(cli, full)))
            with TestClient(create_app(Target(cluster.dsn, schema, store).saver), base_url="http://127.0.0.1") as client:
                for url in (
                    "/api/threads",
                    "/api/threads/trial-1/runs",
                    "/api/threads/trial-1/steps",
                    "/api/threads/trial-1/steps/2",
                    "/api/threads/trial-1/state",
                    "/api/threads/trial-1/diff?from=1&to=3",
                    "/",
                    "/threads/trial-1",
                    "/threads/trial-1/steps/2",
                ):
                    step(f"GET {url}", lambda url=url: _http_ok(client.get(url)))
            step("copy_thread()", lambda: saver.copy_thread("trial-1", "trial-3"))
            step("prune(keep_latest), one thread", lambda: saver.prune(["trial-3"]))
            runs = list(saver.list_runs(thread_id="trial-1"))
            step("delete_for_runs(), one run", lambda: saver.delete_for_runs([runs[-1].run_id]))
            step("delete_thread()", lambda: saver.delete_thread("trial-2"))
            step("gc()", lambda: saver.gc())
        async_results = asyncio.run(_async_operations(cluster, schema, store))
        results.extend(async_results)
    return results


def _fencing(dsn: str, schema: str, policy: str) -> str:
    """Two savers (two processes' worth) on one thread under `policy`, running fencing_worker's
    graph: the first held in its first node while the second runs. Raises unless exactly the expected run is refused
    with the expected error and the thread's history has no fork."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from fencing_worker import build, forks

    from langgraph_pg_durable import ThreadBusyError, ThreadTakenError

    thread = f"fence-{policy}-{uuid.uuid4().hex[:6]}"
    config = {"configurable": {"thread_id": thread}}
    reached, go_on = threading.Event(), threading.Event()

    def hold() -> None:
        reached.set()
        go_on.wait(60)

    with (
        DurablePostgresSaver.from_conn_string(dsn, schema=schema, fencing=policy) as a,
        DurablePostgresSaver.from_conn_string(dsn, schema=schema, fencing=policy) as b,
        ThreadPoolExecutor(1) as pool,
    ):
        held = pool.submit(build(a, "old", hold).invoke, {"marks": []}, config, durability="sync")
        reached.wait(60)
        try:
            second: BaseException | None = None
            try:
                build(b, "new").invoke({"marks": []}, config, durability="sync")
            except BaseException as exc:  # noqa: BLE001 - what it raised is the finding
                second = exc
        finally:
            go_on.set()
        first_error = held.exception(timeout=60)
    expected = (ThreadTakenError, type(None)) if policy == "takeover" else (type(None), ThreadBusyError)
    if (type(first_error), type(second)) != expected:
        raise AssertionError(f"{policy}: the first run raised {first_error!r}, the second {second!r}")
    if forks(dsn, schema, thread):
        raise AssertionError(f"{policy}: the history forked")
    return "ok"


async def _async_operations(cluster: Cluster, schema: str, store: str) -> list[tuple[str, str, int]]:
    results = []
    async with AsyncDurablePostgresSaver.from_conn_string(cluster.dsn, schema=schema, object_store=store, offload_threshold=4096) as saver:
        graph = _graph(3).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "trial-async"}, "recursion_limit": 100}
        for name, make in (
            ("async invoke", lambda: graph.ainvoke({"messages": [HumanMessage("hi")], "count": 0}, config, durability="sync")),
            ("async get_state", lambda: graph.aget_state(config)),
            ("async prune + delete", lambda: _prune_delete(saver)),
        ):
            cluster.reset_counts()
            try:
                await make()
                outcome = "ok"
            except Exception as exc:  # noqa: BLE001
                outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            results.append((name, outcome, cluster.worker_commands(schema)))
    return results


async def _prune_delete(saver: AsyncDurablePostgresSaver) -> None:
    await saver.aprune(["trial-async"])
    await saver.adelete_thread("trial-async")


def _cli_ok(result: Any, fine: tuple[int, ...] = (0,)) -> int:
    if result.exit_code not in fine or result.exception is not None and not isinstance(result.exception, SystemExit):
        detail = result.output.strip() or repr(result.exception)
        raise RuntimeError(f"exit {result.exit_code}: {detail[:160]}")
    return len(result.output)


def _http_ok(response: Any) -> int:
    if response.status_code != 200:
        raise RuntimeError(f"HTTP {response.status_code}: {response.text[:160]}")
    return len(response.content)


def conformance(cluster: Cluster) -> list[tuple[str, int, int]]:
    """(saver, groups passed, groups run) of LangGraph's conformance suite on distributed tables."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate
    from test_conformance import SyncSaverAsAsync

    out = []
    for kind in ("async", "sync"):
        with cluster.schema() as schema:
            if kind == "async":

                @checkpointer_test(name="AsyncDurablePostgresSaver on Citus")
                async def factory():  # type: ignore[no-untyped-def]
                    async with AsyncDurablePostgresSaver.from_conn_string(cluster.dsn, schema=schema) as saver:
                        yield saver

            else:

                @checkpointer_test(name="DurablePostgresSaver on Citus")
                async def factory():  # type: ignore[no-untyped-def]
                    with DurablePostgresSaver.from_conn_string(cluster.dsn, schema=schema) as saver:
                        yield SyncSaverAsAsync(saver)

            report = asyncio.run(validate(factory))
            groups = [r for r in report.results.values() if r.detected]
            out.append((kind, sum(1 for r in groups if r.passed is True), len(groups)))
    return out


# (tables distributed, writes routed, action log) of each cost row.
COST_CASES = (
    (True, True, True),
    (True, True, False),
    (True, False, True),
    (False, False, True),
    (False, False, False),
    (False, True, True),
)


def cost(cluster: Cluster, steps: int, rounds: int) -> list[dict[str, Any]]:
    """Per step (a checkpoint: its put and its task's writes): ms and worker commands, for
    each of COST_CASES; the rounds of the cases alternate."""
    times: dict[tuple[bool, bool, bool], list[float]] = {case: [] for case in COST_CASES}
    commands: dict[tuple[bool, bool, bool], list[float]] = {case: [] for case in COST_CASES}
    for _ in range(rounds):
        for case in COST_CASES:
            distributed, routed, action_log = case
            with cluster.schema(distributed) as schema:
                with DurablePostgresSaver.from_conn_string(
                    cluster.dsn, schema=schema, action_log=action_log, routed_writes=routed
                ) as saver:
                    graph = _graph(steps).compile(checkpointer=saver)
                    warm = {"configurable": {"thread_id": "warm"}, "recursion_limit": 4 * steps + 10}
                    graph.invoke({"messages": [HumanMessage("warm")], "count": steps - 2}, warm, durability="sync")
                    cluster.reset_counts()
                    config = {"configurable": {"thread_id": "cost"}, "recursion_limit": 4 * steps + 10}
                    start = time.perf_counter()
                    graph.invoke({"messages": [HumanMessage("go")], "count": 0}, config, durability="sync")
                    elapsed = time.perf_counter() - start
                    sent = cluster.worker_commands(schema) if distributed else 0
                    checkpoints = len(list(saver.list(config)))
                    commands[case].append(sent / checkpoints)
                    times[case].append(elapsed * 1000 / checkpoints)
    return [
        {
            "tables": "distributed" if case[0] else "plain (coordinator)",
            "writes": "routed (write functions)" if case[1] else "statements",
            "action_log": case[2],
            "ms_per_step": round(statistics.median(times[case]), 2),
            "worker_commands_per_step": round(statistics.median(commands[case]), 1),
        }
        for case in COST_CASES
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True, help="the Citus coordinator's database")
    parser.add_argument("--steps", type=int, default=15, help="graph loops of the cost run (two super-steps each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("operations", "conformance", "cost"), action="append")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    args = parser.parse_args()
    only = set(args.only or ("operations", "conformance", "cost"))
    cluster = Cluster(args.dsn)
    report: dict[str, Any] = {"citus": cluster.version, "workers": len(cluster.workers)}
    with tempfile.TemporaryDirectory() as tmp:
        if "operations" in only:
            report["operations"] = operations(cluster, Path(tmp))
    if "conformance" in only:
        report["conformance"] = conformance(cluster)
    if "cost" in only:
        report["cost"] = cost(cluster, args.steps, args.rounds)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return
    print(f"{report['citus']}, {report['workers']} workers")
    for name, outcome, commands in report.get("operations", []):
        print(f"  {name:<48} {commands:>5} worker commands  {outcome}")
    if "operations" in report:
        ok = sum(1 for _, outcome, _ in report["operations"] if outcome == "ok")
        print(f"operations: {ok} of {len(report['operations'])} ok")
    for kind, passed, run in report.get("conformance", []):
        print(f"conformance, {kind} saver: {passed} of {run} groups passed")
    for row in report.get("cost", []):
        print(
            f"  {row['tables']:<20} {row['writes']:<25} action_log={row['action_log']!s:<5} {row['ms_per_step']:>7} ms/step  "
            f"{row['worker_commands_per_step']:>5} worker commands/step"
        )


if __name__ == "__main__":
    main()
