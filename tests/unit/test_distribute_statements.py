"""Scaling out on Citus without a server: the exact statements for a schema, the tables they
cover against schema.sql and the migrations, the refusals, and `lgpd distribute --dry-run`."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from langgraph_pg_durable import ConfigError, DistributionError, SchemaVersionError
from langgraph_pg_durable.cli import app
from langgraph_pg_durable.sql import distribute
from langgraph_pg_durable.sql.schema import migrations

SNAPSHOT = resources.files("langgraph_pg_durable.sql").joinpath("schema.sql").read_text("utf-8")

DEFAULT_STATEMENTS = [
    """SELECT create_distributed_table('"langgraph_durable".checkpoints', 'thread_id', colocate_with => 'none')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".checkpoints'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".checkpoint_writes', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".checkpoint_writes'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".channel_values', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".channel_values'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".channel_items', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".channel_items'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".run_log', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".run_log'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".action_log', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".action_log'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".effects', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".effects'::regclass)""",
    """SELECT create_distributed_table('"langgraph_durable".thread_holders', 'thread_id', \
colocate_with => '"langgraph_durable".checkpoints')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".thread_holders'::regclass)""",
    """SELECT create_reference_table('"langgraph_durable".schema_migrations')
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"langgraph_durable".schema_migrations'::regclass)""",
]
PUT_SIGNATURE = (
    '"langgraph_durable".lgpd_put(text, text, text, text, text, integer, text, jsonb, text[], text[], jsonb, bytea, text, '
    "text[], text[], text[], text[], text[], text[], text[], bytea[], text[], text[], bigint[], text[], text[], text[], text[], "
    "integer[], text[], bytea[], text[], text[], bigint[], boolean, integer, text, text)"
)
PUT_WRITES_SIGNATURE = (
    '"langgraph_durable".lgpd_put_writes(text, boolean, text, text, text, text, text, text, text, integer[], text[], text[], '
    "bytea[], text[], text[], bigint[], text[], integer, text, bytea, text, text[], text[], integer[], text[], bytea[], text[], "
    "text[], bigint[], boolean, text, integer, integer, text, text, jsonb, text, text)"
)
DEFAULT_FUNCTION_STATEMENTS = [
    f"""SELECT create_distributed_function('{signature}', 'p_thread_id', colocate_with => '"langgraph_durable".checkpoints', \
force_delegation => true)
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_object WHERE classid = 'pg_proc'::regclass AND objid = '{signature}'::regprocedure \
AND distribution_argument_index IS NOT NULL)"""
    for signature in (PUT_SIGNATURE, PUT_WRITES_SIGNATURE)
]


def test_the_default_schema_gets_these_exact_statements() -> None:
    steps = distribute.steps("langgraph_durable")
    assert [step.sql for step in steps] == DEFAULT_STATEMENTS + DEFAULT_FUNCTION_STATEMENTS
    assert [(step.table, step.reference, step.function) for step in steps] == [
        ("checkpoints", False, False),
        ("checkpoint_writes", False, False),
        ("channel_values", False, False),
        ("channel_items", False, False),
        ("run_log", False, False),
        ("action_log", False, False),
        ("effects", False, False),
        ("thread_holders", False, False),
        ("schema_migrations", True, False),
        ("lgpd_put", False, True),
        ("lgpd_put_writes", False, True),
    ]


def test_the_script_is_the_statements_in_one_transaction() -> None:
    statements = DEFAULT_STATEMENTS + DEFAULT_FUNCTION_STATEMENTS
    assert distribute.script("langgraph_durable") == (
        "BEGIN;\nSET LOCAL citus.multi_shard_modify_mode TO 'sequential';\n" + "".join(f"{s};\n" for s in statements) + "COMMIT;\n"
    )


def test_a_schema_name_that_needs_quoting_is_quoted_in_every_name() -> None:
    steps = distribute.steps("Agents_2")
    assert steps[0].sql == (
        """SELECT create_distributed_table('"Agents_2".checkpoints', 'thread_id', colocate_with => 'none')\n"""
        """WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"Agents_2".checkpoints'::regclass)"""
    )
    assert steps[1].sql == (
        """SELECT create_distributed_table('"Agents_2".checkpoint_writes', 'thread_id', colocate_with => '"Agents_2".checkpoints')\n"""
        """WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"Agents_2".checkpoint_writes'::regclass)"""
    )
    assert steps[8].sql == (
        """SELECT create_reference_table('"Agents_2".schema_migrations')\n"""
        """WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '"Agents_2".schema_migrations'::regclass)"""
    )
    # A keyword as a schema name: quoted too, so the server reads it as a name.
    assert distribute.steps("user")[0].sql.startswith("""SELECT create_distributed_table('"user".checkpoints', 'thread_id',""")
    # Each statement is the default schema's with the name swapped: nothing else depends on it.
    renamed = [s.replace('"langgraph_durable"', '"Agents_2"') for s in DEFAULT_STATEMENTS + DEFAULT_FUNCTION_STATEMENTS]
    assert [step.sql for step in steps] == renamed


@pytest.mark.parametrize("schema", ["x'; DROP TABLE t; --", 'a"b', "pg_catalog", "", "a.b"])
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(schema: str) -> None:
    with pytest.raises(ConfigError, match="schema"):
        distribute.steps(schema)


def _tables(text: str) -> dict[str, str]:
    """Each CREATE TABLE of schema.sql: its name and body."""
    return dict(re.findall(r"CREATE TABLE \{schema\}\.(\w+) \((.*?)\n\);", text, re.DOTALL))


def test_every_table_at_head_is_distributed_by_thread_id_or_a_reference_table() -> None:
    tables = _tables(SNAPSHOT)
    assert tables, "schema.sql lists no table"
    keyed = {name for name, body in tables.items() if re.search(r"^\s+thread_id\s", body, re.MULTILINE)}
    assert set(distribute.DISTRIBUTED_TABLES) == keyed
    assert set(distribute.REFERENCE_TABLES) == set(tables) - keyed
    assert "schema_migrations" in distribute.REFERENCE_TABLES
    # And no migration creates a table schema.sql does not have (it is generated from them).
    created = {name for m in migrations() for name in re.findall(r"CREATE TABLE IF NOT EXISTS \{schema\}\.(\w+)", m.template)}
    assert created | {"schema_migrations"} == set(tables)  # the ledger comes from setup()'s bootstrap


def test_every_unique_key_of_a_distributed_table_includes_thread_id() -> None:
    """Citus refuses a primary key or unique constraint without the distribution column."""
    tables = _tables(SNAPSHOT)
    for name in distribute.DISTRIBUTED_TABLES:
        keys = re.findall(r"(?:PRIMARY KEY|UNIQUE) \(([^)]*)\)", tables[name])
        assert keys, f"{name} has no primary key"
        for columns in keys:
            assert "thread_id" in [c.strip() for c in columns.split(",")], (name, columns)
    for name, columns in re.findall(r"CREATE UNIQUE INDEX \w+ ON \{schema\}\.(\w+) USING \w+ \(([^)]*)\)", SNAPSHOT):
        if name in distribute.DISTRIBUTED_TABLES:
            assert "thread_id" in [c.strip() for c in columns.split(",")], (name, columns)


def test_a_database_without_citus_is_refused_with_what_to_run() -> None:
    distribute.require_citus("agents", "app", "13.2-1")  # present: no error
    with pytest.raises(DistributionError) as refused:
        distribute.require_citus("agents", "app", None)
    message = str(refused.value)
    assert "schema 'agents'" in message and "database 'app'" in message
    assert "CREATE EXTENSION citus" in message and "coordinator" in message and "nothing was changed" in message


def test_a_schema_without_the_saver_tables_or_behind_is_refused() -> None:
    head = len(migrations())
    distribute.require_schema("agents", head)  # current: no error
    with pytest.raises(DistributionError, match=r"schema 'agents' holds no langgraph-pg-durable tables: run setup\(\)"):
        distribute.require_schema("agents", None)
    with pytest.raises(DistributionError, match=rf"schema 'agents' is at version 1, this package at {head}: run setup\(\)"):
        distribute.require_schema("agents", 1)
    with pytest.raises(SchemaVersionError, match="newer"):
        distribute.require_schema("agents", head + 1)


def test_lgpd_distribute_dry_run_prints_the_script_and_connects_nowhere() -> None:
    # A connection string no server answers: the dry run needs none.
    args = ["--dsn", "postgresql://127.0.0.1:1/none", "--schema", "Agents_2", "distribute", "--dry-run"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == distribute.script("Agents_2")
    assert "nothing was run" in result.stderr
    printed = CliRunner().invoke(app, ["--schema", "Agents_2", "distribute", "--print"])
    assert printed.exit_code == 0 and printed.stdout == result.stdout


def test_lgpd_distribute_dry_run_refuses_a_bad_schema_name() -> None:
    result = CliRunner().invoke(app, ["--schema", "a-b", "distribute", "--dry-run"])
    assert result.exit_code == 2
    assert "not a plain PostgreSQL identifier" in result.stderr and not result.stdout


def test_the_readme_shows_the_statements_distribute_runs() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    section = readme.split("\n## Scaling out", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.S)
    assert distribute.script("langgraph_durable").strip() in [block.strip() for block in blocks]
