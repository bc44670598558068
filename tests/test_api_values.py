"""Values in the API's answers and what it accepts, found by black-box testing: integers of any
size (events up to 4000 digits) come back exact, non-finite doubles and ill-typed literals as
text, truncated zstd bodies are refused like gzip ones, canned queries negotiate formats with
q-values, and a POSTed SPARQL query is given once."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pytest
import zstandard
from api_support import ApiServer

TOKEN = "values-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
ROWS = {"Accept": "application/vnd.provkg.rows+json"}
XSD = "http://www.w3.org/2001/XMLSchema#"
SPEC = """\
workflow: big-numbers
phase: learning
transformations:
  - name: training
    kind: training
    used: [{name: learning_rate, role: hyperparameter}]
    generated: [{name: accuracy, role: evaluation_measure}]
"""
BIG = 123456789012345678901234567890  # beyond 64 bits
HUGE = int("7" * 4000)  # the most digits an event may carry


def batch(run: str, value: object) -> bytes:
    task = {"type": "task", "id": f"{run}/t", "workflow_id": run, "transformation": "training"}
    events = [{"type": "workflow", "event": "begin", "id": run, "time": 100.0, "workflow": "big-numbers"},
              {**task, "event": "begin", "time": 101.0, "used": [{"name": "learning_rate", "value": value}]},
              {**task, "event": "end", "time": 102.0, "status": "finished",
               "generated": [{"name": "accuracy", "value": 0.9}]}]
    # Python's json writes integers of any size exactly (orjson stops at 64 bits)
    return json.dumps({"format": "provkg.events/1", "events": events}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(tmp_path_factory.mktemp("api-values"), env={"PROVKG_TOKEN": TOKEN}) as srv:
        assert srv.http.post("/v1/specs", content=SPEC, headers={
            **AUTH, "Content-Type": "application/yaml"}).status_code == 201
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def test_integers_beyond_64_bits_and_up_to_4000_digits_are_kept_exact(server: ApiServer) -> None:
    for run, value in (("big", BIG), ("huge", HUGE)):
        accepted = server.http.post("/v1/events", content=batch(run, value), headers=AUTH)
        assert accepted.status_code == 202, accepted.text
    server.wait_applied()
    answer = server.http.get("/v1/queries/d4", params={"workflow": "big-numbers"})
    assert answer.status_code == 200, answer.text
    rows = json.loads(answer.text)["rows"]  # json reads long numbers exactly
    assert sorted(row[1] for row in rows) == [BIG, HUGE]
    assert str(HUGE) in answer.text  # as a JSON number, digit for digit
    too_many = b'{"format": "provkg.events/1", "events": [' + b"1" * 4001 + b"]}"
    refused = server.http.post("/v1/events", content=too_many, headers=AUTH)
    assert refused.status_code == 422 and "more than 4000 digits" in refused.json()["detail"]


def test_sparql_rows_json_numbers_are_exact_and_odd_literals_keep_their_text(server: ApiServer) -> None:
    decimal = "1" + "0" * 400 + ".5"  # finite, but beyond a double
    query = (f"PREFIX xsd: <{XSD}> SELECT * WHERE {{ "
             "BIND(9999999999999999999999999 AS ?integer) "
             'BIND("99999999999999999999"^^xsd:long AS ?long) '
             f"BIND({decimal} AS ?decimal) "
             'BIND(xsd:double("NaN") AS ?nan) BIND(xsd:double("INF") AS ?inf) '
             'BIND(xsd:double("-INF") AS ?minus_inf) '
             'BIND("x"^^xsd:boolean AS ?boolean) BIND("abc"^^xsd:integer AS ?int_text) '
             "BIND(true AS ?yes) BIND(2.5 AS ?small) }")
    answer = server.http.get("/v1/sparql", params={"query": query}, headers=ROWS)
    assert answer.status_code == 200, answer.text
    document = json.loads(answer.text, parse_constant=pytest.fail)  # strict JSON: no bare NaN
    row = dict(zip(document["columns"], document["rows"][0]))
    assert row == {"integer": 9999999999999999999999999, "long": 99999999999999999999,
                   "decimal": json.loads(decimal), "nan": "NaN", "inf": "Infinity",
                   "minus_inf": "-Infinity", "boolean": "x", "int_text": "abc", "yes": True,
                   "small": 2.5}
    assert decimal in answer.text


@pytest.mark.parametrize(("lexical", "datatype", "written"), [
    ("-000123", "integer", "-123"),
    ("+0.50", "decimal", "0.5"),
    ("-0." + "0" * 400 + "1", "decimal", "-0." + "0" * 400 + "1"),  # a double would say 0
    ("1_000", "integer", '"1_000"'),  # Python's int() reads it, XSD does not
    ("inf", "double", '"inf"'),  # XSD writes INF
    ("1e400", "double", '"Infinity"'),
    ("0", "boolean", "false"),
])
def test_literal_values_follow_the_xsd_lexical_rules(lexical: str, datatype: str, written: str) -> None:
    from provkg.service.json_values import rows_json, term_value

    value = term_value({"type": "literal", "value": lexical, "datatype": XSD + datatype})
    assert rows_json(["v"], [[value]]) == f'{{"columns":["v"],"rows":[[{written}]]}}'.encode()


def test_a_truncated_zstd_body_is_refused_like_a_gzip_one(server: ApiServer) -> None:
    data = zstandard.ZstdCompressor(write_checksum=True).compress(batch("cut", 1))
    for cut in (data[:-4], data[:-1], data[: len(data) // 2]):  # the checksum, or deeper
        answer = server.http.post("/v1/events", content=cut, headers={**AUTH, "Content-Encoding": "zstd"})
        assert answer.status_code == 400, answer.text
        assert answer.json() == {"error": "bad_request", "detail": "zstd body is truncated"}
    whole = server.http.post("/v1/events", content=data, headers={**AUTH, "Content-Encoding": "zstd"})
    assert whole.status_code == 202, whole.text


@pytest.mark.parametrize(("accept", "expected"), [
    ("text/csv;q=0, application/json", "application/json"),  # q=0: not acceptable
    ("text/csv;q=0.1, application/json;q=0.9", "application/json"),
    ("text/turtle", None),
    ("application/json;q=0", None),
])
def test_canned_queries_negotiate_with_q_values(server: ApiServer, accept: str, expected: str | None) -> None:
    answer = server.http.get("/v1/queries/d4", params={"workflow": "no-such-workflow"},
                             headers={"Accept": accept})
    if expected is None:
        assert answer.status_code == 406, answer.text
        assert answer.json()["error"] == "not_acceptable"
    else:
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith(expected)


def test_a_posted_query_also_in_the_url_is_refused(server: ApiServer) -> None:
    answer = server.http.post("/v1/sparql", params={"query": "ASK {}"}, content="SELECT * WHERE {}",
                              headers={"Content-Type": "application/sparql-query"})
    assert answer.status_code == 400, answer.text
    assert "once" in answer.json()["detail"]
    form = server.http.post("/v1/sparql", params={"query": "ASK {}"}, data={"query": "ASK {}"})
    assert form.status_code == 400, form.text


def test_a_missing_parameter_is_named_the_api_way(server: ApiServer) -> None:
    answer = server.http.get("/v1/queries/d3")
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert "'training'" in detail and "?training=" in detail and "--param" not in detail


def test_canned_query_csv_writes_values_as_the_cli_does() -> None:
    # the API's CSV wrote Python's True / nan (black-box finding: CLI and API disagreed)
    from provkg.api.render import rows_response
    from provkg.store import Rows

    answer = rows_response("text/csv", Rows(["v", "b", "n"], [[math.nan, True, None], [-math.inf, False, 2]]))
    assert answer.body.decode().split("\r\n") == ["v,b,n", "NaN,true,", "-INF,false,2", ""]
