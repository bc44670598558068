"""The answer to a result past the server's row limit (``PROVKG_MAX_ROWS``) on the SPARQL
endpoint and the views built on it (VoID, the Linked Data pages).

422 ``too_many_rows``: the query is well formed and the client is to change it (add LIMIT);
not 400, which SPARQL clients (SPARQLWrapper's ``QueryBadFormed``) read as a malformed query,
not 413, which RFC 9110 keeps for a request's own content, and not a 5xx, which says the
server failed and invites a retry of the same query.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from provkg.api.errors import TooManyRows, error_body

__all__ = ["TOO_MANY_ROWS_STATUS", "TOO_MANY_ROWS_RESPONSE", "too_many_rows_response"]

TOO_MANY_ROWS_STATUS = 422

#: its OpenAPI description
TOO_MANY_ROWS_RESPONSE: dict[str, Any] = {
    "description": "the answer has more rows (CONSTRUCT: triples) than the server's limit "
                   "(PROVKG_MAX_ROWS)",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {
        "error": "too_many_rows", "detail": "the result has more than 100000 rows (or triples), "
        "the server's limit (PROVKG_MAX_ROWS); add LIMIT or narrow the query"}}}}


def too_many_rows_response(exc: TooManyRows) -> JSONResponse:
    """The answer to ``exc``: :data:`TOO_MANY_ROWS_STATUS`, in the one error shape."""
    return JSONResponse(error_body(exc.code, str(exc)), status_code=TOO_MANY_ROWS_STATUS)
