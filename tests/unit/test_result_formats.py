"""Declared result rows: the SELECT lists are rendered from the same declaration the decoders index by."""

from __future__ import annotations

import re

import pytest

from langgraph_pg_durable.core.decode import CheckpointRow
from langgraph_pg_durable.sql import reads
from langgraph_pg_durable.sql.columns import Columns, select_list
from langgraph_pg_durable.sql.reads import CHECKPOINT_IN_DETAIL, CheckpointColumn, Detail
from langgraph_pg_durable import wire
from langgraph_pg_durable.sql.statements import Statements, compact


def test_a_first_branch_names_every_column_in_order_with_typed_nulls() -> None:
    rendered = select_list(Detail, {Detail.IDX: "int"}, part="'i'", idx="i.idx", channel="i.channel")
    columns = rendered.split(",")
    assert len(columns) == len(Detail.names())
    assert columns[Detail.PART] == "'i' AS part"
    assert columns[Detail.IDX] == "i.idx"  # a column reference names itself
    assert columns[Detail.CHANNEL] == "i.channel"
    assert columns[Detail.VERSION] == "NULL::text AS version"
    assert columns[Detail.TASK_ID] == "NULL::text AS task_id"


def test_a_later_branch_is_positional() -> None:
    rendered = select_list(Detail, {}, False, part="'w'", idx="idx")
    columns = rendered.split(",")
    assert len(columns) == len(Detail.names())
    assert columns[Detail.PART] == "'w'" and columns[Detail.IDX] == "idx" and columns[Detail.CHANNEL] == "NULL"


def test_a_select_list_refuses_a_column_the_format_lacks() -> None:
    with pytest.raises(KeyError, match="no column 'chanel'"):
        select_list(Detail, {}, chanel="x")


def test_column_positions_must_run_without_gaps() -> None:
    with pytest.raises(TypeError, match="without gaps"):

        class Gappy(Columns):
            FIRST = 0
            THIRD = 2


def _branches(sql: str) -> list[str]:
    """Each UNION ALL branch's SELECT list (the text between SELECT and its FROM)."""
    union = sql[sql.index("SELECT 'c'") if "SELECT 'c'" in sql else sql.index("SELECT 'v'") :]
    return [re.match(r"SELECT (.*?) FROM ", branch.strip(), flags=re.S).group(1) for branch in union.split("UNION ALL")]


def test_every_branch_of_the_detail_reads_has_the_declared_columns() -> None:
    statements = Statements("s")
    for sql in (*statements.get_tuple.values(), *statements.page_details.values()):
        branches = _branches(sql)
        assert len(branches) >= 4
        first = branches[0].split(",")
        assert [c.rsplit(" AS ", 1)[-1].rpartition(".")[2] for c in first] == list(Detail.names())
        assert all(len(branch.split(",")) == len(Detail.names()) for branch in branches[1:])


LONGEST_SCHEMA = "s" * 63  # PostgreSQL's identifier limit


def _hot(statements: Statements) -> list[str]:
    return [
        *statements.get_tuple.values(),
        *statements.page_details.values(),
        *statements.put.values(),
        *statements.put_writes.values(),
        *statements.put_writes_items.values(),
        *statements.put_packed_writes.values(),
    ]


def test_hot_statements_are_converted_once_whatever_their_length() -> None:
    """On an idle autocommit connection they go through `wire`, which keeps its parse of any text."""
    for sql in _hot(Statements(LONGEST_SCHEMA)):
        assert wire.convert(sql) is wire.convert(sql)


def test_hot_statements_stay_within_psycopgs_parse_cache_on_the_cursor_path() -> None:
    """A connection the caller keeps in a transaction takes psycopg's cursors, which cache
    their parse of a statement only up to 4 KiB (past it every call parses again): the
    hot statements fit for schema names up to 24 characters (the default has 17). The
    cold get_tuple is not one: it runs once per thread in a process (then the saver holds
    the thread's items), and reads every item of its lists."""
    statements = Statements("s" * 24)
    cold = {sql for (_, cold), sql in statements.get_tuple.items() if cold}
    # Past it since the fencing token (4.2 KB): the put of delta-layout lists or offloaded
    # values with the action log. Converted at each call on this path (~175 us, measured
    # with psycopg's _query2pg_nocache), on a connection the official saver does not take
    # either (it needs autocommit); the plain put, the one of most steps, fits.
    long_put = statements.put[(False, True, True, True)]
    # Past it since the actions on packed rows (4.3 KB): the writes of list items with the
    # action log and the run's row, when they cannot share a row (items of two lists) or
    # the task has writes at the checkpoint already (a re-run): a packed row takes a task's
    # writes otherwise.
    long_items = statements.put_writes_items[(True, True)]
    longer = (long_put, long_items)
    assert cold and max(len(sql) for sql in _hot(statements) if sql not in cold and sql not in longer) <= 4096


def test_compaction_leaves_every_string_literal_as_written() -> None:
    statements = Statements("s")
    for raw, compacted in (
        (reads.get_tuple('"s"', by_id=True), statements.get_tuple[(True, False)]),
        (reads.page_details('"s"'), statements.page_details[False]),
        (reads.page_details('"s"', one_thread=True), statements.page_details[True]),
    ):
        code = re.sub(r"--[^\n]*", "", raw)  # comments may hold apostrophes
        assert re.findall(r"'[^']*'", compacted) == re.findall(r"'[^']*'", code)
        assert compact(raw) == compacted


def test_a_detail_row_holds_a_checkpoint_row_where_declared() -> None:
    offset = CHECKPOINT_IN_DETAIL
    for name in CheckpointColumn.names():
        assert Detail.position(name) == offset + CheckpointColumn.position(name)
    row = [None] * len(Detail.names())
    row[Detail.THREAD_ID], row[Detail.CHECKPOINT_NS], row[Detail.CHECKPOINT_ID] = "t", "", "c1"
    row[Detail.CHECKPOINT], row[Detail.METADATA] = '{"v": 4}', '{"step": 1}'
    row[Detail.VALUE_CHANNELS], row[Detail.VALUE_VERSIONS] = ["a"], ["1"]
    parsed = CheckpointRow.from_row(row, CHECKPOINT_IN_DETAIL)
    assert (parsed.thread_id, parsed.checkpoint_id, parsed.body, parsed.metadata) == ("t", "c1", {"v": 4}, {"step": 1})
    assert parsed.value_keys and list(parsed.value_keys) == [("t", "", "a", "1")]


def test_the_checkpoint_columns_select_list_follows_its_enum() -> None:
    names = [part.strip().split(" AS ")[-1] for part in reads.CHECKPOINT_COLUMNS.split(", ")]
    assert names == list(CheckpointColumn.names())
