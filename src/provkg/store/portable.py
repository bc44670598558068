""":class:`~provkg.store.base.Store`'s optional methods in portable SPARQL 1.1, written with
its six required methods alone (add, select, ask, construct, update, close).

Each backend may override any of them with a faster way to the same answer; these are the
reference. Invariants a backend relies on: queries see the union of all graphs, and the
default graph holds no triple that a named graph also holds (provkg writes each triple to
one graph), so "in the union and in no named graph" is "in the default graph".
"""

from __future__ import annotations

import gzip
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from provkg.errors import StoreError
from provkg.store.common import SPARQL_PARSER_LOCK, Rows, checked_iri, rdf_file
from provkg.store.progress import counting_reader
from provkg.store.sparql_text import syntax_error
from provkg.store.values import ntriples_term, result_term
from provkg.term import Triple

__all__ = ["select_terms", "count", "graphs", "load_file", "dump", "parsed_batches", "StoreLike"]

#: triples per :meth:`Store.add` call when a file is loaded by parsing it here
LOAD_BATCH = 100_000
#: the prologue (``PREFIX`` / ``BASE`` lines, comments) that must stay outside a sub-query
_PROLOGUE = re.compile(r"(?:\s+|#[^\n]*|PREFIX\s+[^\s:]*:\s*<[^<>\s]*>|BASE\s*<[^<>\s]*>)*",
                       re.IGNORECASE)
_RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


class StoreLike(Protocol):
    """The part of :class:`provkg.store.base.Store` the defaults here are written with."""

    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int: ...

    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows: ...

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows: ...

    def construct(self, query: str) -> list[Triple]: ...

    def count(self, *, graph: str | None = None) -> int: ...


def projected_variables(query: str) -> list[str]:
    """The variables a SELECT projects, in order (by rdflib's parser: the one that reads
    ``SELECT *`` and expressions the way the SPARQL algebra does)."""
    from rdflib.plugins.sparql.algebra import translateQuery
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        with SPARQL_PARSER_LOCK:
            algebra = translateQuery(parseQuery(query)).algebra
    except Exception as exc:  # noqa: BLE001 -- pyparsing's and rdflib's assorted types
        raise syntax_error(str(exc), query=query) from exc
    if algebra.name != "SelectQuery":
        raise StoreError("select() needs a SELECT query; use ask() or construct()")
    return [str(v) for v in algebra["PV"]]


def select_terms(store: StoreLike, query: str, *, timeout: float | None = None) -> Rows:
    """SELECT rows of typed terms, from plain :meth:`Store.select`: each column ``?v`` of
    the query, as a sub-query, is asked as itself (a blank node's label), its kind, ``STR``,
    ``DATATYPE`` and ``LANG``."""
    columns = projected_variables(query)
    head = _PROLOGUE.match(query)
    assert head is not None  # _PROLOGUE is (...)*: it matches every text, empty at worst
    prologue, body = query[:head.end()], query[head.end():]
    parts = []
    for i, v in enumerate(columns):
        parts.append(f"?{v} (IF(BOUND(?{v}), IF(isIRI(?{v}), 'uri', IF(isBLANK(?{v}), 'bnode', "
                     f"'literal')), '') AS ?k{i}) (STR(?{v}) AS ?s{i}) "
                     f"(STR(DATATYPE(?{v})) AS ?d{i}) (LANG(?{v}) AS ?l{i})")
    wrapped = f"{prologue}SELECT {' '.join(parts) or '*'} WHERE {{ {body}\n}}"
    answer = store.select(wrapped, timeout=timeout)
    rows = []
    for values in answer.rows:
        row: list[object] = []
        for i in range(len(columns)):
            plain, kind, text, datatype, lang = values[5 * i: 5 * i + 5]
            if not kind:
                row.append(None)
            elif kind == "bnode":  # STR of a blank node is an error: its label from select
                row.append(result_term("bnode", str(plain).removeprefix("_:")))
            else:
                row.append(result_term(str(kind), str(text), str(datatype) if datatype else None,
                                       str(lang) if lang else None))
        rows.append(row)
    return Rows(columns, rows)


def count(store: StoreLike, *, graph: str | None = None) -> int:
    """Triples in ``graph``, or in the default graph plus each named graph's."""
    if graph is not None:
        q = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{checked_iri(graph)}> {{ ?s ?p ?o }} }}"
        return _number(store.select(q, hide_system_graphs=False))
    named = _number(store.select("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"))
    default = _number(store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o FILTER NOT EXISTS { GRAPH ?g { ?s ?p ?o } } }"))
    return named + default


def graphs(store: StoreLike) -> list[str]:
    """IRIs of the named graphs holding data, sorted."""
    rows = store.select_terms("SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    return sorted(str(t["value"]) for (t,) in rows.rows
                  if isinstance(t, dict) and t.get("type") == "uri")


def parsed_batches(source: Any, fmt: str, graph: str | None, *, base: str, what: str,
                   batch: int = LOAD_BATCH) -> Iterator[tuple[str | None, list[Triple], bool]]:
    """An RDF file's triples, parsed here (streaming), as ``(graph, triples, has blank
    nodes)`` batches. Triples with blank nodes come last, one batch per graph, so each blank
    node stays one node when each batch is one write (batches would split it).

    Raises:
        StoreError: the file does not parse (with its line).
    """
    import pyoxigraph as ox

    formats = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES,
               "nquads": ox.RdfFormat.N_QUADS, "rdfxml": ox.RdfFormat.RDF_XML,
               "trig": ox.RdfFormat.TRIG}
    held: dict[str | None, list[Triple]] = {}
    try:
        quads = ox.parse(source, format=formats[fmt], base_iri=base)
        while chunk := list(itertools.islice(quads, batch)):
            by_graph: dict[str | None, list[Triple]] = {}
            for q in chunk:
                g = q.graph_name.value if isinstance(q.graph_name, ox.NamedNode) else graph
                blank = isinstance(q.subject, ox.BlankNode) or isinstance(q.object, ox.BlankNode)
                triple = (str(q.subject), str(q.predicate), str(q.object))  # N-Triples, as read
                (held if blank else by_graph).setdefault(g, []).append(triple)
            for g, triples in by_graph.items():
                yield g, triples, False
    except SyntaxError as exc:
        raise StoreError(f"{what} is not valid RDF: {exc}") from exc
    except (OSError, EOFError) as exc:  # a bad gzip, a file that went away
        raise StoreError(f"cannot read {what}: {exc}") from exc
    for g, triples in held.items():
        yield g, triples, True


def load_file(store: StoreLike, path: str | Path, *, format: str | None = None,
              graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
    """Parse the file here and :meth:`Store.add` it batch by batch; the triples gained."""
    path, fmt, gzipped = rdf_file(path, format)
    quads = fmt in ("nquads", "trig")
    before = store.count(graph=graph) if graph and not quads else store.count()
    with path.open("rb") as raw:
        stream = counting_reader(raw, progress)
        source = gzip.GzipFile(fileobj=stream) if gzipped else stream
        for g, triples, _blank in parsed_batches(source, fmt, graph,
                                                 base=path.resolve().as_uri(), what=str(path)):
            store.add(triples, graph=g)
    after = store.count(graph=graph) if graph and not quads else store.count()
    return after - before


def dump(store: StoreLike, out: BinaryIO, *, graph: str | None = None) -> None:
    """N-Triples of ``graph``, or N-Quads of the whole store, read through SPARQL."""
    if graph is not None:
        triples = store.construct(
            f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{checked_iri(graph)}> {{ ?s ?p ?o }} }}")
        out.write("".join(f"{s} {p} {o} .\n" for s, p, o in triples).encode("utf-8"))
        return
    default = store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o "
                              "FILTER NOT EXISTS { GRAPH ?g { ?s ?p ?o } } }")
    out.write("".join(f"{s} {p} {o} .\n" for s, p, o in default).encode("utf-8"))
    rows = store.select_terms("SELECT ?s ?p ?o ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    lines = [" ".join(_term_text(t) for t in row) + " .\n" for row in rows.rows]
    out.write("".join(lines).encode("utf-8"))


def _term_text(term: object) -> str:
    """A SPARQL JSON result term as N-Triples."""
    if not isinstance(term, dict):
        raise StoreError(f"a quad with an unbound term: {term!r}")
    kind, value = term["type"], str(term["value"])
    datatype = term.get("datatype") or (_RDF_LANG_STRING if term.get("xml:lang") else _XSD_STRING)
    return ntriples_term(kind, value, datatype if kind == "literal" else None, term.get("xml:lang"))


def _number(rows: Rows) -> int:
    return int(rows.rows[0][0]) if rows.rows else 0  # type: ignore[call-overload]
