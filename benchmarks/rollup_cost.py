"""The rollups' mapping cost, side by side: each event group of the paper's synthetic lifecycle
is mapped at ``granularity: full`` and at ``both`` in turn (the order alternating per group),
each with its own mapping state and the collector set as provkg's ingest sets it, and written
to N-Triples as ``provkg bench`` writes them; then
each file is bulk-loaded into its own embedded Oxigraph store on disk and compacted (as ``provkg
load`` does), ``--loads`` times per form in the order A B B A A B B A ..., so a drift in the
machine's speed weighs on both alike; a form's load and compaction are the medians of its runs
(one compaction of the same file varied by 7 s of ~100 in a run of two each). Ingest = map +
write + load + compact.
The specs and the domain KG, the same in both forms, are left out.

``benchmarks/rollups.py`` builds the two datasets one after the other, so on a machine whose
speed drifts (this VM's varied ~2x within an hour) its map-time ratio mixes the drift into the
rollups' cost; here both forms see the same moments.

    .venv/bin/python benchmarks/rollup_cost.py --scale 1 --loads 4

Results: benchmarks/results/rollup-cost-SCALE.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import statistics
import time
from pathlib import Path

from provkg.bench import synthetic
from provkg.bench.dataset import _specs, bulk_load_oxigraph
from provkg.mapper import MapState, finish, map_batch
from provkg.service.ingest import rare_collections

FORMS = ("full", "both")


def _map_both(base, states, files, seconds, triples) -> None:
    """Map every event group in both forms, the order alternating per group."""
    for i, group in enumerate(synthetic.iter_event_groups(base)):
        for g in (FORMS if i % 2 == 0 else FORMS[::-1]):
            start = time.perf_counter()
            mapped = dict.fromkeys(map_batch(group.events, states[g]))
            files[g].write("".join(f"{s} {p} {o} .\n" for s, p, o in mapped))
            seconds[g] += time.perf_counter() - start
            triples[g] += len(mapped)
    for g in FORMS:
        start = time.perf_counter()
        rest = dict.fromkeys(finish(states[g]))
        files[g].write("".join(f"{s} {p} {o} .\n" for s, p, o in rest))
        files[g].flush()
        seconds[g] += time.perf_counter() - start
        triples[g] += len(rest)


def measure(scale: float, schema: str, work: Path, order: int, *, loads_per_form: int = 2,
            keep: bool = False) -> dict[str, dict[str, float]]:
    base = synthetic.shape_for_scale(scale)
    states = {g: MapState(_specs(dataclasses.replace(base, granularity=g)), schema=schema)
              for g in FORMS}
    seconds = dict.fromkeys(FORMS, 0.0)
    triples = dict.fromkeys(FORMS, 0)
    work.mkdir(parents=True, exist_ok=True)
    paths = {g: work / f"{schema}-{g}.nt" for g in FORMS}
    files = {g: open(paths[g], "w", encoding="utf-8", buffering=1 << 20) for g in FORMS}
    # the collector set as provkg's own ingest sets it (``ingest_events``, the server): the
    # default thresholds took a third of the mapping time, more with the rollups' live state
    try:
        with rare_collections():
            _map_both(base, states, files, seconds, triples)
    finally:
        for f in files.values():
            f.close()
    states.clear()
    # A B B A A B ...: a drift in the machine's speed weighs on both forms alike
    loads: dict[str, list[tuple[float, float, int]]] = {g: [] for g in FORMS}
    ab = FORMS if order % 2 == 0 else FORMS[::-1]
    for i in range(loads_per_form):
        for g in (ab if i % 2 == 0 else ab[::-1]):
            loads[g].append(bulk_load_oxigraph(paths[g], work / f"oxigraph-{schema}-{g}"))
    out: dict[str, dict[str, float]] = {}
    for g in FORMS:
        load = statistics.median(x[0] for x in loads[g])
        compact = statistics.median(x[1] for x in loads[g])
        out[g] = {"map_seconds": round(seconds[g], 2), "load_seconds": round(load, 2),
                  "compact_seconds": round(compact, 2),
                  "ingest_seconds": round(seconds[g] + load + compact, 2),
                  "loads": [[round(a, 2), round(b, 2)] for a, b, _ in loads[g]],
                  "triples": triples[g], "store_triples": loads[g][0][2]}
        paths[g].unlink()
        if not keep:
            shutil.rmtree(work / f"oxigraph-{schema}-{g}")
    return {g: out[g] for g in FORMS}


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--work", default=str(Path(__file__).parent / "work" / "rollup-cost"))
    parser.add_argument("--loads", type=int, default=2, help="bulk loads per form (medians)")
    parser.add_argument("--keep", action="store_true", help="keep the stores under --work")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc: dict = {"scale": args.scale, "started": started, "machine": platform.machine(),
                 "python": platform.python_version(), "schemas": {}}
    lines = [f"# Rollups' ingest cost, side by side, scale {args.scale:g}", "",
             f"Run {started} on {platform.machine()}, Python {platform.python_version()}; "
             f"`benchmarks/rollup_cost.py --scale {args.scale:g} --loads {args.loads}`. Every event group is mapped "
             "at `full` and at `both` in turn (the order alternating), each with its own "
             "mapping state, with the garbage collector set as provkg's ingest sets it, "
             "and written as N-Triples; each file is then bulk-loaded into its "
             f"own on-disk Oxigraph store and compacted, {args.loads} times per form in the order "
             "A B B A A B ... (the median load and the median compaction per form). "
             "Ingest = map + load + compact. Triples: as counted by the store (distinct).", "",
             "| schema | form | map s | load + compact s | ingest s | triples |",
             "|---|---|---:|---:|---:|---:|"]
    costs = []
    for i, schema in enumerate(("typed", "tagged")):
        r = doc["schemas"][schema] = measure(args.scale, schema, Path(args.work), i,
                                               loads_per_form=args.loads, keep=args.keep)
        for g in FORMS:
            x = r[g]
            row = (f"| {schema} | {g} | {x['map_seconds']:.1f} | "
                   f"{x['load_seconds'] + x['compact_seconds']:.1f} | {x['ingest_seconds']:.1f} | "
                   f"{x['store_triples']:,} |")
            print(row, flush=True)
            lines.append(row)
        f, b = r["full"], r["both"]
        costs.append(f"| {schema} | {_pct(b['store_triples'], f['store_triples'])} | "
                     f"{_pct(b['map_seconds'], f['map_seconds'])} | "
                     f"{_pct(b['ingest_seconds'], f['ingest_seconds'])} |")
    lines += ["", "Rollup cost (`both` over `full`; targets: ≤ 5 % triples, ≤ 15 % ingest time):", "",
              "| schema | triples | map time | ingest time |", "|---|---:|---:|---:|", *costs]
    print("\n".join(lines[-len(costs) - 2:]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rollup-cost-{args.scale:g}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"rollup-cost-{args.scale:g}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
