"""The replay page behind `lgpd serve`: a small Starlette app that reads through the same
API as the command line, read-only. Its JSON endpoints come first (`api.py`)."""

from __future__ import annotations

from .api import create_app

__all__ = ["create_app"]
