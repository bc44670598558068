"""``/v1/sparql`` describes itself and takes the Protocol's dataset, against a real ``provkg
serve`` holding a lifecycle ingested over HTTP and a domain KG in a named graph: the SPARQL
1.1 Service Description, VoID at ``/.well-known/void`` (its counts checked against SPARQL on
the same store), ``default-graph-uri`` / ``named-graph-uri`` (and rdflib's ``Dataset`` and
``Graph(identifier=G)`` over ``SPARQLStore``), CONSTRUCT with a result-set Accept, the row
limit's 422 as SPARQLWrapper sees it, and CORS off and on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import rdflib
from api_support import ApiServer
from lifecycle import SPECS, Lifecycle, build_lifecycle
from rdflib.compare import isomorphic

from provkg.capture.http_sink import HttpSink
from provkg.store import open_store
from provkg.store.oxigraph_store import OxigraphStore

SD = rdflib.Namespace("http://www.w3.org/ns/sparql-service-description#")
VOID = rdflib.Namespace("http://rdfs.org/ns/void#")
FORMATS = rdflib.Namespace("http://www.w3.org/ns/formats/")
KG_GRAPH = "https://example.org/graph/domain-kg"
OTHER_GRAPH = "https://example.org/graph/other"
EX = "http://example.org/"
JSON_TYPE = "application/sparql-results+json"
MAX_ROWS = 1000


@pytest.fixture(scope="module")
def lc() -> Lifecycle:
    return build_lifecycle()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, lc: Lifecycle) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("described")
    seed = OxigraphStore(folder / "store")  # the domain KG, loaded into its own graph first
    seed.add(lc.kg, graph=KG_GRAPH)
    seed.add([(f"<{EX}a>", f"<{EX}p>", '"other"')], graph=OTHER_GRAPH)
    seed.close()
    with ApiServer(folder, env={"PROVKG_MAX_ROWS": str(MAX_ROWS)}) as srv:
        for text in SPECS.values():
            response = srv.http.post("/v1/specs", content=text, headers={"Content-Type": "application/yaml"})
            assert response.status_code == 201, response.text
        sink = HttpSink(srv.url, compression="gzip")
        try:
            for i in range(0, len(lc.events), 50):
                sink.send(lc.events[i:i + 50])
        finally:
            sink.close()
        assert srv.wait_applied()["applied_events"] == len(lc.events)
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def select(server: ApiServer, query: str, **params: Any) -> list[dict[str, Any]]:
    response = server.http.get("/v1/sparql", params={"query": query, **params}, headers={"Accept": JSON_TYPE})
    assert response.status_code == 200, response.text
    return response.json()["results"]["bindings"]


def count(server: ApiServer, where: str, **params: Any) -> int:
    return int(select(server, f"SELECT (COUNT(*) AS ?n) WHERE {{ {where} }}", **params)[0]["n"]["value"])


# -- the Service Description ----------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("accept", "media", "rdflib_format"), [
    (None, "text/turtle", "turtle"), ("text/turtle", "text/turtle", "turtle"),
    ("application/ld+json", "application/ld+json", "json-ld"),
    ("application/rdf+xml", "application/rdf+xml", "xml"),
    ("application/n-triples", "application/n-triples", "nt")])
def test_a_get_without_a_query_is_the_service_description(server: ApiServer, accept: str | None,
                                                          media: str, rdflib_format: str) -> None:
    request = server.http.build_request("GET", "/v1/sparql", headers={"Accept": accept or ""})
    if accept is None:
        del request.headers["accept"]
    response = server.http.send(request)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == media
    graph = rdflib.Graph().parse(data=response.content, format=rdflib_format)
    (service,) = graph.subjects(rdflib.RDF.type, SD.Service)
    assert graph.value(service, SD.endpoint) == rdflib.URIRef(f"{server.url}/v1/sparql")
    assert set(graph.objects(service, SD.supportedLanguage)) == {SD.SPARQL11Query}  # read-only
    assert graph.value(service, SD.defaultEntailmentRegime) == rdflib.URIRef(
        "http://www.w3.org/ns/entailment/Simple")
    assert SD.UnionDefaultGraph in set(graph.objects(service, SD.feature))
    assert SD.BasicFederatedQuery not in set(graph.objects(service, SD.feature))  # no SERVICE allowed
    assert set(graph.objects(service, SD.resultFormat)) == {FORMATS[n] for n in (
        "SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV",
        "Turtle", "N-Triples", "JSON-LD", "RDF_XML")}
    dataset = graph.value(service, SD.defaultDataset)
    assert (dataset, rdflib.RDF.type, SD.Dataset) in graph
    assert graph.value(dataset, SD.defaultGraph) is not None
    names = {graph.value(g, SD.name) for g in graph.objects(dataset, SD.namedGraph)}
    assert names == {rdflib.URIRef(KG_GRAPH), rdflib.URIRef(OTHER_GRAPH)}
    assert rdflib.URIRef(f"{server.url}/.well-known/void") in set(graph.objects(service, rdflib.RDFS.seeAlso))


def test_each_result_format_the_description_names_is_served(server: ApiServer) -> None:
    """sd:resultFormat says what the endpoint really answers in: each one asked for by its media type."""
    by_format = {"SPARQL_Results_JSON": ("SELECT", JSON_TYPE), "SPARQL_Results_XML": (
        "SELECT", "application/sparql-results+xml"), "SPARQL_Results_CSV": ("SELECT", "text/csv"),
        "SPARQL_Results_TSV": ("SELECT", "text/tab-separated-values"), "Turtle": ("CONSTRUCT", "text/turtle"),
        "N-Triples": ("CONSTRUCT", "application/n-triples"), "JSON-LD": ("CONSTRUCT", "application/ld+json"),
        "RDF_XML": ("CONSTRUCT", "application/rdf+xml")}
    graph = rdflib.Graph().parse(data=server.http.get("/v1/sparql").content, format="turtle")
    named = {str(f).removeprefix(str(FORMATS)) for f in graph.objects(None, SD.resultFormat)}
    assert named == set(by_format)
    for form, media in by_format.values():
        query = ("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1" if form == "SELECT"
                 else "CONSTRUCT WHERE { ?s ?p ?o } LIMIT 1")
        response = server.http.get("/v1/sparql", params={"query": query}, headers={"Accept": media})
        assert response.status_code == 200 and response.headers["content-type"].split(";")[0] == media


def test_graph_parameters_without_a_query_are_still_a_400(server: ApiServer) -> None:
    response = server.http.get("/v1/sparql", params={"default-graph-uri": KG_GRAPH})
    assert response.status_code == 400 and "query" in response.json()["detail"]
    assert server.http.get("/v1/sparql", headers={"Accept": "image/png"}).status_code == 406


# -- VoID ------------------------------------------------------------------------------------


def _void(server: ApiServer, accept: str = "text/turtle", fmt: str = "turtle") -> rdflib.Graph:
    response = server.http.get("/.well-known/void", headers={"Accept": accept})
    assert response.status_code == 200, response.text
    return rdflib.Graph().parse(data=response.content, format=fmt)


def test_void_counts_are_the_stores(server: ApiServer) -> None:
    graph = _void(server)
    (dataset,) = graph.subjects(rdflib.RDF.type, VOID.Dataset)
    assert graph.value(dataset, VOID.triples).toPython() == count(server, "?s ?p ?o")
    assert graph.value(dataset, VOID.sparqlEndpoint) == rdflib.URIRef(f"{server.url}/v1/sparql")
    assert graph.value(dataset, VOID.dataDump) == rdflib.URIRef(f"{server.url}/v1/export?format=nq")
    classes = {graph.value(p, VOID["class"]): graph.value(p, VOID.entities).toPython()
               for p in graph.objects(dataset, VOID.classPartition)}
    expected = {rdflib.URIRef(b["c"]["value"]): int(b["n"]["value"]) for b in select(
        server, "SELECT ?c (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s a ?c } GROUP BY ?c")}
    assert classes == expected and len(classes) > 5
    properties = {graph.value(p, VOID.property): graph.value(p, VOID.triples).toPython()
                  for p in graph.objects(dataset, VOID.propertyPartition)}
    for prop in (rdflib.RDF.type, rdflib.URIRef("http://www.w3.org/ns/prov#used"),
                 rdflib.URIRef("http://www.w3.org/ns/prov#wasGeneratedBy")):
        assert properties[prop] == count(server, f"?s <{prop}> ?o"), prop
    assert sum(properties.values()) == graph.value(dataset, VOID.triples).toPython()
    vocabularies = {str(v) for v in graph.objects(dataset, VOID.vocabulary)}
    assert {"http://www.w3.org/1999/02/22-rdf-syntax-ns#", "http://www.w3.org/ns/prov#",
            "http://example.org/"} <= vocabularies
    assert not any(v.startswith("https://w3id.org/provkg/id/") for v in vocabularies)
    # the Service Description's dataset is the one VoID describes
    sd = rdflib.Graph().parse(data=server.http.get("/v1/sparql").content, format="turtle")
    assert dataset in set(sd.objects(None, SD.defaultDataset))


@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")
def test_void_in_json_ld_is_the_same_graph(server: ApiServer) -> None:
    assert isomorphic(_void(server, "application/ld+json", "json-ld"), _void(server))


# -- default-graph-uri / named-graph-uri --------------------------------------------------


def test_default_graph_uri_names_the_default_graph(server: ApiServer, lc: Lifecycle) -> None:
    assert count(server, "?s ?p ?o", **{"default-graph-uri": KG_GRAPH}) == len(set(lc.kg))
    both = server.http.get("/v1/sparql", headers={"Accept": JSON_TYPE}, params=[
        ("query", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"),
        ("default-graph-uri", KG_GRAPH), ("default-graph-uri", OTHER_GRAPH)])
    assert int(both.json()["results"]["bindings"][0]["n"]["value"]) == len(set(lc.kg)) + 1
    # a graph the store does not hold is an empty default graph, not an error
    assert count(server, "?s ?p ?o", **{"default-graph-uri": f"{EX}none"}) == 0
    # the request's dataset replaces the query's own
    assert int(select(server, f"SELECT (COUNT(*) AS ?n) FROM <{OTHER_GRAPH}> WHERE {{ ?s ?p ?o }}",
                      **{"default-graph-uri": KG_GRAPH})[0]["n"]["value"]) == len(set(lc.kg))


def test_named_graph_uri_names_the_named_graphs(server: ApiServer) -> None:
    rows = select(server, "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", **{"named-graph-uri": OTHER_GRAPH})
    assert [r["g"]["value"] for r in rows] == [OTHER_GRAPH]
    # only named graphs given: the default graph is empty (SPARQL 1.1 Protocol, 2.1.4)
    assert count(server, "?s ?p ?o", **{"named-graph-uri": OTHER_GRAPH}) == 0
    # only a default graph given: no named graphs
    assert count(server, "GRAPH ?g { ?s ?p ?o }", **{"default-graph-uri": KG_GRAPH}) == 0


@pytest.mark.parametrize("how", ["form", "direct"])
def test_graph_parameters_work_with_post(server: ApiServer, lc: Lifecycle, how: str) -> None:
    query = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    if how == "form":
        response = server.http.post("/v1/sparql", headers={"Accept": JSON_TYPE},
                                    data={"query": query, "default-graph-uri": [KG_GRAPH, OTHER_GRAPH]})
    else:
        response = server.http.post("/v1/sparql", content=query.encode(), params={"default-graph-uri": KG_GRAPH},
                                    headers={"Accept": JSON_TYPE, "Content-Type": "application/sparql-query"})
    assert response.status_code == 200, response.text
    expected = len(set(lc.kg)) + (1 if how == "form" else 0)
    assert int(response.json()["results"]["bindings"][0]["n"]["value"]) == expected


@pytest.mark.parametrize("value", ["not an iri", "relative/graph", "http://x/a b", "http://x/<g>", ""])
def test_a_graph_parameter_that_is_no_iri_is_refused_naming_it(server: ApiServer, value: str) -> None:
    for name in ("default-graph-uri", "named-graph-uri"):
        response = server.http.get("/v1/sparql", params={"query": "ASK {}", name: value})
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "bad_request" and name in response.json()["detail"]
        assert value not in response.json()["detail"] or not value


def test_construct_with_a_dataset(server: ApiServer, lc: Lifecycle) -> None:
    response = server.http.get("/v1/sparql", headers={"Accept": "application/n-triples"}, params={
        "query": "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", "default-graph-uri": KG_GRAPH})
    assert response.status_code == 200
    assert len(rdflib.Graph().parse(data=response.text, format="nt")) == len(set(lc.kg))


# -- rdflib's SPARQLStore -----------------------------------------------------------------


def test_rdflib_graph_with_an_identifier_reads_that_graph(server: ApiServer, lc: Lifecycle) -> None:
    from rdflib.plugins.stores.sparqlstore import SPARQLStore

    graph = rdflib.Graph(SPARQLStore(f"{server.url}/v1/sparql", returnFormat="json"),
                         identifier=rdflib.URIRef(KG_GRAPH))
    expected = rdflib.Graph().parse(data="".join(f"{s} {p} {o} .\n" for s, p, o in lc.kg), format="nt")
    assert len(graph) == len(expected)
    read = rdflib.Graph()
    for triple in graph.triples((None, None, None)):
        read.add(triple)
    assert isomorphic(read, expected)
    (row,) = graph.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert row[0].toPython() == len(expected)
    other = rdflib.Graph(SPARQLStore(f"{server.url}/v1/sparql", returnFormat="json"),
                         identifier=rdflib.URIRef(OTHER_GRAPH))
    assert list(other.triples((None, None, None))) == [
        (rdflib.URIRef(f"{EX}a"), rdflib.URIRef(f"{EX}p"), rdflib.Literal("other"))]


@pytest.mark.filterwarnings(  # rdflib's own Dataset.query reads its deprecated default_context
    "ignore:Dataset.default_context is deprecated:DeprecationWarning")
def test_rdflib_dataset_reads_the_union_and_each_graph(server: ApiServer, lc: Lifecycle) -> None:
    from rdflib.plugins.stores.sparqlstore import SPARQLStore

    dataset = rdflib.Dataset(SPARQLStore(f"{server.url}/v1/sparql", returnFormat="json"))
    total = count(server, "?s ?p ?o")
    (row,) = dataset.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")  # rdflib's default graph
    assert row[0].toPython() == total > len(lc.kg)
    executions = count(server, "?x a <http://www.w3.org/ns/prov#Activity>")
    assert len(list(dataset.triples((None, rdflib.RDF.type, rdflib.URIRef(
        "http://www.w3.org/ns/prov#Activity"))))) == executions
    assert set(dataset.store.contexts()) == {rdflib.URIRef(KG_GRAPH), rdflib.URIRef(OTHER_GRAPH)}
    assert len(dataset.get_context(rdflib.URIRef(KG_GRAPH))) == len(set(lc.kg))
    (row,) = dataset.get_context(rdflib.URIRef(OTHER_GRAPH)).query("SELECT ?o WHERE { ?s ?p ?o }")
    assert row[0] == rdflib.Literal("other")


def test_rdflib_default_graph_name_cannot_be_mixed(server: ApiServer) -> None:
    response = server.http.get("/v1/sparql", params=[("query", "ASK {}"), ("default-graph-uri", "urn:x-rdflib:default"),
                                                      ("named-graph-uri", KG_GRAPH)])
    assert response.status_code == 400 and "urn:x-rdflib:default" in response.json()["detail"]


# -- the same dataset on every way the runner runs a query ----------------------------------

DATASET_QUERIES = [
    ("select", f"SELECT ?s ?o WHERE {{ ?s <{EX}p> ?o }}"),
    ("select", f"SELECT * FROM <{EX}g3> WHERE {{ ?s <{EX}p> ?o }}"),
    ("select", f"PREFIX ex: <{EX}>\nSELECT (STR(?o) AS ?t) # WHERE {{ FROM\n WHERE {{ ?s ex:p ?o }}"),
    ("select", f'SELECT ?x ?o {{ BIND("FROM {{ WHERE" AS ?x) ?s <{EX}p> ?o }}'),
    ("select", f"SELECT (EXISTS {{ ?s <{EX}q> ?z }} AS ?e) ?o WHERE {{ ?s <{EX}p> ?o }}"),
    ("select", "SELECT ?g ?o WHERE { GRAPH ?g { ?s ?p ?o } }"),
    ("select", "SELECT ?n WHERE { { SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o } } }"),
    ("ask", f"ASK {{ ?s <{EX}p> \"in g2\" }}"),
    ("construct", "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"),
    ("construct", f"CONSTRUCT WHERE {{ ?s <{EX}p> ?o }}"),
    ("describe", f"DESCRIBE <{EX}s>"),
    ("describe", f"DESCRIBE ?s WHERE {{ ?s <{EX}p> \"in g1\" }}"),
]
DATASETS = [((f"{EX}g1",), ()), ((), (f"{EX}g1", f"{EX}g2")), ((f"{EX}g1", f"{EX}g2"), (f"{EX}g2",))]
DATASET_TRIPLES = {
    None: [(f"<{EX}s>", f"<{EX}p>", '"in default"')],
    f"{EX}g1": [(f"<{EX}s>", f"<{EX}p>", '"in g1"'), (f"<{EX}s>", f"<{EX}q>", "_:b")],
    f"{EX}g2": [(f"<{EX}s>", f"<{EX}p>", '"in g2"'), (f"<{EX}t>", f"<{EX}p>", f"<{EX}s>")],
    f"{EX}g3": [(f"<{EX}s>", f"<{EX}p>", '"in g3"')],
}


def _normal(columns: list[str], rows: list[list[Any]]) -> list[str]:
    """SELECT rows comparable across stores: by column name, sorted, blank nodes all one label."""
    return sorted(repr(sorted((c, "bnode" if t["type"] == "bnode" else sorted(t.items()))
                              for c, t in zip(columns, row) if t is not None)) for row in rows)


@pytest.fixture(scope="module")
def dataset_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("datasets")
    store = OxigraphStore(folder / "store")
    for graph, triples in DATASET_TRIPLES.items():
        store.add(triples, graph=graph)
    store.close()
    with ApiServer(folder) as srv:
        yield srv


@pytest.mark.parametrize("url", ["memory:", "rdflib:"])
def test_in_process_stores_take_the_dataset_as_the_embedded_worker(dataset_server: ApiServer, url: str) -> None:
    """The embedded store's worker hands the graphs to pyoxigraph; other stores get the query
    with FROM / FROM NAMED written in: the answers are the same for every query shape."""
    from provkg.api.sparql import SparqlRunner
    from provkg.api.sparql_dataset import ProtocolDataset
    from provkg.service.sparql_guard import check_query

    store = open_store(url)
    runner = SparqlRunner(store, url, timeout=20, max_rows=100)
    try:
        for graph, triples in DATASET_TRIPLES.items():
            store.add(triples, graph=graph)
        for form, query in DATASET_QUERIES:
            check_query(query)
            if url == "rdflib:" and "EXISTS" in query:  # rdflib cannot project EXISTS at all
                continue
            for default, named in DATASETS:
                params = [("query", query), *(("default-graph-uri", g) for g in default),
                          *(("named-graph-uri", g) for g in named)]
                accept = "application/n-triples" if form in ("construct", "describe") else JSON_TYPE
                response = dataset_server.http.get("/v1/sparql", params=params, headers={"Accept": accept})
                assert response.status_code == 200, (query, response.text)
                got = runner.run(query, form, dataset=ProtocolDataset(default, named))
                where = (url, query, default, named)
                if form == "select":
                    body = response.json()
                    served = [[b.get(v) for v in body["head"]["vars"]] for b in body["results"]["bindings"]]
                    assert got.rows is not None, where
                    assert _normal(got.rows.columns, got.rows.rows) == _normal(body["head"]["vars"], served), where
                elif form == "ask":
                    assert got.boolean is response.json()["boolean"], where
                elif form == "construct" or url == "memory:":  # rdflib's DESCRIBE is its own
                    graph = rdflib.Graph().parse(data=got.ntriples, format="nt")
                    assert isomorphic(graph, rdflib.Graph().parse(data=response.text, format="nt")), where
    finally:
        runner.close()
        store.close()


# -- CONSTRUCT with a result-set Accept, the row limit, CORS -------------------------------


@pytest.mark.parametrize("accept", [JSON_TYPE, "application/sparql-results+xml", "text/csv",
                                    f"{JSON_TYPE}, application/sparql-results+xml;q=0.9"])
@pytest.mark.parametrize("form", ["CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 3", "DESCRIBE <http://example.org/a>"])
def test_construct_asked_with_result_set_types_is_turtle(server: ApiServer, accept: str, form: str) -> None:
    response = server.http.get("/v1/sparql", params={"query": form}, headers={"Accept": accept})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == "text/turtle"
    assert len(rdflib.Graph().parse(data=response.text, format="turtle")) >= 1


def test_the_row_limit_is_422_naming_the_limit(server: ApiServer) -> None:
    many = "SELECT ?n WHERE { VALUES ?n { " + " ".join(map(str, range(MAX_ROWS + 1))) + " } }"
    for response in (server.http.post("/v1/sparql", data={"query": many}),
                     server.http.post("/v1/sparql", headers={"Accept": "application/n-triples"}, data={
                         "query": "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"})):
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "too_many_rows"
        assert f"more than {MAX_ROWS} rows" in body["detail"] and "PROVKG_MAX_ROWS" in body["detail"]


def test_sparqlwrapper_does_not_call_the_row_limit_a_malformed_query(server: ApiServer) -> None:
    import urllib.error

    from SPARQLWrapper import JSON, POST, SPARQLWrapper
    from SPARQLWrapper.SPARQLExceptions import QueryBadFormed

    client = SPARQLWrapper(f"{server.url}/v1/sparql")
    client.setMethod(POST)
    client.setReturnFormat(JSON)
    client.setQuery("SELECT ?s ?p ?o WHERE { ?s ?p ?o }")
    with pytest.raises(urllib.error.HTTPError) as info:
        client.query()
    assert not isinstance(info.value, QueryBadFormed)
    assert info.value.code == 422
    assert b"PROVKG_MAX_ROWS" in info.value.read()
    client.setQuery("SELECT ?s WHERE { ?s ?p ?o } LIMIT 3")  # under the limit: answered
    assert len(client.query().convert()["results"]["bindings"]) == 3


def test_cors_is_off_by_default(server: ApiServer) -> None:
    preflight = server.http.options("/v1/sparql", headers={
        "Origin": "https://yasgui.example", "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 405
    assert "access-control-allow-origin" not in preflight.headers
    plain = server.http.get("/v1/sparql", params={"query": "ASK {}"}, headers={"Origin": "https://yasgui.example"})
    assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers


def test_cors_origins_answer_preflights(tmp_path) -> None:
    allowed = "https://yasgui.example"
    with ApiServer(tmp_path, env={"PROVKG_CORS_ORIGINS": f'["{allowed}", "http://localhost:3000"]'}) as srv:
        preflight = srv.http.options("/v1/sparql", headers={
            "Origin": allowed, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, accept"})
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == allowed
        assert "POST" in preflight.headers["access-control-allow-methods"]
        query = srv.http.post("/v1/sparql", data={"query": "ASK {}"}, headers={"Origin": allowed})
        assert query.status_code == 200 and query.headers["access-control-allow-origin"] == allowed
        void = srv.http.get("/.well-known/void", headers={"Origin": allowed})
        assert void.headers["access-control-allow-origin"] == allowed
        other = srv.http.options("/v1/sparql", headers={
            "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in other.headers and other.status_code >= 400
        plain = srv.http.get("/v1/sparql", params={"query": "ASK {}"}, headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in plain.headers
    assert "Traceback" not in srv.log(), srv.log()


def test_a_cors_origin_with_a_path_is_refused_at_start(tmp_path) -> None:
    from provkg.config import BadSetting, get_settings

    with pytest.raises(BadSetting, match="PROVKG_CORS_ORIGINS"):
        get_settings(cors_origins=["https://yasgui.example/sparql"])
    server = ApiServer(tmp_path, env={"PROVKG_CORS_ORIGINS": "https://yasgui.example"})  # not JSON
    with pytest.raises(RuntimeError, match="PROVKG_CORS_ORIGINS"):
        server.start()
    server.http.close()


def test_every_backend_takes_the_protocol_dataset(store: Any) -> None:
    """The runner's dataset on each backend of ``tests/conftest.py``: the remote endpoints
    (Oxigraph server, Virtuoso) get the query with FROM / FROM NAMED written in."""
    from provkg.api.sparql import SparqlRunner
    from provkg.api.sparql_dataset import ProtocolDataset

    for graph, triples in DATASET_TRIPLES.items():
        store.add(triples, graph=graph)
    runner = SparqlRunner(store, store.url, timeout=30, max_rows=100)
    try:
        values = f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o }}"
        one = runner.run(values, "select", dataset=ProtocolDataset((f"{EX}g1", f"{EX}g2")))
        assert one.rows is not None
        assert sorted(r[0]["value"] for r in one.rows.rows) == ["in g1", "in g2"]
        named = runner.run(f"SELECT ?g WHERE {{ GRAPH ?g {{ <{EX}s> <{EX}p> ?o }} }}", "select",
                           dataset=ProtocolDataset((), (f"{EX}g2",)))
        assert named.rows is not None and [r[0]["value"] for r in named.rows.rows] == [f"{EX}g2"]
        assert runner.run(f'ASK {{ <{EX}s> <{EX}p> "in default" }}', "ask",
                          dataset=ProtocolDataset((), (f"{EX}g1",))).boolean is False
        graph = runner.run(f"CONSTRUCT WHERE {{ ?s <{EX}p> ?o }}", "construct",
                           dataset=ProtocolDataset((f"{EX}g3",)))
        assert graph.ntriples.strip() == f'<{EX}s> <{EX}p> "in g3" .'
    finally:
        runner.close()
