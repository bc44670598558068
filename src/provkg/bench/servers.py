"""The benchmark's store set-ups: how each store gets the two datasets, by its fast path.

=================  ==================================================  ======================
name               load (timed)                                        queried through
=================  ==================================================  ======================
oxigraph           pyoxigraph ``bulk_load`` (part of the pipeline)     ``oxigraph:DIR``
memory             ``Store.load_file`` (pyoxigraph ``bulk_load``)      ``memory:``
rdflib             ``Store.load_file`` (rdflib's N-Triples parser)     ``rdflib:``
oxigraph-server    ``oxigraph load --location DIR`` (+ ``optimize``)   SPARQL over HTTP
virtuoso           ``ld_dir`` + ``rdf_loader_run`` (the bulk loader)   SPARQL over HTTP
=================  ==================================================  ======================

A set-up is a context manager giving one started :class:`~provkg.bench.worker.StoreWorker`
per schema; servers listen on 127.0.0.1 and are stopped on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provkg.bench.worker import StoreWorker, peak_rss_bytes
from provkg.errors import StoreError

if TYPE_CHECKING:
    from provkg.testing import VirtuosoServer

__all__ = ["STORES", "StoreRun", "open_stores"]

STORES = ("oxigraph", "memory", "rdflib", "oxigraph-server", "virtuoso")


@dataclass
class StoreRun:
    """One store holding both datasets, ready to answer queries."""

    name: str
    workers: dict[str, StoreWorker]                 # schema -> worker
    load_seconds: dict[str, float]                  # schema -> seconds to load
    load_note: str = ""
    server_pids: dict[str, int] = field(default_factory=dict)
    server_load_rss: dict[str, int] = field(default_factory=dict)
    servers: dict[str, object] = field(default_factory=dict)

    def restart_server(self, schema: str) -> None:
        """Stop and start ``schema``'s server on its database (a no-op for embedded stores),
        keeping the peak RSS seen so far."""
        server = self.servers.get(schema)
        if server is None:
            return
        self.server_load_rss[schema] = max(self.server_load_rss.get(schema, 0),
                                           self.peak_rss(schema).get("server") or 0)
        server.stop()  # type: ignore[attr-defined]
        server.start()  # type: ignore[attr-defined]
        pid = _pid_of(server)
        if pid is not None:
            self.server_pids[schema] = pid

    def peak_rss(self, schema: str) -> dict[str, int | None]:
        """Peak RSS in bytes of the client (embedded store) and server processes."""
        out: dict[str, int | None] = {"client": self.workers[schema].peak_rss}
        pid = self.server_pids.get(schema)
        if pid is not None:
            rss = peak_rss_bytes(pid)
            out["server"] = max(rss or 0, self.server_load_rss.get(schema, 0)) or None
        return out


def unavailable(name: str) -> tuple[str, str] | None:
    """Why store ``name`` cannot start on this machine and the one command that adds it, or
    None when it can (so a run measures the stores it has, and says of the others)."""
    if name in ("oxigraph-server", "explain") and _find_oxigraph() is None:
        return ("the oxigraph server program is not installed (the `oxigraph` package)",
                "pip install 'oxigraph>=0.5,<0.6'")
    if name == "virtuoso" and not all(shutil.which(b) or shutil.which(b, path="/usr/sbin:/usr/bin")
                                      for b in ("virtuoso-t", "isql-vt")):
        return ("Virtuoso is not installed", "sudo apt-get install virtuoso-opensource")
    return None


def _find_oxigraph() -> str | None:
    candidate = Path(sys.executable).with_name("oxigraph")
    return str(candidate) if candidate.exists() else shutil.which("oxigraph")


def _oxigraph_binary() -> str:
    found = _find_oxigraph()
    if not found:
        raise StoreError("the oxigraph binary is missing: pip install 'oxigraph>=0.5,<0.6'")
    return found


def run_measured(argv: list[str]) -> tuple[float, int]:
    """Run a command; returns (seconds, its peak RSS in bytes). Raises StoreError on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise StoreError(f"{' '.join(argv[:3])} failed ({proc.returncode}): {err[-2000:]}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024


def _start_workers(run: StoreRun, urls: dict[str, str], files: dict[str, list[Path]]) -> None:
    for schema, url in urls.items():
        w = StoreWorker(url, files=files.get(schema, ()), label=f"{run.name}/{schema}")
        run.workers[schema] = w
        report = w.start()
        if files.get(schema):
            run.load_seconds[schema] = report.seconds


@contextlib.contextmanager
def open_stores(name: str, datasets: dict[str, Path], work: Path, *,
                oxigraph_dirs: dict[str, Path] | None = None,
                pipeline_load: dict[str, float] | None = None) -> Iterator[StoreRun]:
    """Start store ``name`` with each schema's N-Triples file loaded (see the module table)."""
    run = StoreRun(name=name, workers={}, load_seconds={})
    work.mkdir(parents=True, exist_ok=True)
    try:
        with contextlib.ExitStack() as stack:
            if name == "oxigraph":
                if not oxigraph_dirs:
                    raise StoreError("oxigraph: the pipeline did not load the on-disk stores")
                run.load_seconds.update(pipeline_load or {})
                run.load_note = "pyoxigraph bulk_load, then optimize (compaction), inside the pipeline"
                _start_workers(run, {s: f"oxigraph:{d}" for s, d in oxigraph_dirs.items()}, {})
            elif name in ("memory", "rdflib"):
                run.load_note = "Store.load_file (" + ("pyoxigraph bulk_load" if name == "memory"
                                                       else "rdflib N-Triples parser") + ")"
                _start_workers(run, {s: f"{name}:" for s in datasets},
                               {s: [p] for s, p in datasets.items()})
            elif name == "oxigraph-server":
                _oxigraph_server(run, datasets, work, stack)
            elif name == "virtuoso":
                _virtuoso(run, datasets, work, stack)
            else:
                raise StoreError(f"unknown store {name!r}: expected one of {', '.join(STORES)}")
            yield run
    finally:
        for w in run.workers.values():
            w.close()


def _oxigraph_server(run: StoreRun, datasets: dict[str, Path], work: Path,
                     stack: contextlib.ExitStack) -> None:
    from provkg.testing import OxigraphServer

    binary = _oxigraph_binary()
    urls = {}
    for schema, path in datasets.items():
        directory = work / f"oxigraph-server-{schema}"
        if directory.exists():
            shutil.rmtree(directory)
        load_s, load_rss = run_measured([binary, "load", "--location", str(directory),
                                         "--file", str(path)])
        opt_s, opt_rss = run_measured([binary, "optimize", "--location", str(directory)])
        run.load_seconds[schema] = load_s + opt_s
        run.server_load_rss[schema] = max(load_rss, opt_rss)
        run.load_note = "oxigraph load --location DIR, then oxigraph optimize (both timed)"
        server = stack.enter_context(OxigraphServer(directory))
        run.servers[schema] = server
        pid = _pid_of(server)
        if pid is not None:
            run.server_pids[schema] = pid
        urls[schema] = server.store_url
    _start_workers(run, urls, {})


def _virtuoso(run: StoreRun, datasets: dict[str, Path], work: Path,
              stack: contextlib.ExitStack) -> None:
    from provkg.testing import VirtuosoServer

    urls = {}
    for schema, path in datasets.items():
        directory = work / f"virtuoso-{schema}"
        if directory.exists():
            shutil.rmtree(directory)
        server = stack.enter_context(_virtuoso_server(VirtuosoServer, directory, path))
        run.servers[schema] = server
        start = time.perf_counter()
        server.bulk_load(path, graph=f"https://w3id.org/provkg/bench/{schema}")
        run.load_seconds[schema] = time.perf_counter() - start
        run.load_note = "ld_dir + rdf_loader_run + checkpoint through isql (timed)"
        pid = _pid_of(server)
        if pid is not None:
            run.server_pids[schema] = pid
        urls[schema] = server.store_url
    _start_workers(run, urls, {})


def _virtuoso_server(cls: type[VirtuosoServer], directory: Path, data: Path) -> VirtuosoServer:
    """A VirtuosoServer that may bulk-load ``data``, its buffers sized for the file (5.5 GB
    from about two million triples up, as RECIPES advises for ten million); the launcher
    raises ResultSetMaxRows far above any answer here, and the benchmark compares row
    counts across stores anyway. ``query_timeout=0`` turns off both MaxQueryExecutionTime
    (no partial "anytime" answers) and MaxQueryCostEstimationTime: with a limit, Virtuoso
    refuses Q1 and Q7 outright because its cost estimate for the ``*`` property path
    overflows ("estimated execution time 1728053248 (sec) exceeds the limit"); the
    benchmark's own client-side timeout bounds every run instead."""
    buffers = 680_000 if data.stat().st_size > 250_000_000 else 100_000
    return cls(directory, bulk_dirs=(data.parent,), buffers=buffers, query_timeout=0)


def _pid_of(server: object) -> int | None:
    pid = getattr(server, "pid", None)
    return pid if isinstance(pid, int) else None
