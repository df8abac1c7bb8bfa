"""`lgpd history` and `lgpd show`: a thread step by step, and one step as a person reads it."""

from __future__ import annotations
