"""The checkpointer the Agent Server runs with: langgraph.json names `durable_checkpointer`.

The server enters this async context manager once per event loop at startup and closes it
at shutdown, so the saver's connection pool lives exactly as long as the server. It reads
the PostgreSQL URL from $DATABASE_URL (the variable `lgpd` reads too) and the schema from
$LGPD_SCHEMA (default `langgraph_durable`), and creates or upgrades that schema before the
server takes its first request (`setup()` is idempotent and safe for several workers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from langgraph_pg_durable import AsyncDurablePostgresSaver, ConfigError

DEFAULT_SCHEMA = "langgraph_durable"


@contextlib.asynccontextmanager
async def durable_checkpointer() -> AsyncIterator[AsyncDurablePostgresSaver]:
    """Our async saver on $DATABASE_URL, its schema set up, open for the server's lifetime."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        raise ConfigError("DATABASE_URL is not set: the Agent Server's checkpointer (checkpointer.py) needs a PostgreSQL URL")
    schema = os.environ.get("LGPD_SCHEMA", "").strip() or DEFAULT_SCHEMA
    async with AsyncDurablePostgresSaver.from_conn_string(url, schema=schema) as saver:
        await saver.setup()
        yield saver
