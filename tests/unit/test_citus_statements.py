"""Every statement the package sends keeps to the shapes Citus accepts on tables distributed
by thread_id (tests/support/citus_rules.py, from ../shared/notes/citus.md): no function in
an ON CONFLICT DO UPDATE, every table access of a one-thread statement tied to the thread at
its own level, and joins and correlated subqueries of the others on thread_id. Checked on
the parsed statements (PostgreSQL's own parser), without a server; tools/citus_trials.py
runs the same catalogue on a real cluster."""

from __future__ import annotations

import pytest
from citus_rules import distributed_accesses, function_body_statements, placeholders_to_params, problems, routed_call_problems
from pglast import parse_sql
from statement_catalogue import NO_TABLE, catalogue_covers, every_statement

from langgraph_pg_durable.sql import routed
from langgraph_pg_durable.sql.schema import migrations
from langgraph_pg_durable.sql.statements import Statements

CATALOGUE = every_statement("s")


STATEMENTS = sorted(name for name, entry in CATALOGUE.items() if not entry.call)
CALLS = sorted(name for name, entry in CATALOGUE.items() if entry.call)
# Each write function as the newest migration that makes it defines it (0008 made both,
# 0011 both again with the fencing token, 0014 lgpd_put_writes again): each such script
# from its first function on, oldest first, and the newest body of each function.
ROUTED_SCRIPTS = [
    text[text.index("CREATE OR REPLACE FUNCTION") :] for text in (m.sql("s") for m in migrations()) if "CREATE OR REPLACE FUNCTION" in text
]
BODIES = {name: body for script in ROUTED_SCRIPTS for name, body in function_body_statements(script).items()}
# Where each write function takes its thread (Citus routes a call by it).
DISTRIBUTION_POSITIONS = {
    "lgpd_put": [name for name, _ in routed.PUT_PARAMETERS].index("thread_id"),
    "lgpd_put_writes": [name for name, _ in routed.PUT_WRITES_PARAMETERS].index("thread_id"),
}


@pytest.mark.parametrize("name", STATEMENTS)
def test_each_statement_keeps_to_the_shapes_citus_accepts(name: str) -> None:
    entry = CATALOGUE[name]
    assert distributed_accesses(entry.sql, schema="s") > 0, f"{name}: no table found: the check would pass vacuously"
    assert problems(entry.sql, schema="s", anchors=entry.anchors) == [], name


@pytest.mark.parametrize("name", CALLS)
def test_each_write_call_goes_whole_to_the_worker_of_its_thread(name: str) -> None:
    assert routed_call_problems(CATALOGUE[name].sql, schema="s", functions=DISTRIBUTION_POSITIONS) == [], name


@pytest.mark.parametrize("function", sorted(BODIES))
def test_each_statement_in_a_write_function_touches_its_threads_shards_alone(function: str) -> None:
    """In the worker that holds the thread, each statement of the function runs on that
    worker's shards alone: every table access is tied to p_thread_id at its own level."""
    with_tables = [sql for sql in BODIES[function] if distributed_accesses(sql, schema="s") > 0]
    assert with_tables, f"{function}: no statement on a table: the check would pass vacuously"
    for sql in with_tables:
        assert problems(sql, schema="s", anchors=frozenset({"p_thread_id"}), variables=True) == [], sql


def test_every_write_function_is_distributed_with_its_signature() -> None:
    """distribute() makes each function the migration creates a distributed function: its
    signature there is the one the migration declares."""
    assert set(BODIES) == set(routed.FUNCTIONS)
    newest = {raw.stmt.funcname[-1].sval: raw.stmt for script in ROUTED_SCRIPTS for raw in parse_sql(script)}
    for name, statement in newest.items():
        types = tuple(_type_name(p.argType) for p in statement.parameters)
        assert types == routed.FUNCTIONS[name], name
        assert routed.DISTRIBUTION_ARGUMENT in [p.name for p in statement.parameters], name


def _type_name(type_name) -> str:  # type: ignore[no-untyped-def]
    names = [n.sval for n in type_name.names if n.sval != "pg_catalog"]
    base = {"int4": "integer", "int8": "bigint", "bool": "boolean"}.get(names[-1], names[-1])
    return base + "[]" * len(type_name.arrayBounds or ())


def test_the_catalogue_holds_every_statement_the_saver_renders() -> None:
    assert catalogue_covers() == [], "a Statements member no check covers: add it to tests/support/statement_catalogue.py"


def test_the_statements_without_a_table_have_none() -> None:
    s = Statements("s")
    for name in NO_TABLE:
        assert '"s".' not in getattr(s, name), name


# -- each rule can fail: the shapes that broke Citus on 742c13c ----------------------------


def test_a_function_in_on_conflict_do_update_is_refused() -> None:
    """742c13c's run_log upserts set `ended_at = now()`: refused on every put and put_writes."""
    sql = (
        'INSERT INTO "s".run_log AS r (thread_id, run_id, status) VALUES (%(thread_id)s, %(run_id)s, %(s)s) '
        "ON CONFLICT (thread_id, run_id) DO UPDATE SET ended_at = now(), status = EXCLUDED.status"
    )
    assert problems(sql, schema="s", anchors=frozenset({"thread_id"})) == [
        "volatile-on-conflict: statement: now() in ON CONFLICT DO UPDATE of run_log"
    ]
    fixed = sql.replace("now()", "EXCLUDED.ended_at")
    assert problems(fixed, schema="s", anchors=frozenset({"thread_id"})) == []
    with_keyword = sql.replace("now()", "current_timestamp")
    assert problems(with_keyword, schema="s", anchors=frozenset({"thread_id"})) != []


def test_a_subquery_reaching_the_thread_through_a_cte_column_is_refused() -> None:
    """742c13c's list_steps: its subqueries on checkpoint_writes and action_log named the
    thread as `p.thread_id`, a CTE's column ("complex joins are only supported when ...")."""
    sql = """WITH page AS MATERIALIZED (
        SELECT c.thread_id, c.checkpoint_id FROM "s".checkpoints c WHERE c.thread_id = %(thread_id)s LIMIT 5)
    SELECT p.checkpoint_id, (SELECT count(*) FROM "s".checkpoint_writes w
        WHERE w.thread_id = p.thread_id AND w.checkpoint_id = p.checkpoint_id) FROM page p"""
    assert problems(sql, schema="s", anchors=frozenset({"thread_id"})) == [
        "unanchored: statement, subquery: checkpoint_writes w is not tied to the thread at its own level (w.thread_id = %(thread_id)s)"
    ]
    fixed = sql.replace("w.thread_id = p.thread_id", "w.thread_id = %(thread_id)s")
    assert problems(fixed, schema="s", anchors=frozenset({"thread_id"})) == []
    # Over any threads, the same subquery is refused for the CTE it refers to.
    across = sql.replace("WHERE c.thread_id = %(thread_id)s", "")
    assert problems(across, schema="s", anchors=None) == [
        "join-off-thread: statement, subquery: a subquery over checkpoint_writes refers to p, "
        "which is not a distributed table it is joined to on thread_id"
    ]


def test_a_data_modifying_cte_anchored_only_through_another_cte_is_refused() -> None:
    """742c13c's prune: only its first CTE named the threads; the deletes joined it, and on
    Citus each ran on all 32 shards for one thread (271 commands)."""
    sql = """WITH doomed AS MATERIALIZED (
        SELECT c.thread_id, c.checkpoint_id FROM "s".checkpoints c WHERE c.thread_id = ANY(%(thread_ids)s)),
    gone_writes AS (
        DELETE FROM "s".checkpoint_writes w USING doomed d
        WHERE w.thread_id = d.thread_id AND w.checkpoint_id = d.checkpoint_id)
    DELETE FROM "s".checkpoints c USING doomed d
    WHERE c.thread_id = ANY(%(thread_ids)s) AND c.thread_id = d.thread_id AND c.checkpoint_id = d.checkpoint_id"""
    assert problems(sql, schema="s", anchors=frozenset({"thread_ids"})) == [
        "unanchored: statement, CTE gone_writes: checkpoint_writes w is not tied to the thread at its own level "
        "(w.thread_id = %(thread_ids)s)"
    ]
    fixed = sql.replace("WHERE w.thread_id = d.thread_id", "WHERE w.thread_id = ANY(%(thread_ids)s) AND w.thread_id = d.thread_id")
    assert problems(fixed, schema="s", anchors=frozenset({"thread_ids"})) == []


def test_an_anchor_under_or_or_on_another_column_does_not_count() -> None:
    anchors = frozenset({"thread_id"})
    base = 'SELECT 1 FROM "s".checkpoints c WHERE '
    assert problems(base + "c.thread_id = %(thread_id)s", schema="s", anchors=anchors) == []
    assert problems(base + "%(thread_id)s = c.thread_id AND c.step > 1", schema="s", anchors=anchors) == []
    assert problems(base + "(c.thread_id = %(thread_id)s OR c.step > 1)", schema="s", anchors=anchors) != []
    assert problems(base + "c.checkpoint_id = %(thread_id)s", schema="s", anchors=anchors) != []
    assert problems(base + "c.thread_id = %(other)s", schema="s", anchors=frozenset({"other"})) == []


def test_an_insert_is_anchored_by_the_thread_it_inserts() -> None:
    anchors = frozenset({"thread_id"})
    insert = 'INSERT INTO "s".run_log (thread_id, run_id, status) '
    assert problems(insert + "VALUES (%(thread_id)s, 'r', 'done')", schema="s", anchors=anchors) == []
    assert problems(insert + "SELECT %(thread_id)s::text, 'r', 'done'", schema="s", anchors=anchors) == []
    assert problems(insert + "VALUES ('t', %(thread_id)s, 'done')", schema="s", anchors=anchors) != []
    # A co-located INSERT ... SELECT: the thread of the table it reads, that table anchored.
    copied = insert + 'SELECT k.thread_id, k.run_id, k.status FROM "s".run_log k WHERE k.thread_id = %(thread_id)s'
    assert problems(copied, schema="s", anchors=anchors) == []
    loose = insert + 'SELECT k.thread_id, k.run_id, k.status FROM "s".run_log k WHERE k.run_id = %(thread_id)s'
    assert problems(loose, schema="s", anchors=anchors) == [
        "unanchored: statement, rows inserted into run_log: run_log k is not tied to the thread at its own level "
        "(k.thread_id = %(thread_id)s)"
    ]
    through_cte = "WITH d AS (SELECT %(thread_id)s AS thread_id) " + insert + "SELECT d.thread_id, 'r', 'done' FROM d"
    assert problems(through_cte, schema="s", anchors=anchors) != []


def test_placeholders_become_numbered_parameters_one_per_name() -> None:
    text, names = placeholders_to_params("SELECT %(a)s, %(b)b::int[], %(a)s")
    assert text == "SELECT $1, $2::int[], $1"
    assert names == {1: "a", 2: "b"}
