"""The SPARQL 1.1 Protocol's dataset: ``default-graph-uri`` / ``named-graph-uri``.

A request naming graphs replaces the query's own dataset (``FROM`` / ``FROM NAMED``), as the
Protocol says: the default graph is the merge of the ``default-graph-uri`` graphs (empty when
only ``named-graph-uri`` is given), the named graphs are the ``named-graph-uri`` ones (none
when only ``default-graph-uri`` is given). A request naming none queries the service's
dataset (the union of all graphs as the default graph, every named graph).

The embedded store's worker hands the graphs to pyoxigraph; every other store gets the query
with its dataset clauses written in (:func:`with_dataset`), which each backend already honours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provkg.api.errors import BadRequest
from provkg.term import blank_noise, is_valid_iri

__all__ = ["ProtocolDataset", "protocol_dataset", "with_dataset", "RDFLIB_DEFAULT_GRAPH"]

#: what rdflib's ``Dataset(SPARQLStore(url))`` sends as ``default-graph-uri`` for its default
#: graph (``rdflib.graph.DATASET_DEFAULT_GRAPH_ID``): read as the service's own default graph
RDFLIB_DEFAULT_GRAPH = "urn:x-rdflib:default"
#: the default graph of a dataset naming named graphs only: one no store holds
EMPTY_GRAPH = "urn:x-provkg:empty-default-graph"
#: graphs one request may name (each becomes a dataset clause)
MAX_GRAPHS = 1000


@dataclass(frozen=True)
class ProtocolDataset:
    """The graphs a request names; empty (false) when it names none."""

    default_graphs: tuple[str, ...] = ()
    named_graphs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.default_graphs or self.named_graphs)


def protocol_dataset(pairs: list[tuple[str, str]]) -> ProtocolDataset:
    """The dataset named by a request's ``default-graph-uri`` / ``named-graph-uri`` pairs (each
    may repeat), every value checked to be an absolute IRI.

    Raises:
        BadRequest: a value that is no IRI, too many graphs, or rdflib's default-graph name
            together with other graphs.
    """
    default = [v.strip() for k, v in pairs if k == "default-graph-uri"]
    named = [v.strip() for k, v in pairs if k == "named-graph-uri"]
    if len(default) + len(named) > MAX_GRAPHS:
        raise BadRequest(f"a request names at most {MAX_GRAPHS} graphs "
                         "(default-graph-uri and named-graph-uri together)")
    for name, values in (("default-graph-uri", default), ("named-graph-uri", named)):
        for position, value in enumerate(values, 1):
            if not is_valid_iri(value):
                raise BadRequest(f"{name} (value {position} of {len(values)}) is not an absolute "
                                 "IRI; give graph names such as https://example.org/graph")
    if RDFLIB_DEFAULT_GRAPH in default:
        if len(default) > 1 or named:
            raise BadRequest(f"default-graph-uri {RDFLIB_DEFAULT_GRAPH} (rdflib's name for the "
                             "service's default graph) cannot be combined with other graphs")
        return ProtocolDataset()
    return ProtocolDataset(tuple(dict.fromkeys(default)), tuple(dict.fromkeys(named)))


_FORM = re.compile(r"(?<![\w?$:])(SELECT|CONSTRUCT|DESCRIBE|ASK)(?![\w:])", re.IGNORECASE)
_KEYWORD = re.compile(r"(?<![\w?$:])(FROM|WHERE|ORDER|GROUP|HAVING|LIMIT|OFFSET|VALUES)(?![\w:])",
                      re.IGNORECASE)
#: one dataset clause as written: FROM, NAMED, then an IRI or a prefixed name
_CLAUSE = re.compile(r"FROM\s+(?:NAMED\s+)?(?:<[^<>\s]*>|(?:[^\s{}()<>#\\]|\\.)+)", re.IGNORECASE)
_SPACE = re.compile(r"(?:\s|#[^\n\r]*)*")


def with_dataset(query: str, dataset: ProtocolDataset) -> str:
    """``query`` with its dataset clauses replaced by those of ``dataset`` (unchanged when it
    names no graph). The query must have passed the read-only guard (it parses).

    >>> with_dataset("SELECT * FROM <http://e/x> WHERE { ?s ?p ?o }", ProtocolDataset(("http://e/g",)))
    'SELECT * FROM <http://e/g> WHERE { ?s ?p ?o }'
    >>> with_dataset("CONSTRUCT { ?s ?p ?o } { ?s ?p ?o }", ProtocolDataset((), ("http://e/n",)))
    'CONSTRUCT { ?s ?p ?o } FROM <urn:x-provkg:empty-default-graph> FROM NAMED <http://e/n> { ?s ?p ?o }'
    """
    if not dataset:
        return query
    # named graphs only: an empty default graph, said with a graph no store holds (Virtuoso
    # reads FROM NAMED alone as "default graph: all graphs")
    default = dataset.default_graphs or (EMPTY_GRAPH,)
    clauses = " ".join([f"FROM <{g}>" for g in default] + [f"FROM NAMED <{g}>" for g in dataset.named_graphs])
    start = _dataset_position(query)
    end = start
    while True:  # the query's own clauses, which the request's replace
        gap = _SPACE.match(query, end)
        assert gap is not None  # matches the empty string at least
        clause = _CLAUSE.match(query, gap.end())
        if clause is None:
            break
        end = clause.end()
    head = query[:start]
    # never strip the head: a comment before the clauses ends at its line break
    return f"{head}{'' if head[-1:].isspace() else ' '}{clauses} {query[end:].lstrip()}"


def _dataset_position(query: str) -> int:
    """Where a query's dataset clauses stand (SPARQL 1.1 grammar): after the SELECT clause, the
    CONSTRUCT template, DESCRIBE's resources or ASK; found in the text with strings, IRIs and
    comments blanked, so none of their words or brackets count."""
    text = blank_noise(query)
    form = _FORM.search(text)
    if form is None:  # the guard let it through, so it has a form
        raise BadRequest("expected a SELECT, ASK, CONSTRUCT or DESCRIBE query")
    word, at = form.group(1).upper(), form.end()
    if word == "ASK":
        return at
    if word == "CONSTRUCT":
        brace = _SPACE.match(text, at)
        assert brace is not None
        if not text.startswith("{", brace.end()):  # CONSTRUCT WHERE { ... }
            return at
        depth = 0
        for i in range(brace.end(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return i + 1
        return len(text)
    # SELECT: the first FROM, WHERE or "{" outside the projection's parentheses; DESCRIBE:
    # also a solution modifier or the end (a DESCRIBE may have no WHERE clause)
    depth = 0
    i = at
    while i < len(text):
        char = text[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            if char == "{":
                return i
            keyword = _KEYWORD.match(text, i)
            if keyword is not None and (word == "DESCRIBE" or keyword.group(1).upper() in ("FROM", "WHERE")):
                return i
        i += 1
    return len(text)
