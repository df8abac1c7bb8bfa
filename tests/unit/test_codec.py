"""core/codec.py without a server: the serializer's calls, inline scalars, item compression,
and the batch decode of list items."""

from __future__ import annotations

import base64
import datetime
import math
import uuid
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_durable.core.codec import (
    COMPRESS_MIN_BYTES,
    COMPRESSED,
    INLINE_MAX_CHARS,
    KEPT_INLINE_FORMS,
    LEGACY_COMPRESSED,
    MAX_ITEM_BYTES,
    Codec,
    digest,
    is_compressed,
    is_inline,
    SMALL_DEFLATE_BYTES,
    packed,
    unpacked,
    unpacked_item,
)
from langgraph_pg_durable.errors import DeserializationError, SerializationError


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec(JsonPlusSerializer())


@pytest.fixture(scope="module")
def encrypted() -> Codec:
    return Codec(EncryptedSerializer.from_pycryptodome_aes(key=b"0" * 16))


class Unserializable:
    pass


class RefusingSerializer:
    """A serializer that refuses everything, and counts loads."""

    def __init__(self) -> None:
        self.loads = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise RuntimeError("no thanks")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads += 1
        raise RuntimeError("cannot read")


# -- dump and load ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [Unserializable(), object(), 2**70, {"nested": [Unserializable()]}])
def test_dump_names_the_channel_when_the_serializer_refuses(codec: Codec, value: object) -> None:
    with pytest.raises(SerializationError) as caught:
        codec.dump(value, channel="my-channel", where="thread 't', checkpoint 'c'")
    message = str(caught.value)
    assert "'my-channel'" in message
    assert "thread 't', checkpoint 'c'" in message
    assert isinstance(caught.value, TypeError)
    assert caught.value.__cause__ is not None


def test_dump_wraps_any_serializer_error() -> None:
    with pytest.raises(SerializationError, match=r"channel 'c' \(w\): RuntimeError: no thanks"):
        Codec(RefusingSerializer()).dump(1, channel="c", where="w")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "type_, data",
    [("msgpack", b"\xc1"), ("msgpack", b""), ("msgpack", None), ("no-such-type", b"x"), ("json", b"{not json")],
)
def test_load_wraps_any_failure_naming_where(codec: Codec, type_: str, data: bytes | None) -> None:
    with pytest.raises(DeserializationError) as caught:
        codec.load(type_, data, where="thread 't', channel 'messages'")
    assert str(caught.value).startswith("thread 't', channel 'messages': the stored value")
    assert caught.value.__cause__ is not None


def test_a_callable_where_is_called_only_on_failure() -> None:
    calls: list[int] = []

    def where() -> str:
        calls.append(1)
        return "LAZILY NAMED"

    codec = Codec(JsonPlusSerializer())
    assert codec.load("msgpack", b"\x05", where=where) == 5
    assert codec.load("null", None, where=where) is None
    assert calls == []
    with pytest.raises(DeserializationError, match="^LAZILY NAMED: "):
        codec.load("msgpack", b"\xc1", where=where)
    assert calls == [1]


def test_load_names_a_failure_of_any_serializer() -> None:
    serde = RefusingSerializer()
    with pytest.raises(DeserializationError, match=r"^W: .*RuntimeError: cannot read"):
        Codec(serde).load("x", b"", where="W")  # type: ignore[arg-type]
    assert serde.loads == 1


def test_an_encrypting_codec_refuses_plaintext(encrypted: Codec) -> None:
    assert encrypted.encrypted
    type_, data = encrypted.dump({"a": 1}, channel="c", where="w")
    assert type_.endswith("+aes")
    assert data != Codec(JsonPlusSerializer()).dump({"a": 1}, channel="c", where="w")[1]
    assert encrypted.load(type_, data, where="w") == {"a": 1}
    with pytest.raises(DeserializationError, match="W: .*not encrypted"):
        encrypted.load("msgpack", b"\x01", where="W")


def test_a_codec_knows_whether_it_encrypts(codec: Codec, encrypted: Codec) -> None:
    assert codec.encrypted is False
    assert encrypted.encrypted is True
    assert isinstance(encrypted.plain, JsonPlusSerializer)


# -- inline scalars ---------------------------------------------------------------------------


INLINE_VALUES = [None, True, False, 0, -1, 2**63 - 1, -(2**63), 1.5, -0.0, float("inf"), "", "é\x00", "x" * INLINE_MAX_CHARS]


@pytest.mark.parametrize("value", INLINE_VALUES)
def test_inline_scalars_round_trip(codec: Codec, value: object) -> None:
    stored = codec.dump_inline({"ch": value}, where="w")
    assert list(stored) == ["ch"]
    back = codec.load_inline(stored, where="w")
    assert back == {"ch": value}
    assert type(back["ch"]) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back["ch"]) == math.copysign(1, value)


def test_nan_round_trips_inline(codec: Codec) -> None:
    back = codec.load_inline(codec.dump_inline({"ch": float("nan")}, where="w"), where="w")
    assert math.isnan(back["ch"])


def test_only_scalars_are_kept_inline(codec: Codec) -> None:
    values = {
        "short": "x" * INLINE_MAX_CHARS,
        "long": "x" * (INLINE_MAX_CHARS + 1),
        "list": [1],
        "dict": {},
        "bytes": b"x",
        "n": 3,
        "flag": True,
        "none": None,
    }
    stored = codec.dump_inline(values, where="w")
    assert set(stored) == {"short", "n", "flag", "none"}
    assert codec.load_inline(stored, where="w") == {k: values[k] for k in stored}


def test_inline_values_are_type_and_base64(codec: Codec) -> None:
    stored = codec.dump_inline({"n": 1}, where="w")
    type_, text = stored["n"]
    assert (type_, base64.b64decode(text)) == codec.dump(1, channel="n", where="w")


def test_an_empty_inline_set_reads_as_nothing(codec: Codec) -> None:
    assert codec.dump_inline({}, where="w") == {}
    assert codec.load_inline(None, where="w") == {}
    assert codec.load_inline({}, where="w") == {}


def test_an_inline_scalar_put_again_is_stored_as_it_was_and_keeps_its_type() -> None:
    # The stored form of an inline scalar is kept and given again: never one of an equal
    # value of another type (True and 1, False and 0), nor of a float (-0.0 == 0.0).
    codec = Codec(JsonPlusSerializer())
    first = {"a": 1, "b": True, "c": 0, "d": False, "e": 0.0, "f": "x", "g": None}
    again = {"a": True, "b": 1, "c": False, "d": 0, "e": -0.0, "f": "x", "g": None}
    for values in (first, again, first, again):
        stored = codec.dump_inline(values, where="w")
        back = codec.load_inline(stored, where="w")
        assert back == values and [type(v) for v in back.values()] == [type(v) for v in values.values()]
        assert math.copysign(1, back["e"]) == math.copysign(1, values["e"])
        assert {k: (t, base64.b64decode(d)) for k, (t, d) in stored.items()} == {
            k: codec.dump(v, channel=k, where="w") for k, v in values.items()
        }
        for k, v in values.items():  # a written value takes the same kept forms
            back_one = codec.load(*codec.dump(v, channel=k, where="w"), where="w")
            assert back_one == v and type(back_one) is type(v) and (k != "e" or math.copysign(1, back_one) == math.copysign(1, v))
    for n in range(3 * KEPT_INLINE_FORMS):  # a string channel that never repeats: bounded
        codec.dump_inline({"s": f"value {n}"}, where="w")
    assert 0 < len(codec._inline_forms or {}) <= KEPT_INLINE_FORMS and 0 < len(codec._scalar_forms or {}) <= KEPT_INLINE_FORMS
    long = "y" * (INLINE_MAX_CHARS + 1)
    assert codec.load(*codec.dump(long, channel="s", where="w"), where="w") == long and (str, long) not in (codec._scalar_forms or {})


def test_an_encrypted_inline_scalar_is_encrypted_again_at_every_put(encrypted: Codec) -> None:
    first, second = (encrypted.dump_inline({"n": 7}, where="w")["n"] for _ in range(2))
    assert first != second  # a fresh nonce each time: no stored form kept
    assert encrypted.load_inline({"n": first}, where="w") == encrypted.load_inline({"n": second}, where="w") == {"n": 7}


def test_inline_values_are_encrypted_under_encryption(encrypted: Codec) -> None:
    stored = encrypted.dump_inline({"n": 7, "s": "secret"}, where="w")
    assert all(type_.endswith("+aes") for type_, _ in stored.values())
    assert b"secret" not in base64.b64decode(stored["s"][1])
    assert encrypted.load_inline(stored, where="w") == {"n": 7, "s": "secret"}


@pytest.mark.parametrize(
    "stored",
    [
        [["ch", ["msgpack", "AQ=="]]],  # not a mapping
        "ch",
        5,
        {"ch": "msgpack"},  # not a pair
        {"ch": ["msgpack"]},
        {"ch": ["msgpack", "AQ==", "extra"]},
        {"ch": ["msgpack", "!!not base64!!"]},
        {"ch": ["msgpack", "AQ"]},  # bad padding
        {"ch": ["msgpack", 5]},
        {"ch": ["msgpack", base64.b64encode(b"\xc1").decode()]},  # not msgpack
        {"ch": ["no-such-type", "AQ=="]},
        {"ch": [5, "AQ=="]},
    ],
)
def test_malformed_inline_values_raise_naming_where(codec: Codec, stored: object) -> None:
    with pytest.raises(DeserializationError, match=r"^thread 't', checkpoint 'c'"):
        codec.load_inline(stored, where="thread 't', checkpoint 'c'")


def test_a_bad_inline_value_names_its_channel(codec: Codec) -> None:
    stored = {"good": ["msgpack", "AQ=="], "bad": ["msgpack", base64.b64encode(b"\xc1").decode()]}
    with pytest.raises(DeserializationError, match=r"^W, channel 'bad': "):
        codec.load_inline(stored, where="W")


# -- several values at once (a checkpoint's pending writes) ------------------------------------


def test_values_load_together_as_each_would_alone(codec: Codec) -> None:
    values = [1, "two", [3, {"four": 4.0}], None, b"five", ("six",), {"seven": [7]}]
    raw = [codec.dump(v, channel="c", where="w") for v in values]
    assert {t for t, _ in raw} > {"msgpack"}  # (None and bytes have types of their own: loaded alone)
    assert codec.load_each(raw, lambda i: f"value {i}") == [codec.load(t, d, where="w") for t, d in raw]
    msgpack_only = [(t, d) for t, d in raw if t == "msgpack"]
    assert codec.load_each(msgpack_only, lambda i: f"value {i}") == [codec.load(t, d, where="w") for t, d in msgpack_only]


@pytest.mark.parametrize("odd", [b"\xc1", b"\x01\x02", b"\x92\x01"], ids=["not msgpack", "two objects", "short array"])
def test_values_that_do_not_frame_load_as_each_would_alone(codec: Codec, odd: bytes) -> None:
    # Bytes that are not exactly one object would shift the values after them in one framed
    # call: the call refuses them, and each value loads alone, as `load` would load it (a
    # failure names that value).
    raw = [codec.dump("a", channel="c", where="w"), ("msgpack", odd), codec.dump("c", channel="c", where="w")]
    try:
        alone = [codec.load(t, d, where=f"value {i}") for i, (t, d) in enumerate(raw)]
    except DeserializationError as exc:
        assert str(exc).startswith("value 1: ")
        with pytest.raises(DeserializationError, match=r"^value 1: "):
            codec.load_each(raw, lambda i: f"value {i}")
    else:
        assert codec.load_each(raw, lambda i: f"value {i}") == alone


def test_no_values_load_as_none(codec: Codec) -> None:
    assert codec.load_each([], lambda i: f"value {i}") == []


@pytest.mark.parametrize(
    "value, inline",
    [
        (None, True),
        (True, True),
        (0, True),
        (2**80, True),
        (1.0, True),
        ("", True),
        ("x" * INLINE_MAX_CHARS, True),
        ("x" * (INLINE_MAX_CHARS + 1), False),
        ([], False),
        ({}, False),
        ((), False),
        (b"", False),
        (bytearray(), False),
        (datetime.date(2020, 1, 1), False),
        (uuid.UUID(int=1), False),
    ],
)
def test_is_inline_by_type_alone(value: object, inline: bool) -> None:
    assert is_inline(value) is inline


def test_subclasses_of_scalars_are_not_inline() -> None:
    class Flag(int):
        pass

    class Name(str):
        pass

    assert not is_inline(Flag(1))
    assert not is_inline(Name("x"))


# -- list items as stored -----------------------------------------------------------------------


_COMPRESSIBLE = st.builds(lambda chunk, times: chunk * times, st.binary(min_size=1, max_size=16), st.integers(1, 600))


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=3000), _COMPRESSIBLE), st.sampled_from(["msgpack", "json", "pickle", "msgpack+aes"]))
def test_packed_items_unpack_to_what_was_packed(data: bytes, type_: str) -> None:
    stored_type, stored = packed(type_, data)
    assert unpacked(stored_type, stored) == (type_, data)
    if stored_type == type_:
        assert stored == data
    else:
        assert stored_type == type_ + COMPRESSED
        assert len(data) >= COMPRESS_MIN_BYTES
        assert len(stored) - 4 <= len(data) * 9 // 10 + 1
        assert is_compressed(stored_type)


def test_items_are_compressed_only_from_the_threshold_and_when_it_pays() -> None:
    assert packed("msgpack", b"a" * (COMPRESS_MIN_BYTES - 1)) == ("msgpack", b"a" * (COMPRESS_MIN_BYTES - 1))
    type_, stored = packed("msgpack", b"a" * COMPRESS_MIN_BYTES)
    assert type_ == "msgpack" + COMPRESSED
    assert int.from_bytes(stored[:4], "big") == COMPRESS_MIN_BYTES
    noise = bytes((i * 7919 + (i >> 3) * 104729) % 251 for i in range(4096))
    noise = zlib.compress(noise, 9)  # incompressible
    assert packed("msgpack", noise) == ("msgpack", noise)


def test_a_small_item_deflates_about_as_small_as_zlib_compress_makes_it() -> None:
    """Below SMALL_DEFLATE_BYTES the deflater's smaller tables (set up in a tenth of the
    time) find the same matches: within a percent of zlib.compress at the same level, on
    text, JSON and a repetitive binary; one past the bound takes zlib.compress itself."""
    words = b" ".join(b"alpha beta gamma delta omega sigma kappa lambda the quick brown fox".split()[i * 7 % 12] for i in range(3000))
    documents = b",".join(b'{"id": %d, "name": "item %d", "ok": true}' % (i, i % 17) for i in range(400))
    for data in (words[:1024], words[:4000], documents[:16000], bytes(range(256)) * 40):
        stored_type, stored = packed("msgpack", data)
        assert stored_type.endswith(COMPRESSED) and unpacked(stored_type, stored) == ("msgpack", data)
        assert len(stored) - 4 <= len(zlib.compress(data, 1)) * 1.01 + 2, len(data)
    large = words * 3
    assert len(large) > SMALL_DEFLATE_BYTES and packed("msgpack", large)[1][4:] == zlib.compress(large, 1)


def _compressed(data: bytes, stated: int | None = None, tail: bytes = b"") -> bytes:
    size = len(data) if stated is None else stated
    return size.to_bytes(4, "big") + zlib.compress(data) + tail


@pytest.mark.parametrize(
    "stored, message",
    [
        (_compressed(b"a" * 2000, stated=1999), "past its size"),
        (_compressed(b"a" * 2000, stated=2001), "not the 2,001 it states"),
        (_compressed(b"a" * 2000, stated=0), "past its size"),
        (_compressed(b"a" * 2000, tail=b"\x00"), "bytes after its stream"),
        (_compressed(b"a" * 2000, tail=zlib.compress(b"b")), "bytes after its stream"),
        (_compressed(b"a" * 2000)[:-3], "inflate"),
        ((2000).to_bytes(4, "big") + b"not zlib at all", "does not inflate"),
        (b"\x00\x01", "shorter than its size header"),
        (b"", "shorter than its size header"),
        ((MAX_ITEM_BYTES + 1).to_bytes(4, "big") + zlib.compress(b"a"), "past"),
    ],
)
def test_compressed_items_that_lie_raise_value_error(stored: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        unpacked("msgpack" + COMPRESSED, stored)


def test_legacy_compressed_items_inflate_and_are_checked() -> None:
    data = b"legacy " * 500
    assert unpacked("msgpack" + LEGACY_COMPRESSED, zlib.compress(data)) == ("msgpack", data)
    with pytest.raises(ValueError, match="bytes after its stream"):
        unpacked("msgpack" + LEGACY_COMPRESSED, zlib.compress(data) + b"x")
    with pytest.raises(ValueError, match="does not inflate"):
        unpacked("msgpack" + LEGACY_COMPRESSED, b"garbage")


def test_plain_items_pass_through_unpacked() -> None:
    assert unpacked("msgpack", b"\x01") == ("msgpack", b"\x01")
    assert unpacked("msgpack", None) == ("msgpack", b"")


def test_unpacked_item_names_where_only_on_failure() -> None:
    calls: list[int] = []

    def where() -> str:
        calls.append(1)
        return "thread 't', channel 'c', version 'v', item 3"

    good = packed("msgpack", b"z" * 5000)
    assert unpacked_item(*good, where) == ("msgpack", b"z" * 5000)
    assert calls == []
    with pytest.raises(DeserializationError, match=r"^thread 't', channel 'c', version 'v', item 3: .*inflates past its size"):
        unpacked_item("msgpack" + COMPRESSED, _compressed(b"z" * 5000, stated=10), where)
    assert calls == [1]


# -- load_items ---------------------------------------------------------------------------------


def _items(codec: Codec, values: list[Any]) -> list[tuple[str, bytes]]:
    return [codec.dump(v, channel="c", where="w") for v in values]


def _value(i: int) -> Any:
    kinds = [
        i,
        f"s{i}",
        {"i": i, "nested": [i, {"k": None}]},
        [i] * (i % 5),
        1.5 * i,
        True,
        {"b": b"b" * (i % 7)},
        datetime.datetime(2020, 1, 1 + i % 28),
        "é" * (i % 300),
        -(2**40) * i,
    ]
    return kinds[i % len(kinds)]


@pytest.mark.parametrize("count", [0, 1, 2, 15, 16, 300])
def test_load_items_equals_a_load_per_item(codec: Codec, count: int) -> None:
    values = [_value(i) for i in range(count)]
    raw = _items(codec, values)
    assert all(t == "msgpack" for t, _ in raw)  # the batch path
    assert codec.load_items(raw, where="w") == [codec.load(t, d, where="w") for t, d in raw]
    assert codec.load_items(raw, where="w") == values


def test_load_items_reads_compressed_and_mixed_items(codec: Codec) -> None:
    values: list[Any] = ["x" * 5000, None, 3, ["y"] * 800, {"k": "v"}]
    raw = [packed(t, d) for t, d in _items(codec, values)]
    assert any(is_compressed(t) for t, _ in raw)
    assert any(t == "null" for t, _ in raw)  # not every item msgpack: one load per item
    assert codec.load_items(raw, where="w") == values


def test_an_item_holding_two_msgpack_objects_is_refused(codec: Codec) -> None:
    raw = _items(codec, [1, 2, 3])
    raw[1] = ("msgpack", raw[1][1] + raw[2][1])  # would shift every later item in a batch
    with pytest.raises(DeserializationError, match=r"^W: .*not exactly one msgpack object"):
        codec.load_items(raw, where="W")
    with pytest.raises(DeserializationError, match="not exactly one msgpack object"):
        codec.load_items([("msgpack", b"\x01\x02")], where="W")


@pytest.mark.parametrize("bad", [("msgpack", b""), ("msgpack", None), ("msgpack", b"\xdc\x00"), ("msgpack", b"\xc1")])
def test_a_truncated_or_foreign_item_is_refused(codec: Codec, bad: tuple[str, bytes | None]) -> None:
    raw: list[tuple[str, bytes | None]] = [*_items(codec, [1, 2]), bad]
    with pytest.raises(DeserializationError, match="^W: a stored list item"):
        codec.load_items(raw, where="W")


def test_a_compressed_item_that_lies_is_refused_by_load_items(codec: Codec) -> None:
    raw = [("msgpack" + COMPRESSED, _compressed(b"\x01", stated=2))]
    with pytest.raises(DeserializationError, match="^W: a stored list item cannot be decoded"):
        codec.load_items(raw, where="W")


_JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=False),
        st.text(max_size=40),
        st.binary(max_size=40),
        st.datetimes(),
        st.uuids(),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=5), inner, max_size=6)),
    max_leaves=20,
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_JSONISH, max_size=30))
def test_the_batch_decode_equals_a_decode_per_item(values: list[Any]) -> None:
    codec = Codec(JsonPlusSerializer())
    raw = _items(codec, values)
    assert codec.load_items(raw, where="w") == [codec.load(t, d, where="w") for t, d in raw]


# -- dump_items ---------------------------------------------------------------------------------


def test_dump_items_digests_the_stored_form(codec: Codec) -> None:
    values = [1, "a", {"x": [1, 2]}]
    digests, stored = codec.dump_items(values, channel="c", where="w")
    assert digests == tuple(digest(*codec.dump(v, channel="c", where="w")) for v in values)
    assert [stored(i) for i in range(3)] == _items(codec, values)
    assert len(set(digests)) == 3


def test_dump_items_names_the_channel_of_a_refused_item(codec: Codec) -> None:
    with pytest.raises(SerializationError, match="'msgs'"):
        codec.dump_items([1, Unserializable()], channel="msgs", where="w")


def test_encrypted_digests_are_deterministic_while_stored_bytes_differ(codec: Codec, encrypted: Codec) -> None:
    values = [1, "a", {"x": [1, 2]}, "x" * 2000]
    digests_1, stored_1 = encrypted.dump_items(values, channel="c", where="w")
    digests_2, stored_2 = encrypted.dump_items(values, channel="c", where="w")
    assert digests_1 == digests_2
    assert digests_1 == codec.dump_items(values, channel="c", where="w")[0]  # the inner serializer's form
    for i in range(len(values)):
        type_1, data_1 = stored_1(i)
        type_2, data_2 = stored_2(i)
        assert type_1 == type_2 and type_1.endswith("+aes")
        assert data_1 != data_2  # a fresh nonce on every call
        assert data_1 != stored_1(i)[1]
    assert encrypted.load_items([stored_1(i) for i in range(len(values))], where="w") == values
    assert encrypted.load_items([packed(*stored_2(i)) for i in range(len(values))], where="w") == values


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_the_ext_precheck_finds_every_byte_that_starts_a_msgpack_ext(data: bytes) -> None:
    """The write check skips its parse only for bytes holding no ext head, short (one regex
    pass) or long (a find per head)."""
    from langgraph_pg_durable.core.type_policy import _names_no_class

    heads = {0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8}
    assert _names_no_class(data) == heads.isdisjoint(data)
