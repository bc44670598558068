"""rdflib in memory: a ``Dataset`` whose queries see the union of all graphs.

Small graphs only: rdflib loads about 34,000 triples/s (see RECIPES.md), and its SPARQL
engine needs its plans rewritten (:mod:`provkg.store.rdflib_plan`) to answer the canned
queries in seconds rather than minutes. Data goes in through rdflib's N-Triples /
N-Quads parsers, so terms are read exactly as the other backends read them.

rdflib 7.6 warns about its own deprecated names from inside its SPARQL engine
(``Dataset.default_context``, ``Dataset.contexts``); those warnings are silenced
around rdflib calls only, since provkg cannot fix them.
"""

from __future__ import annotations

import gzip
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import rdflib.plugins.sparql as rdflib_sparql
from pyparsing import ParseBaseException
from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from provkg.errors import ProvkgError, QuerySyntaxError, StoreError, StoreUnavailable
from provkg.store.base import (
    SPARQL_PARSER_LOCK,
    Rows,
    Store,
    checked_iri,
    ntriples_bytes,
    ntriples_term,
    prefix_declarations,
    python_value,
    rdf_file,
    refuse_deep_nesting,
    result_term,
    run_with_timeout,
    syntax_error,
    undeclared_prefix,
)
from provkg.store.progress import counting_reader
from provkg.store.rdflib_prepared import prepare_query
from provkg.term import Triple

__all__ = ["RdflibStore"]

_FORMATS = {"turtle": "turtle", "ntriples": "nt", "nquads": "nquads", "rdfxml": "xml",
            "trig": "trig"}

# rdflib reads the union switch from a module global; updates need it off (with it on,
# INSERT DATA into the default graph fails in rdflib 7.6), queries need it on
_union_lock = threading.Lock()


#: rdflib's words for a prefix the query did not declare (a plain Exception, not a parse error)
def _declares_one_iri_twice(query: str) -> bool:
    """Do two PREFIX lines of ``query`` name the same IRI (rdflib then keeps only one)?"""
    iris = [iri for _, iri in prefix_declarations(query) if iri is not None]
    return len(iris) != len(set(iris))


@contextmanager
def _rdflib_call(*, union: bool = True) -> Iterator[None]:
    with _union_lock, warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"Dataset\.\w+ is deprecated", DeprecationWarning)
        rdflib_sparql.SPARQL_DEFAULT_GRAPH_UNION = union
        # FROM <g> / LOAD must read graphs of this dataset, never fetch IRIs from the network
        rdflib_sparql.SPARQL_LOAD_GRAPHS = False
        try:
            yield
        finally:
            rdflib_sparql.SPARQL_DEFAULT_GRAPH_UNION = True


class RdflibStore(Store):
    """rdflib ``Dataset`` in memory.

    >>> store = RdflibStore()
    >>> store.add([("<http://ex.org/a>", "<http://ex.org/p>", '"x"')], graph="http://ex.org/g")
    1
    >>> store.ask('ASK { ?s ?p "x" }'), store.graphs()
    (True, ['http://ex.org/g'])
    """

    def __init__(self, *, url: str = "rdflib:"):
        self.url = url
        self._ds: Dataset | None = Dataset(default_union=True)

    # -- writing ---------------------------------------------------------------

    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        data, n = ntriples_bytes(triples)
        if n:
            self._parse(lambda target: target.parse(data=data.decode("utf-8"), format="nt"),
                        graph=graph, what="the triples")
        return n

    def load_file(self, path: str | Path, *, format: str | None = None,
                  graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
        path, fmt, gzipped = rdf_file(path, format)
        before = self.count()
        with path.open("rb") as raw:
            stream = counting_reader(raw, progress)
            source = gzip.GzipFile(fileobj=stream) if gzipped else stream
            quads = fmt in ("nquads", "trig")
            try:
                # rdflib reads any binary file object; its annotation names typing.IO only (a
                # GzipFile, an io.BufferedReader are not typing.IO)
                self._parse(lambda target: target.parse(source=source,  # type: ignore[arg-type]
                                                        format=_FORMATS[fmt],
                                                        publicID=path.resolve().as_uri()),
                            graph=graph, whole_dataset=quads, what=str(path))
            except StoreError as exc:
                where = _diagnose(path, fmt, gzipped)
                if where is None:
                    raise
                raise StoreError(f"{path} is not valid RDF: {where}") from exc
        return self.count() - before

    def update(self, sparql: str) -> None:
        ds = self._dataset()
        with _rdflib_errors("rdflib could not run the update", sparql=True), \
                _rdflib_call(union=False), SPARQL_PARSER_LOCK:  # ds.update parses too
            ds.update(sparql)

    def clear(self, *, graph: str | None = None) -> None:
        ds = self._dataset()
        with _rdflib_errors(f"rdflib could not clear {graph or 'the store'}"), _rdflib_call():
            if graph is None:
                self._ds = Dataset(default_union=True)
            else:
                ds.remove_graph(URIRef(checked_iri(graph)))

    # -- reading ---------------------------------------------------------------

    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        return self._select(query, _python, timeout)

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows:
        return self._select(query, _result_term, timeout)

    def _select(self, query: str, convert: Callable[[Any], object], timeout: float | None) -> Rows:
        """SELECT rows, each value through ``convert`` (Python value or typed term)."""
        def run() -> Rows:
            result = self._query(query)
            if result.type != "SELECT":
                raise StoreError("select() needs a SELECT query; use ask() or construct()")
            columns = [str(v) for v in result.vars or []]
            with _rdflib_call():
                return Rows(columns, [[convert(v) for v in row] for row in result])

        return run_with_timeout(run, timeout)

    def ask(self, query: str) -> bool:
        result = self._query(query)
        if result.type != "ASK":
            raise StoreError("ask() needs an ASK query")
        return bool(result.askAnswer)

    def construct(self, query: str) -> list[Triple]:
        result = self._query(query)
        if result.type not in ("CONSTRUCT", "DESCRIBE"):
            raise StoreError("construct() needs a CONSTRUCT or DESCRIBE query")
        with _rdflib_call():
            return [(_nt(s), _nt(p), _nt(o)) for s, p, o in result]

    def count(self, *, graph: str | None = None) -> int:
        ds = self._dataset()
        with _rdflib_call():
            if graph is not None:
                return len(Graph(store=ds.store, identifier=URIRef(graph)))
            return sum(len(g) for g in ds.graphs())

    def graphs(self) -> list[str]:
        ds = self._dataset()
        with _rdflib_call():
            return sorted(str(g.identifier) for g in ds.graphs()
                          if g.identifier != DATASET_DEFAULT_GRAPH_ID
                          and isinstance(g.identifier, URIRef) and len(g))

    def dump(self, out: BinaryIO, *, graph: str | None = None) -> None:
        """See :meth:`Store.dump`."""
        ds = self._dataset()
        with _rdflib_call():
            source = ds if graph is None else Graph(store=ds.store, identifier=URIRef(graph))
            data = source.serialize(format="nquads" if graph is None else "nt", encoding="utf-8")
            if data.strip():  # an empty store serializes as one blank line
                out.write(data)

    def close(self) -> None:
        self._ds = None

    # -- helpers ---------------------------------------------------------------

    def _dataset(self) -> Dataset:
        if self._ds is None:
            raise StoreUnavailable(f"the store {self.url} is closed")
        return self._ds

    def _query(self, query: str):  # -> rdflib.query.Result
        refuse_deep_nesting(query)
        ds = self._dataset()
        known = {name for name, _ in ds.namespaces()}
        with _rdflib_errors("rdflib could not run the query", sparql=True,
                            query=query, known=known.__contains__), _rdflib_call():
            prepared, bind = prepare_query(query, dict(ds.namespaces()))
            bind()  # this text's VALUES rows into the shared template (under the lock)
            result = ds.query(prepared)
            if result.type == "SELECT":
                _ = result.bindings  # evaluate now, inside the error mapping
            return result

    def _parse(self, parse: Callable[[Graph], object], *, graph: str | None,
               whole_dataset: bool = False, what: str) -> None:
        ds = self._dataset()
        with _rdflib_errors(f"rdflib could not read {what}"), _rdflib_call():
            if whole_dataset:
                # into a fresh dataset first: rdflib's N-Quads parse into a dataset that
                # holds data empties its default graph
                fresh = Dataset()
                parse(fresh)
                # default-graph quads go to `graph` when one is given, as Oxigraph's to_graph
                into_default = ds.graph(URIRef(graph)) if graph else ds.default_graph
                for named in fresh.graphs():
                    default = named.identifier == DATASET_DEFAULT_GRAPH_ID
                    into = into_default if default else ds.graph(named.identifier)
                    into += named
                return
            target: Graph = ds.default_graph if graph is None else ds.graph(URIRef(graph))
            parse(target)


@contextmanager
def _rdflib_errors(failed: str, *, sparql: bool = False, query: str | None = None,
                   known: Callable[[str], bool] | None = None) -> Iterator[None]:
    """The one place rdflib's exceptions (its parsers and engines raise assorted types)
    become provkg's: SPARQL that does not parse (``sparql``) is a :class:`QuerySyntaxError`,
    as is a ``query`` using a prefix neither it nor the store (``known``) declares; anything
    else is ``failed: <why>``."""
    try:
        yield
    except ProvkgError:
        raise
    except ParseBaseException as exc:
        if not sparql:
            raise StoreError(f"{failed}: {exc}") from exc
        raise syntax_error(_pyparsing_message(exc)) from exc
    except Exception as exc:  # noqa: BLE001 -- the mapping point: everything rdflib raises
        if query is not None:
            said = undeclared_prefix(query, known)
            if said is not None:  # the query's mistake: provkg's words, whatever rdflib's were
                raise QuerySyntaxError(f"SPARQL syntax error: {said.rsplit(' at ', 1)[0]}") from exc
            if _declares_one_iri_twice(query):  # rdflib keeps one prefix of an IRI, not both
                raise StoreError(f"{failed}: {exc} (rdflib forgets a prefix when two PREFIX "
                                 "lines name the same IRI: keep one)") from exc
        raise StoreError(f"{failed}: {exc}") from exc


def _diagnose(path: Path, fmt: str, gzipped: bool) -> str | None:
    """Where a file fails to parse, per Oxigraph's parser (rdflib's N-Triples parser does
    not say which line); None when Oxigraph reads it fine."""
    import pyoxigraph as ox

    formats = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES,
               "nquads": ox.RdfFormat.N_QUADS, "rdfxml": ox.RdfFormat.RDF_XML,
               "trig": ox.RdfFormat.TRIG}
    try:
        with (gzip.open(path) if gzipped else path.open("rb")) as f:
            # pyoxigraph reads any binary file object; its stub names typing.IO only
            for _ in ox.parse(f, format=formats[fmt],  # type: ignore[arg-type]
                              base_iri=path.resolve().as_uri()):
                pass
    except SyntaxError as exc:
        return str(exc)
    except (OSError, EOFError) as exc:  # a bad gzip: not readable at all
        return f"cannot read it: {exc}"
    return None


def _pyparsing_message(exc: ParseBaseException) -> str:
    return f"{exc.msg} at line {exc.lineno}, column {exc.col}"


def _python(term: object) -> object:
    if term is None:
        return None
    if isinstance(term, Literal):
        datatype = str(term.datatype) if term.datatype else None
        return python_value("literal", str(term), datatype)
    if isinstance(term, BNode):
        return python_value("bnode", str(term))
    return str(term)


def _result_term(term: object) -> dict[str, str] | None:
    if term is None:
        return None
    if isinstance(term, Literal):
        return result_term("literal", str(term), str(term.datatype) if term.datatype else None,
                           term.language)
    if isinstance(term, BNode):
        return result_term("bnode", str(term))
    return result_term("uri", str(term))


def _nt(term: object) -> str:
    if isinstance(term, Literal):
        return ntriples_term("literal", str(term), str(term.datatype) if term.datatype else None,
                             term.language)
    if isinstance(term, BNode):
        return ntriples_term("bnode", str(term))
    return ntriples_term("uri", str(term))
