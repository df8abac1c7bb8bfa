"""The shapes of statement Citus accepts on tables distributed by `thread_id`
(`../shared/notes/citus.md`), checked on the parsed statement text, without a server.

A statement is parsed by PostgreSQL's own parser (libpg_query, through pglast), after its
psycopg placeholders (`%(name)s`, `%(name)b`) become `$n`, and walked one query level at a
time: the statement, each CTE, each subquery. The rules:

- `volatile-on-conflict`: no function call in `ON CONFLICT ... DO UPDATE` (SET or WHERE).
  Citus refuses any that is not IMMUTABLE there ("functions used in the DO UPDATE SET clause
  of INSERTs on distributed tables must be marked IMMUTABLE"); take the value from EXCLUDED.
- `unanchored`: in a statement of given threads (its `anchors`: the parameters that carry
  them), every access to a distributed table (FROM, JOIN, USING, the target of an UPDATE or
  DELETE, the target of an INSERT) names the thread at its own level: `alias.thread_id =
  %(thread_id)s` (or `= ANY(%(thread_ids)s)`) among the level's AND-ed conditions, or, for an
  INSERT, the parameter as the inserted thread_id, or the thread_id of a distributed table
  its SELECT reads (a co-located INSERT ... SELECT; that table is then checked at the
  SELECT's level like any other). A table that reaches the thread only
  through another table, a CTE or an outer query is not anchored: Citus plans each CTE and
  subquery on its own, so such an access runs on every shard, or is refused as a "complex
  join" when the thread comes from a CTE's column.
- `join-off-thread`: in a statement over any threads, a distributed table is joined to the
  other relations of its level (tables, CTEs, subqueries, functions) on `a.thread_id =
  b.thread_id`, and a subquery over a distributed table that refers to an outer level does
  so through the thread_id of a distributed table there, never through a CTE's or a
  subquery's column (Citus 13.2 joins a CTE to a table in FROM, but refuses such a
  correlated subquery as a "complex join").

`problems()` returns what breaks them, each naming the table and its alias.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pglast import ast, parse_sql
from pglast.parser import ParseError
from pglast.enums.nodes import OnConflictAction
from pglast.enums.parsenodes import A_Expr_Kind
from pglast.enums.primnodes import BoolExprType

from langgraph_pg_durable.sql.distribute import DISTRIBUTED_TABLES

# The views over the distributed tables (schema.sql): a read of one reads its table.
VIEWS = {"runs": "run_log", "actions": "action_log", "action_rows": "action_log"}
DISTRIBUTED = frozenset(DISTRIBUTED_TABLES) | frozenset(VIEWS)
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]")
_STATEMENTS = (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)


@dataclass
class _Access:
    """One distributed table read or written at a level, under `alias`."""

    table: str
    alias: str
    inserted: ast.Node | None = None  # an INSERT target: the expression inserted as thread_id
    insert_rows: list[ast.Node] = field(default_factory=list)
    insert_from: set[str] = field(default_factory=set)  # the distributed tables an INSERT's SELECT reads, by alias


@dataclass
class _Level:
    """One query level: its distributed tables, the other relations it names (CTEs,
    subqueries), its AND-ed conditions, and the level it is nested in."""

    where: str
    outer: _Level | None
    accesses: list[_Access] = field(default_factory=list)
    others: set[str] = field(default_factory=set)  # CTEs, subqueries and functions in its FROM
    ctes: set[str] = field(default_factory=set)
    conjuncts: list[ast.Node] = field(default_factory=list)

    def defines(self, alias: str) -> bool:
        return alias in self.others or alias in self.ctes or any(a.alias == alias for a in self.accesses)


def placeholders_to_params(sql: str) -> tuple[str, dict[int, str]]:
    """The statement with `$n` for each psycopg placeholder (one n per name), and the names."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    text = _PLACEHOLDER.sub(number, sql)
    return text, {n: name for name, n in numbers.items()}


def _nodes(value: Any) -> Iterator[ast.Node]:
    if isinstance(value, ast.Node):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _nodes(item)


def _children(node: ast.Node) -> Iterator[ast.Node]:
    for name in type(node).__slots__:
        yield from _nodes(getattr(node, name, None))


def _and_terms(node: ast.Node | None) -> list[ast.Node]:
    if node is None:
        return []
    if isinstance(node, ast.BoolExpr) and node.boolop == BoolExprType.AND_EXPR:
        return [term for arg in node.args for term in _and_terms(arg)]
    return [node]


def _uncast(node: Any) -> Any:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return node


def _column(node: Any) -> tuple[str, ...] | None:
    """A column reference's names (`('c', 'thread_id')`), else None."""
    node = _uncast(node)
    if isinstance(node, ast.ColumnRef) and all(isinstance(f, ast.String) for f in node.fields):
        return tuple(f.sval for f in node.fields)
    return None


class _Walk:
    def __init__(self, schema: str, params: dict[int, str], anchors: frozenset[str] | None) -> None:
        self.schema = schema
        self.params = params
        self.anchors = anchors
        self.found: list[str] = []

    # -- levels ------------------------------------------------------------------------

    def statement(self, node: ast.Node, outer: _Level | None, where: str) -> None:
        """Check one query level, then the levels nested in it."""
        level = _Level(where, outer)
        nested: list[tuple[ast.Node, str]] = []  # (statement, where) of subqueries and CTEs
        expressions: list[ast.Node] = []
        with_clause = getattr(node, "withClause", None)
        if with_clause is not None:
            for cte in with_clause.ctes:
                level.ctes.add(cte.ctename)
                nested.append((cte.ctequery, f"{where}, CTE {cte.ctename}"))
        if isinstance(node, ast.SelectStmt) and node.op != 0:  # UNION / EXCEPT / INTERSECT
            for branch in (node.larg, node.rarg):
                self.statement(branch, outer if with_clause is None else level, where)
            for sub, sub_where in nested:
                self.statement(sub, level, sub_where)
            return
        if isinstance(node, ast.SelectStmt):
            for item in node.fromClause or ():
                self.from_item(item, level, nested, where)
            level.conjuncts += _and_terms(node.whereClause)
            expressions += [*_nodes(node.targetList), *_nodes(node.whereClause), *_nodes(node.havingClause)]
            expressions += [*_nodes(node.valuesLists), *_nodes(node.sortClause), *_nodes(node.groupClause)]
            expressions += [*_nodes(node.limitCount), *_nodes(node.limitOffset)]
        elif isinstance(node, ast.InsertStmt):
            self.insert(node, level, nested, where, expressions)
        elif isinstance(node, ast.UpdateStmt):
            self.target(node.relation, level)
            for item in node.fromClause or ():
                self.from_item(item, level, nested, where)
            level.conjuncts += _and_terms(node.whereClause)
            expressions += [*_nodes(node.targetList), *_nodes(node.whereClause)]
        elif isinstance(node, ast.DeleteStmt):
            self.target(node.relation, level)
            for item in node.usingClause or ():
                self.from_item(item, level, nested, where)
            level.conjuncts += _and_terms(node.whereClause)
            expressions += [*_nodes(node.whereClause)]
        for expression in expressions:
            for sub in self.sublinks(expression):
                nested.append((sub, f"{where}, subquery"))
        self.check(level)
        for sub, sub_where in nested:
            self.statement(sub, level, sub_where)

    def insert(
        self, node: ast.InsertStmt, level: _Level, nested: list[tuple[ast.Node, str]], where: str, expressions: list[ast.Node]
    ) -> None:
        relation = node.relation
        alias = relation.alias.aliasname if relation.alias else relation.relname
        if self.distributed(relation):
            columns = [target.name for target in node.cols or ()]
            rows = self.inserted_rows(node.selectStmt, columns.index("thread_id")) if "thread_id" in columns else []
            level.accesses.append(_Access(relation.relname, alias, insert_rows=rows, insert_from=self.read_by(node.selectStmt)))
        if node.selectStmt is not None:
            nested.append((node.selectStmt, f"{where}, rows inserted into {relation.relname}"))
        conflict = node.onConflictClause
        if conflict is not None and conflict.action == OnConflictAction.ONCONFLICT_UPDATE:
            for call in self.calls([*_nodes(conflict.targetList), *_nodes(conflict.whereClause)]):
                self.found.append(f"volatile-on-conflict: {where}: {call} in ON CONFLICT DO UPDATE of {relation.relname}")
            expressions += [*_nodes(conflict.targetList), *_nodes(conflict.whereClause)]

    def read_by(self, select: Any) -> set[str]:
        """The aliases of the distributed tables in a SELECT's own FROM (joins included)."""
        found: set[str] = set()
        items = list(select.fromClause or ()) if isinstance(select, ast.SelectStmt) else []
        while items:
            item = items.pop()
            if isinstance(item, ast.JoinExpr):
                items += [item.larg, item.rarg]
            elif isinstance(item, ast.RangeVar) and self.distributed(item):
                found.add(item.alias.aliasname if item.alias else item.relname)
        return found

    def inserted_rows(self, select: Any, index: int) -> list[ast.Node]:
        """The expressions an INSERT's rows take as thread_id (one per VALUES row or UNION branch)."""
        if not isinstance(select, ast.SelectStmt):
            return []
        if select.op != 0:
            return self.inserted_rows(select.larg, index) + self.inserted_rows(select.rarg, index)
        if select.valuesLists:
            return [row[index] for row in select.valuesLists]
        return [select.targetList[index].val]

    def from_item(self, item: ast.Node, level: _Level, nested: list[tuple[ast.Node, str]], where: str) -> None:
        if isinstance(item, ast.RangeVar):
            alias = item.alias.aliasname if item.alias else item.relname
            if self.distributed(item):
                level.accesses.append(_Access(VIEWS.get(item.relname, item.relname), alias))
            else:
                level.others.add(alias)
        elif isinstance(item, ast.JoinExpr):
            self.from_item(item.larg, level, nested, where)
            self.from_item(item.rarg, level, nested, where)
            level.conjuncts += _and_terms(item.quals)
            for sub in self.sublinks(item.quals):
                nested.append((sub, f"{where}, subquery"))
        elif isinstance(item, ast.RangeSubselect):
            name = item.alias.aliasname if item.alias else "(subquery)"
            level.others.add(name)
            nested.append((item.subquery, f"{where}, subquery {name}"))
        elif isinstance(item, ast.RangeFunction):
            if item.alias is not None:
                level.others.add(item.alias.aliasname)
            for sub in self.sublinks(item.functions):
                nested.append((sub, f"{where}, subquery"))
        else:
            raise AssertionError(f"{where}: a FROM item this check does not know: {type(item).__name__}")

    def target(self, relation: ast.RangeVar, level: _Level) -> None:
        alias = relation.alias.aliasname if relation.alias else relation.relname
        if self.distributed(relation):
            level.accesses.append(_Access(relation.relname, alias))

    def distributed(self, relation: ast.RangeVar) -> bool:
        return relation.schemaname == self.schema and relation.relname in DISTRIBUTED

    # -- expressions -------------------------------------------------------------------

    def sublinks(self, node: Any) -> Iterator[ast.Node]:
        """The statements of the subqueries in an expression (not inside those)."""
        for child in _nodes(node):
            if isinstance(child, ast.SubLink):
                yield child.subselect
                yield from self.sublinks(child.testexpr)
            elif not isinstance(child, _STATEMENTS):
                for grandchild in _children(child):
                    yield from self.sublinks(grandchild)

    def calls(self, nodes: list[ast.Node]) -> Iterator[str]:
        """Function calls in an expression, subqueries included."""
        for node in nodes:
            if isinstance(node, ast.FuncCall):
                yield ".".join(n.sval for n in node.funcname) + "()"
            elif isinstance(node, ast.SQLValueFunction):
                yield node.op.name.removeprefix("SVFOP_")
            yield from self.calls(list(_children(node)))

    def is_anchor(self, node: Any) -> bool:
        """A parameter naming the threads, or (in a function's body) a variable that does."""
        node = _uncast(node)
        if self.anchors is None:
            return False
        if isinstance(node, ast.ParamRef):
            return self.params.get(node.number) in self.anchors
        column = _column(node)
        return column is not None and len(column) == 1 and column[0] in self.anchors

    def anchored(self, access: _Access, level: _Level) -> bool:
        if access.insert_rows:
            read = {(alias, "thread_id") for alias in access.insert_from}
            return all(self.is_anchor(row) or _column(row) in read for row in access.insert_rows)
        own = ("thread_id",) if len(level.accesses) == 1 and not level.others else None
        for term in level.conjuncts:
            if not isinstance(term, ast.A_Expr) or [n.sval for n in term.name] != ["="]:
                continue
            if term.kind not in (A_Expr_Kind.AEXPR_OP, A_Expr_Kind.AEXPR_OP_ANY):
                continue
            sides = [(term.lexpr, term.rexpr)]
            if term.kind == A_Expr_Kind.AEXPR_OP:
                sides.append((term.rexpr, term.lexpr))
            for column, value in sides:
                if _column(column) in ((access.alias, "thread_id"), own) and self.is_anchor(value):
                    return True
        return False

    def joined_on_thread(self, access: _Access, level: _Level) -> set[str]:
        """The aliases `access` is joined to by thread_id equality among the level's conditions."""
        partners = set()
        for term in level.conjuncts:
            if isinstance(term, ast.A_Expr) and term.kind == A_Expr_Kind.AEXPR_OP and [n.sval for n in term.name] == ["="]:
                left, right = _column(term.lexpr), _column(term.rexpr)
                if left and right and left[-1] == right[-1] == "thread_id" and len(left) == len(right) == 2:
                    if left[0] == access.alias:
                        partners.add(right[0])
                    elif right[0] == access.alias:
                        partners.add(left[0])
        return partners

    def outer_references(self, level: _Level) -> set[str]:
        """The aliases of enclosing levels this level's conditions name."""
        names = set()
        for term in level.conjuncts:
            for node in [term, *self.descendants(term)]:
                column = _column(node)
                if column and len(column) == 2 and not level.defines(column[0]):
                    names.add(column[0])
        return names

    def descendants(self, node: ast.Node) -> Iterator[ast.Node]:
        for child in _children(node):
            if isinstance(child, _STATEMENTS):
                continue
            yield child
            yield from self.descendants(child)

    # -- the rules ---------------------------------------------------------------------

    def check(self, level: _Level) -> None:
        if not level.accesses:
            return
        if self.anchors is not None:
            for access in level.accesses:
                if not self.anchored(access, level):
                    wanted = " or ".join(f"%({name})s" for name in sorted(self.anchors))
                    self.found.append(
                        f"unanchored: {level.where}: {access.table} {access.alias} is not tied to the thread at its own level "
                        f"({access.alias}.thread_id = {wanted})"
                    )
            return
        if len(level.accesses) + len(level.others) > 1:
            for access in level.accesses:
                if not self.joined_on_thread(access, level) & ({a.alias for a in level.accesses} | level.others):
                    self.found.append(f"join-off-thread: {level.where}: {access.table} {access.alias} is not joined on thread_id")
        for name in self.outer_references(level):
            scope = level.outer
            while scope is not None and not scope.defines(name):
                scope = scope.outer
            tied = any(name in self.joined_on_thread(access, level) for access in level.accesses)
            outer_is_table = scope is not None and any(a.alias == name for a in scope.accesses)
            if not (tied and outer_is_table):
                self.found.append(
                    f"join-off-thread: {level.where}: a subquery over {level.accesses[0].table} refers to {name}, "
                    "which is not a distributed table it is joined to on thread_id"
                )


def problems(sql: str, *, schema: str, anchors: frozenset[str] | None, variables: bool = False) -> list[str]:
    """What in `sql` breaks the rules (see the module's docstring); `anchors`: the
    parameters that name the statement's threads, or None for a statement over any threads;
    `variables`: the anchors are a function's variables (`p_thread_id`), not placeholders."""
    text, params = placeholders_to_params(sql)
    if anchors is not None and not variables:
        missing = anchors - set(params.values())
        assert not missing, f"the statement has no parameter {sorted(missing)}"
    walk = _Walk(schema, params, anchors)
    for raw in parse_sql(text):
        walk.statement(raw.stmt, None, "statement")
    return walk.found


def distributed_accesses(sql: str, *, schema: str) -> int:
    """How many distributed-table accesses the statement has (a check that finds none passes vacuously)."""
    text, params = placeholders_to_params(sql)
    walk = _Walk(schema, params, frozenset())
    for raw in parse_sql(text):
        walk.statement(raw.stmt, None, "statement")
    return sum(1 for message in walk.found if message.startswith("unanchored"))


def routed_call_problems(sql: str, *, schema: str, functions: dict[str, int]) -> list[str]:
    """What keeps Citus from sending a write function's call whole to one worker: it must be
    a bare `SELECT schema.f(...)` of one of `functions` (name -> the position of its
    distribution argument), whose distribution argument is the `thread_id` placeholder."""
    text, params = placeholders_to_params(sql)
    (raw,) = parse_sql(text)
    node = raw.stmt
    if not isinstance(node, ast.SelectStmt) or node.fromClause or node.whereClause or node.withClause or len(node.targetList) != 1:
        return [f"not a bare SELECT of one function: {sql[:80]}"]
    call = node.targetList[0].val
    if not isinstance(call, ast.FuncCall):
        return [f"not a function call: {sql[:80]}"]
    names = [n.sval for n in call.funcname]
    if len(names) != 2 or names[0] != schema or names[1] not in functions:
        return [f"not one of the schema's write functions: {'.'.join(names)}"]
    position = functions[names[1]]
    argument = _uncast(call.args[position]) if call.args and len(call.args) > position else None
    if not (isinstance(argument, ast.ParamRef) and params.get(argument.number) == "thread_id"):
        return [f"{names[1]}: its distribution argument (position {position}) is not %(thread_id)s"]
    return []


def _expressions(node: Any) -> Iterator[str]:
    """The text of every expression and statement in a parsed PL/pgSQL function (pglast's JSON)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "PLpgSQL_expr":
                yield value["query"]
            yield from _expressions(value)
    elif isinstance(node, list):
        for value in node:
            yield from _expressions(value)


def function_body_statements(migration_sql: str) -> dict[str, list[str]]:
    """The SQL of every statement and expression in each PL/pgSQL function the script
    creates, by function name (expressions as `SELECT expr`)."""
    from pglast import parse_plpgsql

    out: dict[str, list[str]] = {}
    for raw, function in zip(parse_sql(migration_sql), parse_plpgsql(migration_sql)):
        name = raw.stmt.funcname[-1].sval
        statements = []
        for text in _expressions(function):
            try:
                parse_sql(text)
                statements.append(text)
            except ParseError:  # an expression: an IF's condition, an assignment (`x := value`)
                statements.append(f"SELECT {text.split(':=', 1)[-1]}")
        out[name] = statements
    return out
