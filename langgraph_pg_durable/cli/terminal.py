"""Text from the database made safe to print on a terminal.

Thread ids, node names, messages, tool results and errors are whatever an agent, a tool
or a user wrote. A control character among them would act on the terminal that shows it
(OSC 52 writes the clipboard, OSC 8 hides where a link goes, CSI 2J clears the screen)
and a bidi control (U+202E) reverses the text after it. `safe_text` shows each as Python
writes it in a string literal, as `repr` and the error messages (`errors.shown`) do:
`\\x1b`, `\\x9b`, `\\u202e`, `\\n`. A backslash already in the text is left as it is: the
table is for reading; `--format json` / `jsonl` keep every value exact.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.rule import Rule
from rich.segment import Segment
from rich.text import Span, Text

# C0 controls and DEL, C1 controls (a terminal may read U+009B as CSI), and the bidi
# controls that reorder what follows them: ALM, LRM, RLM, LRE..RLO, LRI..PDI.
_UNSAFE = (
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
_KEPT_IN_MULTILINE = (ord("\n"), ord("\t"))


def _escape(code: int) -> str:
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(code)
    return named or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


_ESCAPES = {chr(code): _escape(code) for code in _UNSAFE}


def _pattern(codes: Iterable[int]) -> re.Pattern[str]:
    return re.compile("[" + "".join(re.escape(chr(code)) for code in codes) + "]")


_ONE_LINE = _pattern(_UNSAFE)
_MULTILINE = _pattern(code for code in _UNSAFE if code not in _KEPT_IN_MULTILINE)


def _escape_found(found: re.Match[str]) -> str:
    return _ESCAPES[found.group()]


def safe_text(text: str, *, multiline: bool = False) -> str:
    """`text` with every control character and bidi control shown as its escape (`\\x1b`,
    `\\u202e`); `multiline` keeps newlines and tabs. Text with none is returned as it is."""
    if text.isprintable():  # no control, bidi or line break: most cells of a table
        return text
    pattern = _MULTILINE if multiline else _ONE_LINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape_found, text)


def escaped_text(text: Text) -> Text:
    """A rich `Text` with its characters `safe_text`-ed (multi-line) and its styles kept on
    the same characters; `text` itself when there is nothing to escape."""
    plain = text.plain
    if safe_text(plain, multiline=True) is plain:
        return text
    cuts = sorted({0, len(plain), *(s.start for s in text.spans), *(s.end for s in text.spans)})
    moved = {0: 0}
    pieces: list[str] = []
    for start, end in zip(cuts, cuts[1:]):
        pieces.append(safe_text(plain[start:end], multiline=True))
        moved[end] = moved[start] + len(pieces[-1])
    escaped = text.blank_copy("".join(pieces))
    escaped.spans = [Span(moved[s.start], moved[s.end], s.style) for s in text.spans]
    return escaped


class _Escaped:
    """Any other renderable (a table, a panel), its segments `safe_text`-ed once rich has
    laid them out: a line an escape makes longer may then be cut at the console's width."""

    def __init__(self, renderable: ConsoleRenderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            text = segment.text if segment.control else safe_text(segment.text, multiline=True)
            yield segment if text is segment.text else Segment(text, segment.style)


def _escaped(renderable: ConsoleRenderable) -> ConsoleRenderable:
    if isinstance(renderable, Text):
        return escaped_text(renderable)
    if isinstance(renderable, Rule) and isinstance(renderable.title, Text):
        rule = copy.copy(renderable)
        rule.title = escaped_text(renderable.title)
        return rule
    return _Escaped(renderable)


class _EscapeHook(RenderHook):
    """What `escaping` installs: each renderable printed is escaped before rich lays it out."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_escaped(r) for r in renderables]


def escaping(console: Console) -> Console:
    """`console`, made to escape whatever it prints (messages, ids, rule titles), so that no
    command prints the database's text raw. Returns `console`.

    Rich itself drops BEL, BS, VT, FF and CR from a `Text`: printed this way they are gone,
    not shown (a table's cells, escaped before, show them)."""
    console.push_render_hook(_EscapeHook())
    return console
