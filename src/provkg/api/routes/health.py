"""``GET /health/live`` (the process answers) and ``GET /health/ready`` (store and queue work)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from provkg.errors import ProvkgError

router = APIRouter(tags=["health"])


@router.get("/health/live", summary="The server process is up")
async def live() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/health/ready", summary="The store answers and the ingest queue runs",
            responses={503: {"description": "not ready; the body says why"}})
async def ready(request: Request) -> Any:
    service = request.app.state.service
    problems = []
    try:
        await run_in_threadpool(service.store.ask, "ASK { }")
    except ProvkgError as exc:
        problems.append(f"store: {exc}")
    if not service.queue.healthy:
        problems.append("ingest queue: stopped (see the server log)")
    for extra in service.extras:
        if hasattr(extra, "subscribed") and not extra.subscribed.is_set():
            problems.append("MQTT listener: not subscribed to the broker yet")
    stats = service.queue.stats()
    body = {"status": "ready" if not problems else "not ready", "problems": problems,
            "queue": {"accepted_events": stats.accepted_events,
                      "applied_events": stats.applied_events,
                      "backlog_events": stats.backlog_events,
                      "rejected_batches": stats.rejected_batches}}
    return JSONResponse(body, status_code=200 if not problems else 503)
