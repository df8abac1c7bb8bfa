"""`wire`'s pure parts, without a server: query texts in PostgreSQL's numbered form, and
parameters dumped as psycopg would dump them (`core.params`)."""

from __future__ import annotations

import pytest
from psycopg.adapt import PyFormat, Transformer

from langgraph_pg_durable import adapters
from langgraph_pg_durable.core import params
from langgraph_pg_durable.core.arrays import ByteaArray, Int4Array, Int8Array, TextArray
from langgraph_pg_durable.wire import convert


def test_names_are_numbered_in_order_of_first_use_and_reused() -> None:
    done = convert("SELECT %(b)s, %(a)b, %(b)s WHERE x = %(a)b")
    assert done.text == b"SELECT $1, $2, $1 WHERE x = $2"
    assert done.names == ("b", "a")
    assert done.formats == (PyFormat.AUTO, PyFormat.BINARY)
    assert done.auto == (True, False)


def test_a_doubled_percent_is_a_percent_sign() -> None:
    assert convert("SELECT format('%%I', %(s)s)").text == b"SELECT format('%I', $1)"


@pytest.mark.parametrize(
    ("query", "message"),
    [("SELECT %s", "only %\\(name\\)s"), ("SELECT %(v)s, %(v)b", "both as"), ("SELECT 5 % 2", "only %\\(name\\)s")],
)
def test_placeholders_it_cannot_number_are_refused(query: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert(query)


def test_the_conversion_is_cached_by_text() -> None:
    assert convert("SELECT %(z)s") is convert("SELECT %(z)s")


VALUES = ["é and text", "", 0, -1, 2**15 - 1, 2**15, -(2**31), 2**31, 2**63 - 1, -(2**63), None, True, False, b"\x00\xff", b""]
ARRAYS = [TextArray(["a", None, "日本"]), ByteaArray([b"x", None]), Int4Array([1, -(2**31)]), Int8Array([None, 2**62]), TextArray([])]


def test_parameters_are_sent_as_psycopgs_transformer_would_send_them() -> None:
    values = [*VALUES, *ARRAYS]
    formats = [PyFormat.AUTO] * len(VALUES) + [PyFormat.BINARY] * len(ARRAYS)
    tx = Transformer()
    expected = tx.dump_sequence(values, formats)
    fast = params.dumped(values, [fmt is PyFormat.AUTO for fmt in formats])
    assert fast is not None
    data, types, sent = fast
    assert [None if d is None else bytes(d) for d in data] == [None if d is None else bytes(d) for d in expected]
    assert types == tuple(tx.types) and sent == list(tx.formats)


@pytest.mark.parametrize("element", ["日本", None, b"\x00\xff", -(2**31), 2**62], ids=repr)
def test_an_array_of_one_element_is_the_bytes_of_any_other_length(element: object) -> None:
    """Arrays of one element take a path of their own: the same header and field as the
    general loop makes, which the two-element array shows (its second element dropped)."""
    kinds = {str: TextArray, type(None): TextArray, bytes: ByteaArray, int: Int8Array if element == 2**62 else Int4Array}
    cls = kinds[type(element)]
    dumper = adapters.ARRAY_DUMPERS[cls](cls)
    one, two = dumper.dump(cls([element])), dumper.dump(cls([element, element]))
    head = 20  # dimensions, has nulls, element oid, length, lower bound
    field = (len(two) - head) // 2
    assert one[:12] == two[:12] and one[12:16] == (1).to_bytes(4, "big") and one[16:head] == two[16:head]
    assert one[head:] == two[head : head + field] and len(one) == head + field


@pytest.mark.parametrize("value", [1.5, 2**70, {"a": 1}, bytearray(b"x"), ["plain", "list"]], ids=repr)
def test_a_parameter_of_another_type_goes_through_the_transformer(value: object) -> None:
    assert params.dumped(["text", value], [True, True]) is None


@pytest.mark.parametrize("array", [Int4Array([2**31]), Int8Array([2**63])], ids=repr)
def test_an_array_element_out_of_range_is_left_to_the_transformer_which_names_it(array: list[int]) -> None:
    from psycopg import DataError

    assert params.dumped([array], [False]) is None
    with pytest.raises(DataError, match="out of range"):
        Transformer().dump_sequence([array], [PyFormat.BINARY])
