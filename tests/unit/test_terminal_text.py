"""What `lgpd` prints on a terminal, without a server: text from the database escaped
(`safe_text`) in tables, on a terminal and piped, and in `show`'s view; errors escaped and
without the connection's password; `tail`'s memory bounded however long it runs."""

from __future__ import annotations

import datetime
import io
import re
from typing import Any

import pytest
import typer
from rich.console import Console
from rich.text import Text

from langgraph_pg_durable.cli import main
from langgraph_pg_durable.cli.app import failing_cleanly
from langgraph_pg_durable.cli.listing import THREAD_COLUMNS
from langgraph_pg_durable.cli.passwords import passwords_in, without_passwords
from langgraph_pg_durable.cli.render import Format, console_for, emit
from langgraph_pg_durable.cli.search import LogCursor
from langgraph_pg_durable.cli.steps import _print_view
from langgraph_pg_durable.cli.terminal import escaped_text, safe_text
from langgraph_pg_durable.core.logs import ActionRecord

OSC_52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
OSC_8 = "\x1b]8;;http://evil.example/\x1b\\a safe link\x1b]8;;\x1b\\"
HOSTILE = OSC_52 + OSC_8 + "\x1b[2J\u202e\x9b31m"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SGR = re.compile("\x1b\\[[0-9;]*m")  # the styles rich writes on a terminal: its own, not the database's


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# -- safe_text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        (OSC_52, "\\x1b]52;c;cm0gLXJmIH4=\\x07"),
        ("\x00\x08\x7f\x80\x9b\x9f", "\\x00\\x08\\x7f\\x80\\x9b\\x9f"),
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("abc\u202edef", "abc\\u202edef"),
        (
            "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069",
            "\\u061c\\u200e\\u200f\\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069",
        ),
        ("café 日本 \\x1b ok\u00a0", "café 日本 \\x1b ok\u00a0"),  # printable text, a backslash and a no-break space stay
    ],
)
def test_safe_text_shows_each_control_as_python_writes_it(text: str, shown: str) -> None:
    assert safe_text(text) == shown == safe_text(shown)  # a second pass changes nothing
    assert RAW.search(safe_text(text)) is None


def test_multiline_keeps_newlines_and_tabs_and_nothing_else() -> None:
    assert safe_text("one\n\ttwo\r\x1b[2J\u202e", multiline=True) == "one\n\ttwo\\r\\x1b[2J\\u202e"


def test_text_with_nothing_to_escape_is_returned_as_it_is() -> None:
    for text in ("thread-00042", "line one\nline two", ""):
        assert safe_text(text, multiline=True) is text
    assert safe_text("plain") == "plain"


def test_a_rich_text_keeps_its_styles_on_the_same_characters() -> None:
    text = Text("ab\x1bcd")
    text.stylize("bold", 1, 4)
    text.append("e\u202ef", style="red")
    escaped = escaped_text(text)
    assert escaped.plain == "ab\\x1bcde\\u202ef"
    assert [(escaped.plain[s.start : s.end], s.style) for s in escaped.spans] == [("b\\x1bc", "bold"), ("e\\u202ef", "red")]


# -- tables and show, on a terminal and piped -----------------------------------------------


def thread_rows() -> list[dict[str, Any]]:
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    return [
        {
            "thread_id": f"t{HOSTILE}",
            "checkpoints": 3,
            "last_step": 2,
            "status": f"done{HOSTILE}",
            "last_run_id": "r1",
            "last_activity": when,
        },
        {"thread_id": "plain", "checkpoints": 1, "last_step": 0, "status": None, "last_run_id": None, "last_activity": when},
    ]


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "piped"])
def test_a_table_shows_cells_escaped(tty: bool) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=tty, width=300)
    assert emit(thread_rows(), Format.table, THREAD_COLUMNS, console=console) == 2
    printed = out.getvalue()
    assert RAW.search(SGR.sub("", printed)) is None, printed
    assert "t\\x1b]52;c;" in printed and "\\u202e\\x9b31m" in printed and "plain" in printed
    assert (SGR.search(printed) is not None) == tty


def test_an_empty_table_says_so_as_text() -> None:
    out = Terminal()
    emit([], Format.table, THREAD_COLUMNS, console=console_for(out), empty=f"thread [bold]{HOSTILE} has no checkpoints")
    assert RAW.search(SGR.sub("", out.getvalue())) is None and "thread [bold]\\x1b]52" in out.getvalue()


def step_view() -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": f"reply {HOSTILE}\nsecond line",
        "tool_calls": [{"function": {"name": f"tool{HOSTILE}", "arguments": "{}"}}],
    }
    return {
        "thread_id": f"t{HOSTILE}",
        "checkpoint_ns": "",
        "checkpoint_id": f"c{HOSTILE}",
        "run_id": f"r{HOSTILE}",
        "step": 1,
        "created_at": None,
        "prompt": [{"role": "user", "content": f"ask {HOSTILE}"}],
        "response": [{"agent": f"agent{HOSTILE}", "action_type": "llm_call", "payload": {"messages": [message], "goto": HOSTILE}}],
        "tool_calls": [
            {"id": "c-1", "name": f"tool{HOSTILE}", "arguments": {"q": HOSTILE}, "result": f"found {HOSTILE}", "answered": True}
        ],
        "interrupts": [{"value": HOSTILE}],
        "errors": [{"agent": f"crash{HOSTILE}", "type": "RuntimeError", "message": HOSTILE, "traceback": f"Traceback\n  {HOSTILE}"}],
    }


@pytest.mark.parametrize("file", [Terminal, io.StringIO], ids=["terminal", "piped"])
def test_show_prints_the_step_escaped_with_its_lines(file: type[io.StringIO]) -> None:
    out = file()
    _print_view(step_view(), console_for(out, piped_width=100), cut=None)
    printed = out.getvalue()
    assert RAW.search(SGR.sub("", printed)) is None, printed
    flat = " ".join(SGR.sub("", printed).split())
    for planted in (
        "thread t",
        "checkpoint c",
        "run r",
        "ask ",
        "reply ",
        "calls tool",
        "agent",
        "tool",
        "found ",
        "RuntimeError: ",
        "error in crash",
    ):
        assert f"{planted}\\x1b]52;c;" in flat, planted
    assert "\nsecond line" in SGR.sub("", printed)  # a message's own lines stay lines


# -- errors --------------------------------------------------------------------------------


def test_an_error_quoting_the_database_is_printed_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    @failing_cleanly
    def command() -> None:
        raise LookupError(f"thread {HOSTILE} has no step 9\n  and a second line")

    with pytest.raises(typer.Exit):
        command()
    err = capsys.readouterr().err
    assert RAW.search(err) is None and "thread \\x1b]52;c;" in err and "\\u202e" in err and "\n  and a second line" in err


@pytest.mark.parametrize(
    ("dsn", "secret"),
    [
        ("postgresql://u:s3cret@[bad/db", "s3cret"),  # libpq quotes the whole URI
        ("postgresql://u:s3%zzcret@127.0.0.1:1/db", "s3%zzcret"),  # ... or the token it cannot decode
        ("postgresql://u:s3cret@127.0.0.1:1/db?nosuch=1", "s3cret"),
        ("host=127.0.0.1 password=s3cret nosuch=1", "s3cret"),
    ],
)
def test_a_connection_error_never_prints_the_password(capsys: pytest.CaptureFixture[str], dsn: str, secret: str) -> None:
    assert main(["--dsn", dsn, "threads"]) == 1
    printed = capsys.readouterr()
    assert printed.err.startswith("error:") and secret not in printed.err + printed.out


@pytest.mark.parametrize(
    ("dsn", "message", "masked"),
    [
        ("postgresql://u:s3cret@h/db", 'bad URI: "postgresql://u:s3cret@h/db" (s3cret)', 'bad URI: "postgresql://u:***@h/db" (***)'),
        ("postgresql://u:s3%40cret@h/db", "token s3%40cret or s3@cret", "token *** or ***"),
        ("postgresql://u@h/db?password=p4ss&sslmode=x", "?password=p4ss&sslmode=x", "?password=***&sslmode=x"),
        ("host=h password='s 3\\'cret' user=u", "password='s 3\\'cret' user=u, s 3'cret", "password=*** user=u, ***"),
        (None, "postgres://a:b@c and PASSWORD = zz", "postgres://a:***@c and PASSWORD = ***"),
        ("postgresql://u@h/db", 'password authentication failed for user "u"', 'password authentication failed for user "u"'),
    ],
)
def test_without_passwords(dsn: str | None, message: str, masked: str) -> None:
    assert without_passwords(message, dsn) == masked


def test_the_forms_of_a_password() -> None:
    assert passwords_in("postgresql://u:p%20w@h/db") == {"p%20w", "p w"}
    assert passwords_in("host=h user=u") == set()


# -- tail ----------------------------------------------------------------------------------


def action(n: int, at: datetime.datetime) -> ActionRecord:
    return ActionRecord(
        thread_id="t",
        checkpoint_ns="",
        checkpoint_id=f"c{n}",
        run_id="r",
        step=n,
        task_id=f"task{n}",
        agent="a",
        action_type="llm_call",
        payload={},
        created_at=at,
    )


def test_tail_remembers_only_the_actions_at_the_newest_time_it_printed() -> None:
    """10,000 actions, three to a time, polled as `tail` polls (from the newest time printed,
    which the poll returns again): each printed once, and never more than three remembered."""
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    log = [action(n, start + datetime.timedelta(milliseconds=n // 3)) for n in range(10_000)]
    cursor = LogCursor(start)
    printed: list[str] = []
    largest = 0
    while len(printed) < len(log):
        polled = [a for a in log if a.created_at >= cursor.since][:50]  # a page of what committed since
        for found in cursor.fresh(polled):
            printed.append(found.checkpoint_id)
            cursor.printed(found)
            largest = max(largest, len(cursor.printed_at_since))
    assert printed == [a.checkpoint_id for a in log] and largest <= 3
    assert cursor.fresh(a for a in log if a.created_at >= cursor.since) == []  # the last time's actions, not again
