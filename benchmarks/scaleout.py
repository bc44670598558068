"""Scale-out: N ``provkg serve`` processes in front of one remote store give the graph one gives.

For each N (1 and 2 by default) and store (a fresh Oxigraph server; Virtuoso with
``--stores oxigraph,virtuoso``): start the store, then N ``provkg serve --store URL``
processes, each with its own queue folder, and register the spec with each. Capture clients
(one process each) post the same pre-built events, batches of 50 gzip'd as ``HttpSink`` sends
them, as fast as they are answered, client k to server k mod N (a run's events go to one server,
as a load balancer hashing the run id routes them). The clock runs from the first post to the
moment every server's queue is drained into the store. The graph is then read back from the
store and compared with the one-server graph: same triples (deterministic IRIs), counted and
hashed.

    .venv/bin/python benchmarks/scaleout.py [--servers 1,2] [--clients 4] [--epochs 40]

Results: ``benchmarks/results/scaleout.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psutil

from provkg.testing import OxigraphServer, VirtuosoServer, free_port

SPEC = """\
workflow: scaleout-training
phase: learning
transformations:
  - name: training
    kind: training
    used: [{name: learning_rate, role: hyperparameter}]
    generated: [{name: loss, role: evaluation_measure}]
  - name: epoch
    kind: section
    of: training
    generated: [{name: loss, role: evaluation_measure}]
  - name: batch
    kind: section
    of: epoch
    generated: [{name: loss, role: evaluation_measure}]
"""
T0 = 1_760_000_000.0  # fixed times: the graphs of two runs of the benchmark are comparable


def run_events(client: int, epochs: int, batches: int) -> list[dict[str, Any]]:
    """One run of one training: epochs of batches, every time fixed."""
    run = f"scaleout-{client}"
    tr = f"{run}/training"
    t = T0 + client
    ev: list[dict[str, Any]] = [
        {"type": "workflow", "event": "begin", "id": run, "time": t, "workflow": "scaleout-training"},
        {"type": "task", "event": "begin", "id": tr, "workflow_id": run, "transformation": "training",
         "time": t, "used": [{"name": "learning_rate", "value": 0.001 * (client + 1)}]}]
    for e in range(epochs):
        ep = f"{tr}/epoch-{e}"
        ev.append({"type": "task", "event": "begin", "id": ep, "workflow_id": run,
                   "transformation": "epoch", "parent": tr, "index": e, "time": t})
        for b in range(batches):
            task = {"type": "task", "id": f"{ep}/batch-{b}", "workflow_id": run,
                    "transformation": "batch", "parent": ep, "index": b}
            ev.append({**task, "event": "begin", "time": t})
            t += 0.01 + 0.001 * (b % 7)
            ev.append({**task, "event": "end", "time": t, "status": "finished",
                       "generated": [{"name": "loss", "value": round(1.0 / (1 + e + b), 6)}]})
        ev.append({"type": "task", "event": "end", "id": ep, "workflow_id": run, "transformation": "epoch",
                   "parent": tr, "index": e, "time": t, "status": "finished",
                   "generated": [{"name": "loss", "value": round(1.0 / (1 + e), 6)}]})
    ev.append({"type": "task", "event": "end", "id": tr, "workflow_id": run, "transformation": "training",
               "time": t, "status": "finished", "generated": [{"name": "loss", "value": round(1.0 / epochs, 6)}]})
    ev.append({"type": "workflow", "event": "end", "id": run, "time": t, "status": "finished",
               "workflow": "scaleout-training"})
    return ev


def _client(url: str, client: int, epochs: int, batches: int, size: int, ready: Any, go: Any,
            out: Any) -> None:
    from provkg.capture.http_sink import encode_batch

    events = run_events(client, epochs, batches)
    bodies = [encode_batch(events[i:i + size], "gzip") for i in range(0, len(events), size)]
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    ready.put(client)
    while go.value == 0.0:
        time.sleep(0.002)
    errors = 0
    for body in bodies:
        while True:
            conn.request("POST", "/v1/events", body=body, headers=headers)
            response = conn.getresponse()
            answer = response.read()
            if response.status == 202:
                break
            if response.status < 500:  # the batch is refused: a bug here, not load
                raise SystemExit(f"client {client}: HTTP {response.status}: {answer[:300]!r}")
            errors += 1
            time.sleep(0.05)
    conn.close()
    out.put({"client": client, "events": len(events), "errors": errors, "posted_at": time.monotonic()})


def _serve(store_url: str, port: int, queue: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PROVKG_QUEUE_DIR": str(queue)}
    return subprocess.Popen([sys.executable, "-m", "provkg.cli", "serve", "--store", store_url,
                             "--port", str(port)], env=env, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _wait_live(http: httpx.Client, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            if http.get("/health/live").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"provkg serve did not start; see {log}")
        time.sleep(0.1)


def _graph_digest(store_url: str) -> tuple[int, str]:
    """Distinct triples of the store and a hash of them sorted (N-Triples lines)."""
    from provkg.store import open_store

    store = open_store(store_url)
    try:
        rows = store.select_terms("SELECT ?s ?p ?o WHERE { ?s ?p ?o }").rows
    finally:
        store.close()
    lines = sorted({"\t".join(json.dumps(t, sort_keys=True) for t in row) for row in rows})
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def measure(kind: str, servers: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    folder = work / f"{kind}-{servers}"
    with ExitStack() as stack:
        store_server = stack.enter_context(
            OxigraphServer(folder / "oxigraph") if kind == "oxigraph" else VirtuosoServer(folder / "virtuoso"))
        store_url = store_server.store_url
        procs, clients_http = [], []
        for k in range(servers):
            port = free_port()
            log = folder / f"serve-{k}.log"
            proc = _serve(store_url, port, folder / f"queue-{k}", log)
            procs.append(proc)
            stack.callback(lambda p=proc: (os.killpg(p.pid, signal.SIGTERM), p.wait(60)))
            http = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120))
            _wait_live(http, proc, log)
            assert http.post("/v1/specs", content=SPEC, headers={"Content-Type": "application/yaml"}
                             ).status_code in (200, 201)
            clients_http.append(http)
        ready, results, go = mp.Queue(), mp.Queue(), mp.Value("d", 0.0)
        clients = [mp.Process(target=_client, args=(str(clients_http[c % servers].base_url).rstrip("/"), c,
                                                    args.epochs, args.batches, 50, ready, go, results))
                   for c in range(args.clients)]
        for p in clients:
            p.start()
        for _ in clients:
            ready.get(timeout=300)
        cpu_before = [sum(psutil.Process(p.pid).cpu_times()[:2]) for p in procs]
        started = time.monotonic()
        go.value = started
        posted = [results.get(timeout=3600) for _ in clients]
        for p in clients:
            p.join()
        accepted_s = max(r["posted_at"] for r in posted) - started
        events = sum(r["events"] for r in posted)
        while any(h.get("/health/ready").json()["queue"]["backlog_events"] > 0 for h in clients_http):
            time.sleep(0.05)
        stored_s = time.monotonic() - started
        cpu = [sum(psutil.Process(p.pid).cpu_times()[:2]) - b for p, b in zip(procs, cpu_before)]
        triples, digest = _graph_digest(store_url)
    return {"store": kind, "servers": servers, "clients": args.clients, "events": events,
            "client_retries": sum(r["errors"] for r in posted),
            "accepted_s": round(accepted_s, 2), "stored_s": round(stored_s, 2),
            "accepted_events_per_s": round(events / accepted_s), "stored_events_per_s": round(events / stored_s),
            "serve_cpu_s": [round(c, 1) for c in cpu], "triples": triples, "graph_sha256_16": digest}


def write(results: list[dict[str, Any]], args: argparse.Namespace, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaleout.json").write_text(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                   "cpus": os.cpu_count(), "results": results}, indent=2) + "\n")
    rows = []
    for r in results:
        one = next(x for x in results if x["store"] == r["store"] and x["servers"] == 1)
        same = "yes" if (r["triples"], r["graph_sha256_16"]) == (one["triples"], one["graph_sha256_16"]) else "**no**"
        rows.append(f"| {r['store']} | {r['servers']} | {r['events']:,} | {r['accepted_events_per_s']:,} | "
                    f"{r['stored_events_per_s']:,} | {' + '.join(map(str, r['serve_cpu_s']))} | {r['triples']:,} | "
                    f"`{r['graph_sha256_16']}` | {same} |")
    (out / "scaleout.md").write_text(f"""# Scale-out (`benchmarks/scaleout.py`)

N `provkg serve` processes (each its own queue folder) in front of one fresh store server;
{args.clients} capture clients post one run each ({args.epochs} epochs x {args.batches} batches, fixed
times), batches of 50 events as fast as answered, client k to server k mod N. *Stored*: from the
first post until every server's queue is drained into the store. The graph is read back from
the store (every triple, sorted, hashed) and compared with the one-server graph.
{os.cpu_count()} CPUs: the store server, the N services and the clients share them.

| store | servers | events | accepted ev/s | stored ev/s | serve CPU-s | triples | graph hash | same graph as 1 server |
|---|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", default="1,2")
    parser.add_argument("--stores", default="oxigraph")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="provkg-bench-scaleout-") as tmp:
        for kind in args.stores.split(","):
            for n in (int(x) for x in args.servers.split(",")):
                r = measure(kind, n, args, Path(tmp))
                print(json.dumps(r), flush=True)
                results.append(r)
    write(results, args, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
