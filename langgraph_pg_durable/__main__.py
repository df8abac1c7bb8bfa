"""`python -m langgraph_pg_durable`: the `lgpd` command line (see langgraph_pg_durable.cli)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
