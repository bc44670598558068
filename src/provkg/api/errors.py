"""The API's errors: provkg exceptions -> an HTTP status and ``{"error": ..., "detail": ...}``.

Request-level problems the domain tree does not know about (a missing token, a body
too large, an unsupported encoding) are small subclasses of :class:`ProvkgError` so
that the one handler (:mod:`provkg.api.error_handlers`) answers them. Details never echo
submitted values. No FastAPI here: the MQTT listener and the spec registry raise these too.
"""

from __future__ import annotations

from provkg.errors import (
    BadEvent,
    BadParameter,
    BadSpec,
    MappingError,
    NotFound,
    ProvkgError,
    QuerySyntaxError,
    QueryTimeout,
    ReadOnlyQuery,
    StoreError,
    StoreUnavailable,
    UnknownQuery,
)
from provkg.service.queue import QueueUnavailable

__all__ = [
    "Unauthorized", "BodyTooLarge", "UnsupportedMediaType", "NotAcceptable", "ReadOnlyQuery",
    "BadRequest", "TooManyRows", "QueueUnavailable", "status_of", "error_body",
]


class Unauthorized(ProvkgError):
    code = "unauthorized"


class BodyTooLarge(ProvkgError):
    code = "body_too_large"


class UnsupportedMediaType(ProvkgError):
    code = "unsupported_media_type"


class NotAcceptable(ProvkgError):
    code = "not_acceptable"


class TooManyRows(ProvkgError):
    """An answer past the server's ``max_rows`` (one code for canned queries and SPARQL)."""

    code = "too_many_rows"


class BadRequest(ProvkgError):
    """Malformed request framing: bad encoding, not UTF-8, not JSON."""

    code = "bad_request"


# most specific first: the first isinstance match wins
_STATUS: list[tuple[type[ProvkgError], int]] = [
    (Unauthorized, 401),
    (BodyTooLarge, 413),
    (UnsupportedMediaType, 415),
    (NotAcceptable, 406),
    (ReadOnlyQuery, 400),
    (TooManyRows, 422),
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
