"""Which database and schema a command works on, and the saver it opens there.

The connection string is `--dsn`, else `$DATABASE_URL`, else the embedded server the
quickstart uses (./.langgraph-pg-durable/pgdata), so a newcomer's first `lgpd threads`
lists the quickstart's threads. The object store (for offloaded values and `gc`) is
`--object-store`, else `$OBJECT_STORE_URL`, else the quickstart's directory when the
embedded server is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..embedded import resolve_conn_string, resolve_object_store
from ..errors import ConfigError, shown
from ..retry import RetryPolicy
from ..saver import DurablePostgresSaver
from ..sql import schema as schema_sql
from ..sql.schema import DEFAULT_SCHEMA

# A person waits at a terminal: fail in seconds, not after the saver's 30 s deadline.
CLI_RETRY = RetryPolicy(deadline=5.0, max_attempts=4, reconnect_deadline=5.0)
CONNECT_TIMEOUT = 10.0


def allowed_type(text: str) -> tuple[str, str]:
    """`module:Name` (or `module.Name`) of `--allow-type` as (module, name), refused by name
    when it is neither."""
    module, sep, name = text.partition(":")
    if not sep:
        module, _, name = text.rpartition(".")
    parts = [*module.split("."), *name.split(".")]
    if not module or not name or not all(p.isidentifier() for p in parts):
        raise ConfigError(f"--allow-type takes module:Name (a class of your own, e.g. myapp.models:UserProfile), got {shown(text)}")
    return module, name


@dataclass(frozen=True)
class Target:
    """The `--dsn` and `--schema` of a command line (dsn None: resolve it as the module says)."""

    dsn: str | None = None
    schema: str = DEFAULT_SCHEMA
    object_store: str | None = None  # a URL; None: the quickstart's directory with the embedded server, else none
    allowed_types: tuple[tuple[str, str], ...] = ()  # --allow-type module:Name, as (module, name)

    def conn_string(self) -> str:
        if self.dsn:
            return self.dsn
        try:
            return resolve_conn_string()
        except RuntimeError as exc:  # no URL and no embedded server to start
            raise ConfigError(f"{exc} Or pass --dsn.") from None

    @contextmanager
    def saver(self, *, need_schema: bool = True) -> Iterator[DurablePostgresSaver]:
        """A saver on a small pool of its own, closed on exit; with `need_schema`, a schema
        that is not the saver's (no tables, or pending migrations) is refused by name first."""
        conn_string = self.conn_string()
        store = self.object_store or (resolve_object_store() if not self.dsn else None)
        with DurablePostgresSaver.from_conn_string(
            conn_string,
            schema=self.schema,
            max_size=2,
            timeout=CONNECT_TIMEOUT,
            retry=CLI_RETRY,
            object_store=store,
            allowed_types=self.allowed_types,
        ) as saver:
            if need_schema:
                self._check_schema(saver)
            yield saver

    def _check_schema(self, saver: DurablePostgresSaver) -> None:
        current = saver.schema_version()
        if current is None:
            raise ConfigError(f"schema {shown(self.schema)} holds no langgraph-pg-durable tables (wrong --schema, or run `lgpd setup`)")
        if schema_sql.pending(self.schema, current):
            needed = len(schema_sql.migrations())
            raise ConfigError(f"schema {shown(self.schema)} is at version {current}, this lgpd needs {needed}: run `lgpd setup`")
