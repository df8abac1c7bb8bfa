"""Scaling out on Citus: the statements that distribute one schema's tables by `thread_id`.

Every table keyed by thread_id is hash-distributed on it, all in one co-location group
(the first one's), so every statement of the saver, anchored on one thread, runs on one
worker and its joins stay local; the migrations ledger, which has no thread_id, becomes a
reference table (a copy on every node). The write functions (sql/routed.py) become
distributed functions in the same co-location group, each call sent whole to the worker
that holds its thread (`force_delegation`: also inside the transaction that takes the
thread's writer lock first). Written for Citus 12 and 13 (observed on 13.2 over PostgreSQL
15). Each statement skips a table that pg_dist_partition already lists (a function that
pg_dist_object lists as distributed), so the script can run again, e.g. after an upgrade's
setup() added a table or a function.

Text only; `distribute()` / `lgpd distribute` (aio.py, cli/maintain.py) check the server and
send it in one transaction.
"""

from __future__ import annotations

from typing import NamedTuple

from psycopg import sql

from ..errors import DistributionError, shown
from . import routed
from .schema import migrations, pending, quote_schema

CITUS_VERSIONS = "12 and 13"
DISTRIBUTION_COLUMN = "thread_id"

# The tables keyed by thread_id: it leads each one's primary key, and none has another
# unique constraint (Citus needs the distribution column in every one). The first is the
# co-location group's anchor. A unit test checks this list against schema.sql.
DISTRIBUTED_TABLES = (
    "checkpoints",
    "checkpoint_writes",
    "channel_values",
    "channel_items",
    "run_log",
    "action_log",
    "effects",
    "thread_holders",
)
# Tables without thread_id: small, read by every node.
REFERENCE_TABLES = ("schema_migrations",)

# Citus distributes a function only in a transaction that has kept to one connection per
# node ("cannot run function command because there was a parallel operation on a
# distributed table in the transaction"): sent first in distribute()'s transaction.
SEQUENTIAL = "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"

# One row: the database's name, and the installed citus extension's version (NULL: none).
CITUS_EXTENSION = "SELECT current_database(), (SELECT extversion FROM pg_extension WHERE extname = 'citus')"


class Step(NamedTuple):
    """One statement: it returns a row when it distributed `table` (or the write function of
    that name), none when Citus already had it."""

    table: str
    reference: bool  # a reference table, else distributed by thread_id
    sql: str
    function: bool = False  # a write function, delegated to the worker of its p_thread_id


def steps(schema: str) -> tuple[Step, ...]:
    """The statements for `schema`, in order: the anchor table first, then the tables co-located
    with it, then the reference tables."""
    quoted = quote_schema(schema)  # refuses a name that is not a plain identifier

    def regclass(table: str) -> str:
        return sql.Literal(f"{quoted}.{table}").as_string()

    def unless_distributed(table: str) -> str:
        return f"\nWHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = {regclass(table)}::regclass)"

    anchor = DISTRIBUTED_TABLES[0]
    column = sql.Literal(DISTRIBUTION_COLUMN).as_string()
    out = []
    for table in DISTRIBUTED_TABLES:
        colocate = "'none'" if table == anchor else regclass(anchor)
        statement = f"SELECT create_distributed_table({regclass(table)}, {column}, colocate_with => {colocate})"
        out.append(Step(table, False, statement + unless_distributed(table)))
    for table in REFERENCE_TABLES:
        out.append(Step(table, True, f"SELECT create_reference_table({regclass(table)})" + unless_distributed(table)))
    for name, types in routed.FUNCTIONS.items():
        signature = sql.Literal(f"{quoted}.{name}({', '.join(types)})").as_string()
        statement = (
            f"SELECT create_distributed_function({signature}, {sql.Literal(routed.DISTRIBUTION_ARGUMENT).as_string()}, "
            f"colocate_with => {regclass(anchor)}, force_delegation => true)"
            "\nWHERE NOT EXISTS (SELECT 1 FROM pg_dist_object WHERE classid = 'pg_proc'::regclass "
            f"AND objid = {signature}::regprocedure AND distribution_argument_index IS NOT NULL)"
        )
        out.append(Step(name, False, statement, function=True))
    return tuple(out)


def script(schema: str) -> str:
    """The statements as one psql script, in one transaction (what `lgpd distribute --dry-run` prints)."""
    body = "".join(f"{step.sql};\n" for step in steps(schema))
    return f"BEGIN;\n{SEQUENTIAL};\n{body}COMMIT;\n"


def require_citus(schema: str, database: str, citus_version: str | None) -> None:
    """Refuse a database without the citus extension (CITUS_EXTENSION's row), naming what to run."""
    if citus_version is None:
        raise DistributionError(
            f"schema {shown(schema)} cannot be distributed: database {shown(database)} has no citus extension. "
            f"Run `CREATE EXTENSION citus` in it on the coordinator (Citus {CITUS_VERSIONS}), then distribute again; "
            "nothing was changed"
        )


def require_schema(schema: str, version: int | None) -> None:
    """Refuse a schema that is not at the package's version (`version` None: no saver tables)."""
    if version is None:
        raise DistributionError(
            f"schema {shown(schema)} holds no langgraph-pg-durable tables: run setup() (`lgpd setup`) on the "
            "coordinator first, then distribute; nothing was changed"
        )
    if pending(schema, version):  # a newer schema: SchemaVersionError
        raise DistributionError(
            f"schema {shown(schema)} is at version {version}, this package at {len(migrations())}: run setup() (`lgpd setup`) "
            "first, then distribute; nothing was changed"
        )
