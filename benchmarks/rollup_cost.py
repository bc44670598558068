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

``--end-to-end N`` measures instead what a user waits for: ``provkg ingest``'s own path
(``ingest_paths``, mapping overlapped with the store's writes) over one events file, N runs per
form, each in a fresh process; results in rollup-cost-e2e-SCALE.{json,md}.

Results: benchmarks/results/rollup-cost-SCALE.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import statistics
import subprocess
import sys
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


# -- end to end: ``provkg ingest``'s own path (mapping overlapped with the writes) ----------


def _write_events(scale: float, path: Path) -> None:
    import orjson

    with open(path, "wb", buffering=1 << 20) as f:
        f.writelines(orjson.dumps(e) + b"\n" for e in synthetic.iter_events(synthetic.shape_for_scale(scale)))


def child_ingest(scale: float, schema: str, form: str, events: str, store_dir: str) -> dict:
    """One ingest of the events file into a fresh on-disk store, as ``provkg ingest`` runs it
    (``ingest_paths``: validation, mapping overlapped with the writes, its collector settings)."""
    import resource

    from provkg.service.ingest import ingest_paths
    from provkg.store import open_store

    shape = dataclasses.replace(synthetic.shape_for_scale(scale), granularity=form)
    with open_store(f"oxigraph:{store_dir}") as store:
        started = time.perf_counter()
        ingest_paths(store, [events], specs=_specs(shape), schema=schema, progress=None)
        seconds = time.perf_counter() - started
        count = store.count()
    return {"seconds": round(seconds, 2), "store_triples": count,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def end_to_end(scale: float, schema: str, work: Path, order: int, runs: int) -> dict[str, dict]:
    """``runs`` ingests per form, each in a fresh process, in the order A B B A ...; medians."""
    work.mkdir(parents=True, exist_ok=True)
    events = work / f"events-{scale:g}.jsonl"
    if not events.exists():
        _write_events(scale, events)
    got: dict[str, list[dict]] = {g: [] for g in FORMS}
    ab = FORMS if order % 2 == 0 else FORMS[::-1]
    for i in range(runs):
        for g in (ab if i % 2 == 0 else ab[::-1]):
            store = work / f"ingest-{schema}-{g}"
            shutil.rmtree(store, ignore_errors=True)
            out = subprocess.run([sys.executable, __file__, "--child", str(scale), schema, g,
                                  str(events), str(store)], check=True, capture_output=True, text=True)
            got[g].append(json.loads(out.stdout.strip().splitlines()[-1]))
            shutil.rmtree(store, ignore_errors=True)
    return {g: {"ingest_seconds": statistics.median(r["seconds"] for r in got[g]),
                "runs": [r["seconds"] for r in got[g]], "store_triples": got[g][0]["store_triples"],
                "peak_rss_mb": max(r["peak_rss_mb"] for r in got[g])} for g in FORMS}


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--work", default=str(Path(__file__).parent / "work" / "rollup-cost"))
    parser.add_argument("--loads", type=int, default=2, help="bulk loads per form (medians)")
    parser.add_argument("--keep", action="store_true", help="keep the stores under --work")
    parser.add_argument("--end-to-end", type=int, default=0, metavar="N",
                        help="instead: N ingests per form of one events file as provkg ingest runs "
                             "them, each in a fresh process (medians)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        scale, schema, form, events, store = args.child
        print(json.dumps(child_ingest(float(scale), schema, form, events, store)))
        return 0
    if args.end_to_end:
        n = args.end_to_end
        try:
            return _report(
                args, name="rollup-cost-e2e", title="Rollups' ingest cost end to end",
                command=f"--end-to-end {n}",
                method="One JSON-lines file of the synthetic lifecycle's events is ingested into a fresh "
                       "on-disk Oxigraph store as `provkg ingest` does it (`ingest_paths`: validation, "
                       "mapping overlapped with the store's writes), with the specs at `full` and at "
                       f"`both`, {n} times per form, each in a fresh process, in the order "
                       "A B B A ... (medians). Triples: as counted by the store.",
                columns=("ingest s (median)", "runs s", "triples", "peak RSS MB"),
                measure=lambda schema, i: end_to_end(args.scale, schema, Path(args.work), i, n),
                row=lambda x: (f"{x['ingest_seconds']:.1f}", ", ".join(f"{v:.1f}" for v in x["runs"]),
                               f"{x['store_triples']:,}", f"{x['peak_rss_mb']:,.0f}"),
                costs={"triples": "store_triples", "ingest time": "ingest_seconds"},
                extra={"runs_per_form": n})
        finally:  # the events file is shared by both schemas' runs
            (Path(args.work) / f"events-{args.scale:g}.jsonl").unlink(missing_ok=True)
    return _report(
        args, name="rollup-cost", title="Rollups' ingest cost, side by side",
        command=f"--loads {args.loads}",
        method="Every event group is mapped "
               "at `full` and at `both` in turn (the order alternating), each with its own "
               "mapping state, with the garbage collector set as provkg's ingest sets it, "
               "and written as N-Triples; each file is then bulk-loaded into its "
               f"own on-disk Oxigraph store and compacted, {args.loads} times per form in the order "
               "A B B A A B ... (the median load and the median compaction per form). "
               "Ingest = map + load + compact. Triples: as counted by the store (distinct).",
        columns=("map s", "load + compact s", "ingest s", "triples"),
        measure=lambda schema, i: measure(args.scale, schema, Path(args.work), i,
                                          loads_per_form=args.loads, keep=args.keep),
        row=lambda x: (f"{x['map_seconds']:.1f}", f"{x['load_seconds'] + x['compact_seconds']:.1f}",
                       f"{x['ingest_seconds']:.1f}", f"{x['store_triples']:,}"),
        costs={"triples": "store_triples", "map time": "map_seconds",
               "ingest time": "ingest_seconds"})


def _report(args: argparse.Namespace, *, name: str, title: str, command: str, method: str,
            columns: tuple[str, ...], measure, row, costs: dict[str, str],
            extra: dict | None = None) -> int:
    """Run ``measure`` per schema and write ``name``-SCALE.{json,md}: a row per schema and form,
    and ``both`` over ``full`` for each of ``costs`` (column -> figure)."""
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc: dict = {"scale": args.scale, "started": started, "machine": platform.machine(),
                 "python": platform.python_version(), **(extra or {}), "schemas": {}}
    lines = [f"# {title}, scale {args.scale:g}", "",
             f"Run {started} on {platform.machine()}, Python {platform.python_version()}; "
             f"`benchmarks/rollup_cost.py --scale {args.scale:g} {command}`. {method}", "",
             "| schema | form | " + " | ".join(columns) + " |",
             "|---|---|" + "---:|" * len(columns)]
    cost_rows = []
    for i, schema in enumerate(("typed", "tagged")):
        r = doc["schemas"][schema] = measure(schema, i)
        for g in FORMS:
            line = f"| {schema} | {g} | " + " | ".join(row(r[g])) + " |"
            print(line, flush=True)
            lines.append(line)
        f, b = r["full"], r["both"]
        cost_rows.append(f"| {schema} | " + " | ".join(_pct(b[k], f[k]) for k in costs.values()) + " |")
    lines += ["", "Rollup cost (`both` over `full`; targets: ≤ 5 % triples, ≤ 15 % ingest time):", "",
              "| schema | " + " | ".join(costs) + " |", "|---|" + "---:|" * len(costs), *cost_rows]
    print("\n".join(lines[-len(cost_rows) - 2:]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}-{args.scale:g}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{name}-{args.scale:g}.md").write_text("\n".join(lines) + "\n")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
