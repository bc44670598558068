"""Service benchmark: 8 capture clients posting batches of 50 events to ``provkg serve`` for 60 s.

Measured side by side in one run, against a real ``provkg serve`` subprocess on an embedded
Oxigraph store (fsync before every 202, as in production):

- accepted events/s and the clients' p50 / p99 ingest latency (bodies encoded as the capture
  library's ``HttpSink`` encodes them, gzip, built before the clock starts so the load
  generator is not the bottleneck, posted over one keep-alive ``http.client`` connection per
  client process);
- persistence latency: from posting a probe event to the moment ``/v1/sparql`` sees it
  (the paper reports < 5 s);
- canned-query latency (``GET /v1/queries/d3``) while ingest runs;
- the backlog left when the clients stop, and the time to drain it.

Targets: >= 20,000 events/s accepted with p99 < 50 ms, persistence latency p99 < 2 s.
The load average before and after and the CPU seconds of server and clients are recorded:
the machine is shared.

Run: ``.venv/bin/python benchmarks/service.py [--duration 60] [--clients 8]``; results go to
``benchmarks/results/service.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from provkg.term import mint_iri
from provkg.vocab import PROV

SPEC = """\
workflow: bench-training
phase: learning
transformations:
  - name: training
    kind: training
    used: [{name: learning_rate, role: hyperparameter}]
  - name: batch
    kind: section
    of: training
    generated: [{name: loss, role: evaluation_measure}]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _batch(client: int, n: int, size: int) -> list[dict[str, object]]:
    """One training's slice of batch sections: begin/end pairs with a loss."""
    run = f"bench-{client}"
    parent = f"{run}/training"
    events: list[dict[str, object]] = []
    for k in range(size // 2):
        task = {"type": "task", "id": f"{parent}/b{n}-{k}", "workflow_id": run,
                "transformation": "batch", "parent": parent, "index": n * size + k}
        t = time.time()
        events.append({**task, "event": "begin", "time": t})
        events.append({**task, "event": "end", "time": t + 0.01, "status": "finished",
                       "generated": [{"name": "loss", "value": 1.0 / (1 + n + k)}]})
    return events


def _payloads(client: int, size: int, count: int) -> list[bytes]:
    """``count`` distinct gzip bodies (as ``HttpSink`` encodes them), built before the clock
    starts so the load generator spends its time posting, not building events."""
    from provkg.capture.http_sink import encode_batch

    return [encode_batch(_batch(client, n, size), "gzip") for n in range(count)]


def _client(url: str, client: int, size: int, count: int, duration: float, ready: mp.Queue,
            go: Any, out: mp.Queue, rate: float = 0.0) -> None:
    """One capture client: posts pre-built batches on one keep-alive connection (as
    ``HttpSink`` does: ``http.client``, gzip) for ``duration`` seconds from the moment the
    parent sets ``go`` (a shared monotonic start time), or until its batches run out.
    ``rate`` > 0: this client's events per second, batches sent on a fixed schedule (an
    open-loop load: a slow answer does not slow the schedule, it is counted in the latency
    from the batch's planned send time); 0: as fast as the server answers."""
    from provkg.capture.http_sink import encode_batch

    run = f"bench-{client}"
    first = encode_batch([{"type": "workflow", "event": "begin", "id": run, "time": time.time(),
                           "workflow": "bench-training"},
                          {"type": "task", "event": "begin", "id": f"{run}/training",
                           "workflow_id": run, "transformation": "training", "time": time.time(),
                           "used": [{"name": "learning_rate", "value": 0.001}]}], "gzip")
    bodies = _payloads(client, size, count)
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}

    def post(body: bytes) -> bool:
        conn.request("POST", "/v1/events", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status == 202

    post(first)
    ready.put(client)
    while go.value == 0.0:
        time.sleep(0.002)
    start_at = go.value
    stop_at = start_at + duration
    while time.monotonic() < start_at:
        time.sleep(0.001)
    cpu = os.times()
    latencies: list[float] = []
    sent = errors = 0
    interval = size / rate if rate > 0 else 0.0
    for n, body in enumerate(bodies):
        if time.monotonic() >= stop_at:
            break
        if interval:
            planned = start_at + n * interval
            wait = planned - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            started = time.perf_counter() - max(0.0, -wait)  # late: from the planned time
        else:
            started = time.perf_counter()
        try:
            ok = post(body)
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
        if ok:
            latencies.append(time.perf_counter() - started)
            sent += size
        else:
            errors += 1
    ended = time.monotonic()
    exhausted = ended < stop_at
    cpu_s = sum(os.times()[:2]) - sum(cpu[:2])
    conn.close()
    out.put({"client": client, "events": sent, "errors": errors, "latencies": latencies,
             "cpu_s": cpu_s, "exhausted": exhausted, "active_s": ended - start_at})


def _probe_persistence(http: httpx.Client, stop: threading.Event, out: list[float],
                       missed: list[str]) -> None:
    """Post one probe task, then poll read-only SPARQL until it is visible."""
    i = 0
    while not stop.is_set():
        task_id = f"probe-run/probe-{i}"
        batch = {"format": "provkg.events/1", "events": [
            {"type": "workflow", "event": "begin", "id": "probe-run", "time": time.time(),
             "workflow": "bench-training"},
            {"type": "task", "event": "end", "id": task_id, "workflow_id": "probe-run",
             "transformation": "training", "time": time.time(), "status": "finished"}]}
        ask = f"ASK {{ <{mint_iri('task', task_id)}> <{PROV.endedAtTime}> ?t }}"
        started = time.perf_counter()
        http.post("/v1/events", json=batch)
        while True:
            if http.get("/v1/sparql", params={"query": ask}).json().get("boolean"):
                out.append(time.perf_counter() - started)
                break
            if time.perf_counter() - started > 60:
                missed.append(task_id)
                break
            time.sleep(0.02)
        i += 1
        stop.wait(0.5)


def _probe_ask(http: httpx.Client, stop: threading.Event, out: list[float]) -> None:
    """A trivial ASK on ``/v1/sparql`` every 0.2 s: the endpoint's own cost while ingest runs
    (on the embedded store a worker process answers it on a read-only view of the store)."""
    while not stop.is_set():
        started = time.perf_counter()
        response = http.get("/v1/sparql", params={"query": "ASK { ?s ?p ?o }"})
        if response.status_code == 200:
            out.append(time.perf_counter() - started)
        stop.wait(0.2)


def _tree_cpu(proc: psutil.Process) -> float:
    """User + system CPU seconds of a process and its live children (the SPARQL workers)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def _probe_queries(http: httpx.Client, stop: threading.Event, out: list[float], every: float) -> None:
    """``d3`` of one training every ``every`` seconds (none when 0). Its training's batches are
    its epochs here (sections right under it), so it answers tens of thousands of rows and
    costs the server more CPU than the ingest: runs that measure the service's CPU per event
    leave it out."""
    while every > 0 and not stop.is_set():
        started = time.perf_counter()
        response = http.get("/v1/queries/d3", params={"training": "bench-0/training"})
        if response.status_code == 200:
            out.append(time.perf_counter() - started)
        stop.wait(every)


def run(args: argparse.Namespace) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="provkg-bench-service-"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PROVKG_QUEUE_DIR": str(folder / "queue")}
    if args.view_refresh is not None:
        env["PROVKG_SPARQL_VIEW_REFRESH_S"] = str(args.view_refresh)
    log = open(folder / "server.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "provkg.cli", "serve", "--store", f"oxigraph:{folder / 'store'}",
         "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    http = httpx.Client(base_url=url, timeout=120)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/health/live").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"server did not start; see {folder / 'server.log'}")
            time.sleep(0.1)
        assert http.post("/v1/specs", content=SPEC,
                         headers={"Content-Type": "application/yaml"}).status_code == 201

        stop = threading.Event()
        persistence: list[float] = []
        missed: list[str] = []
        queries: list[float] = []
        asks: list[float] = []
        probes = [threading.Thread(target=_probe_persistence, args=(http, stop, persistence, missed)),
                  threading.Thread(target=_probe_queries, args=(httpx.Client(base_url=url, timeout=120),
                                                                stop, queries, args.d3_every)),
                  threading.Thread(target=_probe_ask, args=(httpx.Client(base_url=url, timeout=120),
                                                            stop, asks))]
        results: mp.Queue = mp.Queue()
        ready: mp.Queue = mp.Queue()
        go = mp.Value("d", 0.0)
        # enough distinct batches for each client to post at twice the target rate
        rate = args.rate / args.clients if args.rate else 0.0
        count = int(args.duration * (rate * 1.05 if rate else 2 * 20_000 / args.clients)
                    / args.batch) + 1
        clients = [mp.Process(target=_client, args=(url, c, args.batch, count, args.duration,
                                                    ready, go, results, rate))
                   for c in range(args.clients)]
        load_before = os.getloadavg()  # before the clients build their payloads
        for p in clients:
            p.start()
        for _ in clients:  # every client has built its payloads and posted its run's start
            ready.get(timeout=600)
        server_proc = psutil.Process(server.pid)
        server_cpu = _tree_cpu(server_proc)
        ctx_start = time.monotonic() + 0.2
        go.value = ctx_start
        for t in probes:
            t.start()
        per_client = [results.get(timeout=args.duration + 120) for _ in clients]
        for p in clients:
            p.join()
        elapsed = max(r["active_s"] for r in per_client)
        server_cpu = _tree_cpu(server_proc) - server_cpu
        queue_at_stop = http.get("/health/ready").json()["queue"]
        drain_started = time.monotonic()
        while http.get("/health/ready").json()["queue"]["backlog_events"] > 0:
            time.sleep(0.1)
        drain = time.monotonic() - drain_started
        stop.set()
        for t in probes:
            t.join()
        queue_final = http.get("/health/ready").json()["queue"]
        load_after = os.getloadavg()
    finally:
        http.close()
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)

    latencies = [x for r in per_client for x in r["latencies"]]
    accepted = sum(r["events"] for r in per_client)
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "pyoxigraph": _version("pyoxigraph"), "fastapi": _version("fastapi"),
                    "provkg_commit": _commit(),
                    "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in load_after]},
        "setup": {"clients": args.clients, "batch_events": args.batch, "duration_s": args.duration,
                  "offered_events_per_s": args.rate or "as fast as answered",
                  "d3_probe_every_s": args.d3_every,
                  "sparql_view_refresh_s": args.view_refresh if args.view_refresh is not None
                  else "default",
                  "store": "embedded Oxigraph on disk", "fsync_before_202": True,
                  "client": "pre-built gzip bodies (HttpSink's encoding) posted over one "
                            "keep-alive http.client connection, one process per client"},
        "cpu_s": {"server_while_clients_ran": round(server_cpu, 1),
                  "clients": round(sum(r["cpu_s"] for r in per_client), 1)},
        # the service's processes (server and its SPARQL workers) per event it accepted
        "server_cpu_us_per_event": round(server_cpu / max(1, accepted) * 1e6, 1),
        "sparql_ask_latency_ms": {"p50": round(_pct(asks, 0.5) * 1000, 1),
                                  "p99": round(_pct(asks, 0.99) * 1000, 1),
                                  "max": round(max(asks, default=float("nan")) * 1000, 1),
                                  "runs": len(asks)},
        "clients_out_of_batches": sum(1 for r in per_client if r["exhausted"]),
        "accepted_events": accepted,
        "accepted_events_per_s": round(accepted / elapsed, 1),
        "client_errors": sum(r["errors"] for r in per_client),
        "ingest_latency_ms": {"p50": round(_pct(latencies, 0.5) * 1000, 2),
                              "p99": round(_pct(latencies, 0.99) * 1000, 2),
                              "requests": len(latencies)},
        "persistence_latency_s": {"p50": round(_pct(persistence, 0.5), 3),
                                  "p99": round(_pct(persistence, 0.99), 3),
                                  "max": round(max(persistence, default=float("nan")), 3),
                                  "probes": len(persistence), "missed": len(missed)},
        "canned_query_latency_ms": {"query": "d3", "p50": round(_pct(queries, 0.5) * 1000, 1),
                                    "p99": round(_pct(queries, 0.99) * 1000, 1),
                                    "runs": len(queries)},
        "applied_events_per_s": round(queue_at_stop["applied_events"] / elapsed, 1),
        "backlog_at_stop_events": queue_at_stop["backlog_events"],
        "drain_s": round(drain, 2),
        # the clients' events and the persistence probes' (which the server applies too)
        "applied_events_total": queue_final["applied_events"],
        "note": "applied_events_total counts the persistence probes' events as well as the "
                "clients' accepted_events",
    }


def targets(r: dict[str, object]) -> list[tuple[str, str, str, bool]]:
    lat = r["ingest_latency_ms"]
    pers = r["persistence_latency_s"]
    return [
        ("accepted events/s", ">= 20,000", f"{r['accepted_events_per_s']:,.0f}",
         r["accepted_events_per_s"] >= 20_000),
        ("ingest latency p99", "< 50 ms", f"{lat['p99']:.1f} ms (p50 {lat['p50']:.1f})", lat["p99"] < 50),
        ("persistence latency p99", "< 2 s", f"{pers['p99']:.2f} s (p50 {pers['p50']:.2f})",
         pers["p99"] < 2),
        ("paper: persistence", "< 5 s", f"{pers['max']:.2f} s max", pers["max"] < 5),
    ]


def write(r: dict[str, object], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "service.json").write_text(json.dumps(r, indent=2) + "\n")
    rows = "\n".join(f"| {name} | {target} | {got} | {'met' if ok else '**missed**'} |"
                     for name, target, got, ok in targets(r))
    q = r["canned_query_latency_ms"]
    (out / "service.md").write_text(f"""# Service benchmark (`benchmarks/service.py`)

{r['setup']['clients']} capture clients (one process each; pre-built gzip bodies as `HttpSink`
encodes them, posted over one keep-alive `http.client` connection) posting batches of
{r['setup']['batch_events']} events for {r['setup']['duration_s']} s to `provkg serve` on an embedded
Oxigraph store, fsync before every 202. {r['machine']['cpus']} CPUs, shared with other engineers'
test runs: load average {r['machine']['load_average_before']} before the clients started,
{r['machine']['load_average_after']} after the backlog drained.

| measure | target | measured | |
|---|---|---|---|
{rows}

- accepted: {r['accepted_events']:,} events in {r['ingest_latency_ms']['requests']:,} requests, {r['client_errors']} client errors, {r['clients_out_of_batches']} clients ran out of pre-built batches
- applied to the store while clients ran: {r['applied_events_per_s']:,.0f} events/s; backlog when the clients stopped: {r['backlog_at_stop_events']:,} events, drained in {r['drain_s']} s
- canned query `d3` while ingesting: p50 {q['p50']} ms, p99 {q['p99']} ms ({q['runs']} runs)
- persistence probes: {r['persistence_latency_s']['probes']} (missed: {r['persistence_latency_s']['missed']})
- CPU seconds while the clients ran: server {r['cpu_s']['server_while_clients_ran']}, all clients {r['cpu_s']['clients']}
""")


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "missing"


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse",
                           "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--d3-every", type=float, default=1.0,
                        help="seconds between d3 probes (0: none)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="offered events/s over all clients (0: as fast as answered)")
    parser.add_argument("--rates", default="",
                        help="a sweep: comma-separated offered rates (0: as fast as answered), "
                             "one fresh server each, written to service-rates.md / .json")
    parser.add_argument("--view-refresh", default="",
                        help="the server's PROVKG_SPARQL_VIEW_REFRESH_S; comma-separated: each "
                             "rate of a sweep runs once per value, the values alternately")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    refreshes = [float(x) for x in args.view_refresh.split(",")] if args.view_refresh else [None]
    args.view_refresh = refreshes[0]
    if args.rates:
        sweep = []
        for rate in [float(x) for x in args.rates.split(",")]:
            for refresh in refreshes:
                result = run(argparse.Namespace(**{**vars(args), "rate": rate,
                                                   "view_refresh": refresh}))
                print(sweep_row(result), flush=True)
                sweep.append(result)
        write_sweep(sweep, Path(args.out))
        return 0
    result = run(args)
    print(f"{'measure':26} {'target':>10}  measured")
    for name, target, got, ok in targets(result):
        print(f"{name:26} {target:>10}  {got}  {'met' if ok else 'MISSED'}")
    print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "setup")}, indent=1))
    write(result, Path(args.out))
    return 0



def sweep_row(r: dict[str, Any]) -> str:
    lat, pers, ask = r["ingest_latency_ms"], r["persistence_latency_s"], r["sparql_ask_latency_ms"]
    offered = r["setup"]["offered_events_per_s"]
    return (f"| {offered if isinstance(offered, str) else f'{offered:,.0f}'} | "
            f"{r['setup'].get('sparql_view_refresh_s', 'default')} | "
            f"{r['accepted_events_per_s']:,.0f} | {r['applied_events_per_s']:,.0f} | "
            f"{lat['p50']:.0f} / {lat['p99']:.0f} | {pers['p50']:.2f} / {pers['p99']:.2f} | "
            f"{ask['p50']:.0f} / {ask['p99']:.0f} | {r['server_cpu_us_per_event']:.0f} | "
            f"{r['backlog_at_stop_events']:,} |")


def write_sweep(sweep: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "service-rates.json").write_text(json.dumps(sweep, indent=2) + "\n")
    first = sweep[0]
    rows = "\n".join(sweep_row(r) for r in sweep)
    (out / "service-rates.md").write_text(f"""# Service at offered rates (`benchmarks/service.py --rates`)

{first['setup']['clients']} capture clients posting batches of {first['setup']['batch_events']} events on a
fixed schedule (open loop: a late answer counts from its planned send time) for
{first['setup']['duration_s']} s per rate, each rate against a fresh `provkg serve` on an embedded
Oxigraph store (fsync before every 202). Probes while they post: a persistence probe
(post one task end, poll `/v1/sparql` ASK until it is visible), a trivial `ASK {{ ?s ?p ?o }}`
on `/v1/sparql` every 0.2 s, and `d3` every {first['setup']['d3_probe_every_s']} s (0: none).
View refresh: the server's `PROVKG_SPARQL_VIEW_REFRESH_S` (0: a query opens a view after any
write); the values of one rate ran one after the other, each on a fresh server.
CPU: the server and its SPARQL worker processes (user + system) per accepted event.
{first['machine']['cpus']} CPUs; commit {first['machine']['provkg_commit']}; load average before the
first rate {first['machine']['load_average_before']}.

| offered ev/s | view refresh s | accepted ev/s | applied ev/s | POST p50 / p99 ms | persistence p50 / p99 s | ASK p50 / p99 ms | server CPU-µs / event | backlog at stop |
|---|---|---|---|---|---|---|---|---|
{rows}
""")


if __name__ == "__main__":
    sys.exit(main())
