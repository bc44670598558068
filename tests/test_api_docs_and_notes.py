"""What a person reads off the API: the OpenAPI of the canned-query route ("Try it out" in
/docs) and the ``Provkg-Note`` headers of an empty answer (in-process server, memory store)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from urllib.parse import unquote

import httpx
import pytest
import uvicorn
from api_support import free_port

from provkg.api.app import create_app
from provkg.api.render import header_text
from provkg.config import get_settings
from provkg.service.querying import query_catalog


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> Iterator[httpx.Client]:
    """The app on a real uvicorn server in this process: headers as they go over the wire."""
    queue = tmp_path_factory.mktemp("queue")
    app = create_app(get_settings(store="memory:", queue_dir=str(queue)))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.05)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
        yield c
    server.should_exit = True
    thread.join(60)


def test_the_canned_query_route_declares_every_querys_parameters(client: httpx.Client) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/queries/{name}"]["get"]
    declared = {p["name"]: p for p in operation["parameters"]}
    assert declared["name"]["in"] == "path" and declared["name"]["required"] is True
    for query in query_catalog():
        for param in query.parameters:
            entry = declared[param.name]
            # optional in the union: which are needed depends on the query, said in the text
            assert entry["in"] == "query" and entry["required"] is False
            assert query.name in entry["description"].split("Taken by ", 1)[1]
    assert declared["k"]["schema"] == {"type": "integer"}
    assert "d5, p2 (optional, default 3)" in declared["k"]["description"]
    assert "q3, q4, q6, q7 (required)" in declared["dataset"]["description"]


def test_the_canned_query_routes_404_example_is_an_unknown_query(client: httpx.Client) -> None:
    responses = client.get("/openapi.json").json()["paths"]["/v1/queries/{name}"]["get"]["responses"]
    example = responses["404"]["content"]["application/json"]["example"]
    answer = client.get("/v1/queries/nope")
    assert answer.status_code == 404 and example == answer.json()
    assert example["error"] == "unknown_query" and "canned query" in example["detail"]
    assert responses["400"]["content"]["application/json"]["example"]["error"] == "bad_parameter"


def test_a_note_header_is_readable_ascii(client: httpx.Client) -> None:
    given = "data/n\u00fc\u2713 50%.h5"  # a relative path: the note adds a hint with "/…"
    answer = client.get("/v1/queries/q3", params={"dataset": given})
    assert answer.status_code == 200 and answer.json()["rows"] == []
    raw = [v for k, v in answer.headers.raw if k.lower() == b"provkg-note"]
    assert raw and all(v.isascii() and v.decode().isprintable() for v in raw)
    notes = answer.headers.get_list("provkg-note")
    assert ("the store has no captured value (id or location) 'data/n%C3%BC%E2%9C%93 50%25.h5' "
            "(parameter dataset); a path names data when absolute (/...) or in a home folder "
            "(~/...)") in notes
    assert any(repr(given) in unquote(note) for note in notes)


@pytest.mark.parametrize(("note", "value"), [
    ("plain 'id-1' (parameter training)", "plain 'id-1' (parameter training)"),
    ("absolute (/\u2026) \u2013 or \u2014 \u2018x\u2019 \u201cy\u201d a \u2192 b",
     "absolute (/...) - or - 'x' \"y\" a -> b"),
    ("two\nlines\r\n and\ttabs", "two lines and tabs"),
    ("caf\u00e9 \u4e2d 100% \x00\x7f", "caf%C3%A9 %E4%B8%AD 100%25 %00%7F"),
])
def test_header_text(note: str, value: str) -> None:
    assert header_text(note) == value
    assert value.isascii() and value.isprintable()
    if "%" in value:  # what was percent-encoded decodes back to the note's own characters
        assert unquote(value) == " ".join(note.split())


def test_the_sparql_of_a_canned_query_is_the_one_provkg_query_shows(client: httpx.Client) -> None:
    from provkg.service.querying import render_query

    response = client.get("/v1/queries/d3/sparql", params={"training": "run-1.1"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/sparql-query")
    assert response.text == render_query("d3", {"training": "run-1.1"})
    # bound, never pasted: a hostile value is an escaped literal or refused
    hostile = client.get("/v1/queries/about/sparql", params={"resource": "x> } DROP ALL {"})
    assert hostile.status_code == 400 and hostile.json()["error"] == "bad_parameter"
    assert client.get("/v1/queries/d3/sparql").json()["error"] == "bad_parameter"
    assert client.get("/v1/queries/nope/sparql").status_code == 404
    twice = client.get("/v1/queries/d3/sparql?training=a&training=b")
    assert twice.status_code == 400 and "more than once" in twice.json()["detail"]


def test_an_ontologys_terms_carry_labels_comments_and_kinds(client: httpx.Client) -> None:
    terms = client.get("/v1/ontologies/provml/terms")
    assert terms.status_code == 200
    by_iri = {t["iri"]: t for t in terms.json()}
    training = by_iri["https://w3id.org/provkg/provml#Training"]
    assert training["kind"] == "class" and training["label"] and training["comment"]
    properties = client.get("/v1/ontologies/provkg/terms").json()
    assert {t["kind"] for t in properties} >= {"class", "object property", "datatype property"}
    assert any(t["domain"] and t["range"] for t in properties if t["kind"] != "class")
    assert [t["iri"] for t in terms.json()] == sorted(by_iri)
    assert client.get("/v1/ontologies/nope/terms").status_code == 404


def test_the_ui_and_the_api_docs_are_served_without_a_cdn(client: httpx.Client) -> None:
    import re

    for path in ("/", "/docs", "/redoc"):
        page = client.get(path)
        assert page.status_code == 200, path
        csp = page.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "default-src 'none'" in csp, path
        # every script and style of the page is this server's, none inline
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text), path
        for ref in re.findall(r'(?:src|href)="([^"#]+)"', page.text):  # not the UI's #/views
            assert ref.startswith("/"), (path, ref)
            assert client.get(ref).status_code == 200, (path, ref)
    assert client.get("/ui/../pyproject.toml").status_code == 404
    assert client.get("/ui/vendor/nothing.js").status_code == 404


def test_the_ui_ranks_measures_by_the_queries_rule(client: httpx.Client) -> None:
    from provkg.queries.lifecycle import lower_is_better

    names = ["val_WER", "accuracy", "neg_mean_squared_error", "top1-err", "power", "ppl"]
    answer = client.get("/ui/lower-is-better.json", params=[("measure", n) for n in names]).json()
    assert answer == {n: lower_is_better(n) for n in names}
    assert answer["val_WER"] is True and answer["power"] is False
