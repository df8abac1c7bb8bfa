"""Write `langgraph_pg_durable/sql/schema.sql`, the schema at head, from what the migrations build.

setup() builds a schema by running the numbered migrations; reviewing a change means
reading all of them. schema.sql is their result in one file: this tool runs setup() on a
fresh schema of a real PostgreSQL, reads the catalog back (`describe`) and writes it as
one script (`render`), a template like the migrations. A test fails when it is stale.

    python tools/schema_snapshot.py [--dsn DSN]            # rewrite schema.sql
    python tools/schema_snapshot.py --check [--dsn DSN]    # exit 1 if schema.sql is stale

Without --dsn it uses the tests' server ($LANGGRAPH_PG_DURABLE_TEST_DSN, else one it starts).
The catalog is rendered by this tool rather than pg_dump, so the output is the same from any
server version the tests run on. Objects it cannot render yet make it fail, naming them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "langgraph_pg_durable" / "sql" / "schema.sql"
PLACEHOLDER = "{schema}"

sys.path.insert(0, str(ROOT))
from langgraph_pg_durable import DurablePostgresSaver  # noqa: E402 - the checkout's package, not an installed one
from langgraph_pg_durable.sql.schema import Migration, migrations, validate_schema  # noqa: E402

Catalog = dict[str, Any]  # JSON-able and schema-name free: two schemas built alike are equal


# -- reading the catalog ----------------------------------------------------------------

_UNSUPPORTED = """
SELECT what || ' ' || quote_ident(name) AS object FROM (
    SELECT 'relation of kind ' || relkind::text AS what, relname AS name FROM pg_class
     WHERE relnamespace = %(ns)s AND relkind NOT IN ('r', 'i', 'S', 'v')
    UNION ALL SELECT 'table with privileges or row security', relname FROM pg_class
     WHERE relnamespace = %(ns)s AND (relacl IS NOT NULL OR relrowsecurity)
    UNION ALL SELECT 'sequence not of an identity column', c.relname FROM pg_class c
     WHERE c.relnamespace = %(ns)s AND c.relkind = 'S' AND NOT EXISTS (
        SELECT 1 FROM pg_depend d
         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'i')
    UNION ALL SELECT 'type', t.typname FROM pg_type t
     WHERE t.typnamespace = %(ns)s AND t.typrelid = 0  -- not the row type of a relation
       AND NOT (t.typcategory = 'A' AND EXISTS (  -- nor an array of a type named on its own
           SELECT 1 FROM pg_type e WHERE e.oid = t.typelem AND e.typnamespace = t.typnamespace))
    UNION ALL SELECT 'rule', r.rulename FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
     WHERE c.relnamespace = %(ns)s AND r.rulename <> '_RETURN'
    UNION ALL SELECT 'policy', p.polname FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
     WHERE c.relnamespace = %(ns)s
    UNION ALL SELECT 'statistics object', stxname FROM pg_statistic_ext WHERE stxnamespace = %(ns)s
    UNION ALL SELECT 'aggregate, window function or granted routine', proname FROM pg_proc
     WHERE pronamespace = %(ns)s AND (prokind IN ('a', 'w') OR proacl IS NOT NULL)
    UNION ALL SELECT 'collation', collname FROM pg_collation WHERE collnamespace = %(ns)s
    UNION ALL SELECT 'conversion', conname FROM pg_conversion WHERE connamespace = %(ns)s
    UNION ALL SELECT 'operator', oprname FROM pg_operator WHERE oprnamespace = %(ns)s
    UNION ALL SELECT 'operator family', opfname FROM pg_opfamily WHERE opfnamespace = %(ns)s
    UNION ALL SELECT 'text search configuration', cfgname FROM pg_ts_config WHERE cfgnamespace = %(ns)s
    UNION ALL SELECT 'text search dictionary', dictname FROM pg_ts_dict WHERE dictnamespace = %(ns)s
    UNION ALL SELECT 'extension', extname FROM pg_extension WHERE extnamespace = %(ns)s
    UNION ALL SELECT 'schema with privileges', nspname FROM pg_namespace WHERE oid = %(ns)s AND nspacl IS NOT NULL
) found ORDER BY 1
"""

_RELATIONS = """
SELECT c.oid, quote_ident(c.relname) AS name, c.relkind AS kind, c.relpersistence AS persistence,
       c.reloptions AS options, obj_description(c.oid, 'pg_class') AS comment
  FROM pg_class c WHERE c.relnamespace = %(ns)s AND c.relkind IN ('r', 'v') ORDER BY c.relname
"""

# attcompression is '' for the default; attstorage is shown only where it is not
# the type's. Generated and identity columns keep their expression and kind.
_COLUMNS = """
SELECT quote_ident(a.attname) AS name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS default,
       nullif(a.attidentity::text, '') AS identity, nullif(a.attgenerated::text, '') AS generated,
       CASE WHEN a.attcollation <> t.typcollation THEN quote_ident(co.collname) END AS collation,
       nullif(a.attcompression::text, '') AS compression,
       CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage::text END AS storage,
       col_description(a.attrelid, a.attnum) AS comment
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  LEFT JOIN pg_collation co ON co.oid = a.attcollation
 WHERE a.attrelid = %(rel)s AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""

# NOT NULL is a column property here (PostgreSQL 18 also lists it as a constraint).
_CONSTRAINTS = """
SELECT quote_ident(conname) AS name, contype::text AS type, pg_get_constraintdef(oid) AS definition
  FROM pg_constraint WHERE conrelid = %(rel)s AND contype <> 'n' ORDER BY conname
"""

_INDEXES = """
SELECT quote_ident(i.relname) AS name, pg_get_indexdef(i.oid) AS definition,
       EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid AND c.conrelid = x.indrelid) AS of_constraint,
       obj_description(i.oid, 'pg_class') AS comment
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
 WHERE x.indrelid = %(rel)s ORDER BY i.relname
"""

_TRIGGERS = """
SELECT quote_ident(tgname) AS name, pg_get_triggerdef(oid) AS definition
  FROM pg_trigger WHERE tgrelid = %(rel)s AND NOT tgisinternal ORDER BY tgname
"""

_IDENTITY_SEQUENCES = """
SELECT quote_ident(a.attname) AS "column", format_type(s.seqtypid, NULL) AS type, s.seqstart AS start,
       s.seqincrement AS increment, s.seqmin AS min, s.seqmax AS max, s.seqcache AS cache, s.seqcycle AS cycle
  FROM pg_depend d
  JOIN pg_sequence s ON s.seqrelid = d.objid
  JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
 WHERE d.classid = 'pg_class'::regclass AND d.refobjid = %(rel)s AND d.deptype = 'i'
 ORDER BY a.attname
"""

_FUNCTIONS = """
SELECT quote_ident(p.proname) || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS signature,
       pg_get_functiondef(p.oid) AS definition, obj_description(p.oid, 'pg_proc') AS comment
  FROM pg_proc p WHERE p.pronamespace = %(ns)s AND p.prokind IN ('f', 'p') ORDER BY 1
"""


class UnsupportedObjects(Exception):
    """The schema holds objects `render` cannot write yet; the message names them."""


def describe(conn: psycopg.Connection, schema: str) -> Catalog:
    """Everything the migrations built in `schema`, with its name replaced by {schema}.

    Names and definitions are the server's own (quote_ident, pg_get_*def, format_type),
    read with search_path = pg_catalog so that every name of the schema comes qualified.
    """
    validate_schema(schema)
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        cur.execute("SET LOCAL search_path = pg_catalog")
        cur.execute("SELECT oid, obj_description(oid, 'pg_namespace') AS comment FROM pg_namespace WHERE nspname = %s", (schema,))
        found = cur.fetchone()
        if found is None:
            raise LookupError(f"no schema {schema!r}")
        ns = found["oid"]
        cur.execute(_UNSUPPORTED, {"ns": ns})
        if unsupported := [row["object"] for row in cur.fetchall()]:
            raise UnsupportedObjects(
                f"schema {schema!r} holds what tools/schema_snapshot.py cannot render yet: "
                + ", ".join(unsupported)
                + "; extend describe() and render()"
            )
        catalog: Catalog = {"comment": found["comment"], "tables": {}, "views": {}, "functions": {}}
        cur.execute(_RELATIONS, {"ns": ns})
        for rel in cur.fetchall():
            params = {"rel": rel["oid"]}
            entry = {"persistence": rel["persistence"], "options": rel["options"], "comment": rel["comment"]}
            cur.execute(_COLUMNS, params)
            entry["columns"] = cur.fetchall()
            if rel["kind"] == "v":
                cur.execute("SELECT pg_get_viewdef(%(rel)s::oid, true) AS definition", params)
                entry["definition"] = cur.fetchone()["definition"].strip().rstrip(";")
                catalog["views"][rel["name"]] = entry
                continue
            for key, query in (
                ("constraints", _CONSTRAINTS),
                ("indexes", _INDEXES),
                ("triggers", _TRIGGERS),
                ("identity_sequences", _IDENTITY_SEQUENCES),
            ):
                cur.execute(query, params)
                entry[key] = cur.fetchall()
            catalog["tables"][rel["name"]] = entry
        cur.execute(_FUNCTIONS, {"ns": ns})
        for row in cur.fetchall():
            catalog["functions"][row["signature"]] = {"definition": row["definition"].strip(), "comment": row["comment"]}
    return _without_name(catalog, schema)


def _without_name(value: Any, schema: str) -> Any:
    """`value` with `schema` replaced by {schema} in every key and string: as the server
    prints it, quoted where it must be (never for the lower-case names used here) or bare."""
    pattern = re.compile(rf"{re.escape(sql.Identifier(schema).as_string())}|(?<![\w$\"]){re.escape(schema)}(?![\w$\"])")
    if isinstance(value, str):
        return pattern.sub(PLACEHOLDER, value)
    if isinstance(value, dict):
        return {_without_name(k, schema): _without_name(v, schema) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_name(v, schema) for v in value]
    return value


def catalog_diff(expected: Catalog, actual: Catalog) -> str:
    """A unified diff of two catalogs, for a failing comparison."""

    def lines(catalog: Catalog) -> list[str]:
        return json.dumps(catalog, indent=1, sort_keys=True).splitlines()

    return "\n".join(difflib.unified_diff(lines(expected), lines(actual), "expected", "actual", lineterm=""))


# -- writing it ---------------------------------------------------------------------------

_COMPRESSION = {"p": "pglz", "l": "lz4"}
_STORAGE = {"p": "PLAIN", "e": "EXTERNAL", "m": "MAIN", "x": "EXTENDED"}
_IDENTITY = {"a": "GENERATED ALWAYS AS IDENTITY", "d": "GENERATED BY DEFAULT AS IDENTITY"}


def render(catalog: Catalog) -> str:
    """schema.sql's text for a catalog: a template whose only placeholder is {schema}."""
    known = migrations()
    out = [
        f"-- Generated by tools/schema_snapshot.py from migrations 0001..{len(known):04d}; do not edit.",
        "-- The schema at head as setup() leaves it, on a server with lz4, in one place for review.",
        "-- setup() runs the migrations, never this file; schema_migrations then lists every one.",
        "-- Regenerate: python tools/schema_snapshot.py [--dsn postgresql://...]",
        "-- tests/test_schema_snapshot.py fails when this is not what the migrations give.",
        "",
        f"CREATE SCHEMA {PLACEHOLDER};",
    ]
    comments = []
    if catalog["comment"] is not None:
        comments.append(f"COMMENT ON SCHEMA {PLACEHOLDER} IS {_literal(catalog['comment'])};")
    for name, table in sorted(catalog["tables"].items()):
        out += ["", *_table(name, table)]
        qualified = f"{PLACEHOLDER}.{name}"
        for index in table["indexes"]:
            if not index["of_constraint"]:
                out.append(f"{index['definition']};")
            if index["comment"] is not None:
                comments.append(f"COMMENT ON INDEX {PLACEHOLDER}.{index['name']} IS {_literal(index['comment'])};")
        comments += _comments("TABLE", qualified, table)
    for signature, function in sorted(catalog["functions"].items()):
        out += ["", f"{function['definition']};"]
        if function["comment"] is not None:
            comments.append(f"COMMENT ON FUNCTION {PLACEHOLDER}.{signature} IS {_literal(function['comment'])};")
    for name, view in sorted(catalog["views"].items()):
        options = f" WITH ({', '.join(view['options'])})" if view["options"] else ""
        out += ["", f"CREATE VIEW {PLACEHOLDER}.{name}{options} AS", f"{view['definition']};"]
        comments += _comments("VIEW", f"{PLACEHOLDER}.{name}", view)
    # After every table, as they may reference one another in any order.
    foreign_keys = [
        f"ALTER TABLE {PLACEHOLDER}.{name} ADD CONSTRAINT {c['name']} {c['definition']};"
        for name, table in sorted(catalog["tables"].items())
        for c in table["constraints"]
        if c["type"] == "f"
    ]
    triggers = [f"{t['definition']};" for _, table in sorted(catalog["tables"].items()) for t in table["triggers"]]
    for section in (foreign_keys, triggers):
        if section:
            out += ["", *section]
    if comments:
        out += ["", *comments]
    text = "\n".join(out) + "\n"
    # A template for str.format, like the migrations: every other brace is doubled.
    return text.replace("{", "{{").replace("}", "}}").replace("{" + PLACEHOLDER + "}", PLACEHOLDER)


def _table(name: str, table: Catalog) -> list[str]:
    columns = table["columns"]
    for sequence in table["identity_sequences"]:
        if (sequence["start"], sequence["increment"], sequence["cycle"]) != (1, 1, False):
            raise UnsupportedObjects(f"identity column {name}.{sequence['column']} has sequence options; extend render()")
    name_width = max(len(c["name"]) for c in columns)
    type_width = max(len(c["type"]) for c in columns)
    lines = []
    for column in columns:
        parts = [column["name"].ljust(name_width), column["type"].ljust(type_width)]
        if column["compression"]:
            parts.append(f"COMPRESSION {_COMPRESSION[column['compression']]}")
        if column["collation"]:
            parts.append(f"COLLATE {column['collation']}")
        if column["generated"]:
            parts.append(f"GENERATED ALWAYS AS ({column['default']}) STORED")
        if column["identity"]:
            parts.append(_IDENTITY[column["identity"]])
        if column["not_null"]:
            parts.append("NOT NULL")
        if column["default"] is not None and not column["generated"]:
            parts.append(f"DEFAULT {column['default']}")
        lines.append("    " + " ".join(parts).rstrip())
    lines += [f"    CONSTRAINT {c['name']} {c['definition']}" for c in table["constraints"] if c["type"] != "f"]
    unlogged = "UNLOGGED " if table["persistence"] == "u" else ""
    options = f" WITH ({', '.join(table['options'])})" if table["options"] else ""
    out = [f"CREATE {unlogged}TABLE {PLACEHOLDER}.{name} (", ",\n".join(lines), f"){options};"]
    out += [
        f"ALTER TABLE {PLACEHOLDER}.{name} ALTER COLUMN {c['name']} SET STORAGE {_STORAGE[c['storage']]};" for c in columns if c["storage"]
    ]
    return out


def _comments(kind: str, qualified: str, relation: Catalog) -> list[str]:
    out = []
    if relation["comment"] is not None:
        out.append(f"COMMENT ON {kind} {qualified} IS {_literal(relation['comment'])};")
    out += [
        f"COMMENT ON COLUMN {qualified}.{c['name']} IS {_literal(c['comment'])};" for c in relation["columns"] if c["comment"] is not None
    ]
    return out


def _literal(text: str) -> str:
    return sql.Literal(text).as_string()


# -- servers without lz4 --------------------------------------------------------------------


def server_has_lz4(conn: psycopg.Connection) -> bool:
    """Whether the server was built with lz4: the migrations set it where it can, else keep
    the default compression, so the schema at head differs by that alone."""
    try:
        with conn.transaction():
            conn.execute("SET LOCAL default_toast_compression = 'lz4'")
    except psycopg.errors.InvalidParameterValue:
        return False
    return True


def without_lz4(text: str) -> str:
    """schema.sql as the migrations build it on a server without lz4."""
    return re.sub(r" +COMPRESSION lz4", "", text)


def snapshot_sql(schema: str, *, lz4: bool = True) -> str:
    """schema.sql for `schema`, filled in as a migration is (and without lz4 if asked)."""
    text = SNAPSHOT.read_text("utf-8")
    return Migration(0, "schema", text if lz4 else without_lz4(text)).sql(schema)


# -- the schema at head -------------------------------------------------------------------


def head_catalog(dsn: str) -> Catalog:
    """The catalog setup() builds on a fresh schema of the server at `dsn` (then dropped)."""
    schema = f"lgpd_snapshot_{uuid.uuid4().hex[:12]}"
    try:
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema, max_size=1) as saver:
            saver.setup()
        with psycopg.connect(dsn) as conn:
            return describe(conn, schema)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def expected_text(dsn: str) -> tuple[str, bool]:
    """What schema.sql should hold, from the server at `dsn`, and whether it has lz4."""
    with psycopg.connect(dsn) as conn:
        lz4 = server_has_lz4(conn)
    return render(head_catalog(dsn)), lz4


def _test_server():  # -> pg_server.PgServer
    """The tests' server helper, from tests/ (or tests/support/ once the tests are layered)."""
    for folder in (ROOT / "tests" / "support", ROOT / "tests"):
        if (folder / "pg_server.py").exists():
            sys.path.insert(0, str(folder))
            break
    from pg_server import start_pg_server

    return start_pg_server()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not what the migrations give")
    parser.add_argument("--dsn", help="a PostgreSQL server to build the schema on (default: the tests' server)")
    parser.add_argument("--output", type=Path, default=SNAPSHOT, help=f"default: {SNAPSHOT.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    server = None if args.dsn else _test_server()
    try:
        generated, lz4 = expected_text(args.dsn or server.dsn)
    finally:
        if server is not None:
            server.stop()
    if args.check:
        current = args.output.read_text("utf-8") if args.output.exists() else ""
        if (current if lz4 else without_lz4(current)) != generated:
            diff = difflib.unified_diff(current.splitlines(), generated.splitlines(), str(args.output), "migrations", lineterm="")
            print("\n".join(diff), file=sys.stderr)
            print(f"{args.output} is not what the migrations give: run python tools/schema_snapshot.py", file=sys.stderr)
            return 1
        return 0
    if not lz4:
        print(
            "this server has no lz4, so the migrations leave the default compression: schema.sql shows the "
            "schema on a server with lz4; run with --dsn of one",
            file=sys.stderr,
        )
        return 2
    args.output.write_text(generated, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
