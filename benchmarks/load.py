"""Load rate (triples/s) and peak memory of every store backend, measured side by side.

Generates provenance-like N-Triples (workflow runs, tasks, epochs, typed values with
doubles and timestamps, minted with provkg.term like the mapper's output), then loads
them into each backend:

- ``file``: ``Store.load_file`` of the .nt file (each backend's bulk path)
- ``add``: ``Store.add`` of the same triples as N-Triples-term tuples (the mapper's path)
- ``bulk_load``: Virtuoso's own bulk loader (``ld_dir`` + ``rdf_loader_run``)

Each measurement runs in a fresh child process, so its peak RSS is its own; for the
servers the server process's peak RSS is sampled as well. Run::

    .venv/bin/python benchmarks/load.py                 # 1M triples (rdflib: 200k)
    .venv/bin/python benchmarks/load.py --triples 100000 --quick --out /tmp/load   # a quick look

and it writes ``load.json`` and ``load.md`` to ``--out`` (default ``benchmarks/results``, the
committed figures); its data and stores go to a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import psutil

from provkg.store import open_store
from provkg.term import Triple, datetime_literal, iri, literal, mint_iri
from provkg.testing import OxigraphServer, VirtuosoServer
from provkg.vocab import PROV, PROVLAKE, PROVML, RDF, RDFS

RESULTS = Path(__file__).resolve().parent / "results"


# -- data ------------------------------------------------------------------------------

def provenance_triples(n: int) -> list[Triple]:
    """About ``n`` triples shaped like a training lifecycle: per task 10 triples, per value 5."""
    out: list[Triple] = []
    a, label = iri(RDF.type), iri(RDFS.label)
    started, ended = iri(PROV.term("startedAtTime")), iri(PROV.term("endedAtTime"))
    used, generated = iri(PROV.term("used")), iri(PROV.term("wasGeneratedBy"))
    informed, value_p = iri(PROV.term("wasInformedBy")), iri(PROV.term("value"))
    t0 = 1_700_000_000.0
    run = iri(mint_iri("run", "bench-run"))
    i = 0
    while len(out) < n:
        task = iri(mint_iri("task", f"bench-run/epoch-{i}"))
        spec = iri(mint_iri("spec", "training", "epoch"))
        out += [
            (task, a, iri(PROVML.term("TrainingSectionExecution"))),
            (task, a, iri(PROVLAKE.term("DataTransformationExecution"))),
            (task, iri(PROV.term("wasAssociatedWith")), iri(mint_iri("agent", "bench"))),
            (task, informed, run),
            (task, iri(PROVLAKE.term("isPartOf")), spec),
            (task, started, datetime_literal(t0 + i)),
            (task, ended, datetime_literal(t0 + i + 0.731)),
            (task, label, literal(f"epoch {i}")),
        ]
        for name, v in (("loss", 1.0 / (i + 3)), ("accuracy", 1 - 1.0 / (i + 7)), ("lr", 1e-3 * 0.99**i)):
            value = iri(mint_iri("value", f"bench-run/epoch-{i}/{name}"))
            out += [
                (value, a, iri(PROVML.term("EvaluationMeasureValue")) if name != "lr"
                 else iri(PROVML.term("LearningHyperparameterValue"))),
                (value, generated, task) if name != "lr" else (task, used, value),
                (value, value_p, literal(v)),
                (value, label, literal(name)),
                (value, iri(PROV.term("wasAttributedTo")), iri(mint_iri("agent", "bench"))),
            ]
        i += 1
    return out[:n]


def write_ntriples(triples: list[Triple], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.writelines(f"{s} {p} {o} .\n" for s, p, o in triples)


# -- measuring -------------------------------------------------------------------------

def child(args: argparse.Namespace) -> None:
    """Runs in a fresh process: one load, prints a JSON line."""
    data = Path(args.file)
    store = open_store(args.store_url)
    if args.method == "add":
        triples = [tuple(line[:-2].split(" ", 2)) for line in data.read_text("utf-8").splitlines()]
        t = time.perf_counter()
        store.add(triples)  # type: ignore[arg-type]
        seconds = time.perf_counter() - t
    else:
        t = time.perf_counter()
        store.load_file(data)
        seconds = time.perf_counter() - t
    count = store.count()
    store.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "count": count, "client_peak_mib": peak_kib / 1024}))


class PeakRss:
    """Samples a process's RSS in a thread; ``.peak_mib`` when stopped."""

    def __init__(self, pid: int):
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.Error:
                return
            self._stop.wait(0.1)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return self.peak / 2**20


def run_child(store_url: str, method: str, data: Path, n: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", "--store-url", store_url,
                           "--method", method, "--file", str(data)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{store_url} {method} failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["count"] != n:
        raise RuntimeError(f"{store_url} {method}: {result['count']} triples stored, expected {n}")
    return result


def measure(args: argparse.Namespace) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="provkg-bench-load-") as tmp:  # data and stores
        return _measure(args, Path(tmp))  # (it kept hundreds of MB after every run)


def _measure(args: argparse.Namespace, work: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    sizes = {"main": args.triples, "rdflib": args.rdflib_triples}
    files: dict[int, Path] = {}
    for size in set(sizes.values()):
        t = time.perf_counter()
        path = work / f"data-{size}.nt"
        write_ntriples(provenance_triples(size), path)
        files[size] = path
        print(f"generated {size:,} triples in {time.perf_counter() - t:.1f} s -> {path}", file=sys.stderr)

    def record(backend: str, method: str, n: int, result: dict[str, float],
               server_peak_mib: float | None = None) -> None:
        row = {"backend": backend, "method": method, "triples": n,
               "seconds": round(result["seconds"], 2),
               "triples_per_s": round(n / result["seconds"]),
               "client_peak_mib": round(result["client_peak_mib"]),
               "server_peak_mib": round(server_peak_mib) if server_peak_mib else None}
        rows.append(row)
        print(f"{backend:<16} {method:<9} {n:>9,} {row['triples_per_s']:>10,}/s "
              f"client {row['client_peak_mib']:>6} MiB server {row['server_peak_mib']} MiB",
              file=sys.stderr)

    n = sizes["main"]
    for method in ("file", "add"):
        record("oxigraph (disk)", method, n, run_child(f"oxigraph:{work / f'oxi-{method}'}", method, files[n], n))
        record("memory", method, n, run_child("memory:", method, files[n], n))
    r = sizes["rdflib"]
    for method in ("file", "add"):
        record("rdflib", method, r, run_child("rdflib:", method, files[r], r))

    for method in ("file", "add"):
        with OxigraphServer(work / f"oxigraph-server-{method}") as server, PeakRss(server.pid) as peak:
            result = run_child(server.store_url, method, files[n], n)
        record("oxigraph server", method, n, result, peak.peak_mib)

    methods = ["file", "bulk_load"] if args.quick else ["file", "add", "bulk_load"]
    for method in methods:
        with VirtuosoServer(work / f"virtuoso-{method}", buffers=args.virtuoso_buffers,
                            bulk_dirs=(work,)) as server, PeakRss(server.pid) as peak:
            if method == "bulk_load":
                t = time.perf_counter()
                server.bulk_load(files[n], graph="urn:x-provkg:default")
                seconds = time.perf_counter() - t
                with open_store(server.store_url) as store:
                    count = store.count()
                if count != n:
                    raise RuntimeError(f"virtuoso bulk_load stored {count}, expected {n}")
                result = {"seconds": seconds, "count": count, "client_peak_mib": 0.0}
            else:
                result = run_child(server.store_url, method, files[n], n)
        record("virtuoso", method, n, result, peak.peak_mib)
    return rows


def machine() -> dict[str, object]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average_at_start": round(os.getloadavg()[0], 1),
        "pyoxigraph": version("pyoxigraph"),
        "oxigraph_server": version("oxigraph"),
        "rdflib": version("rdflib"),
        "sparqlwrapper": version("SPARQLWrapper"),
        "virtuoso": _virtuoso_version(),
    }


def _virtuoso_version() -> str:
    try:
        out = subprocess.run(["virtuoso-t", "-?"], capture_output=True, text=True, check=False)
        return next((line.strip() for line in (out.stdout + out.stderr).splitlines()
                     if line.startswith("Version")), "unknown")
    except OSError:
        return "not installed"


def write_results(rows: list[dict[str, object]], info: dict[str, object],
                  out: Path = RESULTS) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "load.json").write_text(json.dumps({"machine": info, "results": rows}, indent=2) + "\n")
    lines = [
        "# Load rate per store backend",
        "",
        f"Measured {info['date']} on {info['platform']}, {info['cpus']} CPUs, "
        f"{info['memory_gib']} GiB, load average {info.get('load_average_at_start', '?')} at the "
        "start (the machine is shared: compare rows of one run, not runs).",
        f"pyoxigraph {info['pyoxigraph']}, oxigraph server {info['oxigraph_server']}, "
        f"rdflib {info['rdflib']}, SPARQLWrapper {info['sparqlwrapper']}, {info['virtuoso']}.",
        "",
        "`file`: `Store.load_file` of an N-Triples file; `add`: `Store.add` of N-Triples-term "
        "tuples (the mapper's path); `bulk_load`: Virtuoso's `ld_dir` + `rdf_loader_run`. "
        "Client peak RSS is the loading process (it holds the parsed tuples for `add`); "
        "server peak RSS is sampled every 0.1 s. rdflib is measured on fewer triples: it "
        "loads an order of magnitude slower and holds everything in Python objects.",
        "",
        "| backend | method | triples | seconds | triples/s | client peak MiB | server peak MiB |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['method']} | {r['triples']:,} | {r['seconds']} | "
                     f"{r['triples_per_s']:,} | {r['client_peak_mib']} | {r['server_peak_mib'] or ''} |")
    (out / "load.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=1_000_000)
    parser.add_argument("--rdflib-triples", type=int, default=200_000)
    parser.add_argument("--virtuoso-buffers", type=int, default=340_000,
                        help="Virtuoso NumberOfBuffers (8 KiB pages)")
    parser.add_argument("--quick", action="store_true", help="skip the slowest measurement")
    parser.add_argument("--no-write", action="store_true", help="print only; keep results/ as is")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="where load.json and load.md go (default: the committed results)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--store-url", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    info = machine()
    rows = measure(args)
    print(f"\n{'backend':<16} {'method':<9} {'triples':>9} {'triples/s':>10} {'client MiB':>10} {'server MiB':>10}")
    for r in rows:
        print(f"{r['backend']:<16} {r['method']:<9} {r['triples']:>9,} {r['triples_per_s']:>10,} "
              f"{r['client_peak_mib']:>10} {r['server_peak_mib'] or '':>10}")
    if not args.no_write:
        write_results(rows, info, args.out)


if __name__ == "__main__":
    main()
