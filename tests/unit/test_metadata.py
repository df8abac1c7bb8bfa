"""core/metadata.py without a server: what is stored, its jsonb projection, the exact form
kept where jsonb is lossy, and filters."""

from __future__ import annotations

import datetime
import math
import uuid
from collections import ChainMap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import EXCLUDED_METADATA_KEYS
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable.core.codec import Codec, dump_json, load_json
from langgraph_pg_durable.core.metadata import (
    MAX_METADATA_DEPTH,
    _lossy,
    dump_metadata,
    filter_for_sql,
    filter_needs_recheck,
    load_metadata,
    load_metadata_json,
    merge_metadata,
    unchained,
    metadata_contains,
    project,
)
from langgraph_pg_durable.errors import ConfigError, DeserializationError, SerializationError


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec(JsonPlusSerializer())


def _round_trip(codec: Codec, metadata: dict[Any, Any]) -> tuple[Any, bytes | None]:
    """What a read gives back: the jsonb text as fetched (decoded like CheckpointRow does) and the exact form."""
    text, exact = dump_metadata(codec, metadata)
    return load_metadata(codec, load_metadata_json(text), exact), exact


# -- merge_metadata ---------------------------------------------------------------------------


def test_the_configs_scalar_entries_are_merged() -> None:
    config = {
        "metadata": {"user": "ada", "n": 3, "ok": True, "ratio": 0.5, "tags": ["x"], "obj": {"a": 1}, "none": None},
        "configurable": {"thread_id": "t", "tenant": "acme", "model": object()},
    }
    merged = merge_metadata(config, {"source": "loop", "step": 1})  # type: ignore[arg-type]
    assert merged == {"source": "loop", "step": 1, "user": "ada", "n": 3, "ok": True, "ratio": 0.5, "tenant": "acme"}


def test_a_chainmap_of_the_config_merges_as_the_mapping_it_stands_for() -> None:
    """LangGraph hands the config's metadata as a ChainMap (of one dict, as a rule)."""
    entries = {"user": "ada", "n": 3, "obj": {"a": 1}}
    want = merge_metadata({"metadata": entries}, {"step": 1})  # type: ignore[arg-type]
    assert want == {"step": 1, "user": "ada", "n": 3}
    for metadata in (ChainMap(entries), ChainMap({"user": "ada"}, {"user": "bob", "n": 3})):
        assert merge_metadata({"metadata": metadata}, {"step": 1}) == want  # type: ignore[arg-type]
    assert merge_metadata({"metadata": ChainMap({})}, {"step": 1}) == {"step": 1}  # type: ignore[arg-type]
    one, two = ChainMap(entries), ChainMap({"user": "ada"}, entries)
    assert unchained(one) is entries and unchained(two) is two and unchained(entries) is entries


def test_private_and_excluded_keys_are_skipped() -> None:
    configurable = {key: "x" for key in EXCLUDED_METADATA_KEYS}
    configurable.update({"__pregel_send": "x", "__private": 1, "_single": "kept"})
    merged = merge_metadata({"configurable": configurable, "metadata": {"__hidden": 1}}, {"step": 0})  # type: ignore[arg-type]
    assert merged == {"step": 0, "_single": "kept"}
    assert "thread_id" in EXCLUDED_METADATA_KEYS and "checkpoint_ns" in EXCLUDED_METADATA_KEYS


def test_the_checkpoints_keys_win_then_metadata_then_configurable() -> None:
    config = {"metadata": {"source": "config", "shared": "metadata"}, "configurable": {"shared": "configurable", "c": 1}}
    merged = merge_metadata(config, {"source": "loop"})  # type: ignore[arg-type]
    assert merged == {"source": "loop", "shared": "metadata", "c": 1}


def test_the_checkpoints_writes_are_dropped() -> None:
    merged = merge_metadata({}, {"source": "loop", "writes": {"node": {"x": 1}}})  # type: ignore[typeddict-unknown-key]
    assert merged == {"source": "loop"}


def test_a_writes_entry_of_the_config_is_dropped_too() -> None:
    merged = merge_metadata({"metadata": {"writes": "w"}, "configurable": {"writes": 1}}, {"writes": None})  # type: ignore[typeddict-unknown-key]
    assert "writes" not in merged


def test_nul_characters_are_kept() -> None:
    merged = merge_metadata({"metadata": {"who": "a\x00b"}}, {"source": "lo\x00op"})  # type: ignore[typeddict-item]
    assert merged == {"source": "lo\x00op", "who": "a\x00b"}


@pytest.mark.parametrize("section", ["metadata", "configurable"])
@pytest.mark.parametrize("key", [1, None, ("a",), b"k"])
def test_a_key_that_is_not_a_string_names_its_section(section: str, key: object) -> None:
    with pytest.raises(ConfigError) as caught:
        merge_metadata({section: {"fine": 1, key: "x"}}, {})  # type: ignore[misc]
    assert f"config[{section!r}]" in str(caught.value)
    assert repr(key) in str(caught.value)


def test_an_empty_config_adds_nothing() -> None:
    assert merge_metadata({}, {"step": 2}) == {"step": 2}  # type: ignore[typeddict-item]
    assert merge_metadata({"metadata": None, "configurable": None}, {}) == {}  # type: ignore[typeddict-item]


# -- projection, exact form ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"source": "loop", "step": -1, "parents": {}},
        {"a": 1, "b": [1, "x", None, {"c": 2.5}], "t": True, "f": False},
        {"unicode": "é😀", "nested": {"list": [[], {}, [1, [2, [3]]]]}},
        {"big": 2**63 - 1, "small": -(2**63)},
        {"backslash": "a\\u0000b"},  # the escape's text itself, not a NUL
    ],
)
def test_lossless_metadata_has_no_exact_form(codec: Codec, metadata: dict[str, Any]) -> None:
    back, exact = _round_trip(codec, metadata)
    assert exact is None
    assert back == metadata


@pytest.mark.parametrize(
    "metadata",
    [
        {"s": "a\x00b"},
        {"nested": {"list": ["x\x00", 1]}},
        {"\x00key": 1},
        {"when": datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)},
        {"day": datetime.date(2021, 5, 6)},
        {"id": uuid.UUID(int=7)},
        {"inf": float("inf"), "ninf": float("-inf")},
        {1: "int key"},
        {"deep": [{"d": datetime.timedelta(seconds=3)}]},
    ],
)
def test_lossy_metadata_keeps_an_exact_form_that_reads_back_exactly(codec: Codec, metadata: dict[Any, Any]) -> None:
    back, exact = _round_trip(codec, metadata)
    assert exact is not None
    assert back == metadata
    assert [type(k) for k in back] == [type(k) for k in metadata]


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\x00", "\ud800"]), max_size=6),
    st.uuids(),
)
_KEYS = st.text(max_size=4) | st.integers(0, 3) | st.just("\x00k")


_METADATA = st.dictionaries(
    _KEYS,
    st.recursive(
        _SCALARS,
        lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple) | st.dictionaries(_KEYS, inner, max_size=3),
    ),
    max_size=4,
)


@given(_METADATA)
@settings(max_examples=300, deadline=None)
def test_metadata_is_stored_as_its_projection_and_lossy_check_say_whatever_the_walk(metadata: dict[Any, Any]) -> None:
    # dump_metadata's one walk for plain metadata gives what the projection and the lossy
    # check give: the same jsonb text, and an exact form exactly when something is lossy.
    codec = Codec(JsonPlusSerializer())
    try:
        want: Any = (dump_json(project(metadata, "m")), _lossy(metadata))
        if want[1]:
            codec.dump(dict(metadata), channel="<metadata>", where="checkpoint metadata")
    except (ConfigError, SerializationError) as exc:
        with pytest.raises(type(exc)):
            dump_metadata(codec, metadata)
        return
    text, exact = dump_metadata(codec, metadata)
    assert (text, exact is not None) == want


def test_nan_metadata_reads_back_as_nan(codec: Codec) -> None:
    text, exact = dump_metadata(codec, {"x": float("nan")})
    assert exact is not None
    assert load_json(text) == {"x": "nan"}  # the projection jsonb can hold
    assert math.isnan(load_metadata(codec, load_json(text), exact)["x"])


def test_the_projection_is_what_jsonb_can_hold(codec: Codec) -> None:
    metadata = {"s": "a\x00b", "f": float("inf"), "d": datetime.date(2020, 1, 1), "t": (1, 2), 5: "k"}
    text, _ = dump_metadata(codec, metadata)
    assert load_json(text) == {"s": "a\\u0000b", "f": "inf", "d": "2020-01-01", "t": [1, 2], "5": "k"}
    assert "\x00" not in text


def test_tuples_read_back_as_lists_and_cost_no_exact_form(codec: Codec) -> None:
    """The serializer has no tuple either, so an exact form could not restore one: tuples read
    back as lists, as from the official saver's jsonb, and no exact form is stored for them."""
    metadata = {"t": (1, 2), "n": {"inner": ("a",)}}
    back, exact = _round_trip(codec, metadata)
    assert back == {"t": [1, 2], "n": {"inner": ["a"]}} and exact is None


def test_an_int_past_64_bits_reads_back_exactly(codec: Codec) -> None:
    back, _ = _round_trip(codec, {"big": 2**70 + 1, "neg": -(2**64) - 3})
    assert back == {"big": 2**70 + 1, "neg": -(2**64) - 3}


def test_metadata_the_serializer_refuses_names_the_metadata(codec: Codec) -> None:
    class Opaque:
        pass

    with pytest.raises(SerializationError, match="metadata"):
        dump_metadata(codec, {"o": Opaque()})


def test_load_metadata_names_a_corrupt_exact_form(codec: Codec) -> None:
    with pytest.raises(DeserializationError, match="^thread 't', its exact metadata: "):
        load_metadata(codec, {}, b"msgpack:\xc1", where="thread 't'")
    with pytest.raises(DeserializationError, match="exact metadata"):
        load_metadata(codec, {}, b"no separator", where="x")


def _nested(levels: int, container: str) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"k": value} if container == "dict" else [value]
    return value


@pytest.mark.parametrize("container", ["dict", "list"])
def test_nesting_past_the_limit_is_refused(codec: Codec, container: str) -> None:
    ok = {"top": _nested(MAX_METADATA_DEPTH - 1, container)}  # MAX_METADATA_DEPTH containers in all
    assert project(ok, "X") is not None
    dump_metadata(codec, ok)
    too_deep = {"top": _nested(MAX_METADATA_DEPTH, container)}
    with pytest.raises(ConfigError, match=f"X nests deeper than {MAX_METADATA_DEPTH} levels"):
        project(too_deep, "X")
    with pytest.raises(ConfigError, match="checkpoint metadata nests deeper"):
        dump_metadata(codec, too_deep)
    with pytest.raises(ConfigError, match="list\\(\\) filter nests deeper"):
        filter_for_sql(too_deep)


def test_a_self_referencing_document_is_refused() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ConfigError, match="nests deeper"):
        project(loop, "X")


@pytest.mark.parametrize("document", [{"s": "a\ud800"}, {"\udc00": 1}, {"l": [1, {"x": "\udfff"}]}])
def test_lone_surrogates_are_refused(codec: Codec, document: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="lone surrogate"):
        dump_metadata(codec, document)
    with pytest.raises(ConfigError, match="^list\\(\\) filter holds .*lone surrogate"):
        filter_for_sql(document)


# -- filters ------------------------------------------------------------------------------------


def test_filter_for_sql() -> None:
    assert filter_for_sql(None) is None
    assert filter_for_sql({}) is None
    assert filter_for_sql({"source": "loop", "step": 1}) == '{"source":"loop","step":1}'
    assert load_json(filter_for_sql({"s": "a\x00"})) == {"s": "a\\u0000"}  # as the stored projection has it
    assert load_json(filter_for_sql({"t": (1, 2), "f": float("nan")})) == {"t": [1, 2], "f": "nan"}
    assert filter_for_sql({"big": 2**70}) == '{"big":1180591620717411303424}'


def test_a_filter_matches_its_stored_projection(codec: Codec) -> None:
    for document in ({"s": "a\x00"}, {"d": datetime.date(2020, 1, 1)}, {"t": (1,)}, {"x": 1.5}):
        text, _ = dump_metadata(codec, document)
        assert load_json(filter_for_sql(document)) == load_json(text)


@pytest.mark.parametrize(
    "filter, recheck",
    [
        (None, False),
        ({}, False),
        ({"source": "loop"}, False),
        ({"n": {"a": [1, None]}}, False),
        ({"s": "a\x00"}, True),
        ({"t": (1,)}, True),
        ({"f": float("inf")}, True),
        ({"d": datetime.date(2020, 1, 1)}, True),
        ({"n": {"t": [("x",)]}}, True),
        ({1: "x"}, True),
    ],
)
def test_filter_needs_recheck_where_the_projection_is_lossy(filter: dict[Any, Any] | None, recheck: bool) -> None:
    assert filter_needs_recheck(filter) is recheck


# -- metadata_contains ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "document, pattern, contained",
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": 1}, {}, True),
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, True),
        ({"a": {"b": 1}}, {"a": {"b": 2}}, False),
        ({"a": [1, 2, 3]}, {"a": [3, 1]}, True),
        ({"a": [1, 2, 3]}, {"a": [1, 1]}, True),
        ({"a": [1, 2]}, {"a": [4]}, False),
        ({"a": [1, 2]}, {"a": []}, True),
        ({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]}, True),
        ({"a": [1, [2]]}, {"a": [[2]]}, True),
        ({"a": [1, [2]]}, {"a": [2]}, False),  # no flattening of nested arrays
        ({"a": [1, 2]}, {"a": 1}, False),  # jsonb's array-contains-scalar is for top-level arrays only
        ({"a": 1}, {"a": [1]}, False),
        ({"a": {"b": 1}}, {"a": [{"b": 1}]}, False),
        ({"a": [{"b": 1}]}, {"a": {"b": 1}}, False),
        ({"a": 1}, {"a": 1.0}, True),  # jsonb compares numbers by value
        ({"a": "1"}, {"a": 1}, False),
        ({"a": None}, {"a": None}, True),
        ({"a": None}, {"a": False}, False),
        ({"a": 1}, {"a": True}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": 0}, {"a": False}, False),
        ({"a": False}, {"a": 0}, False),
        ({"a": 1.0}, {"a": True}, False),
        ({"a": [True]}, {"a": [1]}, False),
        ({"a": [1]}, {"a": [True]}, False),
        ({"a": True}, {"a": True}, True),
        ({"a": (1, 2)}, {"a": [2]}, True),  # exact metadata keeps tuples
        ({"a": [1, 2]}, {"a": (2,)}, True),
        ({"d": datetime.date(2020, 1, 1)}, {"d": datetime.date(2020, 1, 1)}, True),
        ({"d": datetime.date(2020, 1, 1)}, {"d": "2020-01-01"}, False),  # the exact value, not its projection
        ({"s": "a\x00b"}, {"s": "a\\u0000b"}, False),
        ([1], {}, False),
        ({"a": 1}, [], False),
    ],
)
def test_metadata_contains_follows_jsonb_containment(document: Any, pattern: Any, contained: bool) -> None:
    assert metadata_contains(document, pattern) is contained


_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=4), inner, max_size=5)),
    max_leaves=12,
)
_DOCUMENTS = st.dictionaries(st.text(max_size=4), _JSON, max_size=5)


def _sub_pattern(draw: Any, value: Any) -> Any:
    """A pattern `value` contains: some keys of a dict, some elements of a list (in any order), recursively."""
    if isinstance(value, dict):
        keys = draw(st.lists(st.sampled_from(sorted(value)), unique=True)) if value else []
        return {k: _sub_pattern(draw, value[k]) for k in keys}
    if isinstance(value, list):
        picks = draw(st.lists(st.sampled_from(range(len(value))), max_size=4)) if value else []
        return [_sub_pattern(draw, value[i]) for i in picks]
    return value


@settings(max_examples=50, deadline=None)
@given(_DOCUMENTS)
def test_a_document_contains_itself(document: dict[str, Any]) -> None:
    assert metadata_contains(document, document)


@settings(max_examples=60, deadline=None)
@given(_DOCUMENTS, st.data())
def test_a_document_contains_every_sub_document(document: dict[str, Any], data: st.DataObject) -> None:
    pattern = _sub_pattern(data.draw, document)
    assert metadata_contains(document, pattern)


@settings(max_examples=40, deadline=None)
@given(_DOCUMENTS, st.text(max_size=4), _JSON)
def test_a_key_the_document_lacks_is_not_contained(document: dict[str, Any], key: str, value: Any) -> None:
    if key in document:
        document = {k: v for k, v in document.items() if k != key}
    assert not metadata_contains(document, {key: value})


@settings(max_examples=25, deadline=None)
@given(_DOCUMENTS, st.text(max_size=4), st.booleans())
def test_a_bool_never_matches_a_number(document: dict[str, Any], key: str, flag: bool) -> None:
    assert not metadata_contains({**document, key: int(flag)}, {key: flag})
    assert not metadata_contains({**document, key: flag}, {key: int(flag)})
    assert not metadata_contains({**document, key: [float(flag)]}, {key: [flag]})
    assert metadata_contains({**document, key: flag}, {key: flag})
