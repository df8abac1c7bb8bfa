"""Action-log bytes per turn of a long conversation, by agent shape.

    python tools/action_log_bytes.py [--turns 100] [--dsn URL]

Runs `create_react_agent` (its ToolNode Sends carry the whole state) and langchain's
`create_agent` for N turns each (a user message, a tool call, its result, an answer), driven
by a scripted chat model, on our saver, and prints the actions' payload bytes (`pg_column_size`
over `action_rows`) per turn, the largest row, and the size of the action_log table (which
holds the actions no packed writes row holds, migration 0014). Without --dsn it starts
the tests' PostgreSQL server.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from psycopg import sql

from langgraph_pg_durable import DurablePostgresSaver

ROOT = Path(__file__).resolve().parent.parent


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, " + "detail " * 40


class Scripted(FakeMessagesListChatModel):
    """Fixed replies; tools bound are ignored (the replies already name them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def replies(turns: int) -> list[AIMessage]:
    out = []
    for turn in range(turns):
        call = {"name": "lookup", "args": {"city": f"city {turn}"}, "id": f"call-{turn}", "type": "tool_call"}
        out.append(AIMessage("", id=f"ask-{turn}", tool_calls=[call]))
        out.append(AIMessage(f"it is sunny in city {turn}. " + "words " * 30, id=f"answer-{turn}"))
    return out


def build(kind: str, model: Scripted, saver: DurablePostgresSaver) -> Any:
    if kind == "create_react_agent":
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, [lookup], checkpointer=saver)
    from langchain.agents import create_agent

    return create_agent(model, [lookup], checkpointer=saver)


def measure(dsn: str, kind: str, turns: int) -> dict[str, float]:
    schema = f"lgpd_bytes_{uuid.uuid4().hex[:8]}"
    try:
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
            saver.setup()
            agent = build(kind, Scripted(responses=replies(turns)), saver)
            config = {"configurable": {"thread_id": kind}}
            for turn in range(turns):
                agent.invoke({"messages": [("user", f"weather in city {turn}?")]}, config, durability="sync")
        with psycopg.connect(dsn, autocommit=True) as conn:
            table = sql.Identifier(schema, "action_rows")  # action_log's rows and those packed writes rows hold (0014)
            total, largest, rows = conn.execute(
                sql.SQL("SELECT sum(pg_column_size(payload)), max(pg_column_size(payload)), count(*) FROM {}").format(table)
            ).fetchone()
            size = conn.execute("SELECT pg_total_relation_size(%s::regclass)", (f'"{schema}".action_log',)).fetchone()[0]
        return {"per_turn": total / turns, "total": total, "largest": largest, "rows": rows, "table": size}
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--dsn")
    args = parser.parse_args(argv)
    server = None
    dsn = args.dsn
    if dsn is None:
        sys.path.insert(0, str(ROOT / "tests" / "support"))
        from pg_server import start_pg_server

        server = start_pg_server()
        dsn = server.dsn
    try:
        for kind in ("create_react_agent", "create_agent"):
            m = measure(dsn, kind, args.turns)
            print(
                f"{kind}: {args.turns} turns, {m['rows']} rows, payload {m['total'] / 1e3:.1f} kB "
                f"({m['per_turn']:.0f} B a turn, largest row {m['largest']:,} B), action_log table {m['table'] / 1e3:.0f} kB"
            )
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
