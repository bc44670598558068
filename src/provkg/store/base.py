"""The store interface every backend implements: :class:`Store`.

A :class:`Store` has one job per method (like httpx's transports): add triples,
answer SELECT / ASK / CONSTRUCT, run an update, close -- and, with defaults written in
portable SPARQL (:mod:`provkg.store.portable`), bulk-load a file, count, list graphs,
clear, dump. Queries always see the union of all graphs. Terms going in and out are
N-Triples text (what :mod:`provkg.term` writes); values in SELECT rows are plain Python
(see :func:`python_value`).

The names the backends and their users share (rows, values, files, SPARQL text analysis)
are re-exported here from :mod:`provkg.store.common`, :mod:`provkg.store.values` and
:mod:`provkg.store.sparql_text`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from provkg.store import portable
from provkg.store.common import (  # noqa: F401
    RDF_FORMATS,
    SPARQL_PARSER_LOCK,
    Rows,
    checked_iri,
    display_url,
    rdf_file,
    rdf_format_of,
    run_with_timeout,
)
from provkg.store.sparql_text import (  # noqa: F401
    declared_prefixes,
    has_dataset_clause,
    prefix_declarations,
    refuse_deep_nesting,
    syntax_error,
    undeclared_prefix,
)
from provkg.store.values import (  # noqa: F401
    INTEGER_TYPES,
    canonical_datetime,
    ntriples_bytes,
    ntriples_term,
    python_value,
    result_term,
)
from provkg.term import Triple

__all__ = [
    "Store", "Rows", "python_value", "ntriples_term", "rdf_file", "rdf_format_of", "syntax_error",
    "ntriples_bytes", "RDF_FORMATS", "run_with_timeout", "result_term", "display_url",
    "refuse_deep_nesting", "checked_iri",
]

#: per thread: inside :meth:`Store.queued_writes`
_queued = threading.local()


class Store(ABC):
    """A triple store provkg can write to and query. Use :func:`provkg.store.open_store`.

    A backend implements six methods: :meth:`add`, :meth:`select`, :meth:`ask`,
    :meth:`construct`, :meth:`update` and :meth:`close`. Every other method has a default
    written with those alone (portable SPARQL, see :mod:`provkg.store.portable`), which a
    backend overrides where it has a faster way; the defaults give the same answers.

    Stores are context managers: ``with open_store("memory:") as store: ...``.
    """

    #: the URL the store was opened with
    url: str = ""
    #: see :attr:`must_see_version`
    _must_see = 0
    #: how canned queries are rendered for this store (``provkg.queries.builder.DIALECTS``)
    query_dialect: str = "standard"
    #: opened read-only because another process holds it (``open_store(..., read_only=True)``):
    #: the store answers from what was written when it was opened, and refuses writes
    snapshot: bool = False
    #: how many ``add`` calls may run at once from different threads (bulk ingest keeps this
    #: many loads in flight); 1 for stores that are not safe to write from several threads
    parallel_adds: int = 1

    # -- what every backend implements -------------------------------------------------

    @abstractmethod
    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        """Add triples (tuples of N-Triples terms) to ``graph`` (IRI; default graph if None).

        Adding a triple that is already there changes nothing. Returns how many
        triples were given. Blank nodes keep their identity within one call. ``trusted``:
        the terms come from provkg's own mapper, which built every IRI through
        :func:`provkg.term.iri` (validated); a store may then skip validating them again
        (embedded Oxigraph parses ~20 % faster).

        Raises:
            StoreError: a term is not valid N-Triples, or the store refused the data.
        """

    @abstractmethod
    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        """Run a SPARQL SELECT over the union of all graphs.

        ``hide_system_graphs=False``: the query matches provkg's vocabularies only (the canned
        queries), so a store need not hide graphs of its own from it. Virtuoso hides its
        system graphs with ``define input:default-graph-exclude``, which turns its plans for
        large joins from seconds into minutes (Q7 typed at 10M triples: 3 s vs > 60 s).

        Raises:
            QuerySyntaxError: the query does not parse (line and column when known).
            QueryTimeout: it ran past ``timeout`` seconds.  StoreError: any other failure.
        """

    @abstractmethod
    def ask(self, query: str) -> bool:
        """Run a SPARQL ASK over the union of all graphs."""

    @abstractmethod
    def construct(self, query: str) -> list[Triple]:
        """Run a SPARQL CONSTRUCT (or DESCRIBE); triples as N-Triples terms."""

    @abstractmethod
    def update(self, sparql: str) -> None:
        """Run a SPARQL 1.1 Update."""

    @abstractmethod
    def close(self) -> None:
        """Release files, locks and connections. Closing twice is harmless; a closed store
        refuses work with :class:`~provkg.errors.StoreUnavailable`."""

    # -- defaults a backend may override for speed ------------------------------------

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows:
        """Like :meth:`select` (user queries: system graphs hidden), but each value keeps its
        RDF term type: a SPARQL 1.1 Query Results JSON term (see :func:`result_term`), or
        None when unbound. The ``/v1/sparql`` endpoint serializes these.

        The default asks :meth:`select` for each column's kind, lexical form, datatype and
        language (``STR``, ``DATATYPE``, ``LANG``) around the query as a sub-query."""
        return portable.select_terms(self, query, timeout=timeout)

    def count(self, *, graph: str | None = None) -> int:
        """Triples in ``graph``, or summed over the default graph and every named graph."""
        return portable.count(self, graph=graph)

    def graphs(self) -> list[str]:
        """IRIs of the named graphs holding data, sorted."""
        return portable.graphs(self)

    def clear(self, *, graph: str | None = None) -> None:
        """Remove every triple of ``graph``, or of the whole store when None."""
        self.update(f"CLEAR SILENT GRAPH <{checked_iri(graph)}>" if graph else "CLEAR ALL")

    def load_file(self, path: str | Path, *, format: str | None = None,
                  graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
        """Bulk-load an RDF file (Turtle, N-Triples, N-Quads, RDF/XML; ``.gz`` too) into
        ``graph`` (triple formats; quad formats keep their own graphs).

        ``format`` is a key of :data:`RDF_FORMATS`, guessed from the extension when
        None; ``progress`` is called with byte counts as the file is read. Returns how
        many triples the store gained (0 when the file was loaded before; blank nodes
        are fresh per load, as RDF has it). The default parses the file (streaming) and
        :meth:`add` s it graph by graph.

        Raises:
            NotFound: no such file.  BadParameter: unknown format.
            StoreError: the file does not parse (with line) or the store refused it.
        """
        return portable.load_file(self, path, format=format, graph=graph, progress=progress)

    def dump(self, out: BinaryIO, *, graph: str | None = None) -> None:
        """Write the whole store as N-Quads (every named graph kept), or the triples of
        ``graph`` as N-Triples, to ``out``; ``provkg load`` reads either back. The default
        reads them with :meth:`select_terms` and :meth:`construct`.

        Raises:
            StoreError: the store cannot be read whole.
        """
        portable.dump(self, out, graph=graph)

    def compact(self, *, force: bool = False) -> float | None:
        """Reorganize the store's files for reading after large bulk loads; the seconds it
        took, or None when there was nothing worth doing (a store that needs no such step,
        or little was bulk-loaded since it was opened). Commands that bulk-load (``ingest``,
        ``load``) call it at the end; ``force`` compacts whatever was loaded."""
        return None

    @property
    def write_version(self) -> int | None:
        """A number that changes after each write through this handle, for readers in other
        processes that keep a view of the same files (the embedded store's SPARQL workers);
        None: not tracked (the store needs no such reader)."""
        return None

    @property
    def must_see_version(self) -> int:
        """The :attr:`write_version` after the last write made outside :meth:`queued_writes`:
        a reader that keeps a view must have seen at least this one (0: none yet)."""
        return self._must_see

    @contextmanager
    def queued_writes(self) -> Iterator[None]:
        """Writes made inside, on this thread, are the ingest queue's: already acknowledged
        (202) and asynchronous by contract, so a reader that keeps a view may see them a
        bounded time later (the SPARQL workers, :mod:`provkg.api.sparql`). Every other write
        raises :attr:`must_see_version`, so a request's own write is seen by its next query."""
        outer = getattr(_queued, "on", False)  # nested (settle inside apply): the outer stays
        _queued.on = True
        try:
            yield
        finally:
            _queued.on = outer

    def _wrote(self, version: int) -> None:
        """Called by a backend that tracks :attr:`write_version` after each write."""
        if not getattr(_queued, "on", False):
            self._must_see = version

    def log_bytes(self) -> int:
        """Bytes of write-ahead log a reader opening the store's files replays (0: none)."""
        return 0

    def flush_log(self) -> None:
        """Make that log short again (nothing to do for stores without one)."""
        return None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({display_url(self.url)!r})"
