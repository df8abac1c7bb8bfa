"""Every statement that reads or writes one thread names it at each table it touches:
`alias.thread_id = %(thread_id)s` where it reads, `%(thread_id)s` in what it inserts. A
distributed Postgres (the tables distributed by thread_id) then runs it on that thread's
shard alone, not on every shard (on Citus an unanchored list() page cost 7.9 ms, anchored
0.58 ms). Checked over the statement texts, without a server."""

from __future__ import annotations

import re

import pytest

from langgraph_pg_durable.core.history import HistoryScan
from langgraph_pg_durable.core.codec import Codec
from langgraph_pg_durable.core.safe_serde import default_serializer
from langgraph_pg_durable.sql.statements import Statements

STATEMENTS = Statements("s")
_KEYWORDS = {
    "WHERE",
    "ON",
    "SET",
    "USING",
    "JOIN",
    "LEFT",
    "INNER",
    "GROUP",
    "ORDER",
    "LIMIT",
    "UNION",
    "AS",
    "RETURNING",
    "VALUES",
    "SELECT",
}
_REFERENCE = re.compile(r'\b(FROM|JOIN|UPDATE|INTO|USING) "s"\.(\w+)(?: AS)?(?: (\w+))?')


def _one_thread_statements() -> dict[str, str]:
    s = STATEMENTS
    out = {f"get_tuple {key}": sql for key, sql in s.get_tuple.items()}
    out["page_details of one thread"] = s.page_details[True]
    out.update({f"put {key}": sql for key, sql in s.put.items()})
    out.update({f"put_writes {key}": sql for key, sql in s.put_writes.items()})
    out.update({f"put_writes_items {key}": sql for key, sql in s.put_writes_items.items()})
    out.update({f"put_packed_writes {key}": sql for key, sql in s.put_packed_writes.items()})
    codec = Codec(default_serializer())
    for name, config in (
        ("list of a lane", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}),
        ("list of a thread", {"configurable": {"thread_id": "t"}}),
    ):
        scan = HistoryScan(codec, config, filter={"k": "v"}, before=None, limit=None)
        out[name] = s.list_page(scan.page_where())
        scan.cursor = ("c", "t", "")
        out[f"{name}, next page"] = s.list_page(scan.page_where())
    return out


def unanchored(sql: str) -> list[str]:
    """The table references of `sql` that no `thread_id = %(thread_id)s` follows."""
    missing = []
    for match in _REFERENCE.finditer(sql):
        verb, table, alias = match.groups()
        alias = alias if alias and alias.upper() not in _KEYWORDS else None
        after = sql[match.end() :]
        if verb == "INTO":  # an insert: the thread is among the values it inserts
            anchored = "%(thread_id)s" in after.split("ON CONFLICT")[0]
        elif alias:
            anchored = re.search(rf"\b{alias}\.thread_id ?= ?%\(thread_id\)s", after) is not None
        else:
            anchored = re.search(r"(?<![.\w])thread_id ?= ?%\(thread_id\)s", after) is not None
        if not anchored:
            missing.append(f"{verb} {table}{' ' + alias if alias else ''}")
    return missing


@pytest.mark.parametrize("name", sorted(_one_thread_statements()))
def test_each_table_a_one_thread_statement_touches_is_anchored_on_the_thread(name: str) -> None:
    sql = _one_thread_statements()[name]
    assert _REFERENCE.search(sql), f"{name}: no table found: the check would pass vacuously"
    assert unanchored(sql) == [], name


def test_the_check_fails_for_a_join_on_another_tables_thread_id() -> None:
    """The page details of several threads join on the keys' thread ids: not anchored."""
    assert "JOIN channel_values v" in unanchored(STATEMENTS.page_details[False])
    assert unanchored('SELECT * FROM "s".checkpoints c WHERE c.thread_id = %(thread_id)s') == []
    assert unanchored('SELECT * FROM "s".checkpoints c WHERE c.checkpoint_id = %(thread_id)s') == ["FROM checkpoints c"]
