"""``GET|POST /v1/sparql``: the SPARQL 1.1 Protocol, read-only.

The query comes as the ``query`` URL parameter (GET), a form field (POST
``application/x-www-form-urlencoded``) or the whole body (POST
``application/sparql-query``). It is parsed and refused if it is an update or
calls an endpoint not allowed with ``SERVICE``, then run with a time limit and a
row cap.

The answer's format is negotiated with the Accept header (q-values honoured; no
Accept or ``*/*`` gets the first of each list):

- SELECT: ``application/sparql-results+json`` (also for ``application/json``),
  ``application/sparql-results+xml`` (also ``application/xml``, ``text/xml``),
  ``text/csv``, ``text/tab-separated-values`` (the W3C SPARQL 1.1 result formats,
  term types kept), or provkg's own ``{"columns": [...], "rows": [[...]]}`` with
  numbers as JSON numbers, on ``Accept: application/vnd.provkg.rows+json`` only;
- ASK: ``application/sparql-results+json`` (``{"head": {}, "boolean": ...}``),
  ``application/sparql-results+xml``, or ``{"columns": ["boolean"], "rows": [[...]]}`` as
  ``application/vnd.provkg.rows+json``, as the CLI writes it (CSV and TSV define no boolean
  form);
- CONSTRUCT / DESCRIBE: ``text/turtle``, ``application/n-triples``,
  ``application/ld+json``, ``application/rdf+xml``.

A CONSTRUCT / DESCRIBE asked for with result-set types only (``Accept:
application/sparql-results+json``, as rasqal's ``roqet`` sends) is answered in Turtle; an Accept
header that allows none of a form's formats (nor, for those, a result-set type) gets 406.

``default-graph-uri`` / ``named-graph-uri`` (repeatable; in the URL, or in a form body) name the
query's dataset (:mod:`provkg.api.sparql_dataset`). A GET with neither a query nor those is
answered with the SPARQL 1.1 Service Description (:mod:`provkg.api.descriptions`). An answer past
the row limit is 422 ``too_many_rows`` (:mod:`provkg.api.row_limit`).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.body import read_body
from provkg.api.errors import BadRequest, NotAcceptable, TooManyRows, UnsupportedMediaType
from provkg.api.openapi import SPARQL_RESPONSES
from provkg.api.render import SPARQL_FORMATS, TURTLE, sparql_format, sparql_response
from provkg.api.routes.void import description_answer
from provkg.api.row_limit import TOO_MANY_ROWS_RESPONSE, TOO_MANY_ROWS_STATUS, too_many_rows_response
from provkg.api.sparql_dataset import ProtocolDataset, protocol_dataset
from provkg.errors import ReadOnlyQuery
from provkg.service.sparql_guard import MAX_QUERY_CHARS, UPDATE_REFUSED, check_query, query_form_of

router = APIRouter(tags=["sparql"])

_EXAMPLE = "SELECT ?class (COUNT(?x) AS ?n) WHERE { ?x a ?class } GROUP BY ?class ORDER BY DESC(?n) LIMIT 10"
_GRAPH_PARAMETERS = ("default-graph-uri", "named-graph-uri")
_UPDATE_PARAMETERS = ("update", "using-graph-uri", "using-named-graph-uri")
#: what fits a request line (uvicorn's h11 refuses larger heads): longer queries are POSTed
_GET_QUERY_CHARS = 4000

def _refuse_updates(pairs: list[tuple[str, str]]) -> None:
    if any(k in _UPDATE_PARAMETERS for k, _ in pairs):
        raise ReadOnlyQuery(UPDATE_REFUSED)


def _pick_query(pairs: list[tuple[str, str]]) -> str:
    queries = [v for k, v in pairs if k == "query"]
    _refuse_updates(pairs)  # the Protocol's update forms: said as such, not as a missing query
    if len(queries) != 1:
        raise BadRequest("send exactly one 'query' parameter (SPARQL 1.1 Protocol)")
    return queries[0]


def _media(request: Request, form: str) -> str:
    accept = ", ".join(request.headers.getlist("accept"))
    media = sparql_format(accept or None, form)
    if media is None and form in ("construct", "describe") and sparql_format(accept, "select"):
        return TURTLE  # result-set types only (roqet): the default RDF format, not a 406
    if media is None:
        raise NotAcceptable(f"this {form.upper()} query can be answered as "
                            f"{', '.join(SPARQL_FORMATS[form])}; the Accept header allows "
                            "none of them")
    return media


async def _answer(request: Request, text: str, dataset: ProtocolDataset) -> Response:
    try:
        return await _run(request, text, dataset)
    except TooManyRows as exc:
        return too_many_rows_response(exc)


async def _run(request: Request, text: str, dataset: ProtocolDataset) -> Response:
    service = request.app.state.service
    text = text.removeprefix("\ufeff")  # a BOM, as `provkg sparql` skips it
    allowed = tuple(service.settings.allowed_service_endpoints)
    if service.sparql.guards_in_worker:
        # the guard's parse takes seconds for a long query: the worker runs it inside the
        # time limit; the form (for the Accept check) is read from the text's first keyword
        form = query_form_of(text)
        media = _media(request, form)  # before the work: a 406 costs nothing
        answer = await run_in_threadpool(service.sparql.run, text, form, guard=allowed,
                                         dataset=dataset)
    else:
        guarded = await run_in_threadpool(check_query, text, allowed_service_endpoints=allowed)
        media = _media(request, guarded.form)
        answer = await run_in_threadpool(service.sparql.run, guarded.text, guarded.form,
                                         dataset=dataset)
    if answer.rows is not None:
        return await run_in_threadpool(sparql_response, media, columns=answer.rows.columns,
                                       rows=answer.rows.rows)
    if answer.boolean is not None:
        return sparql_response(media, boolean=answer.boolean)
    return await run_in_threadpool(sparql_response, media, ntriples=answer.ntriples)


_GRAPH_PARAMETER_SPECS = [
    {"name": name, "in": "query", "required": False, "style": "form", "explode": True,
     "schema": {"type": "array", "items": {"type": "string", "format": "iri"}, "maxItems": 4},
     "description": f"a graph of the query's dataset ({clause} in the query), repeatable; "
                    "replaces the query's own FROM / FROM NAMED"}
    for name, clause in (("default-graph-uri", "FROM"), ("named-graph-uri", "FROM NAMED"))]
_RESPONSES = {**SPARQL_RESPONSES, TOO_MANY_ROWS_STATUS: TOO_MANY_ROWS_RESPONSE}


@router.get("/v1/sparql", summary="Read-only SPARQL (query in the URL), or the Service Description",
            description="With `query`: run it. With no query (and no graph parameter): the SPARQL "
                        "1.1 Service Description of this endpoint, Turtle by default (also "
                        "JSON-LD, RDF/XML, N-Triples by Accept).",
            response_class=Response, responses=_RESPONSES,
            openapi_extra={"parameters": [{"name": "query", "in": "query", "required": False,
                                           "schema": {"type": "string", "maxLength": _GET_QUERY_CHARS},
                                           "example": _EXAMPLE}, *_GRAPH_PARAMETER_SPECS]})
async def sparql_get(request: Request) -> Response:
    # parsed strictly: Starlette's query_params put U+FFFD for bytes that are no UTF-8, and the
    # query would run with it; a POST refuses such bytes
    try:
        pairs = parse_qsl(request.scope.get("query_string", b"").decode("utf-8"),
                          keep_blank_values=True, errors="strict")
    except ValueError:  # UnicodeDecodeError
        raise BadRequest("the URL's query string is not UTF-8 once percent-decoded") from None
    if not any(k in ("query", *_GRAPH_PARAMETERS, *_UPDATE_PARAMETERS) for k, _ in pairs):
        return await description_answer(request, "service")
    text = _pick_query(pairs)
    return await _answer(request, text, protocol_dataset(pairs))


@router.post(
    "/v1/sparql", summary="Read-only SPARQL (query in the body)", response_class=Response,
    responses=_RESPONSES,
    openapi_extra={"parameters": _GRAPH_PARAMETER_SPECS, "requestBody": {"required": True, "content": {
        "application/sparql-query": {"schema": {"type": "string"}, "example": _EXAMPLE},
        "application/x-www-form-urlencoded": {
            "schema": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]},
            "example": {"query": _EXAMPLE}}}}},
)
async def sparql_post(request: Request) -> Response:
    service = request.app.state.service
    in_url = list(request.query_params.multi_items())
    if any(k == "query" for k, _ in in_url):
        raise BadRequest("the query is in the URL of a POST: send it once, in the body "
                         "(application/sparql-query, or the 'query' field of a form) or in "
                         "the URL of a GET")
    _refuse_updates(in_url)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/sparql-update":  # a standard client's update: not a media problem
        raise ReadOnlyQuery(UPDATE_REFUSED)
    if media not in ("application/sparql-query", "application/x-www-form-urlencoded"):
        raise UnsupportedMediaType("POST the query as application/sparql-query or as the "
                                   "'query' field of application/x-www-form-urlencoded")
    limit = min(service.settings.max_body_bytes, 4 * MAX_QUERY_CHARS)
    body = await read_body(request, limit=limit, decompressed_limit=limit)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body is not UTF-8 text") from None
    if media == "application/sparql-query":
        return await _answer(request, text, protocol_dataset(in_url))
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text),
                          errors="strict", max_num_fields=16 + 2 * 1000)
    except ValueError:
        raise BadRequest("the form body is not valid application/x-www-form-urlencoded") from None
    # the Protocol puts every parameter of a form POST in the body; the URL's are taken too
    return await _answer(request, _pick_query(pairs), protocol_dataset(in_url + pairs))
