"""Run LangGraph's own checkpointer tests against our savers, on a real PostgreSQL server.

Takes the sdist of the installed langgraph from the package index, extracts its
`tests/`, makes our savers the implementation of its `sync_checkpointer` and
`async_checkpointer` fixtures (see `langgraph_suite_fixtures.py`), and runs every
test that takes one of them (see `langgraph_suite_plugin.py`), once per flavour (see FLAVOURS):

    python tools/langgraph_suite.py                  # every flavour, every test
    python tools/langgraph_suite.py --pool docs      # the official docs' pool only
    python tools/langgraph_suite.py -- -k time_travel  # extra pytest arguments

Nothing of those tests is skipped, deselected or xfailed by us. A test that fails is
run once more, alone (a few of LangGraph's tests time a stream to a tenth of a second,
which a stall of this 2-core VM breaks: `test_stream_buffering_single_node` failed so in
two of the last three CI runs, and passed alone each time): it counts as passed only if
that run passes, and the summary names it. More than RERUN_AT_MOST failures are not run
again. Exits 1 on any failure or error that remains, or when no test ran. `$LANGGRAPH_PG_DURABLE_TEST_DSN` names a
server to use; otherwise one is started as for our own tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from importlib.metadata import version
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
# Per flavour: the pool, the serializer, and LangGraph's msgpack mode. The docs flavour
# runs our savers exactly as a user gets them: their own default serializer, LangGraph's
# default (non-strict) mode; the tuple flavour gives our saver LangGraph's permissive
# serializer, as the official fixture's saver has. The routed flavour has every write a
# call of the schema's write functions, as a saver on Citus sends them (routed_writes=True),
# under LangGraph's strict mode (LANGGRAPH_STRICT_MSGPACK=true: our serializer then keeps
# the allowlist alone, and LangGraph adds each graph's state types to it).
FLAVOURS: dict[str, dict[str, str]] = {
    "docs": {"LGPD_SUITE_POOL": "docs", "LGPD_SUITE_SERDE": "default", "LANGGRAPH_STRICT_MSGPACK": "false"},
    "tuple": {"LGPD_SUITE_POOL": "tuple", "LGPD_SUITE_SERDE": "langgraph", "LANGGRAPH_STRICT_MSGPACK": "false"},
    "routed": {
        "LGPD_SUITE_POOL": "docs",
        "LGPD_SUITE_SERDE": "default",
        "LANGGRAPH_STRICT_MSGPACK": "true",
        "LGPD_SUITE_ROUTED_WRITES": "true",
    },
}
FIXTURE_NAMES = ("sync_checkpointer", "async_checkpointer")
RERUN_AT_MOST = 3  # failures of one flavour run once more, alone; more than this: none
CONFTEST_HOOK = (
    "\n\n# Added by langgraph-pg-durable's tools/langgraph_suite.py: our savers are the checkpointers.\n"
    "from langgraph_suite_fixtures import async_checkpointer, sync_checkpointer  # noqa: E402,F401\n"
)


def fetch_sdist(package_version: str, cache: Path) -> Path:
    """The langgraph sdist of that version, downloaded once into `cache`."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"langgraph-{package_version}.tar.gz"))
    if found:
        return found[0]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"langgraph=={package_version}",
            "-d",
            str(cache),
        ],
        check=True,
    )
    found = sorted(cache.glob(f"langgraph-{package_version}.tar.gz"))
    if not found:
        raise SystemExit(f"pip download gave no langgraph-{package_version}.tar.gz in {cache}")
    return found[0]


def extract_tests(sdist: Path, work: Path) -> Path:
    """The sdist's `tests/` and `pyproject.toml` (its pytest options) in a fresh `work`."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/", 1)[0]
        members = [m for m in archive.getmembers() if m.name.startswith(f"{top}/tests/") or m.name == f"{top}/pyproject.toml"]
        archive.extractall(work, members=members, filter="data")
    root = work / top
    conftest = root / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text("utf-8") + CONFTEST_HOOK, "utf-8")
    return root


def test_files(root: Path) -> list[str]:
    """The test modules that name a checkpointer fixture (the plugin keeps their tests that take one)."""
    return sorted(
        str(path.relative_to(root))
        for path in (root / "tests").glob("test_*.py")
        if any(name in path.read_text("utf-8") for name in FIXTURE_NAMES)
    )


def run_flavour(root: Path, files: list[str], dsn: str, flavour: str, extra: list[str]) -> dict:
    """One pytest run of the files with one pool flavour, its failures run once more alone
    (see the module); its outcome counts, with `passed_alone`: the tests that failed, then
    passed alone."""
    counts = _pytest(root, [*files, *extra], dsn, flavour)
    failures = counts.get("failures", [])
    counts["passed_alone"] = []
    if failures and len(failures) <= RERUN_AT_MOST and counts.get("exitstatus") == 1:
        again = _pytest(root, failures, dsn, flavour)
        counts["seconds"] += again["seconds"]
        if again.get("exitstatus") == 0 and again.get("passed", 0) == len(failures):
            counts["passed_alone"] = failures
            counts["passed"] = counts.get("passed", 0) + len(failures)
            counts["failed"], counts["error"], counts["exitstatus"] = 0, 0, 0
    return counts


def _pytest(root: Path, arguments: list[str], dsn: str, flavour: str) -> dict:
    """One pytest run with one pool flavour; its outcome counts (the plugin's)."""
    counts_file = Path(tempfile.mkstemp(prefix=f"lgpd-suite-{flavour}-", suffix=".json")[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TOOLS), os.environ.get("PYTHONPATH")])),
        "NO_DOCKER": "true",  # LangGraph's other fixtures then use in-memory stores and caches
        "LGPD_SUITE_DSN": dsn,
        **FLAVOURS[flavour],
        "LGPD_SUITE_COUNTS": str(counts_file),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "langgraph_suite_plugin",
        "-p",
        "no:asyncio",  # LangGraph's tests run on anyio; pytest-asyncio is ours, not theirs
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "-o",
        "console_output_style=classic",
        *arguments,
    ]
    print(f"langgraph suite ({flavour} pool, {FLAVOURS[flavour]}): {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, cwd=root, env=env)
    seconds = time.perf_counter() - start
    try:
        counts = json.loads(counts_file.read_text("utf-8") or "{}")
    finally:
        counts_file.unlink(missing_ok=True)
    counts["seconds"] = seconds
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", choices=(*FLAVOURS, "all"), default="all", help="the flavour to run (default: each)")
    parser.add_argument(
        "--cache",
        type=Path,
        default=ROOT / ".langgraph-suite",
        help="where the sdist is kept and its tests extracted (default: %(default)s)",
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args(argv)

    langgraph_version = version("langgraph")
    sdist = fetch_sdist(langgraph_version, args.cache)
    root = extract_tests(sdist, args.cache / "work")
    files = test_files(root)

    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from pg_server import start_pg_server  # noqa: E402 - our tests' server helper

    server = start_pg_server()
    database = f"lgpd_suite_{uuid.uuid4().hex[:8]}"
    try:
        dsn = server.create_database(database)
        flavours = tuple(FLAVOURS) if args.pool == "all" else (args.pool,)
        results = {flavour: run_flavour(root, files, dsn, flavour, args.pytest_args) for flavour in flavours}
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        server.stop()

    failed = False
    print(f"\nLangGraph {langgraph_version}'s checkpointer tests against langgraph-pg-durable:")
    for flavour, counts in results.items():
        bad = counts.get("failed", 0) + counts.get("error", 0)
        ran = counts.get("passed", 0) + bad
        print(
            f"  {flavour} pool: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
            f"{counts.get('error', 0)} errors, {counts.get('skipped', 0)} skipped by LangGraph, "
            f"{counts.get('xfailed', 0)} xfailed by LangGraph, of {counts.get('collected', 0)} "
            f"({counts['seconds']:.0f} s)"
        )
        for nodeid in counts.get("passed_alone", []):
            print(f"    failed, then passed run alone: {nodeid}")
        failed |= bad > 0 or ran == 0 or counts.get("exitstatus", 1) != 0
    passed = sum(c.get("passed", 0) for c in results.values())
    failures = sum(c.get("failed", 0) + c.get("error", 0) for c in results.values())
    print(f"langgraph-suite: {passed} passed, {failures} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
