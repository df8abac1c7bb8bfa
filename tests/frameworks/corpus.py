"""The comparison harness of the frameworks corpus: one scenario, run once on `InMemorySaver`
and once on one of our savers, must leave the same transcript.

A scenario is an async function of a `Run`. It builds its graph with `run.build(factory)`
(the factory takes a checkpointer and returns a compiled graph) and then drives it:
`invoke`, `state`, `update`, `fork`, `reopen` (a NEW saver object on the same storage, the
graph rebuilt on it). Every call appends an entry to the run's transcript, and at the end
each thread's final state and full history (values, next, metadata source / step /
parents, tasks with their interrupts and results, parent links) are appended too.

Values are made comparable, not loosened: messages and pydantic models become their class
name and fields, dataclasses and NamedTuples likewise, sets are sorted; ids a run makes up
(checkpoint, task and interrupt ids, uuids add_messages gives messages) are renamed
`<id:N>` in order of first appearance, so two runs compare equal only if their ids recur
in the same places. Timestamps become `<ts>`.
"""

from __future__ import annotations

import dataclasses
import enum
import pprint
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt, PregelTask, StateSnapshot
from pydantic import BaseModel

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

Scenario = Callable[["Run"], Awaitable[None]]
# The `check` fixture (conftest.py): `await check(scenario)` runs it on both savers and compares.
# Imported from here, not from conftest: a test module's `import conftest` finds whichever
# conftest of the session was imported first under that name.
Check = Callable[[Scenario], Awaitable["Run"]]

_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z)?")
METADATA_KEYS = ("source", "step", "parents")


class Renamer:
    """Turns values into plain comparable data, renaming made-up ids by first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.racy_message_ids = False

    def task_result(self, value: Any) -> Any:
        """A task's result, with the made-up ids of its messages (or their absence) made
        equal: LangGraph's sync loop hands `put_writes` to a background thread while
        `add_messages` gives the same message objects their ids in place, so whether a
        pending write holds the id is a race inside LangGraph, on any saver."""
        self.racy_message_ids = True
        try:
            return self(value)
        finally:
            self.racy_message_ids = False

    def message(self, message: BaseMessage) -> Any:
        fields = message.model_dump()
        if self.racy_message_ids and (message.id is None or _ID.fullmatch(message.id)):
            fields["id"] = "<id made up by add_messages, or not yet>"
        return (type(message).__name__, self(fields))

    def _rename(self, match: re.Match[str]) -> str:
        return self.names.setdefault(match.group(0), f"<id:{len(self.names)}>")

    def text(self, value: str) -> str:
        return _TIMESTAMP.sub("<ts>", _ID.sub(self._rename, value))

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, (bool, int, float, bytes)):
            return value
        if isinstance(value, enum.Enum):
            return (type(value).__name__, value.name)
        if isinstance(value, StateSnapshot):
            return self.snapshot(value)
        if isinstance(value, PregelTask):
            return self.task(value)
        if isinstance(value, Interrupt):
            return ("Interrupt", self(value.value), self(value.id))
        if isinstance(value, BaseMessage):
            return self.message(value)
        if isinstance(value, BaseModel):
            return (type(value).__name__, self(value.model_dump()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return (type(value).__name__, {f.name: self(getattr(value, f.name)) for f in dataclasses.fields(value)})
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return (type(value).__name__, {k: self(v) for k, v in value._asdict().items()})
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if isinstance(value, (set, frozenset)):
            return ("set", sorted((self(v) for v in value), key=repr))
        if isinstance(value, tuple):
            return tuple(self(v) for v in value)
        if isinstance(value, list):
            return [self(v) for v in value]
        return (type(value).__name__, self.text(repr(value)))

    def config(self, config: dict[str, Any] | None) -> Any:
        if config is None:
            return None
        configurable = config.get("configurable", {})
        return {k: self(configurable.get(k)) for k in ("checkpoint_ns", "checkpoint_id")}

    def task(self, task: PregelTask) -> dict[str, Any]:
        state = task.state
        return {
            "id": self(task.id),
            "name": task.name,
            "path": self(task.path),
            "error": None if task.error is None else repr(task.error),
            "interrupts": self(list(task.interrupts)),
            "state": self.snapshot(state) if isinstance(state, StateSnapshot) else self.config(state),
            "result": self.task_result(task.result),
        }

    def snapshot(self, snapshot: StateSnapshot) -> dict[str, Any]:
        metadata = snapshot.metadata or {}
        return {
            "values": self(snapshot.values),
            "next": snapshot.next,
            "config": self.config(snapshot.config),
            "parent": self.config(snapshot.parent_config),
            "metadata": {k: self(metadata.get(k)) for k in METADATA_KEYS},
            "tasks": [self.task(t) for t in snapshot.tasks],
            "interrupts": self(list(snapshot.interrupts)),
        }


def thread_config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


class Run:
    """One scenario's calls on one saver, sync or async, and the transcript they leave."""

    def __init__(self, backend: str, mode: str, dsn: str | None = None, schema: str | None = None) -> None:
        self.backend = backend  # "memory" or "postgres"
        self.mode = mode  # "sync" or "async"
        self.dsn = dsn
        self.schema = schema
        self.transcript: list[tuple[str, Any]] = []
        self.threads: list[str] = []
        self.saver: Any = None
        self.graph: Any = None
        self.savers_opened = 0
        self._factory: Callable[[Any], Any] | None = None
        self._memory = InMemorySaver()
        self._stack = AsyncExitStack()
        self._names = Renamer()

    # -- savers and graphs -----------------------------------------------------------------

    async def _open_saver(self) -> Any:
        self.savers_opened += 1
        if self.backend == "memory":
            return self._memory  # its storage is the object itself: "a new saver" is a new graph on it
        assert self.dsn is not None and self.schema is not None
        if self.mode == "sync":
            saver = self._stack.enter_context(DurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema))
            saver.setup()
        else:
            saver = await self._stack.enter_async_context(AsyncDurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema))
            await saver.setup()
        return saver

    async def start(self) -> None:
        self.saver = await self._open_saver()

    async def close(self) -> None:
        await self._stack.aclose()

    def build(self, factory: Callable[[Any], Any]) -> Any:
        """Compile the scenario's graph on the current saver (and again after each reopen)."""
        self._factory = factory
        self.graph = factory(self.saver)
        return self.graph

    async def reopen(self) -> None:
        """Drop the saver and graph; continue on a new saver object on the same storage."""
        assert self._factory is not None, "build() the graph before reopen()"
        old = self._stack.pop_all()
        await old.aclose()
        self.saver = await self._open_saver()
        self.graph = self._factory(self.saver)
        self.record("reopen", None)

    # -- recorded calls ----------------------------------------------------------------------

    def record(self, label: str, value: Any) -> None:
        self.transcript.append((label, self._names(value)))

    def _config(self, target: str | dict[str, Any]) -> dict[str, Any]:
        if isinstance(target, str):
            if target not in self.threads:
                self.threads.append(target)
            return thread_config(target)
        return target

    async def invoke(self, input: Any, target: str | dict[str, Any], **kwargs: Any) -> Any:
        """graph.invoke / ainvoke on a thread (a thread id) or a checkpoint (a config)."""
        config = self._config(target)
        if self.mode == "sync":
            result = self.graph.invoke(input, config, **kwargs)
        else:
            result = await self.graph.ainvoke(input, config, **kwargs)
        self.record(f"invoke {self._names.config(config)}", result)
        return result

    async def state(self, target: str | dict[str, Any], *, subgraphs: bool = False) -> StateSnapshot:
        config = self._config(target)
        if self.mode == "sync":
            snapshot = self.graph.get_state(config, subgraphs=subgraphs)
        else:
            snapshot = await self.graph.aget_state(config, subgraphs=subgraphs)
        self.record(f"state {self._names.config(config)} subgraphs={subgraphs}", snapshot)
        return snapshot

    async def history(self, target: str | dict[str, Any], **kwargs: Any) -> list[StateSnapshot]:
        config = self._config(target)
        if self.mode == "sync":
            snapshots = list(self.graph.get_state_history(config, **kwargs))
        else:
            snapshots = [s async for s in self.graph.aget_state_history(config, **kwargs)]
        self.record(f"history {self._names.config(config)} {kwargs}", snapshots)
        return snapshots

    async def update(self, target: str | dict[str, Any], values: Any, as_node: str | None = None) -> dict[str, Any]:
        config = self._config(target)
        if self.mode == "sync":
            new = self.graph.update_state(config, values, as_node=as_node)
        else:
            new = await self.graph.aupdate_state(config, values, as_node=as_node)
        self.record(f"update as_node={as_node}", self._names.config(new))
        return new

    async def fork(self, thread_id: str, pick: Callable[[StateSnapshot], bool], input: Any = None, **kwargs: Any) -> Any:
        """Invoke from the newest past checkpoint of the thread that `pick` chooses."""
        history = await self.history(thread_id)
        chosen = next((s for s in history if pick(s)), None)
        assert chosen is not None, f"no checkpoint of thread {thread_id!r} to fork from"
        return await self.invoke(input, chosen.config, **kwargs)

    async def finish(self) -> None:
        """Each thread's final state and full history, on a new saver object."""
        if self._factory is not None:
            await self.reopen()
            for thread_id in self.threads:
                await self.state(thread_id, subgraphs=True)
                await self.history(thread_id)


@asynccontextmanager
async def opened(run: Run) -> AsyncIterator[Run]:
    await run.start()
    try:
        yield run
    finally:
        await run.close()


def _first_difference(expected: list[tuple[str, Any]], got: list[tuple[str, Any]]) -> str | None:
    for index, (want, have) in enumerate(zip(expected, got)):
        if want != have:
            expected_text, got_text = (pprint.pformat(entry[1], width=130) for entry in (want, have))
            return f"entry {index} ({want[0]!r}) differs.\nInMemorySaver:\n{expected_text}\nours:\n{got_text}"
    if len(expected) != len(got):
        return f"InMemorySaver left {len(expected)} entries, ours {len(got)}"
    return None


async def compare(scenario: Scenario, mode: str, dsn: str, schema: str) -> Run:
    """Run the scenario on InMemorySaver and on our saver (sync or async, as `mode` says);
    fail at the first entry where the transcripts differ. Returns our saver's run (its
    `dsn` and `schema` hold the tables the scenario left)."""
    async with opened(Run("memory", mode)) as reference:
        await scenario(reference)
        await reference.finish()
    async with opened(Run("postgres", mode, dsn, schema)) as ours:
        await scenario(ours)
        await ours.finish()
    difference = _first_difference(reference.transcript, ours.transcript)
    assert difference is None, f"{scenario.__name__} on the {mode} saver: {difference}"
    assert ours.savers_opened >= 2, "the scenario never ran on a new saver object"
    return ours
