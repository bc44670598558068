"""The web UI's views timed in a real browser, on the benchmark's full-scale typed dataset.

The paper's synthetic lifecycle (``provkg bench schemas``' data, 8 workflows of one training
each, 300 epochs of 200 batches) is built typed at ``granularity: both`` (every batch and the
per-epoch rollups: what an innermost section gets by default), bulk-loaded into an on-disk
Oxigraph store and, with ``--stores oxigraph,virtuoso``, into Virtuoso. A real ``provkg
serve`` runs on each, and Debian's Chromium (Playwright, ``executable_path``) opens each view
as a fresh page load: the runs page, a two-run comparison and the lineage of a model. A
view's time is ``performance.now()`` (from navigation start) when its content is on the
page: every training's row, the comparison's charts, the lineage graph. Median of
``--repeat`` loads after one warm-up. Next to it, the same view's REST requests replayed one
after the other (their summed server time as the client sees it). Page weight: the first
view's JavaScript and CSS as sent and gzip-compressed.

    .venv/bin/python benchmarks/ui.py --scale 1 --stores oxigraph,virtuoso

Results: benchmarks/results/ui.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from provkg.bench import synthetic
from provkg.bench.dataset import build_datasets
from provkg.bench.servers import open_stores

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

#: the canned queries the views ask, in the per-request table
QUERIES = ("workflows", "runs", "measures", "epochs", "adaptations", "batches", "lineage", "impact", "about")
#: view -> the JavaScript condition of "its content is shown"
READY = {
    "runs": "document.querySelectorAll('table.runs tbody tr').length === {n}",
    "compare": "document.querySelectorAll('#compare-body figure.chart polyline.series').length >= 2"
               " && document.querySelector('#compare-body table.compare') !== null",
    "lineage": "document.querySelector('#lineage-summary') !== null",
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """``provkg serve`` on a store URL, on a free loopback port."""

    def __init__(self, store: str, work: Path):
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PROVKG_QUEUE_DIR": str(work / f"queue-{self.port}")}
        self.log = open(work / f"serve-{self.port}.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "provkg.cli", "serve", "--store", store,
                                      "--port", str(self.port)], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.http = httpx.Client(base_url=self.url, timeout=600)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"provkg serve exited: see {self.log.name}")
            try:
                if self.http.get("/health/live", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("provkg serve did not start")

    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        r = self.http.get(f"/v1/queries/{name}", params=params)
        r.raise_for_status()
        body = r.json()
        return [dict(zip(body["columns"], row, strict=True)) for row in body["rows"]]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _requests(serve: Serve, view: str, pick: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The canned requests a view makes, in the order its code makes them (mirrors ui/*.js)."""
    # what runs.js loadRuns asks before the table shows (its epochs' figures come after)
    runs = [("workflows", {})] + [(q, {"workflow": w}) for w in pick["workflows"] for q in ("runs", "measures")]
    if view == "runs":
        return runs
    if view == "compare":
        two = pick["trainings"][:2]
        batch = [("batches", {"training": t, "measure": m}) for m in pick["batch_measures"] for t in two]
        return (runs + [("epochs", {"training": t}) for t in two]
                + [("adaptations", {"training": t}) for t in two] + batch)
    kg = [("about", {"resource": r}) for r in pick["kg"]]
    return [("lineage", {"data": pick["model"], "depth": 3}), ("impact", {"data": pick["model"], "depth": 3}),
            *kg]


def _pick(serve: Serve) -> dict[str, Any]:
    workflows = [w["workflow"] for w in serve.rows("workflows") if w["trainings"]]
    trainings = [r["training"] for w in workflows for r in serve.rows("runs", workflow=w)]
    models = [r["data"] for r in serve.rows("data", workflow=workflows[0]) if r["role"] == "model"]
    lineage = serve.rows("lineage", data=models[0], depth=3)
    kg = sorted({r["derived_from"] for r in lineage if not r["derived_from"].startswith("https://w3id.org/provkg/id/")})
    measures = sorted({r["measure"] for r in serve.rows("epochs", training=trainings[0])
                       if r["stage"] == "training" and r["measure"]})
    return {"workflows": workflows, "trainings": trainings, "model": models[0], "kg": kg,
            "batch_measures": measures[:4]}


def _replay(serve: Serve, requests: list[tuple[str, dict[str, Any]]]) -> tuple[float, list[float]]:
    """(total ms, ms of each request)."""
    each = []
    for name, params in requests:
        start = time.perf_counter()
        serve.http.get(f"/v1/queries/{name}", params=params).raise_for_status()
        each.append((time.perf_counter() - start) * 1000)
    return sum(each), each


def _time_views(serve: Serve, pick: dict[str, Any], repeat: int, shots: Path | None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    hashes = {"runs": "#/runs",
              "compare": "#/compare?" + urlencode({"t": pick["trainings"][:2]}, doseq=True),
              "lineage": "#/lineage?" + urlencode({"data": pick["model"], "depth": 3})}
    out: dict[str, Any] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(120_000)
        for view, hash_ in hashes.items():
            ready = READY[view].format(n=len(pick["trainings"]))
            times = []
            for i in range(repeat + 1):  # the first load warms the store's caches: not counted
                page.goto("about:blank")
                page.goto(f"{serve.url}/{hash_}")
                ms = page.wait_for_function(f"() => ({ready}) && performance.now()", polling="raf").json_value()
                if i:
                    times.append(float(ms))
                # the page's later requests (the runs page's epochs) done before the next load:
                # each load starts on an idle server, as a user's first visit does
                page.wait_for_load_state("networkidle")
            if shots:
                shots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shots / f"{view}.png"))
            requests = _requests(serve, view, pick)
            replays = [_replay(serve, requests) for _ in range(repeat)]
            per_query: dict[str, list[float]] = {}
            for _, each in replays:
                for (name, _params), ms in zip(requests, each, strict=True):
                    per_query.setdefault(name, []).append(ms)
            out[view] = {"browser_ms": times, "median_ms": statistics.median(times),
                         "requests": len(requests), "replay_ms": [r[0] for r in replays],
                         "replay_median_ms": statistics.median(r[0] for r in replays),
                         # per canned query: the median of one request (over its requests and runs)
                         "query_median_ms": {n: statistics.median(v) for n, v in per_query.items()}}
            print(f"  {view}: median {out[view]['median_ms']:.0f} ms in the browser "
                  f"({out[view]['requests']} requests, {out[view]['replay_median_ms']:.0f} ms replayed)", flush=True)
        page.goto(f"{serve.url}/#/runs")
        page.wait_for_function("() => document.querySelector('table.runs') !== null")
        entries = page.evaluate("""() => performance.getEntriesByType('resource')
            .filter(e => /\\.(js|css)$/.test(new URL(e.name).pathname))
            .map(e => [new URL(e.name).pathname, e.encodedBodySize])""")
        browser.close()
    sent = {path: size for path, size in entries}
    gz = {path: len(gzip.compress(serve.http.get(path).content, 9)) for path in sent}
    out["weight"] = {"files": sent, "sent_bytes": sum(sent.values()), "gzip_bytes": sum(gz.values())}
    return out


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# The web UI in a browser, full scale", "",
             f"Run {result['when']} on {result['machine']}; `benchmarks/ui.py --scale {result['scale']:g}`; "
             f"Chromium {result['chromium']}.",
             f"Dataset: the typed synthetic lifecycle at granularity `both`, {result['triples']:,} triples "
             f"({result['trainings']} trainings, {result['epochs']} epochs of {result['batches']} batches each).",
             "A view's time: `performance.now()` from navigation start until its content is on the page "
             f"(median of {result['repeat']} fresh loads after a warm-up); replayed: the same view's REST "
             "requests made before the content shows, one after another from Python (server time as a "
             "client sees it; the browser makes them in parallel). Each load starts once the previous "
             "one's requests are done (the runs page asks each training's epochs after its table shows).", "",
             "| view | store | browser median ms | target | requests | replayed median ms |",
             "|---|---|---:|---|---:|---:|"]
    for store, views in result["stores"].items():
        for view in READY:
            v = views[view]
            lines.append(f"| {view} | {store} | {v['median_ms']:.0f} | ≤ 1,000 ms "
                         f"({'met' if v['median_ms'] <= 1000 else 'missed'}) | {v['requests']} | "
                         f"{v['replay_median_ms']:.0f} |")
    lines += ["", "Per request, the median of one canned query's request in each view's replay (ms):", "",
              "| view | store | " + " | ".join(QUERIES) + " |", "|---|---|" + "---:|" * len(QUERIES)]
    for store, views in result["stores"].items():
        for view in READY:
            q = views[view]["query_median_ms"]
            lines.append(f"| {view} | {store} | " + " | ".join(f"{q[n]:.0f}" if n in q else "" for n in QUERIES) + " |")
    w = next(iter(result["stores"].values()))["weight"]
    lines += ["", f"First view's JavaScript and CSS: {w['sent_bytes']:,} bytes as sent, "
              f"{w['gzip_bytes']:,} bytes gzip-compressed (target ≤ 500 KB compressed: "
              f"{'met' if w['gzip_bytes'] <= 500_000 else 'missed'}).", ""]
    lines += ["| file | bytes sent |", "|---|---:|"] + [f"| `{k}` | {v:,} |" for k, v in sorted(w["files"].items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--stores", default="oxigraph,virtuoso")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "ui")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--shots", type=Path, default=ROOT / "artifacts" / "ui-bench")
    args = ap.parse_args()
    shape = dataclasses.replace(synthetic.shape_for_scale(args.scale), granularity="both")
    sets, _ = build_datasets(shape, args.work / "data", schemas=("typed",), parallel=False)
    typed = sets["typed"]
    print(f"built typed/both: {typed.triples:,} triples", flush=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "scale": args.scale,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "chromium": subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip(),
        "triples": typed.triples, "trainings": shape.workflows, "epochs": shape.epochs,
        "batches": shape.training_batches, "repeat": args.repeat, "stores": {}}
    for name in args.stores.split(","):
        print(f"{name}:", flush=True)
        if name == "oxigraph":
            serve = Serve(f"oxigraph:{typed.store_dir}", args.work)
            try:
                pick = _pick(serve)
                result["stores"][name] = _time_views(serve, pick, args.repeat, args.shots)
            finally:
                serve.close()
        else:
            with open_stores(name, {"typed": Path(typed.path)}, args.work / name) as run:
                serve = Serve(run.workers["typed"].url, args.work)
                try:
                    pick = _pick(serve)
                    result["stores"][name] = _time_views(serve, pick, args.repeat, None)
                finally:
                    serve.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ui.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "ui.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
