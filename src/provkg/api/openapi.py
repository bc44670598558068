"""OpenAPI extras: the wire-format schema as a component, examples, the error body."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from provkg.events import batch_schema

__all__ = ["install_openapi", "EVENTS_EXAMPLE", "SPEC_EXAMPLE", "ERROR_RESPONSES"]

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
                "events[3].time: Input should be greater than or equal to 0"),
    504: _error("query ran past the time limit", "query_timeout",
                "query ran past the time limit of 30 s (stopped)"),
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
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
