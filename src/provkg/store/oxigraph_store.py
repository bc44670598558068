"""Embedded Oxigraph (pyoxigraph 0.5): on disk (RocksDB folder) or in memory.

Writes go through Oxigraph's N-Triples / N-Quads parser (``bulk_load`` for large
chunks, a transactional ``load`` for small ones), which is several times faster than
building ``Quad`` objects one by one; adding the same triples twice leaves one copy,
as for any quad set.
Queries see every graph (``use_default_graph_as_union``) unless they name their dataset
(``FROM`` / ``FROM NAMED``); see :func:`union_default_graph` for when that is free.
"""

from __future__ import annotations

import errno
import functools
import gzip
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import pyoxigraph as ox

from provkg.errors import BadEvent, StoreError, StoreUnavailable
from provkg.store.base import (
    Rows,
    Store,
    ntriples_bytes,
    rdf_file,
    refuse_deep_nesting,
    run_with_timeout,
    syntax_error,
)
from provkg.store.oxigraph_terms import (
    oxigraph_ntriples_term,
    oxigraph_python_value,
    oxigraph_result_term,
    union_default_graph,
)
from provkg.store.progress import counting_reader
from provkg.term import Triple

__all__ = ["OxigraphStore", "oxigraph_python_value", "oxigraph_result_term", "union_default_graph"]

log = logging.getLogger("provkg.store")
_REOPEN_LOCK = threading.Lock()

#: triples serialized per bulk_load call: large enough to amortize the call, small
#: enough to keep memory flat for millions of triples
CHUNK = 200_000
#: below this many triples ``add`` uses a transaction (``Store.load``) instead of
#: ``bulk_load``: on disk every bulk load writes and ingests new table files, a fixed
#: cost per call (for 250 triples about ten times a transaction's), while a transaction
#: costs more per triple (it reads each key before writing it): the two break even at
#: about 5,000 triples
BULK_MIN = 5_000
#: ``compact`` rewrites the store's files when bulk loads since it was opened added at
#: least this share of the store (or ``COMPACT_TRIPLES``). Each bulk load ingests new table
#: files that overlap all the others, and every lookup then searches each of them; a short
#: CLI process exits before RocksDB's background compaction merges them, and queries after
#: a large load run several times slower until the files are compacted. A compaction
#: rewrites the whole store, so its cost grows with the store, not the load: a small load
#: into a big store leaves it to RocksDB.
COMPACT_SHARE = 0.1
COMPACT_TRIPLES = 1_000_000
#: below this many bulk-loaded triples there is nothing worth the wait (a small domain KG)
COMPACT_MIN = 50_000

_FORMATS = {
    "turtle": ox.RdfFormat.TURTLE,
    "ntriples": ox.RdfFormat.N_TRIPLES,
    "nquads": ox.RdfFormat.N_QUADS,
    "rdfxml": ox.RdfFormat.RDF_XML,
    "trig": ox.RdfFormat.TRIG,
}


class OxigraphStore(Store):
    """Embedded Oxigraph: ``OxigraphStore("provkg-data")`` on disk, ``OxigraphStore(None)`` in memory.

    >>> store = OxigraphStore(None)
    >>> store.add([("<http://ex.org/a>", "<http://ex.org/p>", '"1"^^<http://www.w3.org/2001/XMLSchema#integer>')])
    1
    >>> store.select("SELECT ?v WHERE { ?s ?p ?v }").rows
    [[1]]

    Raises:
        StoreUnavailable: the folder cannot be opened (another process holds its lock,
            or it cannot be created).
    """

    #: two bulk loads into one store run side by side: pyoxigraph releases the GIL and each
    #: writes its own table files
    parallel_adds = 2
    #: triples bulk-loaded since the store was opened or last compacted (see ``compact``)
    _bulk_loaded = 0
    #: opened with Oxigraph's read-only mode (no lock taken: ``open_store(read_only=True)``)
    _read_only = False
    #: a write failed: the store is opened again before the next write (``_writable``)
    _reopening = False
    #: the pyoxigraph store; None once closed, and while it is opened again (``_reopen``)
    _store: ox.Store | None

    def __init__(self, directory: str | Path | None, *, url: str | None = None,
                 read_only: bool = False):
        self._writes = itertools.count(1)
        #: changes after every write (see :attr:`write_version`)
        self._version = 0
        self._unflushed = 0  # bytes written through the log since the last flush_log
        self.directory = Path(directory) if directory is not None else None
        self.url = url or (f"oxigraph:{directory}" if directory is not None else "memory:")
        if self.directory is not None:
            _check_store_folder(self.directory, self.url)
        if read_only and self.directory is not None and (self.directory / "CURRENT").is_file():
            # a command that only reads takes no lock: opened read-write it would hold the
            # store's lock while it ran, and an ingest or server started meanwhile would fail
            # (a dashboard's queries would make scheduled ingests fail at random)
            held = _held_by_another(self.directory)
            try:
                self._store = ox.Store.read_only(str(directory))
                self._read_only, self.snapshot = True, held
                return
            except OSError:
                pass  # e.g. a store that must first recover its log: opened as below
        try:
            if self.directory is not None:
                # RocksDB creates the last folder only; a path like out/store is common
                self.directory.parent.mkdir(parents=True, exist_ok=True)
            self._store = ox.Store(str(directory)) if directory is not None else ox.Store()
        except OSError as exc:
            held = directory is not None and _held_by_another(Path(directory))
            if read_only and directory is not None:  # a snapshot needs no lock: try one
                try:
                    self._store = ox.Store.read_only(str(directory))
                    self._read_only, self.snapshot = True, held
                    return
                except OSError:
                    pass
            hint = " (another provkg process or an Oxigraph server is using that folder)" if held else ""
            raise StoreUnavailable(
                f"cannot open the Oxigraph store in {directory}: {exc}{hint}") from exc

    # -- writing ---------------------------------------------------------------

    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        fmt = ox.RdfFormat.N_TRIPLES if graph is None else ox.RdfFormat.N_QUADS
        total = 0
        it = iter(triples)
        while chunk := list(itertools.islice(it, CHUNK)):
            data, n = ntriples_bytes(chunk, graph)
            bulk = n >= BULK_MIN
            if not bulk:  # a bulk load writes table files, not the log
                self._unflushed += len(data)
            db = self._writable()  # before the bound method below holds the handle
            load = db.bulk_load if bulk else db.load
            self._write(functools.partial(load, input=data, format=fmt, lenient=trusted),
                        oversized=functools.partial(_has_oversized_term, data))
            if bulk:  # two adds may race here (parallel_adds): a lost count only delays compaction
                self._bulk_loaded += n
            total += n
        return total

    def load_file(self, path: str | Path, *, format: str | None = None,
                  graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
        """See :meth:`Store.load_file`. ``progress`` is called with byte counts as the file is read."""
        path, fmt, gzipped = rdf_file(path, format)
        before = len(self._check_open())
        to_graph = ox.NamedNode(graph) if graph else None
        base = path.resolve().as_uri()
        if not gzipped and progress is None:  # Oxigraph reads the file itself: fastest
            self._write(lambda: self._check_open().bulk_load(
                path=str(path), format=_FORMATS[fmt], base_iri=base, to_graph=to_graph),
                what=str(path))
            self._bulk_loaded += len(self._check_open()) - before
            return len(self._check_open()) - before
        with path.open("rb") as raw:
            stream = counting_reader(raw, progress)
            source = gzip.GzipFile(fileobj=stream) if gzipped else stream
            # pyoxigraph reads any binary file object; its stub names typing.IO only (a
            # GzipFile, an io.BufferedReader are not typing.IO)
            self._write(lambda: self._check_open().bulk_load(
                input=source, format=_FORMATS[fmt], base_iri=base,  # type: ignore[arg-type]
                to_graph=to_graph),
                what=str(path))
        # duplicates in the file (or already stored) are not counted twice
        self._bulk_loaded += len(self._check_open()) - before
        return len(self._check_open()) - before

    def compact(self, *, force: bool = False) -> float | None:
        """See :meth:`Store.compact`: Oxigraph's ``optimize`` (a full RocksDB compaction) of a
        store on disk, when bulk loads since it was opened (or the last compaction) added
        ``COMPACT_SHARE`` of its triples or ``COMPACT_TRIPLES``."""
        db = self._check_open()
        loaded, self._bulk_loaded = self._bulk_loaded, 0
        if self.directory is None or self._read_only or not loaded and not force:
            return None
        if not force and (loaded < COMPACT_MIN or loaded < COMPACT_TRIPLES
                          and loaded < COMPACT_SHARE * len(db)):
            return None
        start = time.perf_counter()
        self._write(lambda: self._check_open().optimize(), what="the compacted files")
        return time.perf_counter() - start

    def update(self, sparql: str) -> None:
        self._unflushed += len(sparql)
        self._write(lambda: self._check_open().update(sparql), what="SPARQL update")

    def clear(self, *, graph: str | None = None) -> None:
        what = "the cleared store" if graph is None else f"the cleared graph {graph}"
        if graph is None:
            self._write(lambda: self._writable().clear(), what=what)
        else:
            self._write(lambda: self._writable().remove_graph(ox.NamedNode(graph)), what=what)

    # -- reading ---------------------------------------------------------------

    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        return self._select(query, oxigraph_python_value, timeout)

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows:
        return self._select(query, oxigraph_result_term, timeout)

    def _select(self, query: str, convert: Callable[[Any], object], timeout: float | None) -> Rows:
        """SELECT solutions, each value through ``convert`` (Python value or typed term)."""
        def run() -> Rows:
            solutions = self._query(query)
            if not isinstance(solutions, ox.QuerySolutions):
                raise StoreError("select() needs a SELECT query; use ask() or construct()")
            columns = [v.value for v in solutions.variables]
            return Rows(columns, [[convert(s[c]) for c in columns] for s in solutions])

        return run_with_timeout(run, timeout)

    def ask(self, query: str) -> bool:
        answer = self._query(query)
        if not isinstance(answer, ox.QueryBoolean):
            raise StoreError("ask() needs an ASK query")
        return bool(answer)

    def construct(self, query: str) -> list[Triple]:
        answer = self._query(query)
        if not isinstance(answer, ox.QueryTriples):
            raise StoreError("construct() needs a CONSTRUCT or DESCRIBE query")
        return [(oxigraph_ntriples_term(t.subject), oxigraph_ntriples_term(t.predicate),
                 oxigraph_ntriples_term(t.object)) for t in answer]

    def count(self, *, graph: str | None = None) -> int:
        db = self._reader()
        if graph is None:
            return len(db)
        with self._errors("Oxigraph could not count", what="the graph"):
            named = ox.NamedNode(graph)
        return sum(1 for _ in db.quads_for_pattern(None, None, None, named))

    def graphs(self) -> list[str]:
        db = self._reader()
        return sorted(g.value for g in db.named_graphs()
                      if isinstance(g, ox.NamedNode)  # only graphs holding data (CLEAR keeps them)
                      and next(iter(db.quads_for_pattern(None, None, None, g)), None))

    def dump(self, out: BinaryIO, *, graph: str | None = None) -> None:
        """See :meth:`Store.dump`: Oxigraph's own writer, streamed."""
        db = self._reader()
        with self._errors(f"cannot export {self.url}"):
            if graph is None:
                db.dump(out, format=ox.RdfFormat.N_QUADS)
            else:
                db.dump(out, format=ox.RdfFormat.N_TRIPLES, from_graph=ox.NamedNode(graph))

    def close(self) -> None:
        store, self._store = getattr(self, "_store", None), None
        if store is not None and self.directory is not None and not self._read_only \
                and not self._reopening:  # (then it may be the read-only stand-in: no flush)
            try:
                store.flush()
            except (OSError, RuntimeError) as exc:  # a full disk: what was written is in the log
                log.error("could not flush the store %s on closing: %s", self.url, exc)
        del store  # RocksDB releases its lock when the object goes

    # -- helpers ---------------------------------------------------------------

    def _query(self, query: str) -> object:
        refuse_deep_nesting(query)
        db = self._reader()
        with self._errors("Oxigraph could not run the query", query=query):
            return db.query(query, use_default_graph_as_union=union_default_graph(db, query))

    def _write(self, action: Callable[[], object], *, what: str = "the triples",
               oversized: Callable[[], bool] | None = None) -> None:
        """Run ``action``, a write; ``oversized()`` tells whether its input holds a term past
        what Oxigraph's parser buffers (then a MemoryError is the data's fault, not the host's)."""
        self._writable()
        if self._read_only:
            held = " (another process holds it)" if self.snapshot else ""
            raise StoreUnavailable(f"the store {self.url} was opened read-only{held}, so {what} "
                                   "cannot be written")
        try:
            with self._errors(f"Oxigraph could not write {what}", what=what, writing=True,
                              update=what == "SPARQL update", oversized=oversized):
                action()
        finally:  # after the write, failed ones too (they may have written a part)
            self._version = version = next(self._writes)
            self._wrote(version)

    @property
    def write_version(self) -> int:
        """See :attr:`Store.write_version` (itertools.count: no lost update between threads).
        A reader that opened the folder read-only when it was ``v`` has seen every write that
        ended before; while it is still ``v`` nothing changed."""
        return self._version

    def log_bytes(self) -> int:
        """See :meth:`Store.log_bytes`: the N-Triples and update texts written in transactions
        through this handle since its last :meth:`flush_log` (the log holds 2-3x that; a
        read-only open replays about 24 ms per MB of log, benchmarks/results/service.md).
        Counted, not read from the log files' sizes: RocksDB recycles a log file by renaming
        an old one and writing over it, so their sizes say little of what is in them."""
        return self._unflushed if self.directory is not None else 0

    def flush_log(self) -> None:
        """Write the memory tables to table files, so the log a read-only open replays is
        short again (the writes after it go to a new log file)."""
        if self.directory is not None and not self._read_only:
            self._unflushed = 0  # first: a write during the flush is counted for the next one
            with self._errors("Oxigraph could not flush the store", writing=True):
                self._check_open().flush()

    @contextmanager
    def _errors(self, failed: str, *, query: str | None = None, what: str = "the data",
                update: bool = False, writing: bool = False,
                oversized: Callable[[], bool] | None = None) -> Iterator[None]:
        """The one place pyoxigraph's exceptions become provkg's: a SPARQL text that does not
        parse is a :class:`QuerySyntaxError`, RDF that does not parse a :class:`StoreError`
        naming ``what``, any other failure ``failed: <why>``. A failed write on disk marks
        the store for opening again (see :meth:`_reopen`)."""
        try:
            yield
        except SyntaxError as exc:
            if query is not None or update:
                raise syntax_error(str(exc), query=query) from exc
            raise StoreError(f"{what} is not valid RDF: {exc}") from exc
        except (OSError, ValueError, RuntimeError, TypeError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE and not writing:
                raise BrokenPipeError(errno.EPIPE, "broken pipe") from None  # `export - | head`
            if writing and isinstance(exc, OSError) and self.directory is not None:
                # RocksDB now refuses every write until the database is opened again: the
                # next write reopens it (_writable), once the action (which holds this handle,
                # and RocksDB's lock with it) is gone; reads go on meanwhile
                self._reopening = True
            raise StoreError(f"{failed}: {exc}") from exc
        except MemoryError as exc:
            if not writing:
                raise
            if oversized is None or not oversized():
                raise StoreError(f"Oxigraph ran out of memory writing {what} (a term larger "
                                 f"than {TERM_LIMIT >> 20} MiB, or no memory left)") from exc
            # its parser holds one term at a time, up to 16 MiB: the data, not the store, is the
            # problem (a queued batch with such a value is set aside, not retried forever)
            raise BadEvent(f"Oxigraph cannot store {what}: a value is larger than the {TERM_LIMIT >> 20} MiB "
                           "one RDF term may hold here; keep big content in a file and record "
                           "its location (capture.ref)") from exc

    def _reader(self) -> Any:
        """The pyoxigraph store for a read: one being opened again after a failed write is
        waited for, so a read in that moment gets no 503."""
        db = self._store
        if db is None and self._reopening:
            with _REOPEN_LOCK:
                db = self._store
        if db is None:
            self._check_open()  # raises, saying why
        return db

    def _writable(self) -> ox.Store:
        """The pyoxigraph store, opened again first if a write failed since (``_reopen``)."""
        if self._reopening:
            with _REOPEN_LOCK:  # two writers (parallel_adds) reopen it once
                if self._reopening:
                    self._reopen()
        return self._check_open()

    def _reopen(self) -> None:
        """After a failed write (a full disk, an I/O error) RocksDB refuses every later write
        until the database is opened again, so a retry would fail for ever even once space is
        back. Opened again here, before the next write; reads
        went on with the old handle meanwhile. While it cannot be opened for writing (the disk
        still full), it is opened read-only, so reads go on, and the next write tries again.

        Raises:
            StoreError: it cannot be opened for writing yet."""
        self._store = None  # ours goes, and RocksDB's lock with it
        try:
            self._store = ox.Store(str(self.directory))
        except OSError as exc:
            try:
                self._store = ox.Store.read_only(str(self.directory))
            except OSError:
                pass
            raise StoreError(f"the store {self.url} failed a write and cannot be opened for "
                             f"writing yet (is its disk full?): {exc}") from exc
        self._reopening = False
        log.warning("reopened the store %s after a failed write", self.url)

    def _check_open(self) -> ox.Store:
        """The pyoxigraph store.

        Raises:
            StoreUnavailable: it is closed, or could not be opened again after a failed write."""
        store = self._store
        if store is None:
            if self._reopening:
                raise StoreUnavailable(f"the store {self.url} failed a write and could not be "
                                       "opened again yet (is its disk full?)")
            raise StoreUnavailable(f"the store {self.url} is closed")
        return store


#: files of an Oxigraph (RocksDB) folder: the first two in every complete one, LOCK from the start
_ROCKSDB_FILES = ("CURRENT", "IDENTITY", "LOCK")
_ROCKSDB_PREFIXES = ("OPTIONS-", "MANIFEST-")


def _check_store_folder(directory: Path, url: str) -> None:
    """Refuse a folder that holds files but no Oxigraph store: RocksDB would create its
    database among them (a mistyped ``--store oxigraph:~/papers`` writing into it).

    Raises:
        StoreUnavailable: ``directory`` is a file, or a non-empty folder without the files of
            a RocksDB database.
    """
    try:
        if not directory.exists():
            return
        if not directory.is_dir():
            raise StoreUnavailable(f"cannot open the Oxigraph store {url}: {directory} is a "
                                   "file, not a store folder")
        names = {p.name for p in directory.iterdir()}
    except OSError as exc:
        raise StoreUnavailable(f"cannot open the Oxigraph store {url}: {exc.strerror or exc}") from exc
    if names and not any(name in _ROCKSDB_FILES or name.startswith(_ROCKSDB_PREFIXES)
                         for name in names):
        shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        raise StoreUnavailable(
            f"{directory} is not an Oxigraph store: it holds other files ({shown}) and none of "
            "a store's (CURRENT, IDENTITY, OPTIONS-*, ...); give the store's folder, or a new or "
            "empty one to create a store in")


def _held_by_another(directory: Path) -> bool:
    """Whether another process holds the RocksDB lock of the store in ``directory`` (a
    running ingest or server), read from /proc/locks. Not by trying the lock: POSIX locks
    belong to the process, and closing any handle of the LOCK file would drop the lock of a
    store this process has open. False where /proc/locks cannot tell."""
    import os

    try:
        inode = (directory / "LOCK").stat().st_ino
        with open("/proc/locks", encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 5 and fields[5].rsplit(":", 1)[-1] == str(inode) \
                        and fields[4] != str(os.getpid()):
                    return True
    except (OSError, ValueError):
        pass
    return False


#: the largest term Oxigraph's parser buffers (its "buffer maximal size")
TERM_LIMIT = 16 << 20


def _has_oversized_term(ntriples: bytes) -> bool:
    """Does N-Triples text hold a term of :data:`TERM_LIMIT` bytes or more? Only asked after a
    write failed: a line that long is the only way to hold one."""
    return any(len(line) >= TERM_LIMIT for line in ntriples.split(b"\n"))
