"""`python -m langgraph_pg_durable`: the package's command line (the `lgpd` CLI grows here).

Today: `version`, and `setup`, which creates or upgrades a schema (what `saver.setup()`
does), for deployments whose application role may not run DDL.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__
from .sql.schema import DEFAULT_SCHEMA, migrations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m langgraph_pg_durable", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print the package version and its schema version")
    setup = commands.add_parser("setup", help="create or upgrade the saver's schema")
    setup.add_argument("--dsn", default=os.environ.get("DATABASE_URL"), help="PostgreSQL connection string (default: $DATABASE_URL)")
    setup.add_argument("--schema", default=DEFAULT_SCHEMA, help="schema name (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"langgraph-pg-durable {__version__}, schema version {len(migrations())}")
        return 0
    if not args.dsn:
        parser.error("setup needs --dsn or $DATABASE_URL")
    from .saver import DurablePostgresSaver

    with DurablePostgresSaver.from_conn_string(args.dsn, schema=args.schema, max_size=1) as saver:
        saver.setup()
    print(f"schema {args.schema!r} is at version {len(migrations())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
