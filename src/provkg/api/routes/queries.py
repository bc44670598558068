"""``GET /v1/queries`` (the catalog) and ``GET /v1/queries/{name}?param=...`` (run one)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.errors import NotAcceptable, TooManyRows
from provkg.api.openapi import (
    QUERY_ERRORS,
    ROWS_NOT_ACCEPTABLE,
    canned_query_parameters,
    error_responses,
)
from provkg.api.render import NOTE_HEADER, ROWS_FORMATS, header_text, rows_format, rows_response
from provkg.errors import BadParameter, UnknownQuery
from provkg.service.querying import query_catalog

router = APIRouter(tags=["queries"])

_MAX_PARAM_CHARS = 4096


def _known(name: str) -> None:
    if name not in {q.name for q in query_catalog()}:
        raise UnknownQuery("no canned query has this name; the catalog is GET /v1/queries")


def _query_params(request: Request) -> dict[str, object]:
    """The query string as canned-query parameters: each once, each of bounded length
    (bad_parameter, as every other parameter problem)."""
    params: dict[str, object] = {}
    for key, value in request.query_params.multi_items():
        if key in params:
            raise BadParameter(f"parameter {key!r} given more than once")
        if len(value) > _MAX_PARAM_CHARS:
            raise BadParameter(f"parameter {key!r} is longer than {_MAX_PARAM_CHARS} characters")
        params[key] = value
    return params


def _describe(query: Any) -> dict[str, Any]:
    params = []
    for p in query.parameters:
        entry: dict[str, Any] = {"name": p.name, "type": p.type, "required": p.required}
        if not p.required:
            entry["default"] = p.default
        if getattr(p, "help", ""):
            entry["description"] = p.help
        params.append(entry)
    return {"name": query.name, "question": query.question, "parameters": params,
            "columns": list(query.columns)}


@router.get("/v1/queries", summary="The canned lifecycle queries: parameters and columns",
            responses={200: {"content": {"application/json": {"example": [
                {"name": "q3", "question": "the model with the least measure",
                 "parameters": [{"name": "dataset", "type": "data", "required": True},
                                {"name": "measure", "type": "str", "required": False,
                                 "default": "loss"}],
                 "columns": ["model", "role", "name", "value"]}]}}}})
async def list_queries() -> list[dict[str, Any]]:
    return [_describe(q) for q in query_catalog()]


@router.get(
    "/v1/queries/{name}",
    summary="Run a canned query",
    description="Parameters are query-string arguments named as in the catalog "
                "(`GET /v1/queries`); they are bound into the query, never pasted. JSON "
                "`{\"columns\": [...], \"rows\": [...]}` by default, CSV with `Accept: text/csv` "
                "(q-values honoured; an Accept header allowing neither gets 406). Numbers are "
                "JSON numbers, exact however large; a non-finite double is the string `\"NaN\"`, "
                "`\"Infinity\"` or `\"-Infinity\"`. An empty answer carries a `Provkg-Note` "
                "header for each reason cheap checks find (a parameter that names nothing in "
                "the store, rows in another schema).",
    response_class=Response,
    responses={200: {"content": {
        "application/json": {"example": {"columns": ["model", "role", "name", "value"],
                                         "rows": [["m-1", "hyperparameter", "learning_rate", 0.001]]}},
        "text/csv": {}}}, **QUERY_ERRORS, **error_responses(504), 406: ROWS_NOT_ACCEPTABLE},
    # each canned query takes its own parameters: the union, each naming its queries
    openapi_extra={"parameters": canned_query_parameters(query_catalog())},
)
async def run_canned(
    request: Request,
    name: str = Path(description="the canned query, as named in the catalog (`GET /v1/queries`)"),
) -> Response:
    from provkg.queries.catalog import get_query
    from provkg.service.querying import run_query, unknown_attributes, why_empty

    service = request.app.state.service
    _known(name)
    media = rows_format(", ".join(request.headers.getlist("accept")) or None)
    if media is None:  # before the work: a 406 costs nothing
        raise NotAcceptable(f"a canned query's answer is {' or '.join(ROWS_FORMATS)}; the "
                            "Accept header allows neither")
    params = _query_params(request)
    for p in get_query(name).parameters:  # said the API's way, not the CLI's (--param)
        if p.required and p.name not in params:
            raise BadParameter(f"query {name!r} needs parameter {p.name!r} ({p.form}); give "
                               f"it in the URL: /v1/queries/{name}?{p.name}=...")
    rows = await run_in_threadpool(run_query, service.store, name, params,
                                   schema=service.settings.ingest_schema,
                                   timeout=service.settings.query_timeout_s)
    if len(rows.rows) > service.settings.max_rows:
        raise TooManyRows(f"the answer has more than {service.settings.max_rows} rows (the "
                          "server's max_rows)")
    response = rows_response(media, rows)
    # why an empty answer is empty, where cheap checks tell (a parameter naming nothing in the
    # store, rows in another schema), and a measure no spec names even when rows came, as the
    # CLI says on stderr: in headers, so the body stays the contract's {"columns", "rows"}
    if not rows.rows:
        notes = await run_in_threadpool(
            why_empty, service.store, name, params, schema=service.settings.ingest_schema,
            timeout=min(10.0, service.settings.query_timeout_s))
    else:
        notes = await run_in_threadpool(unknown_attributes, service.store, name, params)
    for note in notes:
        response.headers.append(NOTE_HEADER, header_text(note))
    return response


@router.get(
    "/v1/queries/{name}/sparql",
    summary="The SPARQL a canned query runs",
    description="The query text `GET /v1/queries/{name}` runs for the same parameters, on this "
                "server's store (its schema and dialect), as `provkg query NAME --show` prints "
                "it: the parameters bound into it, never pasted.",
    response_class=Response,
    responses={200: {"content": {"application/sparql-query": {}}}, **QUERY_ERRORS},
)
async def show_canned(
    request: Request,
    name: str = Path(description="the canned query, as named in the catalog (`GET /v1/queries`)"),
) -> Response:
    from provkg.service.querying import render_query
    from provkg.store.urls import store_dialect

    service = request.app.state.service
    _known(name)
    params = _query_params(request)
    text = render_query(name, params, schema=service.settings.ingest_schema,
                        dialect=store_dialect(service.settings.store))
    return Response(text, media_type="application/sparql-query; charset=utf-8")
