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

An Accept header that allows none of a form's formats gets 406 naming them.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.body import read_body
from provkg.api.errors import BadRequest, NotAcceptable, UnsupportedMediaType
from provkg.api.openapi import SPARQL_RESPONSES
from provkg.api.render import SPARQL_FORMATS, sparql_format, sparql_response
from provkg.errors import ReadOnlyQuery
from provkg.service.sparql_guard import MAX_QUERY_CHARS, UPDATE_REFUSED, check_query, query_form_of

router = APIRouter(tags=["sparql"])

_EXAMPLE = "SELECT ?class (COUNT(?x) AS ?n) WHERE { ?x a ?class } GROUP BY ?class ORDER BY DESC(?n) LIMIT 10"
_UNSUPPORTED = ("default-graph-uri", "named-graph-uri")
#: what fits a request line (uvicorn's h11 refuses larger heads): longer queries are POSTed
_GET_QUERY_CHARS = 4000


def _refuse_graph_parameters(pairs: list[tuple[str, str]]) -> None:
    if any(k in _UNSUPPORTED for k, _ in pairs):
        raise BadRequest("default-graph-uri / named-graph-uri are not supported: queries see "
                         "the union of all graphs; use GRAPH in the query")


def _refuse_updates(pairs: list[tuple[str, str]]) -> None:
    if any(k in ("update", "using-graph-uri", "using-named-graph-uri") for k, _ in pairs):
        raise ReadOnlyQuery(UPDATE_REFUSED)


def _pick_query(pairs: list[tuple[str, str]]) -> str:
    queries = [v for k, v in pairs if k == "query"]
    _refuse_updates(pairs)  # the Protocol's update forms: said as such, not as a missing query
    _refuse_graph_parameters(pairs)
    if len(queries) != 1:
        raise BadRequest("send exactly one 'query' parameter (SPARQL 1.1 Protocol)")
    return queries[0]


def _media(request: Request, form: str) -> str:
    accept = ", ".join(request.headers.getlist("accept"))
    media = sparql_format(accept or None, form)
    if media is None:
        raise NotAcceptable(f"this {form.upper()} query can be answered as "
                            f"{', '.join(SPARQL_FORMATS[form])}; the Accept header allows "
                            "none of them")
    return media


async def _answer(request: Request, text: str) -> Response:
    service = request.app.state.service
    text = text.removeprefix("\ufeff")  # a BOM, as `provkg sparql` skips it
    allowed = tuple(service.settings.allowed_service_endpoints)
    if service.sparql.guards_in_worker:
        # the guard's parse takes seconds for a long query: the worker runs it inside the
        # time limit; the form (for the Accept check) is read from the text's first keyword
        form = query_form_of(text)
        media = _media(request, form)  # before the work: a 406 costs nothing
        answer = await run_in_threadpool(service.sparql.run, text, form, guard=allowed)
    else:
        guarded = await run_in_threadpool(check_query, text, allowed_service_endpoints=allowed)
        media = _media(request, guarded.form)
        answer = await run_in_threadpool(service.sparql.run, guarded.text, guarded.form)
    if answer.rows is not None:
        return await run_in_threadpool(sparql_response, media, columns=answer.rows.columns,
                                       rows=answer.rows.rows)
    if answer.boolean is not None:
        return sparql_response(media, boolean=answer.boolean)
    return await run_in_threadpool(sparql_response, media, ntriples=answer.ntriples)


@router.get("/v1/sparql", summary="Read-only SPARQL (query in the URL)", response_class=Response,
            responses=SPARQL_RESPONSES,
            openapi_extra={"parameters": [{"name": "query", "in": "query", "required": True,
                                           "schema": {"type": "string", "maxLength": _GET_QUERY_CHARS},
                                           "example": _EXAMPLE}]})
async def sparql_get(request: Request) -> Response:
    # parsed strictly: Starlette's query_params put U+FFFD for bytes that are no UTF-8, and the
    # query would run with it; a POST refuses such bytes
    try:
        pairs = parse_qsl(request.scope.get("query_string", b"").decode("utf-8"),
                          keep_blank_values=True, errors="strict")
    except ValueError:  # UnicodeDecodeError
        raise BadRequest("the URL's query string is not UTF-8 once percent-decoded") from None
    return await _answer(request, _pick_query(pairs))


@router.post(
    "/v1/sparql", summary="Read-only SPARQL (query in the body)", response_class=Response,
    responses=SPARQL_RESPONSES,
    openapi_extra={"requestBody": {"required": True, "content": {
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
    _refuse_graph_parameters(in_url)
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
        return await _answer(request, text)
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text),
                          errors="strict", max_num_fields=16)
    except ValueError:
        raise BadRequest("the form body is not valid application/x-www-form-urlencoded") from None
    return await _answer(request, _pick_query(pairs))
