"""The replay page's guard: every request passes it before any route, `/static` included.

- **Host.** A request whose `Host` is not one of the server's names is refused (421), so
  a web page on a name rebound to 127.0.0.1 (DNS rebinding) reads nothing.
- **Token.** With a token, a request carries it as `Authorization: Bearer TOKEN`, or as a
  session cookie: `?token=TOKEN` sets the cookie and redirects to the same URL without the
  token (so it stays out of history, `Referer` and logs; a link followed from another
  site gets a page that moves on by itself instead, see `_redirect`). The cookie holds an HMAC of the
  token, never the token, under a name that holds the server's port (two servers on one
  machine keep their own). Failed token checks are counted: past `FailedChecks.limit` in
  its window, every token is refused (429) until the window clears.
- **Headers.** Every response says: no inline script and no framing (CSP), no MIME
  sniffing, no `Referer`, not cacheable, not for other origins.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from ..errors import ConfigError, shown

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
MIN_TOKEN_CHARS = 16
SESSION_COOKIE = "lgpd_session_"  # + the server's port

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


def new_token() -> str:
    """A token for a server started without one: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def checked_token(token: str, what: str) -> str:
    """`token`, refused by `what` (the option or argument that gave it) when it is too short
    to resist guessing, blank, or holds whitespace or control characters."""
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise ConfigError(
            f"{what}: a token needs at least {MIN_TOKEN_CHARS} characters, none of them whitespace or control "
            f"characters (got {len(token)} characters); leave it out and one is made for you"
        )
    return token


def session_value(token: str) -> str:
    """What the session cookie holds: an HMAC of the token, so the cookie is not the token."""
    return hmac.new(token.encode(), b"lgpd serve session", hashlib.sha256).hexdigest()


def host_name(header: str) -> str:
    """The name in a `Host` header, without its port, lower-cased (`[::1]:8765` is `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    name, sep, port = header.rpartition(":")
    return name.rstrip(".") if sep and port.isdigit() else header.rstrip(".")


@dataclass
class FailedChecks:
    """Failed token checks within the last `window` seconds; past `limit` of them every
    token check is refused until the oldest leaves the window (a guesser gets `limit` tries
    a window). A stale session cookie is not counted: it is a 256-bit HMAC, not a guess
    worth slowing, and a browser left open across a restart sends one with every poll."""

    limit: int = 20
    window: float = 60.0
    clock: Callable[[], float] = time.monotonic
    times: deque[float] = field(default_factory=deque)

    def wait(self) -> float:
        """Seconds until a token is checked again (0: now)."""
        now = self.clock()
        while self.times and self.times[0] <= now - self.window:
            self.times.popleft()
        return self.times[0] + self.window - now if len(self.times) >= self.limit else 0.0

    def failed(self) -> None:
        self.times.append(self.clock())


@dataclass(frozen=True)
class Guard:
    """What the guard enforces: the names the server answers to, its token (None: none),
    whether its cookie is `Secure` (a bind other than loopback), and the failure count."""

    allowed_hosts: Collection[str] = LOOPBACK_NAMES
    token: str | None = None
    secure_cookie: bool = False
    failures: FailedChecks = field(default_factory=FailedChecks)

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app` behind the guard: the Host check, the token, and the headers on every response."""
        allowed = {h.lower().strip("[]") for h in self.allowed_hosts}
        session = session_value(self.token) if self.token is not None else None

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)  # lifespan
                return
            send = with_headers(send)
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
            name = host_name(headers.get("host", ""))
            if name not in allowed:
                message = f"Host {shown(name)} is not this server's name; `lgpd serve --allow-host NAME` adds one"
                await respond(send, 421, message, scope)
                return
            if self.token is not None and session is not None:
                refused = self._check(scope, headers, session)
                if refused is not None:
                    await refused(send)
                    return
            scope["path"] = segment_path(scope)
            await app(scope, receive, send)

        return guarded

    def _check(self, scope: Scope, headers: dict[str, str], session: str) -> Callable[[Send], Awaitable[None]] | None:
        """None when the request may pass; else what to answer it."""
        assert self.token is not None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given_query = [v for k, v in query if k == "token"]
        authorization = headers.get("authorization", "")
        given = authorization[7:] if authorization[:7].lower() == "bearer " else (given_query[0] if given_query else None)
        if given is not None:
            wait = self.failures.wait()
            if wait:
                return lambda send: respond(send, 429, "too many failed token checks; try again later", scope, retry_after=wait)
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                self.failures.failed()
                return lambda send: respond(send, 401, "the token is wrong", scope)
            if given_query and not authorization:
                return lambda send: self._redirect(send, scope, headers, query, session)
            return None
        cookie = cookie_value(headers.get("cookie", ""), cookie_name(scope))
        if cookie is not None and hmac.compare_digest(cookie.encode(), session.encode()):
            return None
        return lambda send: respond(
            send, 401, "a token is required: open the link `lgpd serve` printed, or send Authorization: Bearer TOKEN", scope
        )

    async def _redirect(self, send: Send, scope: Scope, headers: dict[str, str], query: list[tuple[str, str]], session: str) -> None:
        """To the same URL without `?token=`, the session cookie set: a 303, or, when the
        link was followed from another site, a page that moves on by itself: a browser does
        not send a SameSite=Strict cookie on a redirect that another site started."""
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        location = quote(scope.get("raw_path", b"").decode("latin-1") or scope["path"], safe="/%:@!$&'()*+,;=-._~") + (
            f"?{rest}" if rest else ""
        )
        cookie = f"{cookie_name(scope)}={session}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if self.secure_cookie else "")
        if headers.get("sec-fetch-site") == "cross-site":
            target = html.escape(location, quote=True)
            body = (
                f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={target}">'
                f'<title>lgpd</title><p><a href="{target}">continue</a></p>'
            ).encode()
            status, more = 200, [(b"content-type", b"text/html; charset=utf-8")]
        else:
            body, status, more = b"", 303, [(b"location", location.encode("latin-1"))]
        start = [*more, (b"set-cookie", cookie.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": start})
        await send({"type": "http.response.body", "body": body})


def cookie_name(scope: Scope) -> str:
    """The session cookie's name, which holds the server's port: a browser sends cookies of
    127.0.0.1 to every port there, and two servers must not take each other's."""
    server = scope.get("server")
    return f"{SESSION_COOKIE}{server[1] if server and server[1] else 'default'}"


def cookie_value(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None


def segment_path(scope: Scope) -> str:
    """The request's path decoded segment by segment, a `/` or `%` inside a segment kept as
    `%2F` / `%25`: an id holding `/` stays one path parameter (see `path_id`), never a
    route of its own."""
    raw = scope.get("raw_path")
    if not raw:
        return str(scope["path"])
    text = raw.decode("latin-1").split("?", 1)[0]
    return "/".join(quote(unquote(segment), safe="") if "%" in segment else segment for segment in text.split("/"))


def path_id(value: str) -> str:
    """A path parameter as the id it names (see `segment_path`)."""
    return unquote(value)


def with_headers(send: Send) -> Send:
    """`send`, adding the security headers to the response's start (those it does not set)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", ())}
            message["headers"] = [*message.get("headers", ()), *((k, v) for k, v in SECURITY_HEADERS if k not in present)]
        await send(message)

    return sending


async def respond(send: Send, status: int, message: str, scope: Scope, *, retry_after: float = 0.0) -> None:
    """A refusal: JSON for the API, plain text for a person."""
    api = str(scope.get("path", "")).startswith("/api/")
    body = (json.dumps({"error": message}) if api else f"{status}: {message}\n").encode()
    headers = [
        (b"content-type", b"application/json" if api else b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    if retry_after:
        headers.append((b"retry-after", str(int(retry_after) + 1).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
