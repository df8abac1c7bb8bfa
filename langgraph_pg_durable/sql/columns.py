"""Result rows declared once: a statement's columns as int class attributes (decoders index
rows by them), and the SELECT list rendered from the same declaration, so the two cannot drift.

Plain ints, not an IntEnum: indexing a row by an enum member costs ~0.1 µs, and a cold
read of a long list indexes each of its thousand rows several times.
"""

from __future__ import annotations

from collections.abc import Mapping


class Columns:
    """A result's columns, in order: each a capitalised class attribute holding its position."""

    _names: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        declared = sorted((value, key) for key, value in vars(cls).items() if key.isupper() and type(value) is int)
        if [position for position, _ in declared] != list(range(len(declared))):
            raise TypeError(f"{cls.__name__}: column positions must run 0, 1, 2... without gaps or repeats")
        cls._names = tuple(key.lower() for _, key in declared)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The columns' names, lowercase, in order: as the server names them."""
        return cls._names

    @classmethod
    def position(cls, name: str) -> int:
        """Where the column `name` (any case) is in a row."""
        return cls._names.index(name.lower())


def select_list(columns: type[Columns], types: Mapping[int, str], first: bool = True, /, **exprs: str) -> str:
    """The SELECT list of one branch of a result: each declared column, in order, as the
    expression given for it (by lowercase name) or NULL; names a column it lacks.

    Only a UNION's first branch names the columns and types its NULLs (PostgreSQL resolves
    a UNION's types branch by branch, from the first): psycopg caches the parse of a
    statement only up to 4 KiB, and get_tuple's five branches of 22 columns would pass that
    with every NULL typed and named in each.
    """
    names = columns.names()
    unknown = set(exprs) - set(names)
    if unknown:
        raise KeyError(f"{columns.__name__} has no column {sorted(unknown)[0]!r}")
    if not first:
        return ",".join(exprs.get(name, "NULL") for name in names)
    out = []
    for position, name in enumerate(names):
        expr = exprs.get(name, f"NULL::{types.get(position, 'text')}")
        # A column reference names itself; anything else (a NULL, a literal) needs its alias.
        out.append(expr if expr.rpartition(".")[2] == name else f"{expr} AS {name}")
    return ",".join(out)
