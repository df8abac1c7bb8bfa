"""The database schema: numbered migrations, the lock that serializes them, the version check."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from psycopg import sql

from ..errors import ConfigError, SchemaVersionError, shown

DEFAULT_SCHEMA = "langgraph_durable"

_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered step of the schema; its SQL names the schema as `{schema}`."""

    version: int
    name: str
    template: str

    def sql(self, schema: str) -> str:
        """The step's SQL for `schema`: `{schema}` as an identifier, `{schema_literal}` as a
        string literal (DO blocks build their statements with format('%I', ...))."""
        return self.template.format(schema=quote_schema(schema), schema_literal=schema_literal(schema))

    def statements(self, schema: str) -> list[str]:
        """The step's statements for `schema`, each on its own, as setup() sends them: on a
        schema already distributed, Citus sends an ALTER TABLE or a CREATE INDEX to its
        workers as the text of the query it came in, and a worker refuses a text of several
        commands ("cannot insert multiple commands into a prepared statement")."""
        return split_statements(self.sql(schema))


_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")  # $tag$ or $$


def split_statements(script: str) -> list[str]:
    """A migration script cut into its statements: each ends with a `;` that ends a line
    outside a dollar-quoted body (`$fn$ ... $fn$`); what holds no SQL but comments is
    dropped. Written for the package's own scripts, which keep to that layout (a unit test
    parses every piece as exactly one statement)."""
    out: list[str] = []
    current: list[str] = []
    body: str | None = None  # the tag of the dollar-quoted body the line is in
    for line in script.splitlines(keepends=True):
        current.append(line)
        code = line if body is not None else line.split("--", 1)[0]
        for tag in _DOLLAR_QUOTE.findall(code):
            body = tag if body is None else (None if tag == body else body)
        if body is None and code.rstrip().endswith(";"):
            out.append("".join(current))
            current = []
    out.append("".join(current))
    return [piece for piece in out if any(line.split("--", 1)[0].strip() for line in piece.splitlines())]


@lru_cache(maxsize=1)
def migrations() -> tuple[Migration, ...]:
    """The package's migrations in order (sql/migrations/NNNN_name.sql)."""
    folder = resources.files(__package__).joinpath("migrations")
    return numbered((entry.name, entry.read_text("utf-8")) for entry in folder.iterdir() if entry.name.endswith(".sql"))


def numbered(files: Iterable[tuple[str, str]]) -> tuple[Migration, ...]:
    """Migrations from (file name, text) pairs, in order. Their numbers must run 1, 2, 3...
    without a gap or a repeat: setup() records each number once and never looks back, so a
    step missing from an install would leave every schema it creates without it."""
    found = []
    for name, text in files:
        if not name.endswith(".sql"):
            continue
        if not (match := _MIGRATION_FILE.match(name)):
            raise SchemaVersionError(f"migration file {shown(name)} is not named NNNN_name.sql (e.g. 0007_add_index.sql)")
        found.append(Migration(int(match[1]), match[2], text))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version < expected:
            raise SchemaVersionError(f"migration {migration.version:04d} is in the package twice")
        if migration.version != expected:
            raise SchemaVersionError(
                f"migration {expected:04d} is missing from the package (the next one found is "
                f"{migration.version:04d}_{migration.name}.sql): reinstall langgraph-pg-durable"
            )
    return tuple(found)


# A plain identifier: nothing in it can end a quoted name or a string literal, and the
# whitespace/comment compaction of the hot statements (sql.compact) leaves it as it is.
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def validate_schema(schema: object) -> str:
    """The schema name, if it is a plain PostgreSQL identifier; else ConfigError naming it."""
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise ConfigError(
            f"schema {shown(schema)} is not a plain PostgreSQL identifier: use letters, digits "
            "and '_' (not a digit first), at most 63 characters"
        )
    if schema.lower().startswith("pg_"):
        raise ConfigError(f"schema {shown(schema)} starts with 'pg_', which PostgreSQL reserves for system schemas")
    return schema


def quote_schema(schema: str) -> str:
    """The schema name as a quoted SQL identifier (psycopg's quoting of a validated name)."""
    return sql.Identifier(validate_schema(schema)).as_string()


def schema_literal(schema: str) -> str:
    """The schema name as a SQL string literal, for `format('%I', ...)` inside DO blocks."""
    return sql.Literal(validate_schema(schema)).as_string()


def advisory_lock_key(schema: str) -> int:
    """A stable signed 64-bit key, one per schema, for pg_advisory_xact_lock."""
    digest = hashlib.sha256(f"langgraph_pg_durable:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def thread_lock_keys(schema: str, thread_ids: Iterable[str]) -> list[int]:
    """The advisory lock keys of threads' writers, sorted: every writer and deleter of a
    thread takes its key first, and several keys are always taken in this order."""
    if isinstance(thread_ids, (list, tuple)) and len(thread_ids) == 1:  # a put's or put_writes' one thread
        return [_thread_lock_key(schema, thread_ids[0])]
    return sorted({_thread_lock_key(schema, t) for t in thread_ids})


@lru_cache(maxsize=1 << 14)
def _thread_lock_key(schema: str, thread_id: str) -> int:
    """One thread's key (a hash each write of the thread would compute again: cached)."""
    digest = hashlib.blake2b(f"{schema}\x00{thread_id}".encode(), digest_size=8, person=b"lgpd-thread").digest()
    return int.from_bytes(digest, "big", signed=True)


def gc_lock_key(prefix: str) -> int:
    """The advisory lock key of gc() on an object prefix (see Statements.GC_SHARE)."""
    digest = hashlib.blake2b(prefix.encode(), digest_size=8, person=b"lgpd-gc").digest()
    return int.from_bytes(digest, "big", signed=True)


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


def ledger_exists_sql() -> str:
    """Whether the schema has a migrations ledger (the schema name a bound parameter)."""
    return "SELECT to_regclass(format('%%I.schema_migrations', %(schema)s::text)) IS NOT NULL"


def current_version_sql(quoted_schema: str) -> str:
    return f"SELECT coalesce(max(version), 0) FROM {quoted_schema}.schema_migrations"


def record_sql(quoted_schema: str) -> str:
    return f"INSERT INTO {quoted_schema}.schema_migrations (version, name) VALUES (%s, %s)"


def pending(schema: str, current: int) -> tuple[Migration, ...]:
    """The migrations still to apply on a schema at `current`; refuses a newer schema."""
    known = migrations()
    if current > len(known):
        raise SchemaVersionError(
            f"schema {shown(schema)} is at version {current}, created by a newer "
            f"langgraph-pg-durable; this version knows migrations up to {len(known)}. "
            "Upgrade langgraph-pg-durable; the schema was left unchanged."
        )
    return known[current:]
