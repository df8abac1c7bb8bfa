"""Output of the listing commands: a rich table for a person, or JSON / JSON Lines for a
program, streamed as records arrive (a table is printed a page of rows at a time).

A table cell, and whatever a console from `console_for` prints, is escaped (`terminal`):
no text from the database reaches a terminal raw. JSON is exact: it escapes C0 controls
itself (ESC as \u001b) and leaves the rest (C1 and bidi controls) as the record has them.

The JSON of each command is a stable contract (README, "Command line"): field names
never change meaning; times are ISO 8601 with their UTC offset.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, TextIO

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from .terminal import escaping, safe_text

TABLE_PAGE = 200  # rows per printed table: a long listing is never held whole
PIPED_WIDTH = 240


class Format(str, Enum):
    table = "table"
    json = "json"
    jsonl = "jsonl"


@dataclass(frozen=True)
class Column:
    """One column of a table: its header, the record field it shows (none: the record), how to show it."""

    header: str
    field: str
    show: Callable[[Any], str] = lambda value: "" if value is None else str(value)
    style: str | None = None
    short_id: bool = False  # an id: shown by its shortest prefix unique on the page (see short_ids)
    width: int | None = None  # a longer cell is cut, with an ellipsis


SHORTEST_ID = 8


def short_ids(ids: Sequence[str], *, least: int = SHORTEST_ID) -> int:
    """How many leading characters tell `ids` apart, as git shortens hashes (at least
    `least`): a checkpoint's or run's id begins with its time, so two taken in the same
    second share their first eight."""
    distinct = sorted(set(i for i in ids if i))
    length = least
    for a, b in zip(distinct, distinct[1:]):
        common = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        length = max(length, common + 1)
    return length


def _cut(cell: str, width: int | None) -> str:
    return cell if width is None or len(cell) <= width else cell[: width - 1] + "…"


def fields_of(record: Any) -> dict[str, Any]:
    """A record's fields as a dict, not copied (dataclasses.asdict deep-copies every value:
    two thirds of listing 10,000 threads)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def plain(value: Any) -> Any:
    """A JSON-ready copy of a record field: datetimes as ISO 8601, tuples as lists, records as dicts."""
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(fields_of(value))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def to_json(record: Any) -> str:
    """One record as JSON text: orjson (records, datetimes and tuples as `plain` makes them,
    at a tenth of the cost), json for what orjson refuses (an integer past 64 bits)."""
    try:
        return orjson.dumps(record).decode()
    except TypeError:
        return json.dumps(plain(record), ensure_ascii=False, separators=(",", ":"))


def when(value: Any) -> str:
    """A time for a table: to the second, in UTC."""
    if not isinstance(value, datetime.datetime):
        return ""
    return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def took(ms: Any) -> str:
    """How long a step took, for a person: 840ms, 2.4s, 3m."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return ""
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s" if ms < 60_000 else f"{ms / 60_000:.0f}m"


@contextmanager
def progress(description: str, *, enabled: bool, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr while the work runs (none when stderr is not a terminal,
    or not `enabled`); yields the function that moves it on by n."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn() if total else TextColumn("{task.completed}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def console_for(out: TextIO, *, piped_width: int = PIPED_WIDTH) -> Console:
    """On a terminal rich fits the output to its width; piped, a wide page keeps rows whole.
    Either way the console escapes the text it prints (`terminal.escaping`)."""
    return escaping(Console(file=out, highlight=False, width=None if out.isatty() else piped_width))


def emit(
    records: Iterable[Mapping[str, Any]],
    fmt: Format,
    columns: Sequence[Column],
    *,
    out: TextIO | None = None,
    console: Console | None = None,
    empty: str = "nothing found",
    full_ids: bool = False,
) -> int:
    """Write every record in `fmt`; returns how many were written. A table shows id
    columns by their shortest unique prefix (`full_ids`: whole), and cuts long cells; JSON
    has every field whole."""
    out = out or sys.stdout
    count = 0
    if fmt is Format.jsonl:
        for record in records:
            out.write(to_json(record) + "\n")
            count += 1
        return count
    if fmt is Format.json:
        out.write("[")
        for record in records:
            out.write(("," if count else "") + "\n  " + to_json(record))
            count += 1
        out.write("\n]\n" if count else "]\n")
        return count
    console = console or console_for(out)
    rows: list[list[str]] = []

    def flush() -> None:
        for i, column in enumerate(columns):
            if column.short_id and not full_ids:
                keep = short_ids([row[i] for row in rows])
                for row in rows:
                    row[i] = row[i][:keep]
        # Columns as wide as their widest cell on this page, two spaces apart: rich's own
        # Table measured every cell again and took ten seconds for 10,000 rows.
        widths = [max(len(column.header), *(len(row[i]) for row in rows)) for i, column in enumerate(columns)]
        last = len(columns) - 1
        if not console.is_terminal:  # no styles to show: plain lines, written at once
            lines = [[c.header for c in columns], *rows]
            console.file.write(
                "".join("".join(cell.ljust(widths[i] + 2) if i < last else cell for i, cell in enumerate(line)) + "\n" for line in lines)
            )
            rows.clear()
            return
        header = Text()
        for i, column in enumerate(columns):
            header.append(column.header if i == last else column.header.ljust(widths[i] + 2), style="bold")
        console.print(header, no_wrap=True, overflow="ignore", crop=False)
        for row in rows:
            line = Text()  # Text: what the database holds is never read as markup
            for i, (column, cell) in enumerate(zip(columns, row)):
                line.append(cell if i == last else cell.ljust(widths[i] + 2), style=column.style or "")
            console.print(line, no_wrap=True, overflow="ignore", crop=False)
        rows.clear()

    for record in records:
        rows.append([_cut(safe_text(c.show(record.get(c.field) if c.field else record).replace("\n", " ")), c.width) for c in columns])
        count += 1
        if len(rows) >= TABLE_PAGE:
            flush()
    if rows:
        flush()
    elif not count:
        console.print(Text(safe_text(empty), style="dim"))
    return count
