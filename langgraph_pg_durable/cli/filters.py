"""Values from the command line: the filters every listing takes (`--where meta.KEY=VALUE`,
metadata containment; `--since` / `--until`, a time or an age such as 30m, 2h, 7d), and
the `module:attribute` names of the user's own objects (`--tools`, `--graph`)."""

from __future__ import annotations

import datetime
import importlib
import json
import re
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, shown

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
WHERE_PREFIX = "meta."


def metadata_filter(terms: Sequence[str] | None) -> dict[str, Any] | None:
    """`meta.user=ana meta.step=3 meta.tags.lang="en"` as the metadata dict a checkpoint's
    metadata must contain: a value is JSON when it parses as JSON (3, true, "3"), else text."""
    if not terms:
        return None
    found: dict[str, Any] = {}
    for term in terms:
        key, sep, raw = term.partition("=")
        if not sep or not key.startswith(WHERE_PREFIX) or len(key) == len(WHERE_PREFIX):
            raise ConfigError(f"--where {shown(term)}: write it as meta.KEY=VALUE (e.g. meta.user=ana)")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        path = key[len(WHERE_PREFIX) :].split(".")
        node = found
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--where {shown(term)}: meta.{part} is given both a value and keys")
            node = child
        node[path[-1]] = value
    return found


def moment(text: str | None, option: str, *, now: datetime.datetime | None = None) -> datetime.datetime | None:
    """An ISO 8601 time or date (UTC when it names no offset), or an age before `now`."""
    if text is None:
        return None
    text = text.strip()
    age = _AGE.match(text)
    if age:
        now = now or datetime.datetime.now(datetime.timezone.utc)
        try:
            return now - datetime.timedelta(seconds=float(age.group(1)) * _UNIT_SECONDS[age.group(2)])
        except OverflowError:
            raise ConfigError(f"{option} {shown(text)}: an age reaching before the year 1 (give a smaller one)") from None
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{option} {shown(text)}: give a time (2026-12-01, 2026-12-01T09:30) or an age (90s, 30m, 2h, 7d, 1w)") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)


def import_attribute(spec: str, option: str) -> Any:
    """The object `module:attribute` names (the module imported as Python would)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{option} {shown(spec)}: write it as module:attribute")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{option} {shown(spec)}: {exc}") from None
