"""Result rows declared once: a statement's columns as an IntEnum (decoders index rows by
member) and the SELECT list rendered from the same declaration, so the two cannot drift."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import TypeVar

C = TypeVar("C", bound=IntEnum)


def select_list(columns: type[C], types: Mapping[C, str], **exprs: str) -> str:
    """The SELECT list of one branch of a result: each declared column, in order, as the
    expression given for it (by lowercase name) or a typed NULL; names a column it lacks."""
    unknown = set(exprs) - {c.name.lower() for c in columns}
    if unknown:
        raise KeyError(f"{columns.__name__} has no column {sorted(unknown)[0]!r}")
    return ", ".join(f"{exprs.get(c.name.lower(), 'NULL::' + types.get(c, 'text'))} AS {c.name.lower()}" for c in columns)
