"""Typed array parameters: lists sent as text[], bytea[], int4[] or int8[].

A plain list makes psycopg scan its elements on every call to guess the array type; for
the ten arrays of a super-step's put and put_writes that guess was a sixth of the saver's
client CPU. `adapters.py` registers a binary dumper for each of these subclasses.
"""

from __future__ import annotations

from typing import Any


class TextArray(list[Any]):
    """A list of str (or None) sent as text[]."""


class ByteaArray(list[Any]):
    """A list of bytes (or None) sent as bytea[]."""


class Int4Array(list[Any]):
    """A list of int sent as int4[]."""


class Int8Array(list[Any]):
    """A list of int (or None) sent as int8[]."""
