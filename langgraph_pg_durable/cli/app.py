"""The `lgpd` command line: its global options, its commands, and how errors end it.

Exit status: 0 done, 1 not found or refused by the database or the data (a message on
stderr), 2 a bad command line (an option, a filter, a schema name), as for any Unix tool.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, overload

import psycopg
import typer
from rich.console import Console
from rich.text import Text

from .. import __version__
from ..errors import ConfigError, DurableCheckpointError
from ..sql.schema import DEFAULT_SCHEMA, migrations
from .passwords import without_passwords
from .target import Target, allowed_type
from .terminal import escaping, safe_text

app = typer.Typer(
    name="lgpd",
    help="Inspect and maintain LangGraph agent runs stored by langgraph-pg-durable, straight off PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
errors = escaping(Console(stderr=True, highlight=False, soft_wrap=True))

F = TypeVar("F", bound=Callable[..., Any])


@app.callback()
def connect(
    ctx: typer.Context,
    dsn: Annotated[
        str | None,
        typer.Option(
            envvar="DATABASE_URL", show_envvar=True, help="PostgreSQL connection string (default: the embedded quickstart server)"
        ),
    ] = None,
    schema: Annotated[str, typer.Option(envvar="LGPD_SCHEMA", help="the saver's schema")] = DEFAULT_SCHEMA,
    object_store: Annotated[
        str | None,
        typer.Option(envvar="OBJECT_STORE_URL", show_envvar=True, help="where offloaded values live (s3://bucket/prefix, file:///dir)"),
    ] = None,
    allow_type: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-type",
            help="a class of your own that stored values hold, module:Name, imported and rebuilt on read (repeat for more)",
        ),
    ] = None,
) -> None:
    try:
        allowed = tuple(allowed_type(t) for t in allow_type or ())
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--allow-type") from None
    ctx.obj = Target(dsn or None, schema, object_store or None, allowed)


@overload
def failing_cleanly(command: F) -> F: ...


@overload
def failing_cleanly(command: None = None, *, trouble: int) -> Callable[[F], F]: ...


def failing_cleanly(command: F | None = None, *, trouble: int | None = None) -> F | Callable[[F], F]:
    """Our errors and the driver's end the command with a one-line message, not a traceback.

    `trouble` replaces every error's exit status, for a command whose 1 means something
    else (`diff`: the states differ)."""

    def wrap(command: F) -> F:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            # The command's context holds the Target (its class is click's, or typer's own copy of click).
            target = next((a.obj for a in (*args, *kwargs.values()) if isinstance(getattr(a, "obj", None), Target)), None)
            dsn = target.dsn if target is not None else None
            try:
                return command(*args, **kwargs)
            except ConfigError as exc:
                complain(str(exc), dsn)
                raise typer.Exit(trouble or 2) from None
            except LookupError as exc:  # what was asked for is not there
                complain(str(exc), dsn)
                raise typer.Exit(trouble or 1) from None
            except (DurableCheckpointError, psycopg.Error) as exc:
                complain(f"{type(exc).__name__}: {str(exc).strip()}", dsn)
                raise typer.Exit(trouble or 1) from None

        return run  # type: ignore[return-value]

    return wrap(command) if command is not None else wrap


def complain(message: str, dsn: str | None = None) -> None:
    """An error on stderr, as text: escaped (it quotes ids and values from the database), and
    without the password of `dsn`, the connection string in use (libpq quotes a URI it
    cannot parse), nor of any connection string it quotes."""
    errors.print(Text.assemble(("error:", "red"), " ", safe_text(without_passwords(message, dsn), multiline=True)))


@app.command()
def version() -> None:
    """Print the package version and the schema version it writes."""
    print(f"langgraph-pg-durable {__version__}, schema version {len(migrations())}")


@app.command()
@failing_cleanly
def setup(ctx: typer.Context) -> None:
    """Create or upgrade the saver's schema (writes; what saver.setup() does)."""
    target: Target = ctx.obj
    with target.saver(need_schema=False) as saver:
        saver.setup()
    print(f"schema {target.schema!r} is at version {len(migrations())}")


GLOBAL_OPTIONS = ("--dsn", "--schema", "--object-store")


def globals_first(argv: list[str]) -> list[str]:
    """The command line with the connection options moved before the command, so that
    `lgpd setup --dsn URL` works as `lgpd --dsn URL setup` does."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg in GLOBAL_OPTIONS and i + 1 < len(argv):
            front += argv[i : i + 2]
            i += 2
            continue
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS and "=" in arg:
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> int:
    """The console script: runs `app`, returns its exit status."""
    try:
        app(args=globals_first(list(sys.argv[1:] if argv is None else argv)), prog_name="lgpd", standalone_mode=True)
    except SystemExit as exit:
        return int(exit.code or 0) if not isinstance(exit.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
