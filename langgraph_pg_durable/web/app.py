"""The replay page's app: its JSON endpoints (api.py), its pages (pages.py) and their
static files, on one saver for the app's lifetime, every request behind one guard
(guard.py: the Host check, the token, the security headers).

What is not there is a 404 naming it; a bad query a 400 naming the parameter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
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
from .guard import LOOPBACK_NAMES, FailedChecks, Guard, checked_token
from .pages import page_routes

STATIC = Path(__file__).resolve().parent / "static"


def create_app(
    open_saver: Callable[[], AbstractContextManager[Any]],
    *,
    token: str | None = None,
    schema: str = "",
    allowed_hosts: Collection[str] = LOOPBACK_NAMES,
    secure_cookie: bool = False,
    failures: FailedChecks | None = None,
) -> Any:
    """The app (an ASGI callable), on the saver `open_saver()` opens for its lifetime (a
    `Target.saver`). It answers requests whose `Host` is one of `allowed_hosts`; with a
    `token` (at least 16 characters), only those that carry it (see guard.py)."""
    if token is not None:
        checked_token(token, "create_app() token")
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with open_saver() as saver:
            state["saver"] = saver
            yield

    def saver() -> Any:
        return state["saver"]

    def answering(endpoint: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def run(request: Request) -> Response:
            try:
                return endpoint(request)
            except LookupError as exc:
                return failure(request, str(exc).strip("'"), 404)
            except ConfigError as exc:
                return failure(request, str(exc), 400)
            except DurableCheckpointError as exc:
                return failure(request, f"{type(exc).__name__}: {exc}", 500)

        return run

    routes: list[Any] = [Route(path, answering(endpoint)) for path, endpoint in api_routes(saver)]
    routes += [Route(path, answering(endpoint)) for path, endpoint in page_routes(saver, schema)]
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    guard = Guard(allowed_hosts=allowed_hosts, token=token, secure_cookie=secure_cookie, failures=failures or FailedChecks())
    return guard.wrap(Starlette(routes=routes, lifespan=lifespan))


def failure(request: Request, message: str, status: int) -> Response:
    """An error as JSON for the API, as a short page for a person."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=status)
    from .pages import error_page

    return error_page(message, status)
