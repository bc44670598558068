"""What the service says about itself, as RDF: the SPARQL 1.1 Service Description of
``/v1/sparql`` and the VoID description of the dataset (``/.well-known/void``).

Both are built as N-Triples terms (:mod:`provkg.term`) and serialized in the format the Accept
header asks for (:func:`description_format`, :func:`rdf_response`). Counts and graph names come
from SPARQL on the store, run by the service's :class:`~provkg.api.sparql.SparqlRunner` (its
time limit and row cap apply); none of the queries holds a value from the request.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response

from provkg.api.render import (
    CSV,
    JSON_LD,
    NTRIPLES,
    RDF_XML,
    SPARQL_FORMATS,
    SPARQL_JSON,
    SPARQL_XML,
    TSV,
    TURTLE,
    negotiate,
)
from provkg.api.service import Service
from provkg.store.base import ntriples_term
from provkg.term import Triple, iri, is_valid_iri, literal
from provkg.vocab import DEFAULT_BASE, PREFIXES, RDF, RDFS

__all__ = ["DESCRIPTION_FORMATS", "description_format", "rdf_response", "service_description",
           "void_description", "term_text", "SD", "VOID", "DESCRIPTION_PREFIXES"]

SD = "http://www.w3.org/ns/sparql-service-description#"
VOID = "http://rdfs.org/ns/void#"
FORMATS = "http://www.w3.org/ns/formats/"
DCTERMS = "http://purl.org/dc/terms/"
FOAF = "http://xmlns.com/foaf/0.1/"
ENTAILMENT_SIMPLE = "http://www.w3.org/ns/entailment/Simple"
#: the prefixes the descriptions are written with (provkg's own, then the description vocabularies)
DESCRIPTION_PREFIXES = {**PREFIXES, "sd": SD, "void": VOID, "formats": FORMATS, "dcterms": DCTERMS,
                        "foaf": FOAF}

#: the formats a description is served in, the default first
DESCRIPTION_FORMATS = (TURTLE, JSON_LD, RDF_XML, NTRIPLES)

#: the W3C format IRI (https://www.w3.org/ns/formats/) of each media type /v1/sparql answers in
_FORMAT_IRIS = {SPARQL_JSON: "SPARQL_Results_JSON", SPARQL_XML: "SPARQL_Results_XML",
                CSV: "SPARQL_Results_CSV", TSV: "SPARQL_Results_TSV", TURTLE: "Turtle",
                NTRIPLES: "N-Triples", JSON_LD: "JSON-LD", RDF_XML: "RDF_XML"}
#: named graphs listed by the service description at most (each is one row to send)
MAX_LISTED_GRAPHS = 1000


def description_format(accept: str | None) -> str | None:
    """The member of :data:`DESCRIPTION_FORMATS` the Accept header prefers, or None."""
    return negotiate(accept, DESCRIPTION_FORMATS)


def rdf_response(media: str, triples: list[Triple], *, headers: dict[str, str] | None = None) -> Response:
    """``triples`` (N-Triples terms) in ``media``, a member of :data:`DESCRIPTION_FORMATS`,
    written with :data:`DESCRIPTION_PREFIXES` (those used)."""
    import pyoxigraph as ox

    by_subject: dict[str, list[Triple]] = {}  # grouped, so that Turtle writes each subject once
    for triple in triples:
        by_subject.setdefault(triple[0], []).append(triple)
    text = "".join(f"{s} {p} {o} .\n" for group in by_subject.values() for s, p, o in group)
    out_headers = {"Vary": "Accept", **(headers or {})}
    if media == NTRIPLES:
        return Response(text.encode("utf-8"), media_type=NTRIPLES, headers=out_headers)
    parsed = [q.triple for q in ox.parse(text.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)]
    formats = {TURTLE: ox.RdfFormat.TURTLE, JSON_LD: ox.RdfFormat.JSON_LD, RDF_XML: ox.RdfFormat.RDF_XML}
    prefixes = {p: ns for p, ns in DESCRIPTION_PREFIXES.items() if f"<{ns}" in text}
    body = ox.serialize(parsed, format=formats[media], prefixes=None if media == JSON_LD else prefixes)
    assert body is not None  # without an output file, serialize returns the bytes
    media_type = "text/turtle; charset=utf-8" if media == TURTLE else media
    return Response(body, media_type=media_type, headers=out_headers)


def term_text(term: dict[str, Any]) -> str | None:
    """A SPARQL JSON result term as N-Triples; None for a quoted triple (RDF 1.2)."""
    if term["type"] not in ("uri", "bnode", "literal"):
        return None
    return ntriples_term(term["type"], term["value"], term.get("datatype"), term.get("xml:lang"))


def _rows(service: Service, query: str) -> list[list[Any]]:
    answer = service.sparql.run(query, "select")
    assert answer.rows is not None
    return answer.rows.rows


def _number(term: dict[str, Any] | None) -> int:
    return int(term["value"]) if term is not None else 0


# -- SPARQL 1.1 Service Description ---------------------------------------------------------


def service_description(service: Service, origin: str) -> list[Triple]:
    """The Service Description of ``{origin}/v1/sparql`` (``origin``: the URL the client
    reached the server at, no trailing slash): what the endpoint really does, and the names of
    the named graphs of its default dataset."""
    sd, endpoint = SD, iri(f"{origin}/v1/sparql")
    dataset, default_graph, me = iri(f"{origin}/.well-known/void#dataset"), "_:defaultGraph", "_:service"
    out: list[Triple] = [
        (me, iri(RDF.type), iri(sd + "Service")),
        (me, iri(sd + "endpoint"), endpoint),
        # read-only: SPARQL 1.1 Query only, no sd:SPARQL11Update
        (me, iri(sd + "supportedLanguage"), iri(sd + "SPARQL11Query")),
        (me, iri(sd + "defaultEntailmentRegime"), iri(ENTAILMENT_SIMPLE)),
        (me, iri(sd + "feature"), iri(sd + "UnionDefaultGraph")),
        (me, iri(RDFS.comment), literal(
            "Read-only SPARQL 1.1 Protocol endpoint: updates are refused. The default graph is the "
            "union of all graphs unless the query (FROM, FROM NAMED) or the request "
            "(default-graph-uri, named-graph-uri) names a dataset. "
            f"Answers of more than {service.settings.max_rows} rows and queries running past "
            f"{service.settings.query_timeout_s:g} s are refused.")),
        (me, iri(RDFS.seeAlso), iri(f"{origin}/.well-known/void")),
        (me, iri(sd + "defaultDataset"), dataset),
        (dataset, iri(RDF.type), iri(sd + "Dataset")),
        (dataset, iri(RDF.type), iri(VOID + "Dataset")),
        (dataset, iri(sd + "defaultGraph"), default_graph),
        (default_graph, iri(RDF.type), iri(sd + "Graph")),
        (default_graph, iri(RDFS.comment), literal("the union of all graphs of the store")),
    ]
    if service.settings.allowed_service_endpoints:  # SERVICE to the listed endpoints only
        out.append((me, iri(sd + "feature"), iri(sd + "BasicFederatedQuery")))
    served = dict.fromkeys(m for formats in SPARQL_FORMATS.values() for m in formats)
    out += [(me, iri(sd + "resultFormat"), iri(FORMATS + _FORMAT_IRIS[m])) for m in served if m in _FORMAT_IRIS]
    names = _rows(service, f"SELECT ?g WHERE {{ GRAPH ?g {{ }} }} LIMIT {MAX_LISTED_GRAPHS + 1}")
    graphs = sorted({row[0]["value"] for row in names if row[0] is not None and row[0]["type"] == "uri"
                     and is_valid_iri(row[0]["value"])})
    if len(names) > MAX_LISTED_GRAPHS:
        out.append((dataset, iri(RDFS.comment), literal(
            f"more than {MAX_LISTED_GRAPHS} named graphs: the first {MAX_LISTED_GRAPHS} found are "
            "listed; SELECT ?g WHERE { GRAPH ?g {} } lists them all")))
        graphs = graphs[:MAX_LISTED_GRAPHS]
    for number, name in enumerate(graphs):
        node = f"_:namedGraph{number}"
        out += [(dataset, iri(sd + "namedGraph"), node), (node, iri(RDF.type), iri(sd + "NamedGraph")),
                (node, iri(sd + "name"), iri(name))]
    return out


# -- VoID ------------------------------------------------------------------------------------

_CLASSES = ("SELECT ?class (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s a ?class FILTER(isIRI(?class)) } "
            "GROUP BY ?class")
_PROPERTIES = "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p"


def namespace_of(term: str) -> str:
    """The namespace of a vocabulary term: up to its last ``#``, else its last ``/``.

    >>> namespace_of("http://www.w3.org/ns/prov#Activity"), namespace_of("http://purl.org/dc/terms/title")
    ('http://www.w3.org/ns/prov#', 'http://purl.org/dc/terms/')
    """
    cut = term.rfind("#")
    if cut < 0:
        cut = term.rfind("/")
    return term[:cut + 1] if cut >= 0 else term


def void_description(service: Service, origin: str) -> list[Triple]:
    """The VoID description of the store's dataset: its triples, classes (with their entities)
    and properties (with their triples), the vocabularies they come from, the SPARQL endpoint
    and the data dump (``/v1/export?format=nq``)."""
    void, doc = VOID, iri(f"{origin}/.well-known/void")
    dataset = iri(f"{origin}/.well-known/void#dataset")
    class_rows, property_rows = _rows(service, _CLASSES), _rows(service, _PROPERTIES)
    # a term another tool stored that provkg could not write back as an IRI is left out of the
    # partitions (the totals still count it)
    classes = sorted((row[0]["value"], _number(row[1])) for row in class_rows
                     if row[0] is not None and is_valid_iri(row[0]["value"]))
    properties = sorted((row[0]["value"], _number(row[1])) for row in property_rows
                        if row[0] is not None and is_valid_iri(row[0]["value"]))
    out: list[Triple] = [
        (doc, iri(RDF.type), iri(void + "DatasetDescription")),
        (doc, iri(FOAF + "primaryTopic"), dataset),
        (dataset, iri(RDF.type), iri(void + "Dataset")),
        (dataset, iri(DCTERMS + "title"), literal("provkg provenance knowledge graph")),
        (dataset, iri(void + "sparqlEndpoint"), iri(f"{origin}/v1/sparql")),
        (dataset, iri(void + "dataDump"), iri(f"{origin}/v1/export?format=nq")),
        (dataset, iri(void + "uriSpace"), literal(DEFAULT_BASE)),
        (dataset, iri(void + "feature"), iri(FORMATS + "N-Quads")),
        # every triple has one property: the partitions' counts add up to the whole
        (dataset, iri(void + "triples"), literal(sum(_number(row[1]) for row in property_rows))),
        (dataset, iri(void + "classes"), literal(len(class_rows))),
        (dataset, iri(void + "properties"), literal(len(property_rows))),
    ]
    vocabularies = {namespace_of(term) for term, _ in (*classes, *properties)}
    out += [(dataset, iri(void + "vocabulary"), iri(ns)) for ns in sorted(vocabularies)
            if not ns.startswith(DEFAULT_BASE) and ns.endswith(("#", "/"))]
    for number, (name, entities) in enumerate(classes):
        node = f"_:class{number}"
        out += [(dataset, iri(void + "classPartition"), node), (node, iri(void + "class"), iri(name)),
                (node, iri(void + "entities"), literal(entities))]
    for number, (name, triples) in enumerate(properties):
        node = f"_:property{number}"
        out += [(dataset, iri(void + "propertyPartition"), node),
                (node, iri(void + "property"), iri(name)), (node, iri(void + "triples"), literal(triples))]
    return out
