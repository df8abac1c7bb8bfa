"""The replay page behind `lgpd serve`: a small Starlette app that reads through the same
API as the command line, read-only: JSON endpoints (`api.py`), pages (`pages.py`), and the
app that serves both with their static files (`app.py`)."""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
