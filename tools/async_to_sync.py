"""Write the sync twins in `langgraph_pg_durable/` from their async sources.

    aio.py            -> saver.py     (the savers)
    objects_async.py  -> objects.py   (the object storage)

The async code is the source of truth, as in psycopg: a sync twin is the same code with
`async`/`await` taken out and the async names swapped for their sync ones, so the two
cannot drift. In a source, lines between `# async:` and `# end` are left out, and lines
between `# sync:` and `# end` are comments there and code in the twin. Each twin's first
line says it is generated and from what.

    python tools/async_to_sync.py           # rewrite every twin
    python tools/async_to_sync.py --check   # exit 1, naming it, if a twin is not what its source gives
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "langgraph_pg_durable"
# (async source, generated sync twin)
TWINS = [
    (PACKAGE / "aio.py", PACKAGE / "saver.py"),
    (PACKAGE / "objects_async.py", PACKAGE / "objects.py"),
]

# Whole names, async -> sync.
NAMES = {
    # the savers
    "AsyncDurablePostgresSaver": "DurablePostgresSaver",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncConnection": "Connection",
    "AsyncIterator": "Iterator",
    "AsyncWritesInFlight": "WritesInFlight",
    "AsyncFailoverPool": "FailoverPool",
    "asynccontextmanager": "contextmanager",
    "aget_tuple": "get_tuple",
    "alist": "list",
    "alist_runs": "list_runs",
    "alist_actions": "list_actions",
    "alist_threads": "list_threads",
    "alist_steps": "list_steps",
    "astep_neighbours": "step_neighbours",
    "aactions_from": "actions_from",
    "afind_effect": "find_effect",
    "arecord_effect": "record_effect",
    "aschema_version": "schema_version",
    "adiagnose": "diagnose",
    "adistribute": "distribute",
    "abackfill_actions": "backfill_actions",
    "aput": "put",
    "aput_writes": "put_writes",
    "aget_delta_channel_history": "get_delta_channel_history",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
    "agc": "gc",
    # the object storage, and obstore's calls
    "objects_async": "objects",
    "AsyncObjectStorage": "ObjectStorage",
    "put_async": "put",
    "get_async": "get",
    "head_async": "head",
    "delete_async": "delete",
    "bytes_async": "bytes",
}
PHRASES = [
    ("asyncio.Lock()", "threading.Lock()"),
    ("asyncio.Event", "threading.Event"),
    ("asyncio.sleep(", "time.sleep("),
    ("async def ", "def "),
    ("async with ", "with "),
    ("async for ", "for "),
    ("await ", ""),
]
_NAME = re.compile(r"\b(" + "|".join(sorted(NAMES, key=len, reverse=True)) + r")\b")


def header(source: Path) -> str:
    return f"# Generated from {source.relative_to(ROOT).as_posix()} by tools/async_to_sync.py: do not edit."


def to_sync(source: str) -> str:
    out: list[str] = []
    mode = None  # None, "async" (drop) or "sync" (uncomment)
    for line in source.splitlines():
        marker = line.strip()
        if marker in ("# async:", "# sync:"):
            mode = marker[2:-1]
            continue
        if marker == "# end" and mode:
            mode = None
            continue
        if mode == "async":
            continue
        if mode == "sync":
            indent = line[: len(line) - len(line.lstrip())]
            code = line.strip()[1:]
            line = indent + code[1:] if code.startswith(" ") else indent + code
            out.append(line.rstrip())
            continue
        for old, new in PHRASES:
            line = line.replace(old, new)
        out.append(_NAME.sub(lambda m: NAMES[m.group(1)], line))
    return "\n".join(out).rstrip() + "\n"


def generate(source: Path) -> str:
    """The sync twin's text: the header line, then the source made sync."""
    return header(source) + "\n" + to_sync(source.read_text())


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = 0
    for source, target in TWINS:
        generated = generate(source)
        if not check:
            target.write_text(generated)
        elif not target.exists() or target.read_text() != generated:
            print(f"{target} is not what {source.name} gives: run python tools/async_to_sync.py", file=sys.stderr)
            stale += 1
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
