"""The replay page's app: its JSON endpoints (api.py), its pages (pages.py) and their
static files, on one saver for the app's lifetime, every request through one guard.

A token, when configured, is required of every request: `Authorization: Bearer TOKEN`, or
`?token=` once (it is then kept in a cookie, so a pasted deep link works in a browser).
What is not there is a 404 naming it; a bad query a 400.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import ConfigError, DurableCheckpointError
from .api import api_routes
from .pages import page_routes

TOKEN_COOKIE = "lgpd_token"
STATIC = Path(__file__).resolve().parent / "static"


def create_app(open_saver: Callable[[], AbstractContextManager[Any]], *, token: str | None = None, schema: str = "") -> Starlette:
    """The app, on the saver `open_saver()` opens for its lifetime (a `Target.saver`)."""
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with open_saver() as saver:
            state["saver"] = saver
            yield

    def saver() -> Any:
        return state["saver"]

    def guarded(endpoint: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def run(request: Request) -> Response:
            given = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)
            header = request.headers.get("authorization", "")
            if header.lower().startswith("bearer "):
                given = header[7:]
            if token is not None and not (given and hmac.compare_digest(given.encode(), token.encode())):
                return JSONResponse({"error": "a token is required: Authorization: Bearer TOKEN, or ?token="}, status_code=401)
            try:
                response = endpoint(request)
            except LookupError as exc:
                response = failure(request, str(exc).strip("'"), 404)
            except ConfigError as exc:
                response = failure(request, str(exc), 400)
            except DurableCheckpointError as exc:
                response = failure(request, f"{type(exc).__name__}: {exc}", 500)
            if token is not None and request.query_params.get("token"):
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response

        return run

    routes: list[Any] = [Route(path, guarded(endpoint)) for path, endpoint in api_routes(saver)]
    routes += [Route(path, guarded(endpoint)) for path, endpoint in page_routes(saver, schema)]
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    return Starlette(routes=routes, lifespan=lifespan)


def failure(request: Request, message: str, status: int) -> Response:
    """An error as JSON for the API, as a short page for a person."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=status)
    from .pages import error_page

    return error_page(message, status)
