"""`lgpd serve`: the replay page's server (read-only), safe to run on a laptop next to any
web site: it answers only to its own names (the Host check), and only with its token,
which it makes itself when none is given (README, "Security").
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ConfigError, shown
from ..web.guard import LOOPBACK_NAMES, checked_token, new_token
from .app import app, failing_cleanly
from .target import Target

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def allowed_hosts(host: str, extra: list[str] | None) -> set[str]:
    """The names a request's `Host` may give: loopback's, the address bound (unless it is a
    wildcard, which no client names), and each `--allow-host`."""
    names = {*LOOPBACK_NAMES, *([] if host in WILDCARD_HOSTS else [host.strip("[]").lower()])}
    for name in extra or ():
        if not name or any(c.isspace() or c in "/@?#" for c in name) or not name.isprintable():
            raise ConfigError(f"--allow-host {shown(name)}: give a host name or address, without a scheme, port or path")
        names.add(name.strip("[]").lower().rstrip("."))
    return names


def link(host: str, port: int, *, tls: bool) -> str:
    """The address a person opens (a wildcard bind is opened on 127.0.0.1)."""
    shown_host = "127.0.0.1" if host in WILDCARD_HOSTS else host
    return f"{'https' if tls else 'http'}://{f'[{shown_host}]' if ':' in shown_host else shown_host}:{port}/"


@app.command()
@failing_cleanly
def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="the address to listen on (another than 127.0.0.1, localhost or ::1: other machines may connect)")
    ] = ("127.0.0.1"),
    port: Annotated[int, typer.Option(min=1, max=65535, help="the port")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="LGPD_TOKEN",
            show_envvar=True,
            help="required of every request, at least 16 characters (default: a random one, printed once as a link)",
        ),
    ] = None,
    no_token: Annotated[bool, typer.Option("--no-token", help="serve without a token: on 127.0.0.1, localhost or ::1 only")] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="another name the server answers to, as browsers send it in Host (repeat for more)"),
    ] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(help="serve HTTPS with this certificate (PEM)")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="and this private key (PEM)")] = None,
) -> None:
    """The replay page's server (read-only). Every request needs its token: the one given,
    or one made at start and printed once, as a link; and a Host that is one of its names."""
    loopback = host in LOOPBACK_NAMES
    if no_token and token is not None:
        raise ConfigError("--no-token and --token (or $LGPD_TOKEN) are both given: choose one")
    if no_token and not loopback:
        raise ConfigError(f"--host {host!r} lets other machines in: --no-token is for 127.0.0.1, localhost or ::1 only")
    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise ConfigError("--ssl-certfile and --ssl-keyfile go together")
    if token is not None:
        checked_token(token, "--token (or $LGPD_TOKEN)")
    made = new_token() if token is None and not no_token else None
    names = allowed_hosts(host, allow_host)
    import uvicorn

    from ..web import create_app

    target: Target = ctx.obj
    # Opened before the server starts: a database that cannot be reached is one line here,
    # not a traceback from the server's start-up.
    with target.saver() as saver:
        web = create_app(
            lambda: nullcontext(saver),
            token=token or made,
            schema=target.schema,
            allowed_hosts=names,
            secure_cookie=not loopback,
        )
        address = link(host, port, tls=ssl_certfile is not None)
        if made is not None:  # the only time this token is shown
            print(f"lgpd serve: open {address}?token={made}", flush=True)
        elif token is not None:
            print(f"lgpd serve: {address} (the token given by --token or $LGPD_TOKEN)", flush=True)
        else:
            print(f"lgpd serve: {address} (no token: --no-token)", flush=True)
        uvicorn.run(
            web,
            host=host,
            port=port,
            log_level="warning",
            ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
            ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
        )
