"""``/v1/sparql`` as a SPARQL 1.1 Protocol endpoint: the W3C result formats, term types,
content negotiation with q-values, 406, and standard clients (rdflib's ``SPARQLStore``,
SPARQLWrapper) against a real ``provkg serve`` on an embedded Oxigraph store.

The store is filled before the server starts, with terms that only a typed answer tells
apart: an IRI and a string literal with the same text, a typed literal, a language-tagged
literal, a blank node, and a string needing escapes in every format.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import rdflib
from api_support import ApiServer
from rdflib.compare import isomorphic
from rdflib.query import Result

from provkg.store.oxigraph_store import OxigraphStore

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
TRICKY = 'a,b\t"c"\nd\\e'  # comma, tab, quotes, newline, backslash
RESULTS_NS = "{http://www.w3.org/2005/sparql-results#}"

TRIPLES = [
    (f"<{EX}s>", f"<{EX}p1link>", f"<{EX}o>"),
    (f"<{EX}s>", f"<{EX}p2label>", f'"{EX}o"'),
    (f"<{EX}s>", f"<{EX}p3count>", f'"42"^^<{XSD}integer>'),
    (f"<{EX}s>", f"<{EX}p4name>", '"chat"@fr'),
    (f"<{EX}s>", f"<{EX}p5node>", "_:b1"),
    (f"<{EX}s>", f"<{EX}p6text>", '"a,b\\t\\"c\\"\\nd\\\\e"'),
    ("_:b1", f"<{EX}p2label>", '"inside"'),
]
#: (predicate, object as (type, value, datatype, lang); None for a blank node's label)
EXPECTED = [
    (f"{EX}p1link", ("uri", f"{EX}o", None, None)),
    (f"{EX}p2label", ("literal", f"{EX}o", None, None)),
    (f"{EX}p3count", ("literal", "42", f"{XSD}integer", None)),
    (f"{EX}p4name", ("literal", "chat", None, "fr")),
    (f"{EX}p5node", ("bnode", None, None, None)),
    (f"{EX}p6text", ("literal", TRICKY, None, None)),
]
SELECT = f"SELECT ?p ?o ?missing WHERE {{ <{EX}s> ?p ?o OPTIONAL {{ ?o <{EX}nothing> ?missing }} }} ORDER BY ?p"
CONSTRUCT = (f"CONSTRUCT {{ <{EX}s> ?p ?o . ?b <{EX}p2label> ?l }} WHERE {{ {{ <{EX}s> ?p ?o }} "
             f"UNION {{ <{EX}s> <{EX}p5node> ?b . ?b <{EX}p2label> ?l }} }}")
ASK_TRUE = f'ASK {{ <{EX}s> <{EX}p4name> "chat"@fr }}'
ASK_FALSE = f'ASK {{ <{EX}s> <{EX}p4name> "chat" }}'

JSON_TYPE = "application/sparql-results+json"
XML_TYPE = "application/sparql-results+xml"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("sparql-protocol")
    store = OxigraphStore(folder / "store")
    store.add(TRIPLES)
    store.close()
    with ApiServer(folder, env={"PROVKG_QUERY_TIMEOUT_S": "20"}) as srv:
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def sparql(server: ApiServer, query: str, accept: str | None, *, method: str = "GET") -> httpx.Response:
    headers = {} if accept is None else {"Accept": accept}
    if method == "GET":
        request = server.http.build_request("GET", "/v1/sparql", params={"query": query}, headers=headers)
    else:
        request = server.http.build_request("POST", "/v1/sparql", data={"query": query}, headers=headers)
    if accept is None:
        del request.headers["accept"]  # httpx sends */* unless told otherwise
    return server.http.send(request)


def media(response: httpx.Response) -> str:
    return response.headers["content-type"].split(";")[0].strip()


def from_json(term: dict[str, str]) -> tuple[str, str | None, str | None, str | None]:
    kind = term["type"]
    return (kind, None if kind == "bnode" else term["value"], term.get("datatype"), term.get("xml:lang"))


def from_rdflib(term: Any) -> tuple[str, str | None, str | None, str | None] | None:
    if term is None:
        return None
    if isinstance(term, rdflib.BNode):
        return ("bnode", None, None, None)
    if isinstance(term, rdflib.Literal):
        datatype = str(term.datatype) if term.datatype and str(term.datatype) != f"{XSD}string" else None
        return ("literal", str(term), datatype, term.language)
    return ("uri", str(term), None, None)


def rdflib_rows(result: Result) -> list[tuple[str, tuple[str, str | None, str | None, str | None] | None]]:
    assert [str(v) for v in result.vars or []] == ["p", "o", "missing"]
    rows = []
    for row in result:
        assert row[2] is None  # ?missing is unbound
        rows.append((str(row[0]), from_rdflib(row[1])))
    return rows


# -- SELECT --------------------------------------------------------------------------


@pytest.mark.parametrize("accept", [None, "*/*", JSON_TYPE, "application/json"])
def test_select_json_keeps_term_types(server: ApiServer, accept: str | None) -> None:
    response = sparql(server, SELECT, accept)
    assert response.status_code == 200, response.text
    assert media(response) == JSON_TYPE
    body = orjson.loads(response.content)
    assert body["head"]["vars"] == ["p", "o", "missing"]
    bindings = body["results"]["bindings"]
    assert all("missing" not in b for b in bindings), "unbound variables are left out"
    assert all(b["p"]["type"] == "uri" for b in bindings)
    assert [(b["p"]["value"], from_json(b["o"])) for b in bindings] == EXPECTED
    # the IRI and the string literal with the same text are told apart
    assert bindings[0]["o"] == {"type": "uri", "value": f"{EX}o"}
    assert bindings[1]["o"] == {"type": "literal", "value": f"{EX}o"}
    assert bindings[2]["o"] == {"type": "literal", "value": "42", "datatype": f"{XSD}integer"}
    assert bindings[3]["o"] == {"type": "literal", "value": "chat", "xml:lang": "fr"}
    assert bindings[4]["o"]["type"] == "bnode" and bindings[4]["o"]["value"]


def test_from_names_the_dataset(server: ApiServer) -> None:
    # FROM was ignored (every graph answered; found by black-box testing): a graph the
    # store does not hold is an empty dataset
    query = f"SELECT ?o FROM <http://127.0.0.1:9/none> WHERE {{ <{EX}s> ?p ?o }}"
    response = sparql(server, query, JSON_TYPE)
    assert response.status_code == 200, response.text
    assert orjson.loads(response.content)["results"]["bindings"] == []
    assert orjson.loads(sparql(server, SELECT, JSON_TYPE).content)["results"]["bindings"]


def test_queries_see_named_graphs_without_from(tmp_path) -> None:
    # a store without named graphs is queried without the union (cheaper); with one, the
    # worker must still answer from every graph
    store = OxigraphStore(tmp_path / "store")
    store.add([(f"<{EX}s>", f"<{EX}p>", '"default"')])
    store.add([(f"<{EX}s>", f"<{EX}p>", '"named"')], graph=f"{EX}g")
    store.close()
    with ApiServer(tmp_path) as srv:
        response = sparql(srv, f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o }}", JSON_TYPE)
    assert response.status_code == 200, response.text
    got = sorted(b["o"]["value"] for b in orjson.loads(response.content)["results"]["bindings"])
    assert got == ["default", "named"]


def test_select_json_through_post_is_the_same(server: ApiServer) -> None:
    got = sparql(server, SELECT, JSON_TYPE, method="POST")
    direct = server.http.post("/v1/sparql", content=SELECT.encode(),
                              headers={"Content-Type": "application/sparql-query", "Accept": JSON_TYPE})
    expected = sparql(server, SELECT, JSON_TYPE).json()
    for response in (got, direct):
        assert response.status_code == 200 and media(response) == JSON_TYPE
        body = response.json()
        assert [(b["p"]["value"], from_json(b["o"])) for b in body["results"]["bindings"]] == EXPECTED
        assert body["head"] == expected["head"]


@pytest.mark.parametrize("accept", [XML_TYPE, "application/xml"])
def test_select_xml(server: ApiServer, accept: str) -> None:
    response = sparql(server, SELECT, accept)
    assert response.status_code == 200, response.text
    assert media(response) == XML_TYPE
    # an independent parser (rdflib's SPARQL XML results parser) reads the same terms
    parsed = Result.parse(io.BytesIO(response.content), format="xml")
    assert rdflib_rows(parsed) == EXPECTED
    # and the document has the W3C shape
    root = ET.fromstring(response.content)
    assert root.tag == f"{RESULTS_NS}sparql"
    names = [v.get("name") for v in root.iter(f"{RESULTS_NS}variable")]
    assert names == ["p", "o", "missing"]
    results = list(root.iter(f"{RESULTS_NS}result"))
    assert len(results) == len(EXPECTED)
    first_o = next(b for b in results[0] if b.get("name") == "o")[0]
    assert first_o.tag == f"{RESULTS_NS}uri"
    name_o = next(b for b in results[3] if b.get("name") == "o")[0]
    assert name_o.tag == f"{RESULTS_NS}literal"
    assert name_o.get("{http://www.w3.org/XML/1998/namespace}lang") == "fr"


def test_select_csv(server: ApiServer) -> None:
    response = sparql(server, SELECT, "text/csv")
    assert response.status_code == 200, response.text
    assert media(response) == "text/csv"
    assert response.content.startswith(b"p,o,missing\r\n"), "CRLF line ends (W3C CSV results)"
    rows = list(csv.reader(io.StringIO(response.text, newline="")))
    assert rows[0] == ["p", "o", "missing"]
    body = rows[1:]
    assert [r[0] for r in body] == [p for p, _ in EXPECTED]
    assert all(r[2] == "" for r in body)
    # CSV carries plain values: IRIs and literals as their text, blank nodes as _:label
    for row, (_, (kind, value, _dt, _lang)) in zip(body, EXPECTED):
        if kind == "bnode":
            assert row[1].startswith("_:") and len(row[1]) > 2
        else:
            assert row[1] == value


def test_select_tsv(server: ApiServer) -> None:
    response = sparql(server, SELECT, "text/tab-separated-values")
    assert response.status_code == 200, response.text
    assert media(response) == "text/tab-separated-values"
    lines = response.text.split("\n")
    assert lines[0] == "?p\t?o\t?missing"
    assert len(lines) == len(EXPECTED) + 2 and lines[-1] == "", "one line per row, LF ends"
    assert lines[1] == f"<{EX}p1link>\t<{EX}o>\t"
    assert lines[2] == f'<{EX}p2label>\t"{EX}o"\t'
    assert lines[3] == f'<{EX}p3count>\t"42"^^<{XSD}integer>\t'
    assert lines[4] == f'<{EX}p4name>\t"chat"@fr\t'
    assert lines[6] == f'<{EX}p6text>\t"a,b\\t\\"c\\"\\nd\\\\e"\t'
    parsed = Result.parse(io.BytesIO(response.content), format="tsv")
    assert rdflib_rows(parsed) == EXPECTED


def test_provkg_rows_only_on_request(server: ApiServer) -> None:
    response = sparql(server, SELECT, "application/vnd.provkg.rows+json")
    assert response.status_code == 200, response.text
    assert media(response) == "application/vnd.provkg.rows+json"
    body = response.json()
    assert body["columns"] == ["p", "o", "missing"]
    assert body["rows"][2] == [f"{EX}p3count", 42, None]  # numbers as JSON numbers
    ask = sparql(server, ASK_TRUE, "application/vnd.provkg.rows+json")
    assert ask.json() == {"columns": ["boolean"], "rows": [[True]]}  # as the CLI writes it


# -- ASK -----------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "expected"), [(ASK_TRUE, True), (ASK_FALSE, False)])
def test_ask_json_and_xml(server: ApiServer, query: str, expected: bool) -> None:
    as_json = sparql(server, query, None)
    assert as_json.status_code == 200 and media(as_json) == JSON_TYPE
    assert orjson.loads(as_json.content) == {"head": {}, "boolean": expected}
    as_xml = sparql(server, query, XML_TYPE)
    assert as_xml.status_code == 200 and media(as_xml) == XML_TYPE
    root = ET.fromstring(as_xml.content)
    assert root.find(f"{RESULTS_NS}boolean").text == ("true" if expected else "false")
    assert Result.parse(io.BytesIO(as_xml.content), format="xml").askAnswer is expected


# -- CONSTRUCT -------------------------------------------------------------------------


def expected_graph() -> rdflib.Graph:
    graph = rdflib.Graph()
    graph.parse(data="".join(f"{s} {p} {o} .\n" for s, p, o in TRIPLES), format="nt")
    return graph


@pytest.mark.filterwarnings(  # rdflib's own JSON-LD parser uses its deprecated ConjunctiveGraph
    "ignore:ConjunctiveGraph is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("accept", "content_type", "rdflib_format"), [
    (None, "text/turtle", "turtle"),
    ("*/*", "text/turtle", "turtle"),
    ("text/turtle", "text/turtle", "turtle"),
    ("application/n-triples", "application/n-triples", "nt"),
    ("application/ld+json", "application/ld+json", "json-ld"),
    ("application/rdf+xml", "application/rdf+xml", "xml"),
])
def test_construct_formats_parse_to_the_same_graph(server: ApiServer, accept: str | None,
                                                   content_type: str, rdflib_format: str) -> None:
    response = sparql(server, CONSTRUCT, accept)
    assert response.status_code == 200, response.text
    assert media(response) == content_type
    graph = rdflib.Graph()
    graph.parse(data=response.content, format=rdflib_format)
    assert len(graph) == len(TRIPLES)
    assert isomorphic(graph, expected_graph())


def test_describe_is_turtle_by_default(server: ApiServer) -> None:
    response = sparql(server, f"DESCRIBE <{EX}s>", None)
    assert response.status_code == 200 and media(response) == "text/turtle"
    graph = rdflib.Graph().parse(data=response.content, format="turtle")
    assert (rdflib.URIRef(f"{EX}s"), rdflib.URIRef(f"{EX}p4name"), rdflib.Literal("chat", lang="fr")) in graph


# -- negotiation -----------------------------------------------------------------------


@pytest.mark.parametrize(("query", "accept"), [
    (SELECT, "image/png"), (ASK_TRUE, "image/png"), (CONSTRUCT, "image/png"),
    (ASK_TRUE, "text/csv"), (CONSTRUCT, "text/csv;q=0, text/plain"), (SELECT, "text/turtle"),
    (SELECT, f"{JSON_TYPE};q=0, text/plain"),
])
# (a CONSTRUCT asked for with result-set types only gets Turtle: test_api_sparql_described.py)
def test_unacceptable_accept_is_406_naming_the_formats(server: ApiServer, query: str, accept: str) -> None:
    response = sparql(server, query, accept)
    assert response.status_code == 406, response.text
    body = response.json()
    assert set(body) == {"error", "detail"} and body["error"] == "not_acceptable"
    offered = (["text/turtle", "application/n-triples"] if query == CONSTRUCT else
               [JSON_TYPE, XML_TYPE])
    assert all(t in body["detail"] for t in offered), body["detail"]


@pytest.mark.parametrize(("query", "accept", "expected"), [
    (SELECT, f"{JSON_TYPE};q=0.5, text/csv;q=0.9", "text/csv"),
    (SELECT, f"text/csv;q=0.1, {XML_TYPE}", XML_TYPE),
    (SELECT, f"{JSON_TYPE};q=0, */*;q=0.1", XML_TYPE),
    (SELECT, "text/*;q=0.3, text/tab-separated-values;q=0.8", "text/tab-separated-values"),
    (SELECT, f"image/png, {XML_TYPE};q=0.01", XML_TYPE),
    (SELECT, f"{XML_TYPE}, application/rdf+xml", XML_TYPE),  # rdflib's SPARQLStore
    (ASK_TRUE, f"text/csv, {XML_TYPE};q=0.5, {JSON_TYPE};q=0.4", XML_TYPE),
    (CONSTRUCT, "text/turtle;q=0.2, application/n-triples;q=0.8", "application/n-triples"),
    (CONSTRUCT, f"{XML_TYPE}, application/rdf+xml", "application/rdf+xml"),  # rdflib's SPARQLStore
])
def test_q_values_pick_the_preferred_format(server: ApiServer, query: str, accept: str, expected: str) -> None:
    response = sparql(server, query, accept)
    assert response.status_code == 200, response.text
    assert media(response) == expected
    assert "accept" in response.headers.get("vary", "").lower()


def test_openapi_lists_the_media_types(server: ApiServer) -> None:
    spec = server.http.get("/openapi.json").json()
    for method in ("get", "post"):
        responses = spec["paths"]["/v1/sparql"][method]["responses"]
        assert {JSON_TYPE, XML_TYPE, "text/csv", "text/tab-separated-values",
                "application/vnd.provkg.rows+json", "text/turtle", "application/n-triples",
                "application/ld+json", "application/rdf+xml"} <= set(responses["200"]["content"])
        assert "406" in responses


# -- standard clients ------------------------------------------------------------------


@pytest.mark.parametrize("return_format", ["xml", "json"])
def test_rdflib_sparqlstore_runs_select_ask_and_construct(server: ApiServer, return_format: str) -> None:
    from rdflib.plugins.stores.sparqlstore import SPARQLStore

    store = SPARQLStore(query_endpoint=f"{server.url}/v1/sparql", returnFormat=return_format)
    graph = rdflib.Graph(store=store)
    assert rdflib_rows(graph.query(SELECT)) == EXPECTED
    row = next(iter(graph.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p3count> ?o }}")))
    assert row[0] == rdflib.Literal(42) and row[0].datatype == rdflib.XSD.integer
    assert graph.query(ASK_TRUE).askAnswer is True
    assert graph.query(ASK_FALSE).askAnswer is False
    if return_format == "xml":  # asks for application/rdf+xml too, so CONSTRUCT works
        constructed = graph.query(CONSTRUCT).graph
        assert isomorphic(constructed, expected_graph())


@pytest.mark.parametrize("return_format", ["json", "xml", "csv", "tsv"])
def test_sparqlwrapper_select(server: ApiServer, return_format: str) -> None:
    from SPARQLWrapper import SPARQLWrapper

    client = SPARQLWrapper(f"{server.url}/v1/sparql")
    client.setQuery(SELECT)
    client.setReturnFormat(return_format)
    result = client.query()
    assert result.info()["content-type"].split(";")[0] == {
        "json": JSON_TYPE, "xml": XML_TYPE, "csv": "text/csv",
        "tsv": "text/tab-separated-values"}[return_format]
    converted = result.convert()
    if return_format == "json":
        assert [(b["p"]["value"], from_json(b["o"])) for b in converted["results"]["bindings"]] == EXPECTED
    elif return_format == "xml":
        assert len(list(converted.getElementsByTagName("result"))) == len(EXPECTED)
    else:
        assert len(converted.decode("utf-8").strip().splitlines()) >= len(EXPECTED) + 1


def test_sparqlwrapper_ask(server: ApiServer) -> None:
    from SPARQLWrapper import JSON, SPARQLWrapper

    client = SPARQLWrapper(f"{server.url}/v1/sparql")
    client.setQuery(ASK_TRUE)
    client.setReturnFormat(JSON)
    assert client.query().convert()["boolean"] is True


def test_provkg_sparql_endpoint_store_keeps_term_types(server: ApiServer) -> None:
    """provkg's own endpoint store (``sparql+http://``) reads typed terms from a SPARQL
    endpoint, here provkg itself: what ``/v1/sparql`` runs on when the store is remote."""
    from provkg.store import open_store

    store = open_store(f"sparql+{server.url}/v1/sparql")
    try:
        rows = store.select_terms(SELECT)
        assert rows.columns == ["p", "o", "missing"]
        assert [(p["value"], from_json(o)) for p, o, missing in rows.rows] == EXPECTED
        assert all(missing is None for _, _, missing in rows.rows)
        assert store.select(SELECT).rows[2][1] == 42  # the plain-Python path is unchanged
    finally:
        store.close()


def test_a_read_only_endpoint_refusing_an_update_is_a_store_error_not_bad_sparql(server: ApiServer) -> None:
    # found by black-box testing: a server whose store was another provkg's read-only
    # /v1/sparql reported every refused write as "SPARQL syntax error"
    from provkg.errors import QuerySyntaxError, StoreError
    from provkg.store import open_store

    store = open_store(f"sparql+{server.url}/v1/sparql")
    try:
        with pytest.raises(StoreError) as info:
            store.update("INSERT DATA { <urn:a> <urn:p> <urn:b> }")
        assert not isinstance(info.value, QuerySyntaxError), info.value
        with pytest.raises(QuerySyntaxError):  # a query that does not parse still is one
            store.select("SELECT ?s WHERE { ?s ?p }")
    finally:
        store.close()


# -- the in-process backends give the same terms as the worker ---------------------


@pytest.mark.parametrize("url", ["memory:", "rdflib:"])
def test_in_process_backends_answer_the_same_terms(server: ApiServer, url: str) -> None:
    from provkg.api.sparql import SparqlRunner
    from provkg.store import open_store

    store = open_store(url)
    runner = SparqlRunner(store, url, timeout=20, max_rows=100)
    try:
        store.add(TRIPLES)
        answer = runner.run(SELECT, "select")
        assert answer.rows is not None and answer.rows.columns == ["p", "o", "missing"]
        assert [(p["value"], from_json(o)) for p, o, _ in answer.rows.rows] == EXPECTED
        worker = sparql(server, SELECT, JSON_TYPE).json()["results"]["bindings"]
        assert [{k: v for k, v in o.items() if o["type"] != "bnode" or k == "type"}
                for _, o, _ in answer.rows.rows] == \
               [{k: v for k, v in b["o"].items() if b["o"]["type"] != "bnode" or k == "type"}
                for b in worker]
    finally:
        runner.close()
        store.close()


# -- every backend's typed SELECT terms (what /v1/sparql serializes) ----------------


def test_select_terms_keep_types_on_every_backend(store: Any) -> None:
    """``Store.select_terms`` on each backend of ``tests/conftest.py`` (embedded Oxigraph,
    in-memory Oxigraph, rdflib, Oxigraph server, Virtuoso): the in-process and endpoint
    paths of ``/v1/sparql``."""
    store.add(TRIPLES)
    rows = store.select_terms(SELECT)
    assert rows.columns == ["p", "o", "missing"]
    assert [(p["value"], from_json(o)) for p, o, _ in rows.rows] == EXPECTED
    assert all(p["type"] == "uri" and missing is None for p, _, missing in rows.rows)


@pytest.mark.parametrize(("query", "accept", "instead"), [
    ('SELECT ?x WHERE { BIND("\\u001B[31mCUDA out of memory" AS ?x) }', XML_TYPE, JSON_TYPE),
    (f'CONSTRUCT {{ <{EX}s> <{EX}m> "a\\u0001b" }} WHERE {{}}', "application/rdf+xml", "text/turtle"),
])
def test_an_answer_xml_cannot_carry_is_406_not_ill_formed_xml(server: ApiServer, query: str,
                                                               accept: str, instead: str) -> None:
    """Found by black-box testing: a stored failure message with ANSI colour codes made the XML
    answers ill-formed (expat, and so rdflib's SPARQLStore, failed on them)."""
    response = sparql(server, query, accept)
    assert response.status_code == 406, response.text
    assert "XML 1.0" in response.json()["detail"] and instead in response.json()["detail"]
    other = sparql(server, query, instead)  # the other formats carry it
    assert other.status_code == 200, other.text
    assert any(c in other.text.lower() for c in ("\x1b", "\\u001b", "\x01", "\\u0001")), other.text
