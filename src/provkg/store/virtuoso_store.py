"""Virtuoso 7 as a store (``virtuoso+http://HOST:PORT``): :class:`VirtuosoStore`, the
SPARQL store with what Virtuoso does differently.

- it has no writable default graph: writes without a graph go to
  :data:`VIRTUOSO_DEFAULT_GRAPH` (the URL's ``default_graph=`` when given), and updates
  naming none are told it (``define input:default-graph-uri``, see ``SparqlStore.update``);
- its own graphs (:data:`VIRTUOSO_SYSTEM_GRAPHS`, ``/sparql``, ``/DAV/``) sit in its union
  default graph: user queries exclude them (``define input:default-graph-exclude``),
  graphs() and count() skip them;
- its JSON and XML results cut doubles to 6 digits: SELECT answers are asked as Turtle
  (DAWG result sets), CONSTRUCT answers as RDF/JSON, the writers that keep their digits;
- its SPARQL compiler gives up near a few thousand triples per INSERT DATA (batches of
  1,000), it refuses WKT literals that name their coordinate system (kept as strings), and
  it takes no chunked upload (it stores nothing from one, yet answers 201);
- canned queries are rendered in its dialect (``query_dialect = "virtuoso"``).

Its error grammar (codes, hints) is read in :mod:`provkg.store.sparql_errors`, for any URL.

Known limit: Virtuoso prints ``xsd:double`` values with 15 significant digits, so
doubles needing 16-17 digits (0.30000000000000004) come back rounded; the other
backends keep every bit.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pyoxigraph as ox

from provkg.errors import StoreError
from provkg.store.base import Rows, ntriples_term
from provkg.store.endpoint import Endpoint
from provkg.store.oxigraph_terms import oxigraph_python_value, oxigraph_result_term
from provkg.store.sparql_errors import VIRTUOSO_ERROR, error_text, query_failed
from provkg.store.sparql_store import RDF_JSON, SparqlStore
from provkg.term import Triple, blank_noise

__all__ = ["VirtuosoStore", "VIRTUOSO_DEFAULT_GRAPH", "VIRTUOSO_SYSTEM_GRAPHS"]

#: graphs a fresh Virtuoso holds for itself; hidden from queries, graphs() and count()
VIRTUOSO_SYSTEM_GRAPHS = ("http://www.openlinksw.com/schemas/virtrdf#", "http://www.w3.org/ns/ldp#")
#: where writes without a graph go on Virtuoso, which has no writable default graph
VIRTUOSO_DEFAULT_GRAPH = "urn:x-provkg:default"

_WKT = "<http://www.opengis.net/ont/geosparql#wktLiteral>"
#: a GeoSPARQL WKT literal that starts with its coordinate system's IRI, in N-Triples
_CRS_WKT = re.compile(r'"(<[^>"\\]*>[^"\\]*)"\^\^<http://www\.opengis\.net/ont/geosparql#wktLiteral>')
#: ``GRAPH`` followed by an IRI or prefixed name (not a variable): see ``_dressed``
_NAMED_GRAPH = re.compile(r"\bGRAPH\s+(?![\s?$])", re.IGNORECASE)


class VirtuosoStore(SparqlStore):
    """A Virtuoso server. Use :func:`provkg.store.open_store` with a ``virtuoso+`` URL."""

    query_dialect = "virtuoso"
    insert_batch = 1_000
    graph_results = RDF_JSON

    def __init__(self, endpoint: Endpoint, *, url: str):
        if endpoint.default_graph is None:
            endpoint = dataclasses.replace(endpoint, default_graph=VIRTUOSO_DEFAULT_GRAPH)
        super().__init__(endpoint, url=url)
        parts = urlsplit(endpoint.query_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        hidden = [*VIRTUOSO_SYSTEM_GRAPHS]
        for host in {origin, "http://localhost:8890", f"http://{parts.netloc}"}:
            hidden += [f"{host}/sparql", f"{host}/DAV/"]
        self.hidden_graphs = tuple(dict.fromkeys(hidden))
        self._preamble = " ".join(f"define input:default-graph-exclude <{g}>"
                                  for g in self.hidden_graphs)

    def _dressed(self, query: str) -> str:
        # given a default-graph-exclude define, Virtuoso matches nothing in a GRAPH naming one
        # graph (and answers such a SELECT asked as Turtle with 406): those queries go without
        # it; their default-graph patterns then see Virtuoso's own graphs too
        if _NAMED_GRAPH.search(blank_noise(query)):
            return query
        # on the first line, so the line numbers of syntax errors stay right
        return f"{self._preamble} {query}"

    def _select(self, query: str, *, timeout: float | None, hide_system_graphs: bool,
                typed: bool) -> Rows:
        text = self._dressed(query) if hide_system_graphs else query
        answer = self._request(text, timeout=timeout, accept="text/turtle")
        if not isinstance(answer, tuple) or "turtle" not in answer[1] or (
                b"ResultSet" not in answer[0]):
            raise StoreError("select() needs a SELECT query; use ask() or construct()")
        try:
            return _rows_from_turtle(answer[0], _virtuoso_term if typed else oxigraph_python_value)
        except StoreError:
            # a run-time error after the answer began: Virtuoso writes it into the body
            body = answer[0].decode("utf-8", "replace")
            failed = re.search(r"^" + VIRTUOSO_ERROR.pattern, body, re.MULTILINE)
            if failed is None:
                raise
            raise query_failed(self.shown_url, error_text(body[failed.start():], text)) from None

    def _triples(self, data: bytes, media: str) -> list[Triple]:
        if RDF_JSON in media:
            return _triples_from_rdf_json(data, self.shown_url)
        return super()._triples(data, media)

    def _write_triples(self, ntriples: str, graph: str | None, *, blank_nodes: bool = False) -> None:
        if _WKT in ntriples:  # a substring test first: the hot path
            ntriples = _CRS_WKT.sub(r'"\1"', ntriples)  # kept as a string, with the same text
        super()._write_triples(ntriples, graph, blank_nodes=blank_nodes)


_RES = "http://www.w3.org/2005/sparql-results#"


#: Virtuoso's RDF/JSON writes a non-finite double as a bare word, which is no JSON
_BARE_NON_FINITE = re.compile(rb'("value" : )(-?)(nan|inf)\b')


def _triples_from_rdf_json(data: bytes, where: str) -> list[Triple]:
    """Triples from an RDF/JSON graph (``{subject: {predicate: [object, ...]}}``, objects as
    ``{"type", "value", "datatype"?, "lang"?}``), numbers kept as their lexical text."""
    fixed = _BARE_NON_FINITE.sub(
        lambda m: m.group(1) + (b'"NaN"' if m.group(3) == b"nan"
                                else b'"-INF"' if m.group(2) else b'"INF"'), data)
    try:
        graph = json.loads(fixed, parse_float=str, parse_int=str)
        triples = []
        for subject, predicates in graph.items():
            s = (ntriples_term("bnode", subject[2:]) if subject.startswith("_:")
                 else ntriples_term("uri", subject))
            for predicate, objects in predicates.items():
                p = ntriples_term("uri", predicate)
                for o in objects:
                    kind, value = o["type"], str(o["value"])
                    if kind == "bnode":
                        value = value.removeprefix("_:")
                    triples.append((s, p, ntriples_term(kind, value, o.get("datatype"),
                                                        o.get("lang"))))
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise StoreError(f"{where} answered CONSTRUCT with bad RDF/JSON: {exc}") from exc
    return triples


def _rows_from_turtle(data: bytes, convert: Callable[[Any], object] | None = None) -> Rows:
    """Rows from a SELECT answer in Turtle (the DAWG ``res:ResultSet`` vocabulary), in
    document order. Virtuoso writes doubles there with enough digits to be exact.
    ``convert`` turns each pyoxigraph term into a value (default: plain Python)."""
    convert = convert or oxigraph_python_value
    columns: list[str] = []
    solutions: dict[object, dict[str, object]] = {}
    bindings: dict[object, list[object]] = {}  # binding node -> [variable, value]
    try:
        for q in ox.parse(data, format=ox.RdfFormat.TURTLE):
            p = q.predicate.value
            if p == _RES + "resultVariable":
                columns.append(q.object.value)
            elif p == _RES + "solution":
                solutions.setdefault(q.object, {})
            elif p == _RES + "binding":
                bindings.setdefault(q.object, [None, None]).append(q.subject)
            elif p == _RES + "variable":
                bindings.setdefault(q.subject, [None, None])[0] = q.object.value
            elif p == _RES + "value":
                bindings.setdefault(q.subject, [None, None])[1] = q.object
    except SyntaxError as exc:
        raise StoreError(f"the endpoint answered SELECT with bad Turtle: {exc}") from exc
    for variable, value, *owners in bindings.values():
        for owner in owners:
            solutions.setdefault(owner, {})[str(variable)] = None if value is None else convert(value)
    return Rows(columns, [[row.get(c) for c in columns] for row in solutions.values()])


_XSD_DECIMAL = ox.NamedNode("http://www.w3.org/2001/XMLSchema#decimal")
_XSD_DOUBLE = ox.NamedNode("http://www.w3.org/2001/XMLSchema#double")


def _virtuoso_term(term: Any) -> dict[str, Any] | None:
    """A term of Virtuoso's Turtle SELECT answer as a typed result term, its doubles typed
    as doubles again (else /v1/sparql answers 0.7 as the decimal 0.69999999999999995559,
    while DATATYPE() in the same row says xsd:double). The cost: a
    stored decimal of 17 or more significant digits, with a fraction, reads as a double."""
    # how Virtuoso's Turtle writes an xsd:double: a decimal of 17 or more significant digits
    # (0.7 -> 0.69999999999999995559), which no value provkg writes as a decimal is
    if (isinstance(term, ox.Literal) and term.datatype == _XSD_DECIMAL and "." in term.value
            and len(term.value.lstrip("+-").replace(".", "").strip("0")) >= 17):
        term = ox.Literal(repr(float(term.value)), datatype=_XSD_DOUBLE)
    return oxigraph_result_term(term)
