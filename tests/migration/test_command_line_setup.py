"""`python -m langgraph_pg_durable setup` creates a schema a saver then uses as it is."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from langgraph_pg_durable.sql.schema import migrations


def test_setup_from_the_command_line_creates_the_schema_at_head(pg_dsn: str, schema_name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_durable", "setup", "--dsn", pg_dsn, "--schema", schema_name],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"'{schema_name}' is at version {len(migrations())}" in done.stdout
    with psycopg.connect(pg_dsn) as conn:
        versions = conn.execute(f'SELECT max(version) FROM "{schema_name}".schema_migrations').fetchone()[0]
    assert versions == len(migrations())
