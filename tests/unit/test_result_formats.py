"""Declared result rows: the SELECT lists are rendered from the same IntEnum the decoders index by."""

from __future__ import annotations

import re

import pytest

from langgraph_pg_durable.core.decode import CheckpointRow
from langgraph_pg_durable.sql import reads
from langgraph_pg_durable.sql.columns import select_list
from langgraph_pg_durable.sql.reads import CHECKPOINT_IN_DETAIL, CheckpointColumn, Detail


def test_a_select_list_names_every_column_in_order_with_typed_nulls() -> None:
    rendered = select_list(Detail, {Detail.IDX: "int"}, part="'i'", idx="i.idx")
    columns = [c.strip() for c in rendered.split(", ")]
    assert len(columns) == len(Detail)
    assert columns[Detail.PART] == "'i' AS part"
    assert columns[Detail.IDX] == "i.idx AS idx"
    assert columns[Detail.CHANNEL] == "NULL::text AS channel"


def test_a_select_list_refuses_a_column_the_format_lacks() -> None:
    with pytest.raises(KeyError, match="no column 'chanel'"):
        select_list(Detail, {}, chanel="x")


def test_every_branch_of_the_detail_reads_has_the_declared_columns() -> None:
    for sql in (reads.get_tuple('"s"', by_id=True), reads.get_tuple('"s"', by_id=False, cold=True), reads.page_details('"s"')):
        branches = re.findall(r"AS part,.*?AS object_size", sql, flags=re.S)
        assert len(branches) >= 4
        for branch in branches:
            names = re.findall(r" AS (\w+)(?:,|$)", "x AS part," + branch.split("AS part,", 1)[1])
            assert names == [c.name.lower() for c in Detail]


def test_a_detail_row_holds_a_checkpoint_row_where_declared() -> None:
    offset = CHECKPOINT_IN_DETAIL
    for column in CheckpointColumn:
        assert Detail[column.name] == offset + column
    row = [None] * len(Detail)
    row[Detail.THREAD_ID], row[Detail.CHECKPOINT_NS], row[Detail.CHECKPOINT_ID] = "t", "", "c1"
    row[Detail.CHECKPOINT], row[Detail.METADATA] = '{"v": 4}', '{"step": 1}'
    row[Detail.VALUE_CHANNELS], row[Detail.VALUE_VERSIONS] = ["a"], ["1"]
    parsed = CheckpointRow.from_row(row, CHECKPOINT_IN_DETAIL)
    assert (parsed.thread_id, parsed.checkpoint_id, parsed.body, parsed.metadata) == ("t", "c1", {"v": 4}, {"step": 1})
    assert parsed.value_keys and list(parsed.value_keys) == [("t", "", "a", "1")]


def test_the_checkpoint_columns_select_list_follows_its_enum() -> None:
    names = [part.strip().split(" AS ")[-1] for part in reads.CHECKPOINT_COLUMNS.split(", ")]
    assert names == [c.name.lower() for c in CheckpointColumn]
