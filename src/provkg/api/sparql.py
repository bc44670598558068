"""Running user SPARQL where it can be stopped: a time limit that really ends the work.

On an embedded Oxigraph store (``oxigraph:DIR``) each query runs in a warm
subprocess (:mod:`provkg.api.sparql_worker`) that opens the directory read-only;
past the timeout the process is killed and replaced. Remote SPARQL endpoints get
the timeout passed to their HTTP client. In-process stores (``memory:``,
``rdflib:``) cannot be cut off: past the timeout the caller gets a 504 while the
query finishes in a background thread, which is why the service should run on
``oxigraph:DIR`` or a SPARQL endpoint.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import orjson

from provkg.api.errors import TooManyRows
from provkg.api.sparql_dataset import ProtocolDataset, with_dataset
from provkg.api.sparql_worker import too_many_rows_message
from provkg.errors import QuerySyntaxError, QueryTimeout, StoreError
from provkg.store.base import Rows, Store

log = logging.getLogger(__name__)

__all__ = ["SparqlAnswer", "SparqlRunner", "embedded_directory"]


@dataclass
class SparqlAnswer:
    """One query's answer: ``rows`` for SELECT, ``boolean`` for ASK, ``ntriples`` otherwise.

    The values of ``rows`` keep their RDF term types: SPARQL 1.1 Query Results JSON terms
    (:func:`provkg.store.base.result_term`), None when unbound, whatever the store.
    """

    form: str
    rows: Rows | None = None
    boolean: bool | None = None
    ntriples: str = ""
    columns: list[str] = field(default_factory=list)


def embedded_directory(store_url: str) -> str | None:
    """The directory of an ``oxigraph:DIR`` store URL, else None."""
    if not store_url.startswith("oxigraph:"):
        return None
    path = store_url.removeprefix("oxigraph:").split("?", 1)[0]
    return os.path.abspath(path) if path and path != "memory" else None


#: seconds a fresh SPARQL worker may take to load its parsers before its first query
WORKER_START_S = 60.0
#: bytes written through the write-ahead log (Store.log_bytes) past which the server flushes
#: the store before a worker opens it: a read-only open replays the whole log (~24 ms per MB,
#: ~3 KB per event), so the log an open replays stays short
LOG_FLUSH_BYTES = 1 << 18
#: seconds between two such flushes at least, unless the log is past LOG_FLUSH_MAX_BYTES: each
#: flush writes small table files the store then compacts, and one per query (the persistence
#: probe polls every 20 ms) halved the applier's rate at 2,500 events/s
FLUSH_EVERY_S = 0.5
LOG_FLUSH_MAX_BYTES = 8 << 20
#: a view older than this many refresh intervals is not used once the store changed (a
#: worker kept busy through the refreshes): the query opens a fresh one
MAX_LAG_REFRESHES = 4


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "provkg.api.sparql_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)  # a Ctrl-C to the server is handled by the server
        self._buffer = b""
        self._ready = False  # it said so once its parsers were loaded
        #: the store's write version its view has seen, and when it was opened (None: none)
        self.version: int | None = None
        self.opened_at = 0.0

    def ask(self, request: dict[str, object], *, timeout: float) -> dict[str, object]:
        """The worker's answer to ``request``, within ``timeout`` seconds of the worker being
        ready (a fresh one first loads its parsers, within :data:`WORKER_START_S`)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if not self._ready:
            self._line(time.monotonic() + max(timeout, WORKER_START_S))
            self._ready = True
        deadline = time.monotonic() + timeout
        self.proc.stdin.write(orjson.dumps(request) + b"\n")
        self.proc.stdin.flush()
        return orjson.loads(self._line(deadline))

    def _line(self, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise StoreError("the SPARQL worker process ended unexpectedly")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def seen(self, version: int | None) -> None:
        """It answered a request carrying ``version``: its view has seen that one."""
        if version != self.version:
            self.version, self.opened_at = version, time.monotonic()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


class SparqlRunner:
    """Runs guarded, read-only SPARQL with a time limit and a row cap.

    Args:
        store: the open store (used for endpoints and in-process stores).
        store_url: its URL; ``oxigraph:DIR`` selects the subprocess path.
        timeout: seconds per query.
        max_rows: more rows than this is an error (not a silent cut).
        workers: subprocesses kept warm for the embedded store.
        refresh_s: seconds between the background refreshes of their views while the ingest
            queue writes (:meth:`Store.queued_writes`); 0: none, a query opens a fresh view
            after any write.
    """

    def __init__(self, store: Store, store_url: str, *, timeout: float, max_rows: int,
                 workers: int = 2, refresh_s: float = 0.0):
        self._store = store
        self._directory = embedded_directory(store_url)
        self._timeout = timeout
        self._max_rows = max_rows
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._lock = threading.Lock()
        self._all: list[_Worker] = []
        self._closed = False
        self._flush_lock = threading.Lock()
        self._flushed_at = 0.0
        self._floor = 0  # see require_current
        self._stop = threading.Event()
        if self._directory is not None:
            self._size = max(1, workers)
            for _ in range(self._size):
                self._idle.put(self._spawn())  # started now: it loads its parsers meanwhile
            if refresh_s > 0:
                threading.Thread(target=self._refresh_views, args=(refresh_s,),
                                 name="provkg-sparql-views", daemon=True).start()
        self._max_lag_s = refresh_s * MAX_LAG_REFRESHES
        self._threads = ThreadPoolExecutor(max_workers=max(1, workers),
                                           thread_name_prefix="provkg-sparql")

    @property
    def guards_in_worker(self) -> bool:
        """Whether :meth:`run` takes ``guard=`` and checks the query inside the time limit
        (an embedded store's worker process); else the caller runs the guard first."""
        return self._directory is not None

    def run(self, text: str, form: str, *, guard: tuple[str, ...] | None = None,
            dataset: ProtocolDataset | None = None) -> SparqlAnswer:
        """Run a query the guard accepted, or (``guard``: the allowed SERVICE endpoints;
        see :attr:`guards_in_worker`) one the worker is to guard first. ``dataset``: the
        graphs the request named (the Protocol's ``default-graph-uri`` / ``named-graph-uri``),
        the query's dataset in place of its own.

        Raises:
            QueryTimeout: past the timeout (the work is stopped on an embedded store).
            QuerySyntaxError: the store's parser refused it.
            ReadOnlyQuery: the guard refused it (an update, or SERVICE).
            TooManyRows: the answer has more than ``max_rows`` rows.
        """
        if self._directory is not None:
            return self._run_subprocess(text, form, guard, dataset)
        if dataset:
            text = with_dataset(text, dataset)
        future = self._threads.submit(self._run_in_process, text, form)
        try:
            return future.result(self._timeout)
        except FutureTimeout:
            raise QueryTimeout(f"query ran past the time limit of {self._timeout:g} s") from None

    def require_current(self) -> None:
        """The next queries see every write made before this call (the queue's own writes
        too, which they may otherwise see up to four refresh intervals later): the status route
        calls it when it reports an empty backlog, so that "applied" means "queryable"."""
        version = self._store.write_version
        if version is not None:
            self._floor = max(self._floor, version)

    def close(self) -> None:
        self._closed = True
        self._stop.set()
        with self._lock:
            for worker in self._all:
                worker.kill()
            self._all.clear()
        self._threads.shutdown(wait=False, cancel_futures=True)

    # -- embedded store: subprocess ------------------------------------------

    def _run_subprocess(self, text: str, form: str, guard: tuple[str, ...] | None = None,
                        dataset: ProtocolDataset | None = None) -> SparqlAnswer:
        try:
            worker = self._idle.get(timeout=self._timeout)
        except queue.Empty:
            raise QueryTimeout(f"no SPARQL worker free within {self._timeout:g} s") from None
        try:
            if worker is None or worker.proc.poll() is not None:
                worker = self._spawn()
            request: dict[str, object] = {"path": self._directory, "query": text,
                                          "max_rows": self._max_rows}
            version = worker.version if self._view_usable(worker) else self._fresh_version()
            if version is not None:  # the worker keeps its view while it has this version
                request["version"] = version
            if guard is not None:
                request.update(guard=list(guard), form=form)
            if dataset:
                request.update(default_graphs=list(dataset.default_graphs),
                               named_graphs=list(dataset.named_graphs))
            reply = worker.ask(request, timeout=self._timeout)
            worker.seen(version)
        except TimeoutError:
            self._retire(worker)
            worker = None
            raise QueryTimeout(f"query ran past the time limit of {self._timeout:g} s "
                               "(stopped)") from None
        except (OSError, StoreError):
            self._retire(worker)
            worker = None
            raise
        finally:  # a stopped worker is replaced at once, so the next query finds it warm
            self._idle.put(worker if worker is not None or self._closed else self._spawn())
        return self._decode(reply, form)

    def _view_usable(self, worker: _Worker) -> bool:
        """Whether ``worker``'s view may answer: it has seen every write outside the queue
        (:meth:`Store.queued_writes`) and everything before :meth:`require_current`, and the
        queue's writes up to four refresh intervals ago at most (the refresher keeps it at one)."""
        held = worker.version
        if held is None:
            return False
        if held == self._store.write_version:
            return True
        return (held >= self._store.must_see_version and held >= self._floor
                and time.monotonic() - worker.opened_at < self._max_lag_s)

    def _refresh_views(self, every_s: float) -> None:
        """While the store changes, give each idle worker a fresh view every ``every_s``, off
        the queries' path (an open replays the write-ahead log: ~40-85 ms under ingest)."""
        while not self._stop.wait(every_s):
            for _ in range(self._size):
                try:
                    worker = self._idle.get_nowait()
                except queue.Empty:
                    break  # all busy with queries: they refresh their own views
                try:
                    if worker is not None and worker.proc.poll() is None and \
                            worker.version != self._store.write_version:
                        version = self._fresh_version()
                        worker.ask({"path": self._directory, "refresh": True, "version": version,
                                    "max_rows": 0}, timeout=self._timeout)
                        worker.seen(version)
                except (TimeoutError, OSError, StoreError):
                    self._retire(worker)
                    worker = None
                except Exception:  # noqa: BLE001  never let the thread die: queries refresh
                    log.exception("refreshing a SPARQL worker's view failed")
                finally:
                    self._idle.put(worker if worker is not None or self._closed else self._spawn())

    def _fresh_version(self) -> int | None:
        """The store's write version (None: a store that has none), the log flushed first
        when it has grown past :data:`LOG_FLUSH_BYTES` (one flush at a time: a query that
        comes during one waits for it, then finds the log short)."""
        version = self._store.write_version
        if version is None:
            return None
        with self._flush_lock:
            logged = self._store.log_bytes()
            if logged > LOG_FLUSH_MAX_BYTES or logged > LOG_FLUSH_BYTES and \
                    time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
                self._flushed_at = time.monotonic()
                try:
                    self._store.flush_log()
                except StoreError:
                    pass  # the worker replays the log instead: slower, as correct
        return version

    def _spawn(self) -> _Worker:
        worker = _Worker()
        with self._lock:
            self._all.append(worker)
        return worker

    def _retire(self, worker: _Worker | None) -> None:
        if worker is None:
            return
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)

    def _decode(self, reply: dict[str, object], form: str) -> SparqlAnswer:
        error = reply.get("error")
        if error == "query_syntax":
            raise QuerySyntaxError(str(reply["message"]), line=reply.get("line"),  # type: ignore[arg-type]
                                   column=reply.get("column"))  # type: ignore[arg-type]
        if error == "read_only":
            from provkg.errors import ReadOnlyQuery

            raise ReadOnlyQuery(str(reply["message"]))
        if error == "too_many_rows":
            raise TooManyRows(str(reply["message"]))
        if error:
            raise StoreError(str(reply["message"]))
        if reply["kind"] == "select":
            columns = list(reply["columns"])  # type: ignore[call-overload]
            return SparqlAnswer(form, rows=Rows(columns, list(reply["rows"])),  # type: ignore[call-overload]
                                columns=columns)
        if reply["kind"] == "ask":
            return SparqlAnswer(form, boolean=bool(reply["boolean"]))
        return SparqlAnswer(form, ntriples=str(reply["ntriples"]))

    # -- other stores: in process --------------------------------------------

    def _run_in_process(self, text: str, form: str) -> SparqlAnswer:
        if form == "select":
            rows = self._store.select_terms(text, timeout=self._timeout)
            if len(rows.rows) > self._max_rows:
                raise TooManyRows(too_many_rows_message(self._max_rows))
            return SparqlAnswer(form, rows=rows, columns=rows.columns)
        if form == "ask":
            return SparqlAnswer(form, boolean=self._store.ask(text))
        triples = self._store.construct(text)
        if len(triples) > self._max_rows:
            raise TooManyRows(too_many_rows_message(self._max_rows))
        return SparqlAnswer(form, ntriples="".join(f"{s} {p} {o} .\n" for s, p, o in triples))
