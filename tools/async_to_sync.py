"""Write `langgraph_pg_durable/saver.py`, the sync saver, from `aio.py`, the async one.

The async shell is the source of truth, as in psycopg: the sync twin is the same code
with `async`/`await` taken out and the async names swapped for their sync ones, so the
two cannot drift. In `aio.py`, lines between `# async:` and `# end` are left out, and
lines between `# sync:` and `# end` are comments there and code here.

    python tools/async_to_sync.py           # rewrite saver.py
    python tools/async_to_sync.py --check   # exit 1 if saver.py is not what aio.py gives
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "langgraph_pg_durable"
SOURCE, TARGET = PACKAGE / "aio.py", PACKAGE / "saver.py"

# Whole names, async -> sync.
NAMES = {
    "AsyncDurablePostgresSaver": "DurablePostgresSaver",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncConnection": "Connection",
    "AsyncIterator": "Iterator",
    "AsyncWritesInFlight": "WritesInFlight",
    "asynccontextmanager": "contextmanager",
    "aget_tuple": "get_tuple",
    "alist": "list",
    "aput": "put",
    "aput_writes": "put_writes",
    "aget_delta_channel_history": "get_delta_channel_history",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
    "agc": "gc",
    "astore_all": "store_all",
    "afetch_all": "fetch_all",
    "alist_garbage_candidates": "list_garbage_candidates",
    "astill_old": "still_old",
    "adelete": "delete",
}
PHRASES = [
    ("asyncio.Lock()", "threading.Lock()"),
    ("asyncio.sleep(", "time.sleep("),
    ("async def ", "def "),
    ("async with ", "with "),
    ("async for ", "for "),
    ("await ", ""),
]


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
        line = re.sub(r"\b(" + "|".join(sorted(NAMES, key=len, reverse=True)) + r")\b",
                      lambda m: NAMES[m.group(1)], line)
        out.append(line)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    generated = to_sync(SOURCE.read_text())
    if "--check" in argv:
        if TARGET.read_text() != generated:
            print(f"{TARGET} is not what {SOURCE.name} gives: run python tools/async_to_sync.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
