"""The read-only Linked Data view: ``GET /id/...`` on a real ``provkg serve`` answers the
resource ``https://w3id.org/provkg/id/...`` as Turtle, JSON-LD or an HTML page whose every
value is escaped, with the triples SPARQL finds about it; 404 when there are none.

The store holds a lifecycle mapped by the real mapper, plus a resource with hostile values
(markup in its id and label, a ``javascript:`` IRI), a blank node and many incoming links.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
import rdflib
from api_support import ApiServer
from lifecycle import build_lifecycle, load_lifecycle
from rdflib.compare import isomorphic

from provkg.api.routes.resources import MAX_INCOMING
from provkg.store.oxigraph_store import OxigraphStore
from provkg.term import iri, literal, mint_iri

PROV = "http://www.w3.org/ns/prov#"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
HOSTILE_ID = "run x/<script>alert('id')</script>&\"epoch 3\""
HOSTILE_LABEL = "<img src=x onerror=alert(1)> & </td></table><script>alert(2)</script>"
HOSTILE = mint_iri("task", HOSTILE_ID)
POPULAR = mint_iri("spec", "w", "loss")
TRAINING = mint_iri("task", "learning-1.1")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("linked-data")
    store = OxigraphStore(folder / "store")
    load_lifecycle(store, build_lifecycle())
    store.add([(iri(HOSTILE), iri(RDFS_LABEL), literal(HOSTILE_LABEL)),
               (iri(HOSTILE), iri(f"{PROV}wasAssociatedWith"), "<javascript:alert(3)>"),
               (iri(HOSTILE), iri(f"{PROV}qualifiedAssociation"), "_:assoc"),
               ("_:assoc", iri(f"{PROV}agent"), iri(mint_iri("agent", "alice"))),
               (iri(mint_iri("value", "v1")), iri(f"{PROV}wasGeneratedBy"), iri(HOSTILE))])
    store.add([(iri(mint_iri("value", f"run/{n}")), iri(f"{PROV}wasDerivedFrom"), iri(POPULAR))
               for n in range(MAX_INCOMING + 5)], graph="https://example.org/graph/values")
    store.close()
    with ApiServer(folder) as srv:
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def path_of(resource: str) -> str:
    return "/id/" + resource.removeprefix("https://w3id.org/provkg/id/")


def sparql_graph(server: ApiServer, resource: str) -> rdflib.Graph:
    """What SPARQL on the same server says about ``resource`` (as subject and as object)."""
    query = (f"CONSTRUCT {{ {iri(resource)} ?p ?o . ?s ?q {iri(resource)} }} "
             f"WHERE {{ {{ {iri(resource)} ?p ?o }} UNION {{ ?s ?q {iri(resource)} }} }}")
    response = server.http.get("/v1/sparql", params={"query": query}, headers={"Accept": "application/n-triples"})
    return rdflib.Graph().parse(data=response.text, format="nt")


def test_a_minted_resource_is_turtle_by_default(server: ApiServer) -> None:
    response = server.http.get(path_of(TRAINING))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == "text/turtle"
    graph = rdflib.Graph().parse(data=response.text, format="turtle")
    expected = sparql_graph(server, TRAINING)
    assert len(expected) > 5 and isomorphic(graph, expected)
    subject = rdflib.URIRef(TRAINING)
    assert (subject, rdflib.RDF.type, rdflib.URIRef(f"{PROV}Activity")) in graph
    assert any(o == subject for o in graph.objects(None, rdflib.URIRef(f"{PROV}wasGeneratedBy")))


@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("accept", "fmt"), [("application/ld+json", "json-ld"),
                                             ("application/n-triples", "nt"),
                                             ("application/rdf+xml", "xml")])
def test_other_rdf_formats_are_the_same_graph(server: ApiServer, accept: str, fmt: str) -> None:
    response = server.http.get(path_of(TRAINING), headers={"Accept": accept})
    assert response.status_code == 200 and response.headers["content-type"].split(";")[0] == accept
    turtle = rdflib.Graph().parse(data=server.http.get(path_of(TRAINING)).text, format="turtle")
    assert isomorphic(rdflib.Graph().parse(data=response.content, format=fmt), turtle)


def test_percent_encoded_ids_keep_their_encoding_and_blank_nodes_come_along(server: ApiServer) -> None:
    assert "%" in HOSTILE and "%2F" not in HOSTILE  # an id keeps '/' and encodes the rest
    response = server.http.get(path_of(HOSTILE))
    assert response.status_code == 200, response.text
    graph = rdflib.Graph().parse(data=response.text, format="turtle")
    subject = rdflib.URIRef(HOSTILE)
    assert graph.value(subject, rdflib.RDFS.label) == rdflib.Literal(HOSTILE_LABEL)
    association = graph.value(subject, rdflib.URIRef(f"{PROV}qualifiedAssociation"))
    assert isinstance(association, rdflib.BNode)
    assert graph.value(association, rdflib.URIRef(f"{PROV}agent")) == rdflib.URIRef(mint_iri("agent", "alice"))
    # another spelling of the path is another IRI, which the store does not hold
    assert server.http.get("/id/task/%6Cearning-1.1").status_code == 404


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.hrefs += [v or "" for k, v in attrs if k == "href"]
        assert all(not k.startswith("on") for k, _ in attrs), attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_html_page_escapes_every_value(server: ApiServer) -> None:
    response = server.http.get(path_of(HOSTILE), headers={
        "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"})  # a browser's
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == "text/html"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    page = _Page()
    page.feed(response.text)
    assert "script" not in page.tags and "img" not in page.tags
    assert set(page.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p",
                              "strong", "table", "tr", "th", "td", "a", "code", "span"}
    text = "".join(page.text)
    assert HOSTILE_LABEL in text and HOSTILE in text  # shown, as text
    assert not any(h.lower().startswith("javascript:") for h in page.hrefs)
    assert "javascript:alert(3)" in text  # the stored IRI is shown, not linked
    local = [h for h in page.hrefs if h.startswith("/id/")]
    assert path_of(mint_iri("agent", "alice")) in local and path_of(mint_iri("value", "v1")) in local
    for href in local:  # each local link is a page of the view (the agent has no triple as subject)
        assert server.http.get(href).status_code in (200, 404)
    assert server.http.get(path_of(mint_iri("value", "v1"))).status_code == 200


def test_incoming_links_past_the_cap_are_said_to_be_cut(server: ApiServer) -> None:
    response = server.http.get(path_of(POPULAR))
    assert response.status_code == 200, response.text
    graph = rdflib.Graph().parse(data=response.text, format="turtle")
    assert len(graph) == MAX_INCOMING
    assert f"only {MAX_INCOMING}" in response.headers["provkg-note"]
    page = server.http.get(path_of(POPULAR), headers={"Accept": "text/html"})
    assert f"only {MAX_INCOMING}" in page.text


def test_nothing_known_is_404_and_a_bad_path_400(server: ApiServer) -> None:
    for path in ("/id/task/no-such-task", "/id/", "/id/value/learning-1.1%2Fnothing"):
        response = server.http.get(path)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"] == "not_found"
    response = server.http.get("/id/task/%zz")
    assert response.status_code == 400 and response.json()["error"] == "bad_request"
    assert server.http.get(path_of(TRAINING), headers={"Accept": "image/png"}).status_code == 406
    head = server.http.head(path_of(TRAINING))
    assert head.status_code == 200 and head.content == b""
    assert re.match(r"text/turtle", head.headers["content-type"])
