"""The API's endpoints against a real ``provkg serve`` on an embedded Oxigraph store."""

from __future__ import annotations

import csv
import gzip
import io
import time
from collections.abc import Iterator

import httpx
import orjson
import psutil
import pytest
import zstandard
from api_support import ApiServer, store_fingerprint

from provkg.ontology import ontology_names, read_ontology

TOKEN = "api-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: provkg's own {"columns", "rows"} answer from /v1/sparql (the default is SPARQL 1.1 results JSON)
ROWS = {"Accept": "application/vnd.provkg.rows+json"}
SPEC = """\
workflow: api-training
phase: learning
transformations:
  - name: training
    kind: training
    used: [{name: learning_rate, role: hyperparameter}]
    generated: [{name: model, role: model}]
"""


def events(run: str, n_tasks: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [
        {"type": "workflow", "event": "begin", "id": run, "time": 100.0, "workflow": "api-training"}]
    for i in range(n_tasks):
        task = {"type": "task", "id": f"{run}/t{i}", "workflow_id": run, "transformation": "training"}
        out.append({**task, "event": "begin", "time": 101.0 + i,
                    "used": [{"name": "learning_rate", "value": 0.001 * (i + 1)}]})
        out.append({**task, "event": "end", "time": 102.5 + i, "status": "finished",
                    "generated": [{"name": "model", "location": f"file:///models/{run}-{i}.pt"}]})
    return out


def body(evs: list[dict[str, object]]) -> bytes:
    return orjson.dumps({"format": "provkg.events/1", "events": evs})


#: the query time limit of the ``limited`` server: what its queries are meant to run past
LIMIT_S = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    # a time limit no ordinary query here comes near, however loaded the machine
    env = {"PROVKG_TOKEN": TOKEN, "PROVKG_QUERY_TIMEOUT_S": "60", "PROVKG_MAX_ROWS": "50"}
    with ApiServer(tmp_path_factory.mktemp("api"), env=env) as srv:
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """A server whose queries have a short time limit, for queries that run past it."""
    env = {"PROVKG_QUERY_TIMEOUT_S": str(LIMIT_S)}
    with ApiServer(tmp_path_factory.mktemp("api-limited"), env=env) as srv:
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def select(server: ApiServer, query: str) -> list[list[object]]:
    response = server.http.get("/v1/sparql", params={"query": query}, headers=ROWS)
    assert response.status_code == 200, response.text
    return response.json()["rows"]


def test_head_is_answered_wherever_get_is(server: ApiServer) -> None:
    """Found by black-box testing: HEAD /health/live was 405 (uptime monitors use HEAD)."""
    for path in ("/health/live", "/health/ready", "/v1/queries", "/v1/ontologies"):
        get, head = server.http.get(path), server.http.head(path)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"]
    assert server.http.head("/v1/events").status_code == 405  # POST only
    # and a 405 of a GET route says so (it said "Allow: GET": black-box testing)
    refused = server.http.post("/v1/queries/d3")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
    assert server.http.head("/v1/events").headers["allow"] == "POST"
    # every method of the path, not the matched route's only (PUT /v1/specs said POST)
    assert server.http.put("/v1/specs").headers["allow"] == "GET, HEAD, POST"
    assert server.http.put("/v1/sparql").headers["allow"] == "GET, HEAD, POST"


def test_openapi_declares_the_bearer_token_and_the_answers_of_each_write(server: ApiServer) -> None:
    """Found by black-box testing: no security scheme (Swagger UI had no Authorize button);
    POST /v1/events listed 404 / 504, which it never answers, and not 415 / 503."""
    spec = server.http.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path in ("/v1/events", "/v1/specs"):
        post = spec["paths"][path]["post"]
        assert post["security"] == [{"bearer": []}], path
        assert {"401", "413", "415", "422"} <= set(post["responses"]), path
        assert not {"404", "504"} & set(post["responses"]), path
    assert "503" in spec["paths"]["/v1/events"]["post"]["responses"]
    assert "security" not in spec["paths"]["/v1/queries/{name}"]["get"]
    assert "401" not in spec["paths"]["/v1/queries/{name}"]["get"]["responses"]


def test_health(server: ApiServer) -> None:
    assert server.http.get("/health/live").json() == {"status": "ok"}
    ready = server.http.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_openapi_documents_every_endpoint_with_examples(server: ApiServer) -> None:
    spec = server.http.get("/openapi.json").json()
    assert {"/v1/events", "/v1/specs", "/v1/queries", "/v1/queries/{name}", "/v1/sparql",
            "/v1/ontologies/{name}", "/health/live", "/health/ready"} <= set(spec["paths"])
    events_body = spec["paths"]["/v1/events"]["post"]["requestBody"]["content"]["application/json"]
    assert events_body["example"]["format"] == "provkg.events/1"
    assert spec["components"]["schemas"]["Batch"]["required"] == ["format", "events"]
    assert "text/csv" in spec["paths"]["/v1/queries/{name}"]["get"]["responses"]["200"]["content"]
    assert "swagger-ui" in server.http.get("/docs").text


@pytest.mark.parametrize("name", ontology_names())
def test_ontologies_as_turtle(server: ApiServer, name: str) -> None:
    response = server.http.get(f"/v1/ontologies/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/turtle")
    assert response.text == read_ontology(name)
    assert server.http.get("/v1/ontologies").json() == ontology_names()


def test_ontologies_in_rdf_xml_load_in_owlready2_and_take_their_prefix_names(
        server: ApiServer) -> None:
    import io

    import owlready2
    import rdflib

    response = server.http.get("/v1/ontologies/provml", headers={"Accept": "application/rdf+xml"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/rdf+xml")
    turtle = rdflib.Graph().parse(data=read_ontology("prov-ml"), format="turtle")
    world = owlready2.World()  # owlready2 reads RDF/XML, not Turtle
    for imported in turtle.objects(None, rdflib.OWL.imports):
        world.get_ontology(str(imported)).loaded = True  # offline: no fetch of the imports
    onto = world.get_ontology("https://w3id.org/provkg/provml").load(
        fileobj=io.BytesIO(response.content))
    assert onto.search_one(iri="https://w3id.org/provkg/provml#TrainingExecution") is not None
    nt = server.http.get("/v1/ontologies/prov-ml", headers={"Accept": "application/n-triples"})
    assert nt.headers["content-type"].startswith("application/n-triples")
    assert rdflib.Graph().parse(data=nt.text, format="nt").isomorphic(turtle)
    refused = server.http.get("/v1/ontologies/sprov", headers={"Accept": "application/json"})
    assert refused.status_code == 406
    assert "text/turtle" in refused.json()["detail"]


def test_a_spec_body_is_read_up_to_4_mib(server: ApiServer) -> None:
    # a spec the CLI takes (up to 100,000 values, ~2 MB of indented JSON) is not refused for
    # its bytes (black-box testing: 1.4 MB was 413 at the old 1 MiB limit)
    padded = "#" + " " * 1_500_000 + "\n" + SPEC
    taken = server.http.post("/v1/specs", content=padded,
                             headers={**AUTH, "Content-Type": "application/yaml"})
    assert taken.status_code == 201, taken.text
    refused = server.http.post("/v1/specs", content="#" + " " * (4 * 1024 * 1024) + "\n" + SPEC,
                               headers={**AUTH, "Content-Type": "application/yaml"})
    assert refused.status_code == 413 and "4194304" in refused.json()["detail"]


@pytest.mark.parametrize(("media", "body", "said"), [
    ("application/json", '{"workflow": "a", "x": ' + "[" * 5000 + "]" * 5000 + "}", "nests too deeply"),
    ("application/json", '{"workflow": "a", "description": ' + "9" * 5000 + "}", "more than 4,300 digits"),
    ("application/yaml", "workflow: a\nphase: learning\ntransformations: [{name: t}]\n"
                         "description: " + "9" * 5000 + "\n", "more than 4,300 digits"),
    ("application/yaml", "workflow: &a [*a]\n", "nests too deeply"),
])
def test_hostile_specs_are_refused_by_name(server: ApiServer, media: str, body: str, said: str) -> None:
    # found by black-box testing: 500 "internal" with a RecursionError / ValueError in the log
    answer = server.http.post("/v1/specs", content=body, headers={**AUTH, "Content-Type": media})
    assert answer.status_code in (400, 422), answer.text
    assert said in answer.json()["detail"]
    assert "set_int_max_str_digits" not in answer.text


def test_specs_yaml_and_json(server: ApiServer) -> None:
    created = server.http.post("/v1/specs", content=SPEC, headers={**AUTH, "Content-Type": "application/yaml"})
    assert created.status_code == 201, created.text
    # (replaced / changes too when another test of this module registered it first)
    assert created.json().items() >= {"workflow": "api-training", "transformations": 1}.items()
    as_json = orjson.dumps({"workflow": "api-other", "phase": "curation",
                            "transformations": [{"name": "extract"}]})
    assert server.http.post("/v1/specs", content=as_json,
                            headers={**AUTH, "Content-Type": "application/json"}).status_code == 201
    # JSON is read strictly, as the CLI reads a .json spec (YAML, a trailing comma and a
    # byte-order mark passed as JSON here)
    for not_json in (SPEC.encode(), as_json[:-1] + b",}", b"\xef\xbb\xbf" + as_json):
        refused = server.http.post("/v1/specs", content=not_json,
                                   headers={**AUTH, "Content-Type": "application/json"})
        assert refused.status_code == 400 and "not valid JSON" in refused.json()["detail"]
    # YAML aliases, as the CLI reads them (black-box testing: the API refused any alias)
    aliased = (b"workflow: api-aliased\nphase: learning\ntransformations:\n"
               b"  - {name: a, kind: training, used: &hp [{name: lr, role: hyperparameter}]}\n"
               b"  - {name: b, kind: training, used: *hp}\n")
    accepted = server.http.post("/v1/specs", content=aliased,
                                headers={**AUTH, "Content-Type": "application/yaml"})
    assert accepted.status_code == 201, accepted.text
    listed = server.http.get("/v1/specs").json()
    assert [s["workflow"] for s in listed] == ["api-aliased", "api-other", "api-training"]
    assert listed[0]["transformations"][1]["used"] == [{"name": "lr", "role": "hyperparameter"}]
    assert listed[2]["transformations"][0]["used"][0] == {"name": "learning_rate", "role": "hyperparameter"}


@pytest.mark.parametrize("encoding", ["identity", "gzip", "zstd"])
def test_events_are_accepted_queued_and_queryable(server: ApiServer, encoding: str) -> None:
    run = f"api-run-{encoding}"
    raw = body(events(run, 3))
    data = {"identity": raw, "gzip": gzip.compress(raw), "zstd": zstandard.compress(raw)}[encoding]
    response = server.http.post("/v1/events", content=data, headers={
        **AUTH, "Content-Type": "application/json", "Content-Encoding": encoding})
    assert response.status_code == 202, response.text
    assert response.json() == {"accepted": 7, "workflows": 1, "tasks": 6}
    server.wait_applied()
    rows = select(server, f"""SELECT ?lr WHERE {{ ?t <http://www.w3.org/ns/prov#used> ?v .
        ?v <http://www.w3.org/ns/prov#value> ?lr . FILTER(CONTAINS(STR(?t), "{run}/t")) }} ORDER BY ?lr""")
    assert rows == [[0.001], [0.002], [0.003]]


def test_events_are_idempotent(server: ApiServer) -> None:
    data = body(events("api-run-twice", 2))
    headers = {**AUTH, "Content-Type": "application/json"}
    assert server.http.post("/v1/events", content=data, headers=headers).status_code == 202
    server.wait_applied()
    before = store_fingerprint(server.store_dir)
    for _ in range(2):
        assert server.http.post("/v1/events", content=data, headers=headers).status_code == 202
    server.wait_applied()
    assert store_fingerprint(server.store_dir) == before


def test_sparql_forms_and_formats(server: ApiServer) -> None:
    query = "SELECT ?n WHERE { VALUES ?n { 1 2 } } ORDER BY ?n"
    assert server.http.get("/v1/sparql", params={"query": query},
                           headers=ROWS).json() == {"columns": ["n"], "rows": [[1], [2]]}
    assert server.http.post("/v1/sparql", data={"query": query}, headers=ROWS).json()["rows"] == [[1], [2]]
    direct = server.http.post("/v1/sparql", content=query,
                              headers={"Content-Type": "application/sparql-query", **ROWS})
    assert direct.json()["rows"] == [[1], [2]]
    as_csv = server.http.get("/v1/sparql", params={"query": query}, headers={"Accept": "text/csv"})
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert list(csv.reader(io.StringIO(as_csv.text))) == [["n"], ["1"], ["2"]]
    assert server.http.get("/v1/sparql", params={"query": "ASK { }"}).json() == {"head": {}, "boolean": True}
    triples = server.http.get("/v1/sparql", params={
        "query": "CONSTRUCT { <http://x/a> <http://x/p> ?n } WHERE { VALUES ?n { 7 } }"},
        headers={"Accept": "application/n-triples"})
    assert triples.headers["content-type"].startswith("application/n-triples")
    assert triples.text == '<http://x/a> <http://x/p> "7"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'


def test_row_cap_is_an_error_not_a_silent_cut(server: ApiServer) -> None:
    response = server.http.get("/v1/sparql", params={"query": "SELECT ?n { VALUES ?n { " +
                                                     " ".join(map(str, range(51))) + " } }"})
    assert response.status_code == 422 and "more than 50 rows" in response.json()["detail"]
    # one code for the SPARQL endpoint and the canned queries (bad_parameter / bad_request)
    assert response.json()["error"] == "too_many_rows"
    assert len(select(server, "SELECT ?n { VALUES ?n { " + " ".join(map(str, range(50))) + " } }")) == 50


def _workers(server: ApiServer) -> list[psutil.Process]:
    assert server.proc is not None
    return [p for p in psutil.Process(server.proc.pid).children()
            if "provkg.api.sparql_worker" in " ".join(p.cmdline())]


def _ended(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _timed_out(response: httpx.Response) -> None:
    """A 504 naming the server's own limit: the limit applied is the configured one."""
    assert response.status_code == 504, response.text
    assert response.json() == {"error": "query_timeout",
                               "detail": f"query ran past the time limit of {LIMIT_S} s (stopped)"}


def test_the_time_limit_covers_parsing_the_query(limited: ApiServer, server: ApiServer) -> None:
    # black-box finding: the read-only guard parsed in the server, outside the time limit;
    # rdflib takes about 1 ms a value to parse this 85 kB query (several times the limit on
    # any machine: a reader needs no token), Oxigraph 10 ms. Parsed outside, it would be a 200.
    slow_to_parse = ("SELECT * WHERE { ?s ?p ?o FILTER(?o IN ("
                     + ", ".join(f'"v{i}"' for i in range(9600)) + ")) }")
    _timed_out(limited.http.post("/v1/sparql", content=slow_to_parse,
                                 headers={"Content-Type": "application/sparql-query"}))
    # and many flat patterns parse (90 of them were "nests too deeply to parse"); a chain,
    # which Oxigraph plans at once (90 patterns on one subject take it 2 s to plan)
    flat = ("SELECT * WHERE { " + " ".join(f"?o{i} <http://example.org/p> ?o{i + 1} ."
                                            for i in range(90)) + " } LIMIT 1")
    answer = server.http.post("/v1/sparql", content=flat, headers={"Content-Type": "application/sparql-query"})
    assert answer.status_code == 200, answer.text


def test_timeout_really_stops_the_query(limited: ApiServer) -> None:
    endless = ("SELECT (COUNT(*) AS ?n) WHERE { VALUES ?a { " + " ".join(map(str, range(2000)))
               + " } VALUES ?b { " + " ".join(map(str, range(2000))) + " } VALUES ?c { "
               + " ".join(map(str, range(2000))) + " } }")  # 8e9 rows: many minutes
    idle = _workers(limited)  # the warm workers: one of them takes the query
    assert len(idle) == 2, idle
    _timed_out(limited.http.post("/v1/sparql", data={"query": endless}))
    # the worker that ran it is ended (the query ran in it), the other one left alone; the
    # deadline only bounds the wait for a kill that is under way
    deadline = time.monotonic() + 60
    while not any(_ended(p) for p in idle) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [_ended(p) for p in idle].count(True) == 1, "the timed-out query must not keep running"
    assert select(limited, "SELECT ?n { VALUES ?n { 1 } }") == [[1]]  # a fresh worker answers


def test_canned_query_catalog_and_run(server: ApiServer) -> None:
    from provkg.service.querying import query_catalog

    catalog = server.http.get("/v1/queries").json()
    assert [q["name"] for q in catalog] == [q.name for q in query_catalog()]
    q3 = next(q for q in catalog if q["name"] == "q3")
    assert q3["columns"] == ["model", "role", "name", "value"]
    by_name = {p["name"]: p for p in q3["parameters"]}
    assert by_name["dataset"]["required"] is True
    assert by_name["measure"]["required"] is False and by_name["measure"]["default"] == "loss"
    empty = server.http.get("/v1/queries/q3", params={"dataset": "file:///nothing.h5"})
    assert empty.status_code == 200 and empty.json() == {"columns": q3["columns"], "rows": []}
    # the body keeps the contract; why it is empty is in a header, as the CLI's stderr note
    assert ("the store has no captured value (id or location) 'file:///nothing.h5' (parameter "
            "dataset)") in empty.headers.get_list("provkg-note")
    as_csv = server.http.get("/v1/queries/q3", params={"dataset": "file:///nüthing.h5"},
                             headers={"Accept": "text/csv"})
    assert as_csv.text.strip() == ",".join(q3["columns"])
    assert ("the store has no captured value (id or location) 'file:///n%C3%BCthing.h5' "
            "(parameter dataset)") in as_csv.headers.get_list("provkg-note")
    missing = server.http.get("/v1/queries/q3")
    assert missing.status_code == 400 and "dataset" in missing.json()["detail"]
    # every parameter problem is bad_parameter (a repeated one was bad_request), and a range
    # is the one the parameter takes (k: from 1; it said -2^63): black-box testing
    twice = server.http.get("/v1/queries/q3?dataset=a&dataset=b")
    assert twice.status_code == 400 and twice.json()["error"] == "bad_parameter"
    huge = server.http.get("/v1/queries/d5", params={"workflow": "w", "k": "9" * 25})
    assert huge.status_code == 400 and huge.json() == {
        "error": "bad_parameter", "detail": "parameter 'k': expected an integer such as 3 "
                                            "between 1 and 2^63-1"}
    assert server.http.get("/v1/queries/nope").status_code == 404


def test_replacing_a_spec_says_what_changed(server: ApiServer) -> None:
    """Found by black-box testing: a POST that replaced a spec (and so re-typed every stored
    run) answered as a first registration would, and the server said nothing."""
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/yaml"}
    v1 = ("workflow: replaced-wf\nphase: learning\ntransformations:\n  - name: training\n"
          "    kind: training\n    used:\n      - {name: batch_size, role: hyperparameter}\n")
    first = server.http.post("/v1/specs", content=v1, headers=auth)
    assert first.status_code == 201 and "replaced" not in first.json()
    again = server.http.post("/v1/specs", content=v1, headers=auth).json()
    assert again["replaced"] is False and again["changes"] == []
    v2 = v1.replace("batch_size", "bs") + "  - name: evaluation\n    kind: evaluation\n"
    changed = server.http.post("/v1/specs", content=v2, headers=auth).json()
    assert changed["replaced"] is True
    assert changed["changes"] == ["transformations added: evaluation",
                                  "transformations changed: training (used -batch_size +bs)"]


def test_sparql_takes_a_bom_refuses_bad_utf8_and_names_an_undeclared_prefix(server: ApiServer) -> None:
    """Found by black-box testing: a query file starting with a BOM was refused as no query,
    %E9 in a GET became U+FFFD and ran, and an undeclared prefix gave a list of Unicode
    ranges without naming it."""
    bom = "\ufeffASK { }".encode()
    answered = server.http.post("/v1/sparql", content=bom,
                                headers={"Content-Type": "application/sparql-query", **ROWS})
    assert answered.status_code == 200, answered.text
    bad = server.http.get("/v1/sparql?query=SELECT%20(%22%E9t%C3%A9%22%20AS%20%3Fx)%20%7B%7D")
    assert bad.status_code == 400 and "not UTF-8" in bad.json()["detail"]
    prefix = server.http.get("/v1/sparql", params={"query": "SELECT ?s WHERE { ?s foo:bar ?o }"})
    assert prefix.status_code == 400
    assert "prefix foo: is not declared" in prefix.json()["detail"], prefix.text


def test_a_syntax_error_reads_the_same_from_the_api_as_from_the_cli(server: ApiServer, tmp_path,
                                                                     capsys) -> None:
    """Found by black-box testing: the API said rdflib's "Expected SelectQuery (column 27)"
    where `provkg sparql` on the same store said where Oxigraph stopped (column 42)."""
    from provkg.cli import main

    query = "SELECT * WHERE { ?s ?p ?o FILTER(?o = ) }"
    answer = server.http.get("/v1/sparql", params={"query": query})
    assert answer.status_code == 400
    path = tmp_path / "q.rq"
    path.write_text(query)
    assert main(["sparql", str(path), "--store", "memory:"]) == 1
    cli = capsys.readouterr().err
    assert answer.json()["detail"] in cli, (answer.json()["detail"], cli)


def test_a_body_that_breaks_off_is_no_server_error(server: ApiServer) -> None:
    # found by black-box testing: a malformed chunked body logged "unexpected error" with a
    # traceback (the client had its 400 from the HTTP layer already)
    import socket

    offset = len(server.log())
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        raw.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                    + f"\r\nAuthorization: Bearer {TOKEN}".encode()
                    + b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
        assert b" 400 " in raw.recv(500)
    # the app saw the body break off: it says so (info) or logs a traceback (the bug)
    tail = server.wait_log("client went away during POST /v1/events", "unexpected error", after=offset)
    assert "Traceback" not in tail and "unexpected error" not in tail, tail
    assert server.http.get("/health/live").status_code == 200


def test_a_json_spec_file_with_a_huge_number_is_a_one_line_error(tmp_path, capsys) -> None:
    # found by black-box testing: a traceback for the .json file (the .yaml one was said)
    from provkg.cli import main

    spec = tmp_path / "big.json"
    spec.write_text('{"workflow": "h", "phase": "learning", "transformations": '
                    '[{"name": "t", "kind": "training", "index": ' + "9" * 5000 + "}]}")
    assert main(["spec", "validate", str(spec)]) == 1
    assert "a number has more than 4,300 digits" in capsys.readouterr().err


def test_hostile_nesting_is_refused_by_name_and_real_nesting_parses(server: ApiServer) -> None:
    # a regression round: `!` marks with blanks or comments between them (and nested quoted
    # triples) passed the nesting limit; Oxigraph's parser then took the SPARQL worker down
    # (502), and `provkg sparql` with a segmentation fault
    for query in ("SELECT ?x WHERE { BIND(" + "! " * 10000 + "true AS ?x) }",
                  "SELECT ?x WHERE { BIND(" + "!#c\n" * 10000 + "true AS ?x) }",
                  "SELECT * WHERE { " + "<< " * 3000 + "?a ?b ?c" + " >> <urn:p> ?o" * 3000 + " . }",
                  # and a prefixed name's escaped "#" read as a comment (the next regression round)
                  "PREFIX ex: <urn:x:> SELECT * WHERE { ?s ?p ex:a\\# . " + "{" * 10000 + "?s ?p ?o"
                  + "}" * 10000 + " }",
                  # and a comparison read as an IRI's "<" (the round after)
                  "ASK { FILTER(1<" + "(" * 10000 + "1" + ")" * 10000 + "&&2>1) }"):
        response = server.http.post("/v1/sparql", content=query,
                                    headers={"Content-Type": "application/sparql-query"})
        assert response.status_code == 400, response.text
        assert "deep; at most 500 are taken" in response.json()["detail"]
    assert select(server, "SELECT ?n { VALUES ?n { 1 } }") == [[1]]


def test_the_guard_takes_the_nesting_the_stores_take() -> None:
    # a regression round: the read-only guard's parser (rdflib) refused 160 nested parentheses,
    # which `provkg sparql` answers; the stores take 500 levels
    import sys

    from provkg.errors import QuerySyntaxError
    from provkg.service.sparql_guard import check_query

    limit = sys.getrecursionlimit()
    for query in ("SELECT * WHERE { ?s ?p ?o FILTER(" + "(" * 400 + "1" + ")" * 400 + ") }",
                  "SELECT * WHERE { ?s ?p ?o " + "OPTIONAL { ?s ?p ?o " * 400 + "}" * 400 + " }"):
        assert check_query(query).form == "select"
    assert sys.getrecursionlimit() == limit  # raised for the parse only
    with pytest.raises(QuerySyntaxError, match="nests its brackets 6002 deep; at most 500"):
        check_query("SELECT * WHERE { ?s ?p ?o FILTER(" + "(" * 6000 + "1" + ")" * 6000 + ") }")
