"""`lgpd`: inspect and maintain agent runs straight off the saver's PostgreSQL tables.

Every command drives the savers' own API (no I/O path of its own) and reads unless its
help says it writes. `main()` is the console script and `python -m langgraph_pg_durable`.
"""

from __future__ import annotations

from . import compare, export, forks, listing, maintain, search, steps  # noqa: F401 - each registers its commands on `app`
from .app import app, main

__all__ = ["app", "main"]
