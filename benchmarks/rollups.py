"""Rollups beside the detail, side by side in one run.

The paper's synthetic lifecycle (``provkg bench schemas``' data) is built twice: at
``granularity: full`` (every batch: the paper's form) and at ``both`` (every batch and the
per-epoch rollups, the default of an innermost section). Both are mapped typed and tagged,
bulk-loaded into each store, and the canned batch-aggregating queries (Q4, Q5, Q7) plus p1
and d3 (which read epochs, no batch: a control) are timed on the two stores alternately
(cold run, then warm runs until the median is tight or the budget is spent). Answers are
compared full vs both. The rollup's cost: triples, mapping and loading seconds.

    .venv/bin/python benchmarks/rollups.py --scale 0.1
    .venv/bin/python benchmarks/rollups.py --scale 1 --stores oxigraph

Results: benchmarks/results/rollups-SCALE.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path
from typing import Any

from provkg.bench import synthetic
from provkg.bench.dataset import build_datasets
from provkg.bench.schemas import _finished, compare_answers, plan_queries
from provkg.bench.servers import open_stores
from provkg.bench.timing import measure_pair
from provkg.store import store_dialect

QUERIES = ("q4", "q5", "q7", "p1", "d3")
SCHEMAS = ("typed", "tagged")
GRANULARITIES = ("full", "both")


def _build(scale: float, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for gran in GRANULARITIES:
        shape = dataclasses.replace(synthetic.shape_for_scale(scale), granularity=gran)
        sets, seconds = build_datasets(shape, work / f"rollups-{scale:g}-{gran}", parallel=False)
        for schema, r in sets.items():
            out[f"{schema}-{gran}"] = r
            print(f"built {schema}-{gran}: {r.triples:,} triples, map {r.map_seconds:.1f} s, "
                  f"load {r.load_seconds:.1f} s + compact {r.compact_seconds:.1f} s", flush=True)
    return out


def _time_store(name: str, sets: dict[str, Any], plans: list[Any], work: Path, budget: float,
                timeout: float) -> dict[str, Any]:
    paths = {k: Path(r.path) for k, r in sets.items()}
    dirs = {k: Path(r.store_dir) for k, r in sets.items() if r.store_dir}
    loads = {k: r.load_seconds + (r.compact_seconds or 0.0) for k, r in sets.items()}
    results: dict[str, Any] = {}
    with open_stores(name, paths, work, oxigraph_dirs=dirs, pipeline_load=loads) as run:
        dialect = store_dialect(next(iter(run.workers.values())).url)
        for plan in plans:
            texts = plan.texts_for(dialect)
            for schema in SCHEMAS:
                answers: dict[str, Any] = {}

                def runner(gran: str, schema: str = schema, answers: dict = answers, texts: dict = texts):
                    def once() -> float:
                        seconds, rows = run.workers[f"{schema}-{gran}"].select(texts[schema], timeout=timeout)
                        answers.setdefault(gran, rows)
                        return seconds
                    return once

                full, both = measure_pair(runner("full"), runner("both"), budget_s=budget)
                a, b = (_finished(plan.name, answers[g]) for g in GRANULARITIES)
                mismatch = compare_answers(a, b, ordered=plan.ordered)
                key = f"{plan.name}/{schema}"
                results[key] = {"full_ms": full.median * 1e3, "both_ms": both.median * 1e3,
                                "full_cold_ms": full.cold * 1e3, "both_cold_ms": both.cold * 1e3,
                                "runs": len(full.warm), "rows": len(a.rows),
                                "identical": mismatch is None or mismatch.startswith("same rows"),
                                "mismatch": mismatch}
                r = results[key]
                print(f"{name:16} {key:10} full {r['full_ms']:9.1f} ms  both {r['both_ms']:8.1f} ms  "
                      f"x{r['full_ms'] / max(r['both_ms'], 1e-9):6.1f}  rows {r['rows']:4}  "
                      f"{'identical' if r['identical'] else 'DIFFERENT: ' + str(mismatch)}", flush=True)
        results["load_seconds"] = dict(run.load_seconds)
    return results


def _markdown(doc: dict[str, Any]) -> str:
    lines = [f"# Rollups beside the detail, scale {doc['scale']:g}", "",
             f"Run {doc['started']} on {doc['machine']}; `benchmarks/rollups.py --scale {doc['scale']:g}`.",
             "Each store holds the same lifecycle twice: `full` (every batch, the paper's form) and `both`",
             "(every batch and the per-epoch rollups). Warm medians, the two timed alternately in one run.",
             "", "## Data", "", "| dataset | triples | map s | load + compact s |", "|---|---:|---:|---:|"]
    for key, d in doc["datasets"].items():
        lines.append(f"| {key} | {d['triples']:,} | {d['map_seconds']:.1f} | {d['load_seconds']:.1f} |")
    for schema in SCHEMAS:
        f, b = doc["datasets"][f"{schema}-full"], doc["datasets"][f"{schema}-both"]
        lines.append("")
        lines.append(f"Rollup cost, {schema}: {100 * (b['triples'] / f['triples'] - 1):+.2f} % triples, "
                     f"{100 * ((b['map_seconds'] + b['load_seconds']) / (f['map_seconds'] + f['load_seconds']) - 1):+.1f} % "
                     "map + load seconds.")
    for store, res in doc["stores"].items():
        lines += ["", f"## {store}", "", "| query | schema | full ms | both ms | speed-up | rows | answers |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for key, r in res.items():
            if key == "load_seconds":
                continue
            q, schema = key.split("/")
            lines.append(f"| {q} | {schema} | {r['full_ms']:.1f} | {r['both_ms']:.1f} | "
                         f"{r['full_ms'] / max(r['both_ms'], 1e-9):.1f}x | {r['rows']} | "
                         f"{'identical' if r['identical'] else 'different'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--stores", default="oxigraph,oxigraph-server,virtuoso")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--work", type=Path, default=Path("benchmarks/work"))
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of warm runs per query and schema")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    work = args.work.resolve()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    sets = _build(args.scale, work)
    plans = plan_queries(synthetic.shape_for_scale(args.scale), only=list(QUERIES))
    doc: dict[str, Any] = {
        "scale": args.scale, "started": started,
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "datasets": {k: {"triples": r.triples, "map_seconds": r.map_seconds,
                         "load_seconds": r.load_seconds + (r.compact_seconds or 0.0)} for k, r in sets.items()},
        "stores": {}}
    for name in args.stores.split(","):
        doc["stores"][name] = _time_store(name, sets, plans, work / f"rollups-{name}", args.budget, args.timeout)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"rollups-{args.scale:g}"
    # not with_suffix: "rollups-0.1" has a suffix of its own
    Path(f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    Path(f"{stem}.md").write_text(_markdown(doc), encoding="utf-8")
    print(f"wrote {stem}.md", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
