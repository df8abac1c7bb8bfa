"""`lgpd`: inspect and maintain agent runs straight off the saver's PostgreSQL tables.

Every command drives the savers' own API (no I/O path of its own) and reads unless its
help says it writes. `main()` is the console script and `python -m langgraph_pg_durable`.
"""

from __future__ import annotations

# Each registers its commands on `app`, in the order `lgpd --help` lists them.
from . import listing, steps, compare, search, export, forks, maintain, serve  # noqa: F401, I001
from .app import app, main

__all__ = ["app", "main"]
