"""OpenAPI extras: the wire-format schema as a component, examples, the error body."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from provkg.events import batch_schema

__all__ = ["install_openapi", "EVENTS_EXAMPLE", "SPEC_EXAMPLE", "ERROR_RESPONSES",
           "WRITE_SECURITY", "error_responses",
           "SPARQL_RESPONSES", "ROWS_NOT_ACCEPTABLE", "QUERY_ERRORS", "canned_query_parameters"]

EVENTS_EXAMPLE: dict[str, Any] = {
    "format": "provkg.events/1",
    "events": [
        {"type": "workflow", "event": "begin", "id": "run-1", "time": 1700000000.0,
         "workflow": "flower-training"},
        {"type": "task", "event": "end", "id": "run-1/training", "time": 1700000042.5,
         "workflow_id": "run-1", "transformation": "training", "status": "finished",
         "used": [{"name": "learning_rate", "value": 0.001}],
         "generated": [{"name": "model", "location": "file:///models/m.pt"}]},
    ],
}

SPEC_EXAMPLE = """\
workflow: flower-training
phase: learning
transformations:
  - name: training
    kind: training
    used:
      - {name: learning_rate, role: hyperparameter}
    generated:
      - {name: model, role: model}
  - name: epoch
    kind: section
    of: training
    generated:
      - {name: loss, role: evaluation_measure}
"""

_ERROR = {"type": "object", "required": ["error", "detail"],
          "properties": {"error": {"type": "string"}, "detail": {"type": "string"}}}


def _error(description: str, code: str, detail: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Error"},
        "example": {"error": code, "detail": detail}}}}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error("bad request", "query_syntax", "SPARQL syntax error ... (line 1, column 9)"),
    401: _error("missing or wrong bearer token (writes, when a token is set)", "unauthorized",
                "this endpoint writes: send 'Authorization: Bearer <token>'"),
    404: _error("unknown name", "not_found", "unknown ontology; expected one of: ..."),
    413: _error("body too large", "body_too_large",
                "request body larger than the limit of 16777216 bytes"),
    422: _error("invalid content; each bad field named by its JSON path", "bad_event",
                "events[3].time: must be 0 or more"),
    504: _error("query ran past the time limit", "query_timeout",
                "query ran past the time limit of 30 s (stopped)"),
}
_MORE_ERRORS: dict[int | str, dict[str, Any]] = {
    415: _error("a Content-Type or Content-Encoding this endpoint does not take",
                "unsupported_media_type", "send the batch as Content-Type: application/json"),
    503: _error("the ingest queue cannot take the batch now (disk full, closing)",
                "queue_unavailable", "the ingest queue cannot store the batch: ..."),
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers ``codes`` of a route."""
    every = {**ERROR_RESPONSES, **_MORE_ERRORS}
    return {code: every[code] for code in codes}


#: the bearer token writes need when the server has one (PROVKG_TOKEN)
WRITE_SECURITY: dict[str, Any] = {"security": [{"bearer": []}]}

#: a canned query asked for in neither of its formats
ROWS_NOT_ACCEPTABLE = _error("the Accept header allows neither JSON nor CSV", "not_acceptable",
                             "a canned query's answer is application/json or text/csv; the "
                             "Accept header allows neither")

#: the errors of ``GET /v1/queries/{name}`` that differ from the shared examples
QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("a parameter missing, repeated or malformed", "bad_parameter",
                "query 'q3' needs parameter 'dataset' (a captured value id or the data's "
                "location URI); give it in the URL: /v1/queries/q3?dataset=..."),
    404: _error("no canned query has this name", "unknown_query",
                "no canned query has this name; the catalog is GET /v1/queries"),
}

_PARAMETER_SCHEMAS = {"int": {"type": "integer"}, "float": {"type": "number"}}


def canned_query_parameters(queries: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAPI query parameters for ``GET /v1/queries/{name}``: the union of the canned
    queries' parameters (``queries``: the catalog), each optional here, since which are
    needed depends on the query; the description names the queries that take it, whether
    each needs it and its default there, so "Try it out" can fill them in."""
    by_name: dict[str, list[tuple[str, Any]]] = {}
    for query in queries:
        for param in query.parameters:
            by_name.setdefault(param.name, []).append((query.name, param))
    out = []
    for name, uses in by_name.items():
        helps = list(dict.fromkeys(p.help for _, p in uses if p.help))
        forms = list(dict.fromkeys(p.form for _, p in uses))
        groups: dict[str, list[str]] = {}
        for query_name, p in uses:
            need = "required" if p.required else (
                "optional" if p.default is None else f"optional, default {p.default}")
            groups.setdefault(need, []).append(query_name)
        taken = "; ".join(f"{', '.join(names)} ({need})" for need, names in groups.items())
        types = {p.type for _, p in uses}
        schema = _PARAMETER_SCHEMAS.get(types.pop(), {"type": "string"}) if len(types) == 1 \
            else {"type": "string"}
        text = "; ".join(helps)
        form = "; ".join(forms)
        if form not in text:
            text = f"{text} ({form})" if text else form
        out.append({"name": name, "in": "query", "required": False, "schema": dict(schema),
                    "description": f"{text}. Taken by {taken}."})
    return out


#: an ontology asked for in none of its formats
ONTOLOGY_NOT_ACCEPTABLE = _error("the Accept header allows none of Turtle, N-Triples, RDF/XML",
                                 "not_acceptable", "an ontology is served as text/turtle, "
                                 "application/n-triples, application/rdf+xml; the Accept header "
                                 "allows none of them")

_XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"
#: ``/v1/sparql``'s answers, by media type (chosen with the Accept header, q-values honoured)
SPARQL_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "SELECT: W3C SPARQL 1.1 Query Results as JSON (the default, also for "
            "`application/json` and `*/*`), XML, CSV or TSV; or provkg's "
            "`{\"columns\", \"rows\"}` (numbers as JSON numbers) on `Accept: "
            "application/vnd.provkg.rows+json`. ASK: JSON (`{\"head\": {}, \"boolean\": "
            "...}`), XML, or `{\"boolean\": ...}` as vnd.provkg.rows+json. "
            "CONSTRUCT / DESCRIBE: Turtle (the default), N-Triples, JSON-LD or RDF/XML."),
        "content": {
            "application/sparql-results+json": {"example": {
                "head": {"vars": ["class", "n"]},
                "results": {"bindings": [{
                    "class": {"type": "uri", "value": "http://www.w3.org/ns/prov#Entity"},
                    "n": {"type": "literal", "value": "42", "datatype": _XSD_INTEGER}}]}}},
            "application/sparql-results+xml": {"schema": {"type": "string"}, "example": (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                '<sparql xmlns="http://www.w3.org/2005/sparql-results#">\n'
                '<head><variable name="class"/><variable name="n"/></head>\n<results>\n'
                '<result><binding name="class"><uri>http://www.w3.org/ns/prov#Entity</uri>'
                f'</binding><binding name="n"><literal datatype="{_XSD_INTEGER}">42</literal>'
                '</binding></result>\n</results>\n</sparql>\n')},
            "text/csv": {"schema": {"type": "string"},
                         "example": "class,n\r\nhttp://www.w3.org/ns/prov#Entity,42\r\n"},
            "text/tab-separated-values": {"schema": {"type": "string"}, "example": (
                f'?class\t?n\n<http://www.w3.org/ns/prov#Entity>\t"42"^^<{_XSD_INTEGER}>\n')},
            "application/vnd.provkg.rows+json": {"example": {
                "columns": ["class", "n"], "rows": [["http://www.w3.org/ns/prov#Entity", 42]]}},
            "text/turtle": {"schema": {"type": "string"}, "example": (
                "@prefix prov: <http://www.w3.org/ns/prov#> .\n"
                "<https://w3id.org/provkg/id/run-1> a prov:Activity .\n")},
            "application/n-triples": {"schema": {"type": "string"}, "example": (
                "<https://w3id.org/provkg/id/run-1> "
                "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> "
                "<http://www.w3.org/ns/prov#Activity> .\n")},
            "application/ld+json": {"schema": {"type": "array", "items": {"type": "object"}}},
            "application/rdf+xml": {"schema": {"type": "string"}},
        },
    },
    **ERROR_RESPONSES,
    406: _error("the Accept header allows no format this query form can be answered in",
                "not_acceptable", "this SELECT query can be answered as "
                "application/sparql-results+json, application/sparql-results+xml, text/csv, "
                "text/tab-separated-values, application/vnd.provkg.rows+json; the Accept "
                "header allows none of them"),
}


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (v.replace("#/$defs/", "#/components/schemas/") if k == "$ref" else
                    _rewrite_refs(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def install_openapi(app: FastAPI) -> None:
    """Generate the schema once, with the wire-format ``Batch`` and ``Error`` as components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                             routes=app.routes)
        batch = batch_schema()
        defs = batch.pop("$defs", {})
        for key in ("$id", "$schema"):
            batch.pop(key, None)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update({name: _rewrite_refs(d) for name, d in defs.items()})
        components["Batch"] = _rewrite_refs(batch)
        components["Error"] = _ERROR
        schema["components"]["securitySchemes"] = {"bearer": {
            "type": "http", "scheme": "bearer",
            "description": "PROVKG_TOKEN of the server; needed by the writes when it is set"}}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
