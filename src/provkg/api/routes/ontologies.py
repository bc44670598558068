"""``GET /v1/ontologies`` and ``GET /v1/ontologies/{name}`` (Turtle). Names are looked up, never
joined to paths."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from provkg.api.openapi import error_responses
from provkg.errors import NotFound
from provkg.ontology import ontology_names, read_ontology

router = APIRouter(tags=["ontologies"])


@router.get("/v1/ontologies", summary="Names of provkg's ontologies")
async def list_ontologies() -> list[str]:
    return ontology_names()


@router.get("/v1/ontologies/{name}", summary="One ontology as Turtle",
            response_class=Response,
            responses={200: {"content": {"text/turtle": {}}}, **error_responses(404)})
async def get_ontology(name: str) -> Response:
    if name not in ontology_names():  # look up, never build a path from the request
        raise NotFound(f"unknown ontology; expected one of: {', '.join(ontology_names())}")
    return Response(read_ontology(name), media_type="text/turtle; charset=utf-8")
