"""``GET /.well-known/void``: the VoID description of the dataset (RFC 5785's well-known path
that the VoID note names), and the Service Description that ``GET /v1/sparql`` answers with
no query; both Turtle by default, JSON-LD, RDF/XML or N-Triples by the Accept header."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.descriptions import (
    DESCRIPTION_FORMATS,
    description_format,
    rdf_response,
    service_description,
    void_description,
)
from provkg.api.errors import NotAcceptable, TooManyRows
from provkg.api.openapi import error_responses
from provkg.api.row_limit import TOO_MANY_ROWS_RESPONSE, TOO_MANY_ROWS_STATUS, too_many_rows_response

__all__ = ["router", "description_answer", "origin_of"]

router = APIRouter(tags=["sparql"])


def origin_of(request: Request) -> str:
    """The URL the client reached the server at (scheme, host, port and any root path), with
    no trailing slash: the descriptions name the server's routes under it."""
    return str(request.base_url).rstrip("/")


async def description_answer(request: Request, which: Literal["service", "void"]) -> Response:
    """The Service Description (``service``) or the VoID description (``void``), in the format
    the Accept header prefers."""
    media = description_format(", ".join(request.headers.getlist("accept")) or None)
    if media is None:
        raise NotAcceptable(f"this description is served as {', '.join(DESCRIPTION_FORMATS)}; "
                            "the Accept header allows none of them")
    build = service_description if which == "service" else void_description
    try:
        triples = await run_in_threadpool(build, request.app.state.service, origin_of(request))
    except TooManyRows as exc:
        return too_many_rows_response(exc)
    return await run_in_threadpool(rdf_response, media, triples)


@router.get("/.well-known/void", summary="VoID description of the dataset",
            description="A `void:Dataset` with its triples, classes (entities per class) and "
                        "properties (triples per property), the vocabularies used, the SPARQL "
                        "endpoint and the N-Quads dump; counted on the store when asked. Turtle "
                        "by default; JSON-LD, RDF/XML or N-Triples by Accept.",
            response_class=Response,
            responses={200: {"content": {m: {} for m in DESCRIPTION_FORMATS}},
                       **error_responses(504), TOO_MANY_ROWS_STATUS: TOO_MANY_ROWS_RESPONSE,
                       406: {"description": "the Accept header allows none of the formats"}})
async def void(request: Request) -> Response:
    return await description_answer(request, "void")
