"""A spec posted while the store is down is refused and not half-registered."""

from __future__ import annotations

from pathlib import Path

from api_support import ApiServer

from provkg.testing import OxigraphServer

YAML = {"Content-Type": "application/yaml"}
SPEC = """\
workflow: down-and-up
phase: learning
transformations:
  - {name: training, kind: training, generated: [{name: model, role: model}]}
"""


def test_a_spec_the_store_refused_is_not_kept(tmp_path: Path) -> None:
    """Found by black-box testing: after a 503, GET /v1/specs listed the spec and the worker
    mapped events with it, but the store never got its triples."""
    oxigraph = OxigraphServer(tmp_path / "oxigraph").start()
    server = ApiServer(tmp_path / "api", store=oxigraph.store_url).start()
    try:
        oxigraph.stop()
        refused = server.http.post("/v1/specs", content=SPEC, headers=YAML)
        assert refused.status_code in (502, 503), refused.text
        assert "error" in refused.json()
        assert server.http.get("/v1/specs").json() == []
        oxigraph.start()
        created = server.http.post("/v1/specs", content=SPEC, headers=YAML)
        assert created.status_code == 201, created.text
        assert [s["workflow"] for s in server.http.get("/v1/specs").json()] == ["down-and-up"]
        asked = server.http.post("/v1/sparql", content="ASK { ?s ?p \"down-and-up\" }",
                                 headers={"Content-Type": "application/sparql-query",
                                          "Accept": "application/sparql-results+json"})
        assert asked.json()["boolean"] is True
    finally:
        server.stop()
        oxigraph.stop()


def test_ready_says_a_store_that_stopped_answering_is_not_ready_within_seconds(tmp_path: Path) -> None:
    """black-box testing: with the Oxigraph server behind it stopped (SIGSTOP), /health/ready
    gave no answer for 200 s (its ASK had the store's 900 s limit)."""
    import os
    import signal
    import time

    import psutil

    from provkg.api.routes.health import STORE_ANSWER_S
    from provkg.testing import OxigraphServer

    said = f"store: did not answer ASK {{}} within {STORE_ANSWER_S:.0f} s"
    with OxigraphServer(tmp_path / "db") as store, \
            ApiServer(tmp_path / "srv", store=store.store_url) as server:
        assert server.http.get("/health/ready").status_code == 200
        os.kill(store.pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 60
            while psutil.Process(store.pid).status() != psutil.STATUS_STOPPED:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            # two polls, the second while the first one's probe still waits: each answers on
            # the probe's own limit and names it (the store's 900 s limit would run into the
            # client's 60 s, a deadline for a hang only)
            answers = [server.http.get("/health/ready", timeout=60) for _ in range(2)]
            assert all(a.status_code == 503 for a in answers)
            assert all(a.json()["problems"][0] == said for a in answers), [a.text for a in answers]
        finally:
            os.kill(store.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while server.http.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
