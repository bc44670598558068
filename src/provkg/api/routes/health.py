"""``GET /health/live`` (the process answers) and ``GET /health/ready`` (store and queue work)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from provkg.errors import ProvkgError

router = APIRouter(tags=["health"])

#: the queue worker retrying the same batches this long makes the server not ready
STALLED_AFTER_S = 30.0
#: a store that has not answered the readiness probe this long makes the server not ready
STORE_ANSWER_S = 5.0


@router.get("/health/live", summary="The server process is up")
async def live() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/health/ready", summary="The store answers and the ingest queue runs",
    description=(
        "200 when the store answers, the ingest queue runs and applies batches (not stuck "
        f"retrying for more than {STALLED_AFTER_S:.0f} s) and the MQTT listener (if any) is "
        "subscribed; 503 otherwise. `problems` says what is wrong. It also lists batches set "
        "aside in the queue's dead-letter folder `rejected/` (they could not be applied because "
        "of their content; reasons in `rejected.log`): those need an operator but do not make "
        "the server unready, since later batches are applied normally."),
    responses={503: {"description": "not ready; the body says why"}})
async def ready(request: Request) -> Any:
    service = request.app.state.service
    problems = []
    # one probe at a time, waited for at most STORE_ANSWER_S: a store that accepts and never
    # answers would hold this request for the store's own 900 s, and a monitor polling it
    # would pile threads up behind the first
    probe = getattr(request.app.state, "store_probe", None)
    if probe is None or probe.done():
        probe = request.app.state.store_probe = asyncio.ensure_future(
            run_in_threadpool(service.store.ask, "ASK { }"))
    try:
        await asyncio.wait_for(asyncio.shield(probe), STORE_ANSWER_S)
    except TimeoutError:
        problems.append(f"store: did not answer ASK {{}} within {STORE_ANSWER_S:.0f} s")
    except ProvkgError as exc:
        problems.append(f"store: {exc}")
    waiting = service.store_wait
    if waiting is not None and not waiting.reached.is_set():
        problems.append(f"store: not usable since the server started ({waiting.problem}); "
                        "batches are accepted and kept in the queue until it is")
    queue = service.queue
    if not queue.healthy:
        problems.append("ingest queue: stopped (see the server log)")
    refusing = queue.refusing()
    if refusing is not None:
        problems.append(f"ingest queue: its disk refused the last batch {refusing[0]:.0f} s ago "
                        f"({refusing[1]}); batches are refused (503) until one can be written")
    stalled = queue.stalled()
    if stalled is not None and stalled[0] >= STALLED_AFTER_S:
        problems.append(f"ingest queue: no batch applied for {stalled[0]:.0f} s, retrying "
                        f"({stalled[1]})")
    for extra in service.extras:
        if hasattr(extra, "subscribed") and not extra.subscribed.is_set():
            problems.append("MQTT listener: not subscribed to the broker yet")
    stats = queue.stats()
    if stats.backlog_events == 0:  # "nothing left to apply" then means "all of it queryable"
        service.sparql.require_current()
    notices = []
    if stats.dead_letters:
        notices.append(
            f"ingest queue: {stats.dead_letters} batch(es) could not be applied because of their "
            "content and were set aside in the dead-letter folder rejected/ of the queue folder "
            "(reasons in rejected.log); fix and POST them again, then delete the files")
    body = {"status": "ready" if not problems else "not ready", "problems": problems + notices,
            # since this start; found_at_start: on disk, not applied yet, when it started
            # (without it the counters would not add up after a restart)
            "queue": {"accepted_events": stats.accepted_events,
                      "found_at_start_events": stats.replayed_events,
                      "applied_events": stats.applied_events,
                      "backlog_events": stats.backlog_events,
                      "rejected_batches": stats.rejected_batches,
                      "dead_letters": stats.dead_letters}}
    return JSONResponse(body, status_code=200 if not problems else 503)
