"""Sans-I/O keyset paging shared by the streaming listings (runs, actions, threads): the
page size, the remaining count, the WHERE clause of the next page, and the checks of
the filters callers pass.

Pages start small and double, so the first record costs little and a long scan never
holds more than a page.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, shown

FIRST_PAGE = 16
LARGEST_PAGE = 512


def moment(value: Any, what: str) -> datetime.datetime | None:
    """A datetime bound; a naive one is taken as UTC."""
    if value is None:
        return None
    if not isinstance(value, datetime.datetime):
        raise ConfigError(f"{what} must be a datetime, got {type(value).__name__} {shown(value)}")
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)


def one_of(value: Any, allowed: Sequence[str], what: str) -> str | None:
    if value is None:
        return None
    if value not in allowed:
        raise ConfigError(f"{what} {shown(value)} is not one of {', '.join(allowed)}")
    return str(value)


def page_limit(value: Any, call: str) -> int | None:
    if value is not None and (type(value) is not int or value < 0):
        raise ConfigError(f"{call} limit must be a whole number >= 0 or None, got {shown(value)}")
    return value


class Pager:
    """What both scans share: the page size (doubling up to LARGEST_PAGE, never past what
    `limit` leaves), the remaining count, and the WHERE clause and parameters of the next
    page, from each scan's fixed fragments (`FILTERS`: a filter's name and its condition;
    `KEYSET`: the row comparison past the last row, `CURSOR`: its parameters)."""

    FILTERS: tuple[tuple[str, str], ...] = ()
    KEYSET = ""
    CURSOR: tuple[str, ...] = ()

    def __init__(self, limit: int | None, filters: dict[str, Any]) -> None:
        self.remaining = limit
        self.page_size = FIRST_PAGE
        self.done = limit == 0
        self.filters = filters
        self.cursor: tuple[Any, ...] | None = None
        self._asked = 0

    def page_where(self) -> str:
        """The WHERE clause of the next page (values are parameters)."""
        terms = [fragment for name, fragment in self.FILTERS if self.filters[name] is not None]
        if self.cursor is not None:
            terms.append(self.KEYSET)
        return " AND ".join(terms) or "true"

    def page_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {k: v for k, v in self.filters.items() if v is not None}
        if self.cursor is not None:
            params.update(zip(self.CURSOR, self.cursor))
        params["page"] = self._asked = self.size()
        return params

    def size(self) -> int:
        return self.page_size if self.remaining is None else min(self.page_size, self.remaining)

    def took(self, fetched: int, asked: int) -> None:
        if self.remaining is not None:
            self.remaining -= fetched
        self.done = fetched < asked or self.remaining == 0
        self.page_size = min(self.page_size * 2, LARGEST_PAGE)
