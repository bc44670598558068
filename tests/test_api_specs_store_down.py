"""A spec posted while the store is down is refused and not half-registered."""

from __future__ import annotations

from pathlib import Path

from api_support import ApiServer

from provkg.store.launch import OxigraphServer

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

    from provkg.store.launch import OxigraphServer

    with OxigraphServer(tmp_path / "db") as store, \
            ApiServer(tmp_path / "srv", store=store.store_url) as server:
        assert server.http.get("/health/ready").status_code == 200
        os.kill(store.pid, signal.SIGSTOP)
        try:
            answers = []
            for _ in range(2):  # a second poll while the first probe still waits
                started = time.monotonic()
                answers.append(server.http.get("/health/ready", timeout=30))
                assert time.monotonic() - started < 15
            assert all(a.status_code == 503 for a in answers)
            assert "store: did not answer" in answers[0].json()["problems"][0]
        finally:
            os.kill(store.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while server.http.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
