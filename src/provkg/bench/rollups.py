"""The rollup-backed canned forms beside the paper's full-detail ones (``provkg bench schemas``).

The paper's experiment measures the lifecycle stored in full (every batch: Fig. 10's form).
This part stores the same lifecycle again at ``granularity: both`` (every batch and the
per-epoch rollups, an innermost section's default) and times the batch-aggregating canned
queries on it, typed and tagged, on the same stores; their answers must be the full-detail
ones. The report puts both in one table per store.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from provkg.bench.dataset import build_datasets
from provkg.bench.synthetic import Shape

__all__ = ["ROLLUP_QUERIES", "measure_rollups", "rollup_lines"]

#: the canned queries a rollup answers (the others read no batch)
ROLLUP_QUERIES = ("q4", "q5", "q7")


def measure_rollups(shape: Shape, stores: list[str], plans: list[Any], data_dir: Path, work: Path, *,
                    reference: dict[str, tuple[str, list[tuple]]], timeout: float, budget: float,
                    progress: bool, say: Any) -> dict[str, Any]:
    """Build the ``both`` datasets of ``shape``, load them into each store of ``stores`` and
    time :data:`ROLLUP_QUERIES` there; ``reference`` holds the full-detail answers (query ->
    (store, canonical rows)). Returns the report's ``rollups`` section."""
    from provkg.bench.schemas import measure_store
    from provkg.bench.servers import open_stores
    from provkg.errors import QueryTimeout, StoreError

    todo = [p for p in plans if p.name in ROLLUP_QUERIES and p.skip is None]
    if not todo:
        return {}
    both = dataclasses.replace(shape, granularity="both")
    say("rollups: generate, map typed + tagged at granularity both, bulk-load embedded Oxigraph")
    sets, pipeline_s = build_datasets(both, data_dir / "both", load_oxigraph="oxigraph" in stores,
                                      progress=progress)
    out: dict[str, Any] = {"pipeline_s": pipeline_s,
                           "datasets": {s: {"triples": r.triples, "map_seconds": r.map_seconds,
                                            "load_seconds": r.load_seconds} for s, r in sets.items()},
                           "stores": {}}
    for name in stores:
        if name == "rdflib":  # it measures the paper's three queries at its own smaller scale
            continue
        try:
            with open_stores(name, {s: Path(r.path) for s, r in sets.items()}, work / "rollups",
                             oxigraph_dirs={s: Path(r.store_dir) for s, r in sets.items() if r.store_dir},
                             pipeline_load={s: r.load_seconds + (r.compact_seconds or 0.0)
                                            for s, r in sets.items() if r.load_seconds is not None}) as run:
                results = measure_store(run, todo, timeout=timeout, budget=budget, no_answer=set(),
                                        progress=progress)
        except (StoreError, QueryTimeout) as exc:
            out["stores"][name] = {"error": str(exc)}
            continue
        section: dict[str, dict[str, Any]] = {}
        for q, res in results.items():
            entry = res.as_dict()
            full = reference.get(q)
            entry["same_as_full_detail"] = full is not None and res.answer == full[1]
            section[q] = entry
        out["stores"][name] = section
        say(f"{name} rollups: " + "; ".join(
            f"{q} {_ms(r, 'typed'):.1f}/{_ms(r, 'tagged'):.1f} ms" for q, r in section.items() if "typed" in r))
    return out


def _ms(result: dict[str, Any], schema: str) -> float | None:
    timing = result.get(schema)
    return None if not isinstance(timing, dict) else float(timing["median_s"]) * 1e3


def rollup_lines(doc: dict[str, Any]) -> list[str]:
    """The report's rollup table: per store and query, the full-detail (paper) and the
    rollup-backed warm medians, typed and tagged, and whether the answers agree."""
    section = doc.get("rollups") or {}
    if not section.get("stores"):
        return []
    lines = ["## Rollup-backed canned forms\n",
             "The same lifecycle stored again at `granularity: both` (every batch and the per-epoch "
             "rollups, an innermost section's default): the canned queries read the rollups. "
             "Full detail is the paper's form above. Warm medians."]
    for schema, d in section["datasets"].items():
        full = doc["datasets"][schema]["triples"]
        lines.append(f"- {schema}: {d['triples']:,} triples ({d['triples'] / full - 1:+.2%} for the rollups), "
                     f"mapped in {d['map_seconds']:.1f} s")
    lines += ["", "| store | query | typed full detail | typed rollups | tagged full detail | tagged rollups "
              "| answers |", "|---|---|---:|---:|---:|---:|---|"]
    for store, results in section["stores"].items():
        if "error" in results:
            lines.append(f"| {store} | – | {results['error'][:80]} | | | | |")
            continue
        paper = doc["stores"].get(store, {}).get("results", {})
        for q, r in results.items():
            cells = []
            for schema in ("typed", "tagged"):
                for source in (paper.get(q, {}), r):
                    ms = _ms(source, schema)
                    cells.append("–" if ms is None else f"{ms:.1f} ms")
            same = "identical" if r.get("same_as_full_detail") and r.get("identical") else "**differ**"
            lines.append(f"| {store} | {q} | " + " | ".join(cells) + f" | {same} |")
    return lines + [""]
