"""``GET /v1/ontologies`` and ``GET /v1/ontologies/{name}`` (Turtle, N-Triples or RDF/XML by
the Accept header). Names are looked up, never joined to paths."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.errors import NotAcceptable
from provkg.api.openapi import ONTOLOGY_NOT_ACCEPTABLE, error_responses
from provkg.api.render import negotiate
from provkg.errors import NotFound
from provkg.ontology import ONTOLOGY_FORMATS, ontology_name, ontology_names, ontology_terms, ontology_text

router = APIRouter(tags=["ontologies"])


@router.get("/v1/ontologies", summary="Names of provkg's ontologies")
async def list_ontologies() -> list[str]:
    return ontology_names()


@router.get("/v1/ontologies/{name}", summary="One ontology as Turtle, N-Triples or RDF/XML",
            description="`name` is one of `GET /v1/ontologies` or its prefix (`provml`, "
                        "`sprov`, `seis`). Turtle by default; `Accept: application/rdf+xml` "
                        "gives the form owlready2 (Protégé's library) reads, "
                        "`application/n-triples` one triple a line (q-values honoured; an "
                        "Accept header allowing none of the three gets 406).",
            response_class=Response,
            responses={200: {"content": {m: {} for m in ONTOLOGY_FORMATS}},
                       **error_responses(404),
                       406: ONTOLOGY_NOT_ACCEPTABLE})
async def get_ontology(name: str, request: Request) -> Response:
    if ontology_name(name) not in ontology_names():  # look up, never build a path from the request
        raise NotFound(f"unknown ontology; expected one of: {', '.join(ontology_names())}")
    media = negotiate(", ".join(request.headers.getlist("accept")) or None, list(ONTOLOGY_FORMATS))
    if media is None:
        raise NotAcceptable(f"an ontology is served as {', '.join(ONTOLOGY_FORMATS)}; the Accept "
                            "header allows none of them")
    text = await run_in_threadpool(ontology_text, name, media)
    return Response(text, media_type=f"{media}; charset=utf-8", headers={"Vary": "Accept"})


@router.get("/v1/ontologies/{name}/terms", summary="The classes and properties of one ontology",
            description="Each class and property the ontology declares: `iri`, `kind`, `label`, "
                        "`comment`, `parent` (superclass or superproperty), `domain`, `range` "
                        "(empty text where it states none); by IRI.",
            responses=error_responses(404))
async def get_ontology_terms(name: str) -> list[dict[str, str]]:
    if ontology_name(name) not in ontology_names():
        raise NotFound(f"unknown ontology; expected one of: {', '.join(ontology_names())}")
    return await run_in_threadpool(ontology_terms, name)
