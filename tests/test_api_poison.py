"""A real ``provkg serve``: a batch the worker could not apply is refused at the door (4xx, store
unchanged), and one that reaches the queue anyway goes to the dead-letter folder instead of
blocking every later batch, reported by ``/health/ready``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from api_support import ApiServer, store_fingerprint

from provkg.errors import StoreError
from provkg.service.queue import IngestQueue

JSON = {"Content-Type": "application/json"}
RUN = "https://w3id.org/provkg/id/run/"


def workflow(run: str, t: float = 1.7e9) -> dict[str, object]:
    return {"type": "workflow", "event": "begin", "id": run, "time": t, "workflow": "poison-test"}


def task(i: int, **extra: object) -> dict[str, object]:
    return {"type": "task", "event": "begin", "id": f"poison-run/t{i}", "time": 1.7e9 + i,
            "workflow_id": "poison-run", "transformation": "train", **extra}


def dumps(*events: dict[str, object]) -> bytes:
    """Python's json.dumps as a client would call it: NaN / Infinity written bare."""
    return json.dumps({"format": "provkg.events/1", "events": list(events)}).encode()


def stored(server: ApiServer, run: str) -> bool:
    answer = server.http.get("/v1/sparql", params={"query": f"ASK {{ <{RUN}{run}> ?p ?o }}"})
    assert answer.status_code == 200, answer.text
    return answer.json()["boolean"] is True


@contextmanager
def running(srv: ApiServer) -> Iterator[ApiServer]:
    """Start and stop ``srv`` (keeping its HTTP client open, unlike its ``with``)."""
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(tmp_path_factory.mktemp("api-poison")) as srv:
        good = dumps(workflow("poison-run"), task(0))
        assert srv.http.post("/v1/events", content=good, headers=JSON).status_code == 202
        assert srv.wait_applied()["backlog_events"] == 0
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


REFUSED = {  # (batch, what the error names)
    "nan-value": (dumps(task(1), task(2, used=[{"name": "loss", "value": math.nan}])),
                  "events[1].used[0].value: NaN is not JSON"),
    "infinity-time": (dumps(task(1, time=math.inf)), "events[0].time: Infinity is not JSON"),
    "minus-infinity-in-a-list": (dumps(task(1, generated=[{"name": "l", "value": [1.0, -math.inf]}])),
                                 "events[0].generated[0].value[1]: -Infinity"),
    "overflow": (dumps(task(1)).replace(b'"time": 1700000001.0', b'"time": 1e400'),
                 "events[0].time: a number too large for a double"),
    "milliseconds": (dumps(task(1, time=1.7e12)), "events[0].time: must be seconds"),
    "past-year-9999": (dumps(task(1, time=1e20)), "year 9999"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_batch_the_worker_could_not_apply_is_refused_whole(server: ApiServer, name: str) -> None:
    content, names = REFUSED[name]
    before = store_fingerprint(server.store_dir)
    response = server.http.post("/v1/events", content=content, headers=JSON)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "bad_event" and names in body["detail"], body
    if name == "milliseconds":
        assert "milliseconds" in body["detail"] and "divide by 1000" in body["detail"]
    if name.endswith("time"):  # the time's own form (the value advice would be refused)
        assert "time is a finite number of seconds" in body["detail"]
    elif "nan" in name or "infinity" in name:
        assert '"NaN"' in body["detail"]  # how to send it instead
    queue = server.wait_applied()
    assert queue["backlog_events"] == 0 and queue["dead_letters"] == 0
    assert store_fingerprint(server.store_dir) == before
    ready = server.http.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["problems"] == []


def test_integers_beyond_64_bits_reach_the_store_exact(server: ApiServer) -> None:
    big = 10**40 + 7
    content = dumps(workflow("big-run"), {**task(3, used=[{"name": "seed", "value": big}]),
                                          "id": "big-run/t", "workflow_id": "big-run"})
    assert server.http.post("/v1/events", content=content, headers=JSON).status_code == 202
    queue = server.wait_applied()
    assert queue["dead_letters"] == 0
    answer = server.http.get("/v1/sparql", params={
        "query": f'ASK {{ ?x <http://www.w3.org/ns/prov#value> ?v FILTER(STR(?v) = "{big}") }}'})
    assert answer.json()["boolean"] is True, answer.text


def test_a_bom_at_the_start_of_the_body_is_skipped(server: ApiServer) -> None:
    response = server.http.post("/v1/events", content=b"\xef\xbb\xbf" + dumps(workflow("bom-run")),
                                headers=JSON)
    assert response.status_code == 202, response.text
    assert server.wait_applied()["dead_letters"] == 0
    assert stored(server, "bom-run")


def test_a_queued_batch_the_worker_cannot_decode_is_set_aside_and_the_queue_goes_on(tmp_path: Path) -> None:
    srv = ApiServer(tmp_path)
    with running(srv):
        assert srv.http.post("/v1/events", content=dumps(workflow("first")), headers=JSON).status_code == 202
        srv.wait_applied()
    # what an older server accepted: planted in the queue folder while the server is down, with
    # a good batch behind it (the queue's own writer, so the records are exactly as on disk)
    poison = dumps(task(1, used=[{"name": "loss", "value": math.nan}]))

    def store_down(payloads: list[bytes]) -> None:
        raise StoreError("not applied here")

    planter = IngestQueue(srv.queue_dir, store_down).start()
    planter.put(poison, events=1)
    planter.put(dumps(workflow("planted-good")), events=1)
    planter.close()
    assert len(list(srv.queue_dir.glob("*.seg"))) >= 1

    with running(srv):
        assert srv.http.post("/v1/events", content=dumps(workflow("later")), headers=JSON).status_code == 202
        queue = srv.wait_applied(timeout=60)
        assert queue["backlog_events"] == 0 and queue["dead_letters"] == 1, queue
        for run in ("first", "planted-good", "later"):
            assert stored(srv, run), run
        ready = srv.http.get("/health/ready")
        body = ready.json()
        assert ready.status_code == 200 and body["status"] == "ready", body  # it works: ingest goes on
        assert any("rejected/" in p and "1 batch" in p for p in body["problems"]), body
        assert body["queue"]["rejected_batches"] == 1

    [letter] = (srv.queue_dir / "rejected").iterdir()
    assert letter.read_bytes() == poison  # kept as it was queued
    ledger = (srv.queue_dir / "rejected.log").read_text()
    assert letter.name in ledger and "events[0].used[0].value: NaN is not JSON" in ledger
    log = srv.log()
    assert letter.name in log and "cannot be applied because of its content" in log
    assert "Traceback" not in log, log

    # a restart applies nothing twice and still reports the dead letter (until an operator acts)
    with running(srv):
        # whatever the start found on disk is applied (or set aside) before the backlog is
        # empty; nothing may be set aside again
        assert srv.wait_applied(timeout=60)["backlog_events"] == 0
        body = srv.http.get("/health/ready").json()
        assert body["queue"]["dead_letters"] == 1 and body["queue"]["rejected_batches"] == 0
        assert any("rejected/" in p for p in body["problems"])
    letter.unlink()
    with running(srv):
        body = srv.http.get("/health/ready").json()
        assert body["problems"] == [] and body["queue"]["dead_letters"] == 0
    srv.http.close()


def test_error_bodies_stay_json(server: ApiServer) -> None:
    """orjson renders error details: a message naming a NaN must not itself break the answer."""
    response = server.http.post("/v1/events", content=b'{"format": "provkg.events/1", "events": NaN}',
                                headers=JSON)
    assert response.status_code == 422
    assert orjson.loads(response.content)["detail"].startswith("events: NaN is not JSON")


def test_a_value_too_large_for_the_store_is_refused_at_the_door_and_later_batches_land(
        tmp_path: Path) -> None:
    """Found by black-box testing: a 17 KB gzip body holding one 17 MiB string (within every
    wire limit) was queued, then Oxigraph refused it ("buffer maximal size") and the worker
    retried it forever, a restart too: every later batch was acknowledged and never stored.
    Then it was set aside whole, after its 202, with every other event of its batch; now it
    is refused before the 202 (422 naming the value), so a client sends the rest in halves."""
    import gzip

    huge = dumps(workflow("huge-run", 1.7e9), {**task(1, used=[{"name": "blob", "value": "x" * (17 << 20)}]),
                                                "id": "huge-run/t", "workflow_id": "huge-run"})
    body = gzip.compress(huge)
    assert len(body) < 1 << 20
    srv = ApiServer(tmp_path)
    with running(srv):
        response = srv.http.post("/v1/events", content=body,
                                 headers={**JSON, "Content-Encoding": "gzip"})
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith(
            "events[1].used[0].value: a string of 17,825,792 bytes is too large to store as one value")
        assert srv.http.post("/v1/events", content=dumps(workflow("after-huge")),
                             headers=JSON).status_code == 202
        queue = srv.wait_applied(timeout=60)
        assert queue["backlog_events"] == 0 and queue["dead_letters"] == 0, queue
        assert stored(srv, "after-huge") and not stored(srv, "huge-run")
    assert "Traceback" not in srv.log()
    srv.http.close()
