"""The frameworks corpus: popular LangGraph frameworks, unchanged, driven by a scripted chat
model (`scripted.py`), each scenario run on InMemorySaver and on one of our savers and
compared call by call (`corpus.py`). Every test runs with the sync and the async saver."""

from __future__ import annotations

import pytest
from corpus import Check, Run, Scenario, compare


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def check(mode: str, pg_dsn: str, schema_name: str) -> Check:
    """`await check(scenario)`: run it on InMemorySaver and on our `mode` saver, compare."""

    async def run(scenario: Scenario) -> Run:
        return await compare(scenario, mode, pg_dsn, schema_name)

    return run
