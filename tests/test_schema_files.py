"""The migration files as the package ships them; no server needed."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from langgraph_pg_durable import SchemaVersionError
from langgraph_pg_durable.sql import schema as schema_sql

MIGRATIONS = resources.files("langgraph_pg_durable.sql").joinpath("migrations")


def test_the_migration_files_are_numbered_from_one_without_gaps() -> None:
    names = sorted(entry.name for entry in MIGRATIONS.iterdir() if entry.name.endswith(".sql"))
    assert names, "no migration shipped"
    assert all(re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", name) for name in names), names
    assert [int(name[:4]) for name in names] == list(range(1, len(names) + 1))
    assert [m.version for m in schema_sql.migrations()] == list(range(1, len(names) + 1))


@pytest.mark.parametrize("schema", ["lgpd_plain", "Mixed_Case_9"])
def test_every_migration_formats_with_a_schema_name(schema: str) -> None:
    quoted = f'"{schema}"'
    for migration in schema_sql.migrations():
        text = migration.sql(schema)  # a stray `{` or `}` in a template raises here
        assert quoted in text or f"'{schema}'" in text, migration.name
        assert "{schema" not in text, migration.name


def _files(*numbers: int) -> list[tuple[str, str]]:
    return [(f"{n:04d}_step_{n}.sql", f"-- step {n}") for n in numbers]


def test_migrations_are_ordered_by_number_whatever_the_listing_order() -> None:
    found = schema_sql.numbered([*_files(3, 1), ("README", "not a migration"), *_files(2)])
    assert [(m.version, m.name) for m in found] == [(1, "step_1"), (2, "step_2"), (3, "step_3")]


def test_a_migration_missing_from_the_package_is_named() -> None:
    with pytest.raises(SchemaVersionError, match=r"migration 0002 is missing .*0003_step_3\.sql"):
        schema_sql.numbered(_files(1, 3, 4))
    with pytest.raises(SchemaVersionError, match="migration 0001 is missing"):
        schema_sql.numbered(_files(2))


def test_a_repeated_or_misnamed_migration_is_refused() -> None:
    with pytest.raises(SchemaVersionError, match="migration 0002 is in the package twice"):
        schema_sql.numbered([*_files(1, 2), ("0002_other.sql", "")])
    with pytest.raises(SchemaVersionError, match="'7_add_index.sql' is not named NNNN_name.sql"):
        schema_sql.numbered([*_files(1), ("7_add_index.sql", "")])
