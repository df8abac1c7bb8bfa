"""The LangGraph Agent Server (`langgraph dev`, langgraph-api's in-memory runtime) on our async
saver, set up as examples/agent_server/ sets it up, driven with `langgraph_sdk` as a client
would: a run that pauses for approval, the tool call edited with `update_state`, the resume,
history (whole and `before` a checkpoint), copy, delete, a rollback of a run in flight, and a
restart of the server on the same database. Each step is checked against our own tables too.

The server runs in a process group of its own, in a copy of the example's folder (the
in-memory runtime keeps its thread and run records in `.langgraph_api/` there), offline:
tracing, analytics, the version check and LangSmith keys are off. The rollback is forced
with a test-only graph whose node holds until the test lets it go (a socket the test owns).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("langgraph_cli", reason="the `langgraph` CLI (langgraph-cli[inmem], in the `frameworks` extra) is not installed")

from langgraph_sdk import get_client  # noqa: E402
from langgraph_sdk.errors import NotFoundError  # noqa: E402

from langgraph_pg_durable import ConfigError, DurablePostgresSaver  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent_server"
READY_TIMEOUT = 90.0  # `langgraph dev` imports langgraph-api and the graphs: ~4 s here
STOP_TIMEOUT = 30.0
OPTIONAL_METHODS = ("adelete_thread", "adelete_for_runs", "acopy_thread", "aprune")
WAIT = 120.0  # the bound on any one wait for the server or the held node

# Variables that would make the server or the SDK talk to LangSmith (or PyPI); unset in the child.
ONLINE_VARIABLES = (
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_ENDPOINT",
    "LANGCHAIN_ENDPOINT",
)
OFFLINE = {
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
}

# A test-only graph for the rollback: `first` writes a checkpoint, then `hold` tells the test
# it is running and waits for the test's answer on that socket, so the run is in flight for
# exactly as long as the test wants (a cancelled run's wait ends with the cancellation).
GATE_GRAPH = '''
"""Test-only: a run that holds inside a node until the test answers on $GATE_PORT."""
import asyncio
import operator
import os
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def first(state: Steps) -> dict:
    return {"steps": ["first"]}


async def hold(state: Steps) -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", int(os.environ["GATE_PORT"]))
    writer.write(b"holding\\n")
    await writer.drain()
    answer = await reader.readline()
    writer.close()
    return {"steps": [answer.decode().strip()]}


builder = StateGraph(Steps)
builder.add_node("first", first)
builder.add_node("hold", hold)
builder.add_edge(START, "first")
builder.add_edge("first", "hold")
builder.add_edge("hold", END)
graph = builder.compile()
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking Linux to SIGTERM the server if pytest dies without stopping it."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return preexec


class AgentServer:
    """One `langgraph dev` process group on our saver; `start` again after `stop` restarts it
    in the same folder (same thread records) on the same schema."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.log = folder / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "langgraph_cli", "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                argv, cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, preexec_fn=_die_with_parent(),
            )  # fmt: skip
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        """Poll /ok (a readiness check, bounded): fail with the log if the server exits or never answers."""
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"`langgraph dev` exited with code {self.process.returncode}; log tail:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)  # poll interval, not a guess at how long startup takes
        self.stop()
        tail = self.log_tail()
        raise AssertionError(f"`langgraph dev` not ready at {self.url}/ok after {READY_TIMEOUT:.0f}s ({last}); log tail:\n{tail}")

    def stop(self) -> None:
        """SIGTERM our process group (uvicorn shuts down cleanly, saving the thread records),
        SIGKILL it if it has not exited in STOP_TIMEOUT."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT)
            raise AssertionError(f"`langgraph dev` ignored SIGTERM for {STOP_TIMEOUT:.0f}s; log tail:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def errors(self) -> list[str]:
        """The log's error lines (the server logs a failed checkpointer call and carries on)."""
        text = re.sub(r"\x1b\[[0-9;]*m", "", self.log.read_text(errors="replace"))
        return [line for line in text.splitlines() if "[error" in line or "Traceback" in line]


class Gate:
    """The socket the gate graph's `hold` node connects to: each connection is one held run."""

    def __init__(self) -> None:
        self.held: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def open(self) -> None:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            assert await reader.readline() == b"holding\n"
            await self.held.put((reader, writer))

        self.server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def next_held(self) -> asyncio.StreamWriter:
        """Wait for the next run to reach `hold`; its writer releases it."""
        _, writer = await asyncio.wait_for(self.held.get(), timeout=WAIT)
        return writer

    async def close(self) -> None:
        while not self.held.empty():
            self.held.get_nowait()[1].close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    gate = Gate()
    await gate.open()
    yield gate
    await gate.close()


@pytest.fixture
def server(tmp_path: Path, pg_dsn: str, schema_name: str, gate: Gate) -> Iterator[AgentServer]:
    """The example, copied as it is, plus the gate graph; started on the test's schema."""
    folder = tmp_path / "agent_server"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api", "*.md"))
    (folder / "gate.py").write_text(GATE_GRAPH)
    config = json.loads((folder / "langgraph.json").read_text())
    config["graphs"]["gate"] = "./gate.py:graph"
    (folder / "langgraph.json").write_text(json.dumps(config, indent=2))
    env = {k: v for k, v in os.environ.items() if k not in ONLINE_VARIABLES}
    env.update(OFFLINE, DATABASE_URL=pg_dsn, LGPD_SCHEMA=schema_name, GATE_PORT=str(gate.port))
    agent_server = AgentServer(folder, env)
    agent_server.start()
    try:
        yield agent_server
    finally:
        agent_server.stop()


@pytest.fixture
def saver(pg_dsn: str, schema_name: str) -> Iterator[DurablePostgresSaver]:
    """Our sync saver on the server's schema, to read what the server stored."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        yield saver


def _stored_ids(saver: DurablePostgresSaver, thread_id: str) -> list[str]:
    """The checkpoint ids our tables hold for a thread's root namespace, newest first."""
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})]


def _ids(states: list[Any]) -> list[str]:
    return [s["checkpoint"]["checkpoint_id"] for s in states]


def _stored_runs(saver: DurablePostgresSaver, thread_id: str) -> list[str | None]:
    return [t.metadata.get("run_id") for t in saver.list({"configurable": {"thread_id": thread_id}})]


async def test_a_thread_on_the_server_runs_pauses_edits_resumes_copies_and_survives_a_restart(
    server: AgentServer, saver: DurablePostgresSaver
) -> None:
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]

    # A run that pauses at `approve`, with the model's call in the interrupt.
    first = await client.runs.create(thread_id, "agent", input={"messages": [{"role": "user", "content": "weather in Oslo?"}]})
    await client.runs.join(thread_id, first["run_id"])
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["approve"]
    [interrupt] = state["tasks"][0]["interrupts"]
    assert interrupt["value"]["tool_calls"][0]["args"] == {"city": "Oslo"}
    assert (await client.threads.get(thread_id))["status"] == "interrupted"
    assert _stored_ids(saver, thread_id)[0] == state["checkpoint"]["checkpoint_id"]

    # The reviewer retargets the pending call (same message id: it replaces the model's).
    model_message = state["values"]["messages"][-1]
    model_message["tool_calls"][0]["args"]["city"] = "Bergen"
    updated = await client.threads.update_state(thread_id, {"messages": [model_message]}, as_node="agent")
    edited = await client.threads.get_state(thread_id)
    assert edited["checkpoint"]["checkpoint_id"] == updated["checkpoint"]["checkpoint_id"]
    assert edited["metadata"]["source"] == "update" and edited["next"] == ["approve"]
    assert edited["values"]["messages"][-1]["tool_calls"][0]["args"] == {"city": "Bergen"}
    stored_edit = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    assert stored_edit is not None and stored_edit.metadata["source"] == "update"

    # The approval resumes the run: the edited call ran.
    resumed = await client.runs.wait(thread_id, "agent", command={"resume": "yes"})
    assert resumed["messages"][-1]["content"] == "The weather: drizzle, 9 C."
    [second, _] = await client.runs.list(thread_id)  # newest first
    assert second["run_id"] != first["run_id"]

    # History: the server's is our tables', checkpoint for checkpoint.
    history = await client.threads.get_history(thread_id, limit=100)
    assert _ids(history) == _stored_ids(saver, thread_id)
    assert [h["metadata"]["step"] for h in history] == list(range(len(history) - 2, -2, -1))
    assert {first["run_id"], second["run_id"]} <= set(_stored_runs(saver, thread_id))
    assert thread_id in {t.thread_id for t in saver.list_threads()}  # what `lgpd threads` lists

    # The action log names the server's runs: the model's call in the first, the tool's answer in the second.
    actions = list(saver.list_actions(thread_id=thread_id))
    assert any(a.agent == "agent" and a.action_type == "tool_call" and a.run_id == first["run_id"] for a in actions), actions
    assert any(a.agent == "tools" and a.run_id == second["run_id"] and "drizzle, 9 C" in json.dumps(a.payload) for a in actions), actions

    # Copy: the copy has the same checkpoints, in our tables too (our acopy_thread); delete it.
    copy_id = (await client.threads.copy(thread_id))["thread_id"]
    assert _ids(await client.threads.get_history(copy_id, limit=100)) == _ids(history)
    assert _stored_ids(saver, copy_id) == _ids(history)
    await client.threads.delete(copy_id)
    with pytest.raises(NotFoundError):
        await client.threads.get(copy_id)
    assert _stored_ids(saver, copy_id) == []
    assert _stored_ids(saver, thread_id) == _ids(history)  # the original is untouched

    # Restart: stop the server, start it again on the same database and folder.
    server.stop()
    server.start()
    client = get_client(url=server.url)
    after = await client.threads.get_state(thread_id)
    assert after["checkpoint"] == history[0]["checkpoint"]
    assert after["values"] == history[0]["values"]
    assert _ids(await client.threads.get_history(thread_id, limit=100)) == _ids(history)

    # ... and the thread goes on: a new question, paused, then refused.
    await client.runs.wait(thread_id, "agent", input={"messages": [{"role": "user", "content": "weather in Lisbon?"}]})
    paused = await client.threads.get_state(thread_id)
    assert paused["next"] == ["approve"]
    assert paused["tasks"][0]["interrupts"][0]["value"]["tool_calls"][0]["args"] == {"city": "Lisbon"}
    refused = await client.runs.wait(thread_id, "agent", command={"resume": "not today"})
    assert refused["messages"][-1]["content"] == "I did not look it up (refused: not today)."
    assert len(refused["messages"]) == len(history[0]["values"]["messages"]) + 4
    longer = await client.threads.get_history(thread_id, limit=100)
    assert _ids(longer)[len(longer) - len(history) :] == _ids(history)
    assert _ids(longer) == _stored_ids(saver, thread_id)
    assert server.errors() == []


async def test_history_before_a_checkpoint_pages_back_from_it(server: AgentServer, saver: DurablePostgresSaver) -> None:
    """The SDK sends `before` as the checkpoint object (its id at the top level, not under
    "configurable"); the server hands it to `alist(before=...)` as it is."""
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input={"messages": [{"role": "user", "content": "weather in Oslo?"}]})
    await client.runs.wait(thread_id, "agent", command={"resume": "yes"})
    history = await client.threads.get_history(thread_id, limit=100)
    assert len(history) >= 5
    for i in (1, 3):
        page = await client.threads.get_history(thread_id, before=history[i]["checkpoint"], limit=100)
        assert _ids(page) == _ids(history[i + 1 :]), f"history before checkpoint {i} of {len(history)}"
        before = {"configurable": {"checkpoint_id": history[i]["checkpoint"]["checkpoint_id"]}}
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        assert _ids(page) == [t.config["configurable"]["checkpoint_id"] for t in saver.list(config, before=before)]
    page = await client.threads.get_history(thread_id, before=history[1]["checkpoint"], limit=2)
    assert _ids(page) == _ids(history[2:4])


async def test_a_rollback_deletes_the_run_in_flight_and_its_checkpoints(
    server: AgentServer, saver: DurablePostgresSaver, gate: Gate
) -> None:
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]

    # The first run holds inside `hold`; under durability="sync" its earlier checkpoints are committed.
    doomed = await client.runs.create(thread_id, "gate", input={"steps": []}, durability="sync")
    held = await gate.next_held()
    assert (await client.runs.get(thread_id, doomed["run_id"]))["status"] == "running"
    assert _stored_runs(saver, thread_id).count(doomed["run_id"]) >= 2

    # A second run with multitask_strategy="rollback" cancels it and deletes it, rows and all.
    kept = await client.runs.create(thread_id, "gate", input={"steps": ["again"]}, multitask_strategy="rollback", durability="sync")
    released = await gate.next_held()  # the second run reached `hold`: the first is gone by now
    released.write(b"released\n")
    await released.drain()
    await asyncio.wait_for(client.runs.join(thread_id, kept["run_id"]), timeout=WAIT)
    held.close()

    assert (await client.runs.get(thread_id, kept["run_id"]))["status"] == "success"
    with pytest.raises(NotFoundError):
        await client.runs.get(thread_id, doomed["run_id"])
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [kept["run_id"]]
    state = await client.threads.get_state(thread_id)
    assert state["values"] == {"steps": ["again", "first", "released"]}
    stored = _stored_runs(saver, thread_id)
    assert doomed["run_id"] not in stored and stored.count(kept["run_id"]) >= 3, stored
    history = await client.threads.get_history(thread_id, limit=100)
    assert _ids(history) == _stored_ids(saver, thread_id)
    assert all(h["metadata"]["run_id"] == kept["run_id"] for h in history)
    assert not [a for a in saver.list_actions(thread_id=thread_id) if a.run_id == doomed["run_id"]]
    assert server.errors() == []


def test_the_readme_names_the_example_checkpointer() -> None:
    """The README's langgraph.json snippet is the example's checkpointer entry, verbatim."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## On the LangGraph Agent Server", 1)[1].split("\n## ", 1)[0]
    snippet = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert snippet is not None, "README's Agent Server section has no ```json block"
    example = json.loads((EXAMPLE / "langgraph.json").read_text())
    assert json.loads(snippet.group(1))["checkpointer"] == example["checkpointer"]
    path = example["checkpointer"]["path"]
    assert path.startswith("./") and (EXAMPLE / path[2:].split(":")[0]).is_file()


def test_our_saver_has_the_optional_methods_the_server_looks_for_and_the_official_lacks_adelete_for_runs() -> None:
    """The server's startup check (langgraph_api._checkpointer._adapter): a method counts when
    the saver's class overrides BaseCheckpointSaver's (which raises NotImplementedError)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from langgraph_pg_durable import AsyncDurablePostgresSaver

    def has(cls: type, method: str) -> bool:
        return getattr(cls, method) is not getattr(BaseCheckpointSaver, method)

    assert [m for m in OPTIONAL_METHODS if not has(AsyncDurablePostgresSaver, m)] == []
    assert not has(AsyncPostgresSaver, "adelete_for_runs")


async def test_the_example_checkpointer_names_the_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("agent_server_checkpointer", EXAMPLE / "checkpointer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(ConfigError, match="DATABASE_URL"):
        async with module.durable_checkpointer():
            pass
