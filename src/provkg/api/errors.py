"""The API's one error handler: provkg exceptions -> ``{"error": ..., "detail": ...}``.

Request-level problems the domain tree does not know about (a missing token, a body
too large, an unsupported encoding) are small subclasses of :class:`ProvkgError` so
that the same handler answers them. Details never echo submitted values.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from provkg.errors import (
    BadEvent,
    BadParameter,
    BadSpec,
    MappingError,
    NotFound,
    ProvkgError,
    QuerySyntaxError,
    QueryTimeout,
    StoreError,
    StoreUnavailable,
    UnknownQuery,
)
from provkg.problems import describe

__all__ = [
    "Unauthorized", "BodyTooLarge", "UnsupportedMediaType", "NotAcceptable", "ReadOnlyQuery",
    "BadRequest", "TooManyRows", "QueueUnavailable", "status_of", "install_error_handlers",
    "error_body",
]

log = logging.getLogger("provkg.api")


class Unauthorized(ProvkgError):
    code = "unauthorized"


class BodyTooLarge(ProvkgError):
    code = "body_too_large"


class UnsupportedMediaType(ProvkgError):
    code = "unsupported_media_type"


class NotAcceptable(ProvkgError):
    code = "not_acceptable"


class ReadOnlyQuery(ProvkgError):
    """An update, or a SERVICE call, sent to the read-only SPARQL endpoint."""

    code = "read_only"


class TooManyRows(ProvkgError):
    """An answer past the server's ``max_rows`` (one code for canned queries and SPARQL)."""

    code = "too_many_rows"


class BadRequest(ProvkgError):
    """Malformed request framing: bad encoding, not UTF-8, not JSON."""

    code = "bad_request"


class QueueUnavailable(ProvkgError):
    code = "queue_unavailable"


# most specific first: the first isinstance match wins
_STATUS: list[tuple[type[ProvkgError], int]] = [
    (Unauthorized, 401),
    (BodyTooLarge, 413),
    (UnsupportedMediaType, 415),
    (NotAcceptable, 406),
    (ReadOnlyQuery, 400),
    (TooManyRows, 400),
    (BadRequest, 400),
    (BadEvent, 422),
    (BadSpec, 422),
    (BadParameter, 400),
    (QuerySyntaxError, 400),
    (UnknownQuery, 404),
    (NotFound, 404),
    (QueryTimeout, 504),
    (MappingError, 422),
    (StoreUnavailable, 503),
    (QueueUnavailable, 503),
    (StoreError, 502),
]


def status_of(exc: ProvkgError) -> int:
    """The HTTP status answering ``exc`` (500 for a provkg error with no mapping)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def error_body(code: str, detail: str) -> dict[str, str]:
    """The one shape of every error answer."""
    return {"error": code, "detail": detail}


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
