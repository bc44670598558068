"""One store in a child process: open (and optionally load) it, then answer timed SELECTs.

Embedded stores cannot be interrupted from Python (a pyoxigraph or rdflib query runs to
its end), so each one lives in its own process: a query past its time limit is ended by
killing that process, and its memory goes back to the machine when the store is done.
The query time is measured in the child around ``Store.select`` (request to Python rows,
as the paper measured in the client); result rows travel back to the parent untimed.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from provkg.errors import ProvkgError, QueryTimeout, StoreError
from provkg.store import Rows

__all__ = ["LoadReport", "StoreWorker", "peak_rss_bytes"]


@dataclass(frozen=True)
class LoadReport:
    seconds: float     # load_file of every file (0 when nothing was loaded)
    triples: int       # store.count() after loading


def peak_rss_bytes(pid: int) -> int | None:
    """Peak resident set size of a live process (Linux ``VmHWM``), or None if unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _serve(conn: Connection, url: str, files: list[str]) -> None:
    from provkg.store import open_store

    try:
        store = open_store(url)
        start = time.perf_counter()
        for f in files:
            store.load_file(f)
        seconds = time.perf_counter() - start if files else 0.0
        conn.send(("ready", seconds, store.count()))
    except ProvkgError as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        text = conn.recv()
        if text is None:
            break
        start = time.perf_counter()
        try:
            rows = store.select(text, hide_system_graphs=False)  # canned queries only
        except ProvkgError as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("ok", time.perf_counter() - start, rows.columns, rows.rows))
    store.close()
    conn.send(("closed",))


class StoreWorker:
    """A store (by ``provkg.store.open_store`` URL) served from a child process.

    >>> with StoreWorker("memory:") as w:  # doctest: +SKIP
    ...     seconds, rows = w.select("SELECT * WHERE { ?s ?p ?o }")
    """

    def __init__(self, url: str, *, files: Sequence[str | Path] = (), label: str = ""):
        self.url = url
        self.files = [str(f) for f in files]
        self.label = label or url
        self._proc: multiprocessing.process.BaseProcess | None = None
        #: the parent's end of the pipe to the child; set by ``start`` with ``_proc``
        self._conn: Connection | None = None
        self.load: LoadReport | None = None
        self.peak_rss: int | None = None

    def start(self, *, timeout: float = 1800.0) -> LoadReport:
        """Spawn the child, open the store and load its files.

        Raises:
            StoreError: the child failed or did not get ready within ``timeout`` seconds.
        """
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, self.url, self.files),
                                 name=f"provkg-bench-{self.label}", daemon=True)
        self._proc.start()
        self._conn = parent
        msg = self._receive(timeout, what="open and load")
        if msg[0] != "ready":
            self.kill()
            raise StoreError(f"{self.label}: {msg[1]}")
        self.load = LoadReport(seconds=msg[1], triples=msg[2])
        return self.load

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def select(self, text: str, *, timeout: float | None = None) -> tuple[float, Rows]:
        """Run a SELECT; returns (seconds measured in the child, rows).

        Raises:
            QueryTimeout: no answer within ``timeout`` (the child is killed; ``start`` again
                to go on).
            StoreError: the store refused the query.
        """
        if not self.alive:
            raise StoreError(f"{self.label}: the store's process is not running")
        self._pipe().send(text)
        msg = self._receive(timeout, what="answer")
        if msg[0] == "error":
            raise StoreError(f"{self.label}: {msg[1]}")
        self._note_rss()
        return msg[1], Rows(list(msg[2]), [list(r) for r in msg[3]])

    def _pipe(self) -> Connection:
        """The pipe to the child (``start`` opens it before anything is sent or received)."""
        assert self._conn is not None, "StoreWorker.start() first"
        return self._conn

    def _receive(self, timeout: float | None, *, what: str) -> tuple[Any, ...]:
        conn = self._pipe()
        if not conn.poll(timeout):
            self.kill()
            raise QueryTimeout(f"{self.label}: no {what} within {timeout:.0f} s (process ended)")
        try:
            return conn.recv()
        except EOFError:
            self.kill()
            raise StoreError(f"{self.label}: the store's process died during {what}") from None

    def _note_rss(self) -> None:
        if self.pid is not None:
            rss = peak_rss_bytes(self.pid)
            if rss is not None:
                self.peak_rss = max(self.peak_rss or 0, rss)

    def kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._note_rss()
            self._proc.kill()
            self._proc.join(10)

    def close(self) -> None:
        """Close the store in the child and end it (killed if it does not end in 60 s)."""
        proc = self._proc
        if proc is not None and proc.is_alive():  # (self.alive)
            self._note_rss()
            try:
                self._pipe().send(None)
                self._pipe().poll(60)
            except (OSError, EOFError):
                pass
            proc.join(60)
        self.kill()

    def __enter__(self) -> StoreWorker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
