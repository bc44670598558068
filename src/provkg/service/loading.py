"""Use cases: load provkg's ontologies (``provkg init``) and RDF files (``provkg load``).

>>> from provkg.store import open_store
>>> with open_store("memory:") as store:
...     report = init_store(store)
>>> [entry.graph for entry in report.entries][:1]
['https://w3id.org/provkg/provlake']
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from provkg.errors import NotFound, StoreError, StoreUnavailable
from provkg.ontology import all_ontology_paths, import_graphs, ontology_iri, ontology_names
from provkg.service.progress import Progress, start
from provkg.store import Rows, Store, display_url

__all__ = ["LoadEntry", "LoadReport", "compact_after_load", "export_store", "init_store",
           "load_files", "replace_graph", "shared_copies", "shared_copies_warnings"]

#: files smaller than this load without a progress bar
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


@dataclass
class LoadEntry:
    """One file loaded: where from, into which graph (None: the default graph), how many
    triples the store gained."""

    path: str
    graph: str | None
    triples: int


@dataclass
class LoadReport:
    entries: list[LoadEntry] = field(default_factory=list)
    #: what the counts are: a graph's size (init), or what a load added (a file loaded
    #: before adds nothing, and "0 triples" read as if the file were empty)
    counted: str = "triples"

    @property
    def triples(self) -> int:
        return sum(e.triples for e in self.entries)

    def lines(self) -> list[str]:
        """Human-readable lines: file, triples, graph."""
        width = max((len(e.path) for e in self.entries), default=0)
        out = [f"{e.path:<{width}}  {e.triples:>9,} {_noun(e.triples, self.counted)}  -> "
               f"{e.graph or _default_or_own(e.path)}" for e in self.entries]
        out.append(f"{'total':<{width}}  {self.triples:>9,} {_noun(self.triples, self.counted)}")
        return out


def _default_or_own(path: str) -> str:
    """Where a file loaded without a graph went: N-Quads and TriG name their own graphs."""
    quads = path.lower().removesuffix(".gz").endswith((".nq", ".nquads", ".trig"))
    return "(the graphs the file names; the default graph otherwise)" if quads else "(default graph)"


def _noun(n: int, plural: str) -> str:
    return plural.removesuffix("s") if n == 1 else plural


def init_store(store: Store, *, progress: Progress | None = None) -> LoadReport:
    """Load provkg's ontologies and those they import (PROV-O, ML Schema), each into the
    named graph of its ontology IRI, so ``rdfs:subClassOf*`` paths reach PROV's classes.

    Each graph is cleared first, so running it again refreshes the ontologies rather
    than duplicating their blank nodes (OWL lists). ``triples`` is the graph's size.
    """
    report = LoadReport()
    ours = [(ontology_iri(name), path) for name, path in zip(ontology_names(), all_ontology_paths(), strict=True)]
    for graph, path in [*ours, *import_graphs().items()]:
        store.clear(graph=graph)
        _load_one(store, path, graph=graph, progress=progress)
        report.entries.append(LoadEntry(path.name, graph, store.count(graph=graph)))
    return report


def load_files(store: Store, paths: Iterable[str | Path], *, graph: str | None = None,
               progress: Progress | None = None, format: str | None = None) -> LoadReport:
    """Load RDF files (Turtle, N-Triples, N-Quads, RDF/XML; ``.gz`` too) into ``graph``.

    Each large file (:data:`PROGRESS_MIN_BYTES` or more) is reported to ``progress``
    (:mod:`provkg.service.progress`; None: not reported), labelled with the file's name.

    A file that does not parse is left out whole (nothing of it is stored) and the others
    are loaded; then one :class:`StoreError` names each such file, its ``report`` attribute
    the report of what was loaded.

    Raises:
        NotFound: a file does not exist (checked before anything is loaded).
        BadParameter: a file's format cannot be told from its extension, or ``graph`` is not an IRI.
        StoreError: files that do not parse (above).  StoreUnavailable: the store failed.
    """
    files = [Path(p) for p in paths]
    folders = [str(p) for p in files if p.is_dir()]
    if folders:
        raise NotFound(f"{', '.join(folders)}: a folder; load takes RDF files (give them, "
                       f"e.g. {folders[0].rstrip('/')}/*.ttl)")
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise NotFound(f"no such file: {', '.join(missing)}")
    if graph is not None:
        _graph_term(graph)
        _no_quads(files, format)
    report = LoadReport(counted="new triples")
    bad: list[str] = []
    for path in files:
        try:
            added = _load_one(store, path, graph=graph, progress=progress, format=format)
        except StoreUnavailable:
            raise
        except StoreError as exc:  # this file is not RDF: the others still are
            bad.append(str(exc))
            continue
        report.entries.append(LoadEntry(str(path), graph, added))
    if bad:
        n = len(report.entries)
        loaded = (f"; the other {n} file{' was' if n == 1 else 's were'} loaded" if n else "")
        error = StoreError(bad[0] + loaded if len(bad) == 1 else
                           f"{len(bad)} files were not loaded (nothing of each){loaded}:\n  "
                           + "\n  ".join(bad))
        error.report = report  # type: ignore[attr-defined]
        error.problems = bad  # type: ignore[attr-defined]
        raise error
    return report


def _no_quads(files: list[Path], format: str | None) -> None:
    """BadParameter for N-Quads / TriG files given with a graph: their quads name their own
    graphs, so they would go there, not into ``--graph`` (and a ``--replace`` would keep the
    old triples of those graphs)."""
    from provkg.errors import BadParameter
    from provkg.store.base import rdf_format_of

    quads = [str(p) for p in files if rdf_format_of(p, format)[0] in ("nquads", "trig")]
    if quads:
        raise BadParameter(f"{', '.join(quads)}: N-Quads and TriG name the graph of each quad "
                           "themselves, so --graph cannot put them in one graph; load such "
                           "files without --graph, or give the triples as Turtle or N-Triples")


def _graph_term(graph: str) -> str:
    """``<graph>``, or BadParameter naming the argument (the files are fine)."""
    from provkg.errors import BadParameter
    from provkg.term import iri

    try:
        return iri(graph)
    except BadParameter as exc:
        raise BadParameter(f"the graph (--graph) is not usable: {exc}") from None


def _check_gzip(path: Path) -> None:
    """StoreError unless ``path`` decompresses to its end: a cut-off backup is refused before
    anything of it is stored (a bulk load keeps what it read), as an error, not a traceback
    that leaves the command's other files unloaded."""
    import zlib

    try:
        with gzip.open(path, "rb") as f:
            while f.read(1 << 20):
                pass
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise StoreError(f"{path} is cut short or damaged ({exc}); nothing of it was loaded") from None


def _load_one(store: Store, path: Path, *, graph: str | None, progress: Progress | None,
              format: str | None = None) -> int:
    if path.name.lower().endswith(".gz"):
        _check_gzip(path)
    size = path.stat().st_size
    if not progress or size < PROGRESS_MIN_BYTES:
        return store.load_file(path, graph=graph, format=format)
    bar = start(progress, path.name, size)
    try:
        return store.load_file(path, graph=graph, format=format, progress=bar.advance)
    finally:
        bar.close()


def compact_after_load(store: Store) -> float | None:
    """Let the store reorganize its files after a large bulk load (queries are several times
    faster afterwards, see ``Store.compact``): the seconds it took, None when the store had
    nothing worth compacting. It takes a while: a caller with a user waiting says so first."""
    return store.compact()


def replace_graph(store: Store, paths: Iterable[str | Path], graph: str, *,
                  progress: Progress | None = None, format: str | None = None) -> LoadReport:
    """Replace what ``graph`` holds with the triples of the files, all or nothing: they are
    loaded into a staging graph first, which then takes the place of ``graph``
    (``MOVE``); if a file does not parse, ``graph`` is left as it was.

    Raises:
        as :func:`load_files`, and BadParameter for a ``graph`` that is no IRI."""
    import uuid

    target = _graph_term(graph)
    staging = f"urn:provkg:staging:{uuid.uuid4()}"
    try:
        report = load_files(store, paths, graph=staging, progress=progress, format=format)
        store.update(f"MOVE SILENT <{staging}> TO {target}")
    except StoreError as exc:
        store.clear(graph=staging)
        # all or nothing: name the files that failed, not "the other files were loaded"
        said = "\n  ".join(getattr(exc, "problems", None) or [str(exc)])
        raise type(exc)(f"{said}\nnothing was replaced: {graph} is as it was") from None
    except BaseException:
        store.clear(graph=staging)
        raise
    report.entries = [LoadEntry(e.path, graph, e.triples) for e in report.entries]
    report.counted = "triples"  # the graph is new: these are its triples, not the store's gain
    return report


#: ``provkg load --graph`` looks for triples the graph shares with others up to this size
#: (one lookup per triple: about 2 s per 100,000 on disk here); a larger graph is not checked
SHARED_CHECK_MAX = 200_000
#: named graphs checked after a load into the default graph
_SHARED_CHECK_GRAPHS = 20


def shared_copies(store: Store, graph: str) -> int | None:
    """How many more times the triples of ``graph`` match the union default graph than once:
    their copies in the default graph or other named graphs. Oxigraph (before 0.6,
    oxigraph/oxigraph#1919) and Virtuoso match such a triple once per graph, so COUNT, SUM and
    AVG over the union count it again; rdflib merges them (0 here). None: ``graph`` has more
    than :data:`SHARED_CHECK_MAX` triples, not checked."""
    size = store.count(graph=graph)
    if size == 0 or size > SHARED_CHECK_MAX:
        return None if size else 0
    g = _graph_term(graph)
    rows = store.select("SELECT (COUNT(*) AS ?n) WHERE { { SELECT DISTINCT ?s ?p ?o WHERE { "
                        f"GRAPH {g} {{ ?s ?p ?o }} }} }} ?s ?p ?o }}")
    distinct = store.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH {g} {{ ?s ?p ?o }} }}")
    return max(0, _count(rows) - _count(distinct))


def _count(answer: Rows) -> int:
    """The one value of a ``SELECT (COUNT(*) AS ?n)``: an xsd:integer, so an int (a number
    or its digits from a store that types it otherwise)."""
    n = answer.rows[0][0]
    assert isinstance(n, (int, float, str)), n
    return int(n)


def shared_copies_warnings(store: Store, graph: str | None) -> list[str]:
    """A warning for each graph whose triples are also in other graphs, after a load into
    ``graph`` (None: the default graph, which can copy any named graph's triples: a KG loaded
    with ``--graph``, then again without, counts twice; the first named graphs are checked)."""
    warnings = []
    for g in [graph] if graph else store.graphs()[:_SHARED_CHECK_GRAPHS]:
        copies = shared_copies(store, g)
        if copies:
            warnings.append(
                f"{copies:,} {_noun(copies, 'copies')} of triples of {g} are also in "
                f"the default graph or other graphs; on {display_url(store.url)} a query over all graphs "
                "matches such a triple once per graph, so COUNT / SUM / AVG count it again (use "
                "DISTINCT or GRAPH <...>, or keep each triple in one graph: `provkg load --graph G "
                "--replace` replaces a graph instead of adding another copy)")
    return warnings


def export_store(store: Store, target: str | BinaryIO, *, graph: str | None = None) -> int:
    """Write ``store`` as N-Quads (every graph kept: the provenance, the specs it holds, the
    ontologies, each domain KG) or ``graph`` as N-Triples to the file ``target`` (``.gz``:
    compressed), whole or not at all, or to the binary stream ``target`` (standard output).
    Returns the lines written.

    Raises:
        BadParameter: the file's extension says another format.  StoreError: the store
            cannot be exported (remote stores) or the file cannot be written.
    """
    from provkg.errors import BadParameter

    want = (".nt",) if graph is not None else (".nq",)
    if graph is not None:
        _graph_term(graph)
        if graph not in store.graphs():  # a typo would write an empty backup, silently
            held = ", ".join(store.graphs()) or "none"
            raise NotFound(f"the store has no graph {graph} (its named graphs: {held})")
    if not isinstance(target, str):
        counter = _LineCounter(target)
        store.dump(counter, graph=graph)  # type: ignore[arg-type]
        target.flush()
        return counter.lines
    compressed = target.lower().endswith(".gz")
    name = target.lower().removesuffix(".gz")
    if not name.endswith(want):
        what = "N-Triples (.nt or .nt.gz)" if graph is not None else "N-Quads (.nq or .nq.gz)"
        raise BadParameter(f"{target}: export writes {what}"
                           + ("" if graph is not None else "; --graph IRI exports one graph as N-Triples"))
    path = Path(target)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open(partial, "wb") as raw:
            # the name in the gzip header is the file's, not the temporary one's (gunzip -N)
            out = (gzip.GzipFile(filename=path.name[:-3],  # without .gz in any case
                                 fileobj=raw, mode="wb", mtime=0, compresslevel=6) if compressed else raw)
            counter = _LineCounter(out)
            store.dump(counter, graph=graph)  # type: ignore[arg-type]
            if out is not raw:
                out.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return counter.lines


class _LineCounter:
    """A binary writer that counts the lines written through it."""

    def __init__(self, out: Any):
        self._out, self.lines = out, 0

    def write(self, data: bytes) -> int:
        self.lines += data.count(b"\n")
        return self._out.write(data)

    def flush(self) -> None:
        self._out.flush()
