"""pyoxigraph terms as provkg writes them: SELECT values, SPARQL results JSON, N-Triples; and
when a query needs the union of all graphs as its default graph."""

from __future__ import annotations

from typing import Any

import pyoxigraph as ox

from provkg.store.base import has_dataset_clause, ntriples_term, python_value, result_term

__all__ = ["oxigraph_ntriples_term", "oxigraph_python_value", "oxigraph_result_term", "union_default_graph"]


def oxigraph_python_value(term: object) -> object:
    """An Oxigraph term as the Python value a SELECT row holds (see :func:`python_value`)."""
    if term is None:
        return None
    if isinstance(term, ox.Literal):
        return python_value("literal", term.value, term.datatype.value)
    if isinstance(term, ox.BlankNode):
        return python_value("bnode", term.value)
    return term.value  # type: ignore[attr-defined]


def oxigraph_result_term(term: object) -> dict[str, Any] | None:
    """A pyoxigraph term as a SPARQL 1.1 Query Results JSON term (None stays None); a
    quoted triple (RDF 1.2) as ``{"type": "triple", "value": {"subject": ..., ...}}``."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return result_term("uri", term.value)
    if isinstance(term, ox.BlankNode):
        return result_term("bnode", term.value)
    if isinstance(term, ox.Literal):
        return result_term("literal", term.value, term.datatype.value, term.language)
    if isinstance(term, ox.Triple):
        return {"type": "triple", "value": {
            "subject": oxigraph_result_term(term.subject),
            "predicate": oxigraph_result_term(term.predicate),
            "object": oxigraph_result_term(term.object)}}
    return result_term("literal", str(term))


def oxigraph_ntriples_term(term: object) -> str:
    """A pyoxigraph term in N-Triples syntax, as :mod:`provkg.term` writes it."""
    if isinstance(term, ox.Literal):
        return ntriples_term("literal", term.value, term.datatype.value, term.language)
    if isinstance(term, ox.BlankNode):
        return ntriples_term("bnode", term.value)
    if isinstance(term, ox.NamedNode):
        return ntriples_term("uri", term.value)
    return str(term)  # a quoted triple (RDF 1.2)


def union_default_graph(store: ox.Store, query: str) -> bool:
    """Whether ``query`` must run with the union of all graphs as its default graph: it names
    no dataset and the store has named graphs. Without named graphs the union *is* the
    default graph, and asking Oxigraph for it anyway costs a second index seek per triple
    pattern (Q5 at full scale takes about a quarter longer with it). Checked per
    query (one seek), as another process may add a graph at any time."""
    return not has_dataset_clause(query) and next(iter(store.named_graphs()), None) is not None
