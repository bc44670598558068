"""Batches in full vs kept as per-epoch summaries: graph size and Q4 / Q5 / Q7 times, side
by side in one run, on the default store (embedded Oxigraph on disk).

Generates the schema benchmark's synthetic events (``provkg bench schemas``) at ``--scale``
twice, once with the paper's spec (every batch as triples) and once with the batch sections
marked ``granularity: summary`` (docs/reference/graph.md), maps both typed, bulk-loads each into its
own on-disk store and times the three queries that aggregate batches: one cold run, then at
least ``--runs`` warm runs each. The answers must agree (floats within 1e-9 relative): the
benchmark exits non-zero if they do not. Run::

    .venv/bin/python benchmarks/summaries.py --scale 1      # the paper's scale (~20 min)
    .venv/bin/python benchmarks/summaries.py --scale 0.01   # a quick check

and it writes ``benchmarks/results/summaries-<scale>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from tqdm import tqdm

from provkg.bench import synthetic
from provkg.bench.dataset import bulk_load_oxigraph, write_dataset
from provkg.bench.schemas import _close as _same
from provkg.bench.schemas import plan_queries
from provkg.queries.catalog import get_query
from provkg.store import open_store

QUERIES = ("q4", "q5", "q7")
HERE = Path(__file__).resolve().parent


def time_queries(store_dir: Path, plans: list, runs: int, bar: tqdm) -> dict[str, dict]:
    """Cold run, then ``runs`` warm runs of each plan (typed) on the store in ``store_dir``."""
    out: dict[str, dict] = {}
    with open_store(f"oxigraph:{store_dir}") as store:
        for plan in plans:
            text = plan.texts["typed"]
            q = get_query(plan.name)
            times, rows = [], None
            for _ in range(runs + 1):
                start = time.perf_counter()
                got = store.select(text)
                times.append(time.perf_counter() - start)
                rows = q.finish(got.columns, got.rows, sparql=text)
                bar.update(1)
            out[plan.name] = {"cold_s": times[0], "warm_median_s": statistics.median(times[1:]),
                              "warm_min_s": min(times[1:]), "warm_max_s": max(times[1:]),
                              "warm_runs": runs, "rows": rows}
    return out


def _ratio(x: float) -> str:
    """``85x``, ``1.4x``: a whole number said "1x" for 1.43x (found by black-box testing)."""
    return f"{x:,.0f}x" if x >= 10 else f"{x:.1f}x"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the paper's data")
    ap.add_argument("--runs", type=int, default=5, help="warm runs per query (>= 5)")
    ap.add_argument("--work", type=Path, default=HERE / "work", help="data and stores (git-ignored)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    if not 0 < args.scale <= 10:  # as provkg bench schemas says it
        ap.error("--scale: more than 0 and at most 10")
    if args.runs < 5:
        ap.error("--runs: at least 5")
    runs = args.runs
    base = synthetic.shape_for_scale(args.scale)
    work = args.work.resolve() / f"summaries-{args.scale:g}"
    shapes = {"full": base, "summary": replace(base, granularity="summary")}
    plans = plan_queries(base, only=list(QUERIES))
    load = os.getloadavg()
    result: dict[str, dict] = {}
    for name, shape in shapes.items():
        nt, store_dir = work / f"{name}.nt", work / f"oxigraph-{name}"
        report = write_dataset(shape, "typed", nt, progress=True)
        load_s, compact_s, count = bulk_load_oxigraph(nt, store_dir)
        nt.unlink()  # gigabytes: the store holds it now
        with tqdm(total=len(plans) * (runs + 1), desc=f"queries {name}", unit="run") as bar:
            timed = time_queries(store_dir, plans, runs, bar)
        result[name] = {"triples": count, "events": report.events, "map_s": report.map_seconds,
                        "load_s": load_s, "compact_s": compact_s, "queries": timed}
    mismatches = []
    for q in QUERIES:
        a, b = (result[g]["queries"][q]["rows"] for g in ("full", "summary"))
        if len(a) != len(b) or not all(len(x) == len(y) and all(map(_same, x, y))
                                       for x, y in zip(a, b)):
            mismatches.append(q)
    doc = {
        "benchmark": "summaries", "scale": args.scale, "date": datetime.now(UTC).isoformat(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "pyoxigraph": version("pyoxigraph"), "load_average_at_start": load},
        "datasets": {g: {k: v for k, v in r.items() if k != "queries"} for g, r in result.items()},
        "queries": {q: {g: {k: v for k, v in result[g]["queries"][q].items() if k != "rows"}
                        for g in shapes} for q in QUERIES},
        "rows": {q: len(result["full"]["queries"][q]["rows"]) for q in QUERIES},
        "answers_equal": not mismatches, "mismatches": mismatches,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"summaries-{args.scale:g}"  # (not Path.with_suffix: "0.01" has a dot of its own)
    (args.out / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (args.out / f"{stem}.md").write_text(markdown(doc), encoding="utf-8")
    print(markdown(doc))
    if mismatches:
        print(f"ANSWERS DIFFER for {', '.join(mismatches)}", file=sys.stderr)
        return 1
    return 0


def markdown(doc: dict) -> str:
    d = doc["datasets"]
    full, summ = d["full"]["triples"], d["summary"]["triples"]
    lines = [
        f"# Batches in full vs per-epoch summaries (scale {doc['scale']:g}, typed, embedded "
        "Oxigraph on disk)", "",
        f"{doc['date'][:19]} UTC, {doc['machine']['cpus']} CPUs, pyoxigraph "
        f"{doc['machine']['pyoxigraph']}, load average at start "
        f"{' / '.join(f'{x:.2f}' for x in doc['machine']['load_average_at_start'])}.", "",
        "| | batches in full | summaries | ratio |", "|---|---|---|---|",
        f"| triples | {full:,} | {summ:,} | {full / summ:.1f}x smaller |",
        f"| map (s) | {d['full']['map_s']:.1f} | {d['summary']['map_s']:.1f} | |",
        f"| bulk load (s) | {d['full']['load_s']:.1f} | {d['summary']['load_s']:.1f} | |",
        f"| compaction (s) | {d['full'].get('compact_s', 0):.1f} | "
        f"{d['summary'].get('compact_s', 0):.1f} | |",
    ]
    for q, per in doc["queries"].items():
        f, s = per["full"], per["summary"]
        lines.append(
            f"| {q} warm median (min-max), cold | {f['warm_median_s'] * 1000:,.1f} ms "
            f"({f['warm_min_s'] * 1000:,.1f}-{f['warm_max_s'] * 1000:,.1f}), "
            f"{f['cold_s'] * 1000:,.1f} ms | {s['warm_median_s'] * 1000:,.1f} ms "
            f"({s['warm_min_s'] * 1000:,.1f}-{s['warm_max_s'] * 1000:,.1f}), "
            f"{s['cold_s'] * 1000:,.1f} ms | {_ratio(f['warm_median_s'] / s['warm_median_s'])} faster |")
    lines += ["", f"Rows per query: {', '.join(f'{q} {n}' for q, n in doc['rows'].items())}; "
              + ("answers identical (floats within 1e-9)." if doc["answers_equal"]
                 else f"**answers differ: {', '.join(doc['mismatches'])}**"), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
