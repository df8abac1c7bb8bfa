"""The database schema: numbered migrations, the lock that serializes them, the version check."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from .errors import ConfigError, SchemaVersionError

DEFAULT_SCHEMA = "langgraph_durable"

_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered step of the schema; its SQL names the schema as `{schema}`."""

    version: int
    name: str
    template: str

    def sql(self, quoted_schema: str) -> str:
        return self.template.format(schema=quoted_schema)


@lru_cache(maxsize=1)
def migrations() -> tuple[Migration, ...]:
    """The package's migrations in order; their numbers must run 1, 2, 3... without gaps."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        if match := _MIGRATION_FILE.match(entry.name):
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise RuntimeError(f"migration {expected:04d} is missing from the package")
    return tuple(found)


def quote_schema(schema: str) -> str:
    """The schema name as a quoted SQL identifier; refuses names Postgres cannot hold."""
    if not isinstance(schema, str) or not schema:
        raise ConfigError(f"schema must be a non-empty string, got {schema!r}")
    if "\x00" in schema or len(schema.encode()) > 63:
        raise ConfigError(f"schema name {schema!r} is not a valid PostgreSQL identifier")
    return '"' + schema.replace('"', '""') + '"'


def advisory_lock_key(schema: str) -> int:
    """A stable signed 64-bit key, one per schema, for pg_advisory_xact_lock."""
    digest = hashlib.sha256(f"langgraph_pg_durable:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_sql(schema: str) -> str:
    return f"SELECT pg_advisory_xact_lock({advisory_lock_key(schema)})"


def bootstrap_sql(quoted_schema: str) -> str:
    """Creates the schema and its migrations ledger; safe to run every time under the lock."""
    return (
        f"CREATE SCHEMA IF NOT EXISTS {quoted_schema};\n"
        f"CREATE TABLE IF NOT EXISTS {quoted_schema}.schema_migrations (\n"
        "    version    integer     PRIMARY KEY,\n"
        "    name       text        NOT NULL,\n"
        "    applied_at timestamptz NOT NULL DEFAULT now()\n"
        ");"
    )


def current_version_sql(quoted_schema: str) -> str:
    return f"SELECT coalesce(max(version), 0) FROM {quoted_schema}.schema_migrations"


def record_sql(quoted_schema: str) -> str:
    return f"INSERT INTO {quoted_schema}.schema_migrations (version, name) VALUES (%s, %s)"


def pending(schema: str, current: int) -> tuple[Migration, ...]:
    """The migrations still to apply on a schema at `current`; refuses a newer schema."""
    known = migrations()
    if current > len(known):
        raise SchemaVersionError(
            f"schema {schema!r} is at version {current}, created by a newer "
            f"langgraph-pg-durable; this version knows migrations up to {len(known)}. "
            "Upgrade langgraph-pg-durable; the schema was left unchanged."
        )
    return known[current:]
