"""The core stays sans-I/O: nothing it imports, directly or through the package, is psycopg,
psycopg_pool, obstore or asyncio, and nothing in it takes a lock."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "langgraph_pg_durable"
FORBIDDEN = ("psycopg", "psycopg_pool", "obstore", "asyncio")
LOCKS = ("Lock(", "RLock(", "Condition(", "Semaphore(", "Event(")


def _imports(path: Path) -> list[str]:
    """Absolute module names a file imports (relative imports resolved within the package)."""
    module = ".".join(("langgraph_pg_durable", *path.relative_to(PACKAGE).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
                # `from . import lists` imports a module too.
                out += [f"{base}.{alias.name}" for alias in node.names]
            out.append(base)
    return out


def _file_of(module: str) -> Path | None:
    relative = Path(*module.split(".")[1:])
    for candidate in (PACKAGE / relative.with_suffix(".py"), PACKAGE / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _closure(start: list[Path]) -> dict[Path, list[str]]:
    """Every package file reachable from `start` by imports, with its imports."""
    seen: dict[Path, list[str]] = {}
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = _imports(path)
        for name in seen[path]:
            if name.startswith("langgraph_pg_durable"):
                parts = name.split(".")
                for i in range(2, len(parts) + 1):  # a package's __init__ runs too
                    found = _file_of(".".join(parts[:i]))
                    if found is not None:
                        todo.append(found)
    return seen


def test_the_core_and_what_it_imports_never_reach_psycopg_obstore_or_locks() -> None:
    core = sorted((PACKAGE / "core").glob("*.py"))
    assert len(core) >= 10
    reached = _closure(core)
    offenders = {
        str(path.relative_to(PACKAGE)): name for path, names in reached.items() for name in names if name.split(".")[0] in FORBIDDEN
    }
    assert offenders == {}
    # The root package (which imports the savers) is outside the closure: only modules.
    assert PACKAGE / "__init__.py" not in reached
    # A pure module holds no lock (safe_serde keeps a thread-local, which is not one).
    locked = {str(path.relative_to(PACKAGE)) for path in reached if any(lock in path.read_text() for lock in LOCKS)}
    assert locked == set()


def test_the_closure_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The check above could pass by reading nothing: it must flag psycopg where it is."""
    reached = _closure([PACKAGE / "adapters.py"])
    assert any(name.split(".")[0] == "psycopg" for name in reached[PACKAGE / "adapters.py"])
