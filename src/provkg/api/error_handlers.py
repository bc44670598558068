"""The API's one error handler: provkg exceptions -> ``{"error": ..., "detail": ...}``
with the status of :func:`provkg.api.errors.status_of`; FastAPI's validation errors, HTTP
errors and unexpected exceptions in the same shape."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from provkg.api.errors import error_body, status_of
from provkg.errors import ProvkgError
from provkg.problems import describe

__all__ = ["install_error_handlers"]

log = logging.getLogger("provkg.api")


def _path(loc: tuple[object, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(request)"


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers: provkg errors, FastAPI validation, HTTP errors, the rest."""

    @app.exception_handler(ProvkgError)
    async def _provkg(request: Request, exc: ProvkgError) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            log.warning("%s %s -> %s: %s", request.method, request.url.path, status, exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(error_body(exc.code, str(exc)), status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        # name the field, never echo the submitted value (tokens leak that way)
        lines = [f"{_path(tuple(e['loc']))}: {describe(e)}" for e in exc.errors()]
        return JSONResponse(error_body("bad_request", "; ".join(lines[:20])), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code,
                            headers=headers or None)

    app.add_middleware(_InternalError)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette names only the matched route's,
    so ``PUT /v1/specs`` would say POST, not GET and POST), HEAD wherever GET is."""
    from starlette.routing import Match

    routes = request.app.router.routes
    allowed = {m for m in _METHODS
               if any(r.matches({**request.scope, "method": m})[0] == Match.FULL for r in routes)}
    if "GET" in allowed:
        allowed.add("HEAD")
    return [m for m in _METHODS if m in allowed]


class _InternalError:
    """Answer an unexpected exception with a logged 500 ``{"error": "internal", ...}``.

    A middleware, not ``exception_handler(Exception)``: Starlette runs that handler and then
    re-raises to the server, which drops the connection, so a keep-alive client's next
    request would fail with "connection reset"."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except ClientDisconnect:  # the client went (or its body broke off): nobody to answer
            log.info("client went away during %s %s", scope.get("method"), scope.get("path"))
            return
        except Exception:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if started:  # part of an answer went out: nothing sound can follow it
                raise
            body = error_body("internal", "internal server error (logged on the server)")
            await JSONResponse(body, status_code=500)(scope, receive, send)
