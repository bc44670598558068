"""A capture client without the server's token loses nothing: a 401 is a setup problem, not a
refusal of the batch, so the events stay spooled (not moved to ``rejected/``) and
``provkg replay`` fails loudly until it is given the token, then delivers every event."""

from __future__ import annotations

import pytest
from api_support import ApiServer

from provkg import capture
from provkg.capture.spool import spool_segments
from provkg.cli import main
from provkg.term import mint_iri

TOKEN = "capture-auth-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with ApiServer(tmp_path_factory.mktemp("capture-auth"), env={"PROVKG_TOKEN": TOKEN}) as srv:
        yield srv


def test_no_token_keeps_the_events_spooled_until_replayed_with_it(server, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PROVKG_TOKEN", raising=False)
    spool = tmp_path / "spool"
    with capture.workflow("auth", sink=server.url, spool=spool, flush_timeout=2) as wf:
        ids = [wf.task("step", index=i).begin().id for i in range(30)]
    assert spool_segments(spool), "the refused events must stay in the spool"
    assert not (spool / "rejected").exists()

    assert main(["replay", str(spool), "--to", server.url]) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "token" in err
    assert spool_segments(spool) and not (spool / "rejected").exists()

    monkeypatch.setenv("PROVKG_TOKEN", TOKEN)
    assert main(["replay", str(spool), "--to", server.url]) == 0
    assert spool_segments(spool) == []
    server.wait_applied()
    task_iris = " ".join(f"<{mint_iri('task', i)}>" for i in ids)
    answer = server.http.get("/v1/sparql", params={
        "query": f"SELECT (COUNT(DISTINCT ?t) AS ?n) WHERE {{ VALUES ?t {{ {task_iris} }} "
                 "?t a ?class }"}, headers={"Accept": "application/sparql-results+json"})
    assert answer.status_code == 200, answer.text
    assert int(answer.json()["results"]["bindings"][0]["n"]["value"]) == len(ids)
    assert wf.id
