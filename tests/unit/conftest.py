"""Unit tests run without servers: asking for one is a mistake in the test, so it fails loudly."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pg_server() -> None:
    pytest.fail(
        "unit tests run without servers: this test asks for PostgreSQL (pg_server, pg_dsn or schema_name); move it to tests/integration/",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def s3_server() -> None:
    pytest.fail("unit tests run without servers: this test asks for S3 (s3_server); move it to tests/integration/", pytrace=False)
