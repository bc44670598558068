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
