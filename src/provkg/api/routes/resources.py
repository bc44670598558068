"""``GET /id/{path}``: the read-only Linked Data view of the resources provkg mints.

``/id/PATH`` describes the resource ``https://w3id.org/provkg/id/PATH``
(:data:`provkg.vocab.DEFAULT_BASE`), PATH taken as the client sent it, percent-encoding kept
(``/id/task/run-1/epoch%203`` is ``.../task/run-1/epoch%203``, as :func:`provkg.term.mint_iri`
writes it). The answer, by the Accept header: Turtle (the default), JSON-LD, RDF/XML,
N-Triples, or a small HTML page (:mod:`provkg.api.resource_page`); it holds the resource's
triples as subject, those of the blank nodes it points to (one level: qualified associations),
and up to :data:`MAX_INCOMING` triples with it as object. 404 when the store holds none.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.descriptions import DESCRIPTION_FORMATS, rdf_response, term_text
from provkg.api.errors import BadRequest, NotAcceptable, TooManyRows
from provkg.api.openapi import error_responses
from provkg.api.render import NOTE_HEADER, header_text, negotiate
from provkg.api.resource_page import PAGE_HEADERS, resource_page
from provkg.api.row_limit import TOO_MANY_ROWS_RESPONSE, TOO_MANY_ROWS_STATUS, too_many_rows_response
from provkg.api.service import Service
from provkg.errors import NotFound
from provkg.term import Triple, iri, is_valid_iri
from provkg.vocab import DEFAULT_BASE

__all__ = ["router", "resource_iri", "MAX_OUTGOING", "MAX_INCOMING"]

router = APIRouter(tags=["linked data"])

HTML = "text/html"
#: the formats of a resource's description, the default first
RESOURCE_FORMATS = (*DESCRIPTION_FORMATS[:2], HTML, *DESCRIPTION_FORMATS[2:])
#: triples as subject (with its blank nodes' own) sent at most: more is 422 too_many_rows
MAX_OUTGOING = 10_000
#: triples with the resource as object sent at most (a spec attribute is the object of every
#: value captured for it); more are left out, and the answer says so
MAX_INCOMING = 1_000
_PREFIX = "/id/"


def resource_iri(raw_path: bytes) -> str:
    """The IRI ``/id/...`` stands for: the path as sent, after ``/id/``, under the base.

    >>> resource_iri(b"/id/task/run-1/epoch%203")
    'https://w3id.org/provkg/id/task/run-1/epoch%203'

    Raises:
        BadRequest: the path is not UTF-8 or does not make an IRI.
    """
    try:
        rest = raw_path.decode("utf-8")[len(_PREFIX):]
    except UnicodeDecodeError:
        raise BadRequest("the path is not UTF-8") from None
    value = DEFAULT_BASE + rest
    if not is_valid_iri(value):
        raise BadRequest(f"the path after {_PREFIX} does not make an IRI under {DEFAULT_BASE} "
                         "(a character IRIs forbid, or % not followed by two hex digits)")
    return value


def _describe(service: Service, resource: str) -> tuple[list[list[Any]], list[list[Any]]]:
    """(rows ?p ?o ?bp ?bo of the resource as subject, rows ?s ?p of it as object)."""
    term = iri(resource)
    outgoing = service.sparql.run(
        f"SELECT ?p ?o ?bp ?bo WHERE {{ {term} ?p ?o OPTIONAL {{ ?o ?bp ?bo FILTER(isBlank(?o)) }} }} "
        f"LIMIT {MAX_OUTGOING + 1}", "select")
    incoming = service.sparql.run(f"SELECT ?s ?p WHERE {{ ?s ?p {term} }} LIMIT {MAX_INCOMING + 1}",
                                  "select")
    assert outgoing.rows is not None and incoming.rows is not None
    if len(outgoing.rows.rows) > MAX_OUTGOING:
        raise TooManyRows(f"this resource has more than {MAX_OUTGOING} triples as subject, more "
                          "than its page shows; query it with /v1/sparql and LIMIT")
    return outgoing.rows.rows, incoming.rows.rows


@router.get("/id/{path:path}", summary="Linked Data view of a resource provkg minted",
            description=f"`/id/PATH` describes `{DEFAULT_BASE}PATH` (PATH as sent, percent-encoding "
                        "kept): its triples as subject, its blank nodes' triples, and up to "
                        f"{MAX_INCOMING} triples with it as object. Turtle by default; JSON-LD, "
                        "RDF/XML, N-Triples or an HTML page by Accept.",
            response_class=Response,
            responses={200: {"content": {m: {} for m in RESOURCE_FORMATS}},
                       **error_responses(400, 404, 504), TOO_MANY_ROWS_STATUS: TOO_MANY_ROWS_RESPONSE,
                       406: {"description": "the Accept header allows none of the formats"}})
async def resource(path: str, request: Request) -> Response:
    # the raw path: Starlette's `path` is percent-decoded, and minted IRIs keep their %XX
    resource = resource_iri(request.scope.get("raw_path") or request.url.path.encode("utf-8"))
    media = negotiate(", ".join(request.headers.getlist("accept")) or None, RESOURCE_FORMATS)
    if media is None:
        raise NotAcceptable(f"a resource is described as {', '.join(RESOURCE_FORMATS)}; the "
                            "Accept header allows none of them")
    try:
        outgoing, incoming = await run_in_threadpool(_describe, request.app.state.service, resource)
    except TooManyRows as exc:
        return too_many_rows_response(exc)
    if not outgoing and not incoming:
        raise NotFound("the store holds no triple about this resource")
    notes = []
    if len(incoming) > MAX_INCOMING:
        incoming = incoming[:MAX_INCOMING]
        notes.append(f"only {MAX_INCOMING} of the triples with this resource as object are shown; "
                     "query the rest with /v1/sparql")
    if media == HTML:
        page = _page(resource, outgoing, incoming, notes)
        return Response(page, media_type="text/html; charset=utf-8",
                        headers={"Vary": "Accept", **PAGE_HEADERS})
    triples = _triples(iri(resource), outgoing, incoming)
    headers = {NOTE_HEADER: header_text(notes[0])} if notes else None
    return await run_in_threadpool(rdf_response, media, triples, headers=headers)


def _triples(subject: str, outgoing: list[list[Any]], incoming: list[list[Any]]) -> list[Triple]:
    out: dict[Triple, None] = {}
    for p, o, bp, bo in outgoing:
        p_text, o_text = term_text(p), term_text(o)
        if p_text is None or o_text is None:
            continue
        out[(subject, p_text, o_text)] = None
        if bp is not None and bo is not None and (bp_text := term_text(bp)) and (bo_text := term_text(bo)):
            out[(o_text, bp_text, bo_text)] = None
    for s, p in incoming:
        s_text, p_text = term_text(s), term_text(p)
        if s_text is not None and p_text is not None:
            out[(s_text, p_text, subject)] = None
    return list(out)


def _page(resource: str, outgoing: list[list[Any]], incoming: list[list[Any]], notes: list[str]) -> str:
    direct: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
    blank: dict[str, dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]]] = {}
    for p, o, bp, bo in outgoing:
        direct.setdefault((str(p["value"]), str(o["value"])), (p, o))
        if bp is not None and bo is not None:
            blank.setdefault(str(o["value"]), {}).setdefault((str(bp["value"]), str(bo["value"])), (bp, bo))
    ordered = sorted(direct.items())
    return resource_page(resource, [pair for _, pair in ordered],
                         {label: [pair for _, pair in sorted(rows.items())] for label, rows in blank.items()},
                         sorted(((s, p) for s, p in incoming), key=lambda sp: (str(sp[1]["value"]),
                                                                               str(sp[0]["value"]))),
                         notes=notes)
