"""The saver's writes as calls of the schema's write functions (migration 0008; with the
fencing token since 0011), for tables distributed on Citus.

On Citus each data-modifying CTE of a write statement (sql/writes.py) is planned as a
separate sub-plan through the coordinator, and an INSERT ... SELECT from arrays passes its
rows through it: a put cost 5 worker commands and ~25 ms. `distribute()` makes the write
functions distributed functions co-located with the tables, so a call `SELECT f(thread, ...)`
is sent whole to the worker that holds the thread, and runs there as single-table
statements on local shards: one command, one worker.

A call is rendered from the statement it replaces: each function parameter takes that
statement's placeholder of the same name (`p_thread_id` <- `%(thread_id)s`, in the same
text or binary format), or NULL where the statement has none; so a call takes exactly the
parameters its statement does, and the saver builds them the same way for both.
"""

from __future__ import annotations

import re

# The list items a write stores (sql/writes.py, _insert_items), in both functions.
_ITEM_PARAMETERS = (
    ("item_channels", "text[]"),
    ("item_of", "text[]"),
    ("item_idx", "integer[]"),
    ("item_types", "text[]"),
    ("item_values", "bytea[]"),
    ("item_object_keys", "text[]"),
    ("item_object_shas", "text[]"),
    ("item_object_sizes", "bigint[]"),
)

# Each function's parameters in order, as (name without `p_`, type). A name that is also a
# placeholder of the replaced statement takes its value; `MODES` are set by the variant.
PUT_PARAMETERS = (
    ("thread_id", "text"),
    ("checkpoint_ns", "text"),
    ("checkpoint_id", "text"),
    ("parent_checkpoint_id", "text"),
    ("run_id", "text"),
    ("step", "integer"),
    ("source", "text"),
    ("checkpoint", "jsonb"),
    ("value_channels", "text[]"),
    ("value_versions", "text[]"),
    ("metadata", "jsonb"),
    ("metadata_exact", "bytea"),
    ("check_parent", "text"),
    ("base_channels", "text[]"),
    ("base_versions", "text[]"),
    ("base_item_channels", "text[]"),
    ("base_item_versions", "text[]"),
    ("channels", "text[]"),
    ("versions", "text[]"),
    ("types", "text[]"),
    ("values", "bytea[]"),
    ("object_keys", "text[]"),
    ("object_shas", "text[]"),
    ("object_sizes", "bigint[]"),
    ("list_chains", "text[]"),
    ("item_versions", "text[]"),
    *_ITEM_PARAMETERS,
    ("log", "boolean"),
    ("run_step", "integer"),
    ("run_status", "text"),
    ("fence", "text"),
)

PUT_WRITES_PARAMETERS = (
    ("kind", "text"),
    ("replace", "boolean"),
    ("thread_id", "text"),
    ("checkpoint_ns", "text"),
    ("checkpoint_id", "text"),
    ("task_id", "text"),
    ("task_path", "text"),
    ("packed_type", "text"),
    ("check_checkpoint", "text"),
    ("idx", "integer[]"),
    ("channels", "text[]"),
    ("types", "text[]"),
    ("values", "bytea[]"),
    ("object_keys", "text[]"),
    ("object_shas", "text[]"),
    ("object_sizes", "bigint[]"),
    ("write_item_versions", "text[]"),
    ("packed_idx", "integer"),
    ("packed_channel", "text"),
    ("packed_value", "bytea"),
    ("packed_item_version", "text"),
    *_ITEM_PARAMETERS,
    ("log", "boolean"),
    ("run_id", "text"),
    ("action_step", "integer"),
    ("action_idx", "integer"),
    ("agent", "text"),
    ("action_type", "text"),
    ("payload", "jsonb"),
    ("run_status", "text"),
    ("fence", "text"),
)

# The functions `distribute()` makes distributed, with their parameter types (for
# `create_distributed_function`'s signature) and the argument Citus routes a call by.
FUNCTIONS = {
    "lgpd_put": tuple(t for _, t in PUT_PARAMETERS),
    "lgpd_put_writes": tuple(t for _, t in PUT_WRITES_PARAMETERS),
}
DISTRIBUTION_ARGUMENT = "p_thread_id"

# Whether Citus is installed (one row, one boolean), then, only if it is, whether the
# schema's tables are distributed (`table`: the schema's checkpoints table, as text).
CITUS_INSTALLED = "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL"
TABLES_DISTRIBUTED = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = to_regclass(%(table)s))"

_PLACEHOLDER = re.compile(r"%\((\w+)\)([sb])")


def _literal(value: bool | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    assert re.fullmatch(r"\w+", value), value  # the fixed modes only: never user input
    return f"'{value}'"


def call(q: str, function: str, parameters: tuple[tuple[str, str], ...], statement: str, modes: dict[str, bool | str]) -> str:
    """`SELECT q.function(...)`, each argument the placeholder of the same name in
    `statement` (in its format), a mode's literal, or NULL; every argument cast to its type,
    so the call resolves to the one function whatever the values."""
    formats = {name: fmt for name, fmt in _PLACEHOLDER.findall(statement)}
    args = []
    for name, sql_type in parameters:
        if name in modes:
            args.append(f"{_literal(modes[name])}::{sql_type}")
        elif name in formats:
            args.append(f"%({name}){formats[name]}::{sql_type}")
        else:
            args.append(f"NULL::{sql_type}")
    unused = set(formats) - {name for name, _ in parameters}
    assert not unused, f"{function} has no parameter for {sorted(unused)}"
    return f"SELECT {q}.{function}({', '.join(args)})"


def put(q: str, statement: str, *, log: bool) -> str:
    """The call that does what `statement` (a `put` or `put_plain` of sql/writes.py) does."""
    return call(q, "lgpd_put", PUT_PARAMETERS, statement, {"log": log})


def put_writes(q: str, statement: str, *, kind: str, replace: bool, log: bool) -> str:
    """The call that does what `statement` (`put_writes`, `put_writes_items` or
    `put_packed_writes` of sql/writes.py, by `kind`: rows, items, packed) does."""
    return call(q, "lgpd_put_writes", PUT_WRITES_PARAMETERS, statement, {"kind": kind, "replace": replace, "log": log})
