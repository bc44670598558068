"""``POST /v1/events``: validate a whole batch, make it durable, answer 202."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool

from provkg.api.auth import require_write_token
from provkg.api.body import read_body
from provkg.api.errors import UnsupportedMediaType
from provkg.api.openapi import EVENTS_EXAMPLE, WRITE_SECURITY, error_responses
from provkg.events import parse_batch, strip_bom

router = APIRouter(tags=["ingest"])

#: bodies larger than this are validated off the event loop
_INLINE_BYTES = 256 * 1024


@router.post(
    "/v1/events",
    status_code=202,
    dependencies=[Depends(require_write_token)],
    summary="Ingest a batch of capture events (wire format v1)",
    description=(
        "The body is one batch `{\"format\": \"provkg.events/1\", \"events\": [...]}`, optionally "
        "gzip- or zstd-compressed (`Content-Encoding`; a truncated one is refused); a UTF-8 "
        "BOM at its start is skipped. It must be strict JSON: a bare `NaN`, `Infinity`, "
        "`-Infinity` or a number overflowing a double is refused (send such numbers as the "
        "strings `\"NaN\"`, `\"Infinity\"`, `\"-Infinity\"`, or as null), and so are a `time` "
        "outside 0 .. 253402300800 (seconds, not milliseconds); integers are kept exact, up to "
        "4000 digits. The whole batch is validated first (a bad "
        "field is named by its JSON path, and nothing of a rejected batch is kept), then written "
        "to the server's durable queue and acknowledged with 202; a worker maps it into the store "
        "within moments. Posting the same events again adds nothing (idempotent)."),
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Batch"}, "example": EVENTS_EXAMPLE}}},
        **WRITE_SECURITY},
    responses={202: {"description": "queued durably", "content": {"application/json": {
        "example": {"accepted": 2, "workflows": 1, "tasks": 1}}}},
        **error_responses(400, 401, 413, 415, 422, 503)},
)
async def post_events(request: Request) -> dict[str, int]:
    service = request.app.state.service
    # application/json only: a body without a type is what a web page may send to 127.0.0.1
    # without a CORS preflight (a forged write on a server with no token)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType("send the batch as Content-Type: application/json")
    body = await read_body(request, limit=service.settings.max_body_bytes,
                           decompressed_limit=service.settings.max_decompressed_bytes)
    # queued as validated: the worker parses the very bytes checked here, by the same rule
    stripped = strip_bom(body)
    assert isinstance(stripped, bytes)  # strip_bom keeps the type it is given
    body = stripped
    if len(body) > _INLINE_BYTES:
        batch = await run_in_threadpool(parse_batch, body)
    else:
        batch = parse_batch(body)
    workflows = sum(1 for e in batch.events if e.type == "workflow")
    total = len(batch.events)
    if total:
        await asyncio.wrap_future(service.queue.submit(body, events=total))
    return {"accepted": total, "workflows": workflows, "tasks": total - workflows}
