"""Every string a decoded JSON document holds, for tests that look for a text anywhere in
what was written (a secret an export must not let through)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def strings_in(value: Any) -> Iterator[str]:
    """Every key and string of `value`, and of every JSON text inside it, at any depth."""
    if isinstance(value, str):
        yield value
        try:
            yield from strings_in(json.loads(value))
        except ValueError:
            pass
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
