"""pytest plugin for `tools/langgraph_suite.py`: runs exactly the tests that take a checkpointer.

Keeps the tests whose fixtures include `sync_checkpointer` or `async_checkpointer`
(directly or through another fixture) and deselects the rest of the files it is
given (those use no checkpointer, or only LangGraph's in-memory ones); skips and
xfails are LangGraph's own. At the end it writes the outcome counts as JSON to
`$LGPD_SUITE_COUNTS`, with the node ids of the tests that failed or errored.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

CHECKPOINTER_FIXTURES = frozenset({"sync_checkpointer", "async_checkpointer"})
_counts: Counter[str] = Counter()
_failures: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        (kept if names & CHECKPOINTER_FIXTURES else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    _counts["collected"] = len(session.items)  # after -k or -m, if given


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if (
        report.when == "call"
        or (report.when == "setup" and report.outcome != "passed")
        or (report.when == "teardown" and report.outcome == "failed")
    ):
        if hasattr(report, "wasxfail"):
            outcome = "xpassed" if report.passed else "xfailed"
        elif report.when == "teardown":
            outcome = "error"
        elif report.when == "setup" and report.failed:
            outcome = "error"
        else:
            outcome = report.outcome
        _counts[outcome] += 1
        if outcome in ("failed", "error") and report.nodeid not in _failures:
            _failures.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("LGPD_SUITE_COUNTS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({**_counts, "exitstatus": int(exitstatus), "failures": _failures}, out)
