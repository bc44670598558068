"""``POST /v1/specs`` (YAML or JSON) and ``GET /v1/specs``."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool

from provkg.api.auth import require_write_token
from provkg.api.body import read_body
from provkg.api.errors import BadRequest, UnsupportedMediaType
from provkg.api.openapi import SPEC_EXAMPLE, WRITE_SECURITY, error_responses
from provkg.errors import StoreUnreachable
from provkg.spec import has_overlong_number, spec_changes

log = logging.getLogger("provkg.api")

router = APIRouter(tags=["specs"])

# not text/plain, and not a body without a type: a web page may send those to 127.0.0.1
# without asking first (no CORS preflight), which would let any site replace a spec on a
# server with no token
_SPEC_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml",
               "application/json")
#: a spec at the 100,000-value limit is about 2 MB of indented JSON: the CLI takes it, so
#: the server does too; beyond, a body is a mistake or an attack
_SPEC_BYTES = 4 * 1024 * 1024


@router.post(
    "/v1/specs",
    status_code=201,
    dependencies=[Depends(require_write_token)],
    summary="Register a prospective workflow spec (YAML or JSON)",
    description="Validates the spec (errors name line and field), saves it, and writes its "
                "prospective triples. A spec with the same workflow name replaces the old one, "
                "for stored events too: the old spec's prospective triples are removed and, in "
                "the typed schema, stored runs, executions and values are classified again by "
                "the new spec (the graph is the one a fresh ingest with it would give). Not so "
                "for a section whose `granularity` changes: sections stored in full stay in "
                "full, and summaries need their spec before their events (docs/reference/graph.md); "
                "change it between runs, not while a run streams.",
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/yaml": {"schema": {"type": "string"}, "example": SPEC_EXAMPLE},
        "application/json": {"schema": {"type": "object"}}}}, **WRITE_SECURITY},
    responses={201: {"description": "registered; when the workflow had a spec before, "
                     "`replaced` (false: the same spec again) and `changes` say what differs "
                     "(its stored runs are mapped again with the new one)",
                     "content": {"application/json": {"example": {
                         "workflow": "flower-training", "transformations": 2, "replaced": True,
                         "changes": ["transformations changed: training (used -lr +learning_rate)"]}}}},
        **error_responses(400, 401, 413, 415, 422)},
)
async def post_spec(request: Request) -> dict[str, Any]:
    from provkg.service.ingest import register_spec

    service = request.app.state.service
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in _SPEC_TYPES:
        raise UnsupportedMediaType("send the spec as application/yaml or application/json")
    body = await read_body(request, limit=min(_SPEC_BYTES, service.settings.max_body_bytes),
                           decompressed_limit=_SPEC_BYTES)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the spec is not UTF-8 text") from None
    if media == "application/json":  # JSON as the CLI reads a .json spec: strictly (YAML,
        # a trailing comma or a byte-order mark is no JSON body)
        try:
            json.loads(text)
        except RecursionError:  # a 400, not a 500
            raise BadRequest("the body nests too deeply to be a spec") from None
        except ValueError as exc:
            reason = ("a number has more than 4,300 digits" if has_overlong_number(text)
                      else str(exc))
            raise BadRequest(f"the body is not valid JSON ({reason}); send YAML as "
                             "application/yaml") from None
    def register() -> Any:
        with service.spec_lock:  # two posts at once: one after the other
            # saved first, so the queue worker maps new events with it before the store
            # re-types what came earlier; taken back if the store refuses the spec's triples
            # (a 503 must leave no half-registered spec)
            spec, previous = service.specs.replace(text)  # validated first: a bad spec is a 400
            try:
                waiting = service.store_wait
                if waiting is not None and not waiting.reached.is_set():
                    # the store's own specs are not read yet: they may be newer than this one
                    raise StoreUnreachable("the store has not been usable since the server "
                                           f"started ({waiting.problem}); send the spec again "
                                           "once GET /health/ready answers 200")
                register_spec(service.store, spec, schema=service.settings.ingest_schema)
            except BaseException:
                service.specs.restore(spec.workflow, previous)
                raise
            return spec, previous

    spec, previous = await run_in_threadpool(register)
    answer: dict[str, Any] = {"workflow": spec.workflow, "transformations": len(spec.transformations)}
    changes = spec_changes(previous[1], spec) if previous is not None else None
    if changes is not None:
        # said, since stored runs are re-typed: a renamed attribute leaves the old name's
        # values plain in every earlier run (as the CLI says too)
        answer["replaced"] = bool(changes)
        answer["changes"] = changes
        if changes:
            log.info("spec of workflow %r replaced (stored runs mapped again): %s",
                     spec.workflow, "; ".join(changes))
    return answer


@router.get("/v1/specs", summary="The registered specs",
            responses={200: {"content": {"application/json": {"example": [
                {"workflow": "flower-training", "phase": "learning", "transformations": [
                    {"name": "training", "kind": "training"}]}]}}}})
async def get_specs(request: Request) -> list[dict[str, Any]]:
    return request.app.state.service.specs.describe()
