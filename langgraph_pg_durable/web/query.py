"""The replay page's query parameters, read strictly: a value of the wrong type or range
is a ConfigError naming the parameter (a 400), never a 500 from deeper down."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping

from ..cli.filters import moment
from ..errors import ConfigError, shown

_WHOLE = re.compile(r"-?[0-9]{1,10}")  # ASCII digits only: int() would also take "٣" and "1_0"
_STEP_RANGE = (-(2**31), 2**31 - 1)  # the step column is an integer
_FLAGS = {"": False, "0": False, "false": False, "no": False, "1": True, "true": True, "yes": True}


def whole(text: str, name: str, *, minimum: int = _STEP_RANGE[0], maximum: int = _STEP_RANGE[1]) -> int:
    """`text` as a whole number in [minimum, maximum], refused by `name`."""
    if not _WHOLE.fullmatch(text) or not minimum <= int(text) <= maximum:
        raise ConfigError(f"{name} must be a whole number from {minimum} to {maximum}, got {shown(text)}")
    return int(text)


def integer(
    query: Mapping[str, str], name: str, default: int | None = None, *, minimum: int = _STEP_RANGE[0], cap: int | None = None
) -> int | None:
    """The whole-number parameter `?name=` (absent or empty: `default`); `cap` bounds it from
    above by lowering it (a `?limit` past the page size is the page size)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    value = whole(raw, f"?{name}", minimum=minimum)
    return min(value, cap) if cap is not None else value


def flag(query: Mapping[str, str], name: str) -> bool:
    """A yes/no parameter (`?internals=1`); anything but 1/0, true/false, yes/no is refused."""
    raw = (query.get(name) or "").lower()
    if raw not in _FLAGS:
        raise ConfigError(f"?{name} must be 1 or 0 (true/false, yes/no), got {shown(query.get(name))}")
    return _FLAGS[raw]


def text(query: Mapping[str, str], name: str) -> str | None:
    """A text parameter (an id, a namespace), None when absent or empty."""
    return query.get(name) or None


def time_bound(query: Mapping[str, str], name: str) -> datetime.datetime | None:
    """A time or an age (`?since=2h`), as `lgpd --since` reads it."""
    return moment(text(query, name), f"?{name}")
