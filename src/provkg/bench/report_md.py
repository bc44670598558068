"""The Markdown page of a ``provkg bench schemas`` run (rendered from its JSON document)."""

from __future__ import annotations

from typing import Any

from provkg.bench.rollups import rollup_lines

__all__ = ["render_markdown"]

_STORE_TITLES = {
    "oxigraph": "Oxigraph embedded, on disk",
    "memory": "Oxigraph embedded, in memory",
    "rdflib": "rdflib, in memory",
    "oxigraph-server": "Oxigraph server (HTTP)",
    "virtuoso": "Virtuoso 7 (HTTP)",
}


def _t(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _gib(b: int | None) -> str:
    return "–" if not b else f"{b / 2**30:.2f} GiB"


def render_markdown(doc: dict[str, Any]) -> str:
    out: list[str] = []
    add = out.append
    m, v = doc["machine"], doc["versions"]
    add(f"# Typed (PROV-ML) vs tag-based (PROVLake) queries — scale {doc['scale']:g}\n")
    add("The PROV-ML paper's section 5.4 / Fig. 10 experiment, re-run with provkg's generator "
        "(`provkg.bench.synthetic`), mapper, stores and canned queries: "
        "`provkg bench schemas --scale " + f"{doc['scale']:g}" + "`.\n")
    add(f"- date {doc['date']}; {m['cpu']}, {m['cores']} cores, {_gib(m['memory_bytes'])} RAM; "
        f"load average at start {', '.join(f'{x:.1f}' for x in m['load_average_at_start'])}"
        + (f", at end {', '.join(f'{x:.1f}' for x in m['load_average_at_end'])}"
           if "load_average_at_end" in m else ""))
    add(f"- Python {v['python']}, pyoxigraph {v['pyoxigraph']}, {v['oxigraph_cli']}, rdflib "
        f"{v['rdflib']}, Virtuoso {v['virtuoso']}, provkg {v['provkg_commit']}")
    sh = doc["shape"]
    add(f"- data: {sh['workflows']} learning workflows × (training, validation, evaluation) × "
        f"{sh['epochs']} epochs; {sh['training_batches']} training, {sh['validation_batches']} "
        f"validation, {sh['evaluation_batches']} evaluation batches per epoch; batch hyperparameters "
        f"{', '.join(sh['batch_hyperparameters'])}; seed {sh['seed']}")
    for schema, d in doc["datasets"].items():
        add(f"- {schema}: **{d['triples']:,} triples** ({d['vs_paper']:+.2%} vs the paper's "
            f"{doc['paper_triples']:,}), {d['events']:,} events, mapped in {d['map_seconds']:.1f} s"
            + (f", bulk-loaded into embedded Oxigraph in {d['load_seconds']:.1f} s"
               if d.get("load_seconds") else "")
            + (f" and compacted in {d['compact_seconds']:.1f} s" if d.get("compact_seconds") else "")
            + (f" (worker peak RSS {_gib(d['peak_rss'])})" if d.get("peak_rss") else ""))
    add(f"- pipeline (events → triples → both datasets → loaded into embedded Oxigraph on disk, "
        f"two processes): **{doc['pipeline_s']:.1f} s**\n")
    _loads(doc, add)
    _paper_table(doc, add)
    _query_tables(doc, add)
    for line in rollup_lines(doc):
        add(line)
    _targets(doc, add)
    _clauses(doc, add)
    if doc.get("problems") or doc.get("warnings"):
        add("## Problems and warnings\n")
        for p in doc.get("problems", []):
            add(f"- **problem**: {p}")
        for w in doc.get("warnings", []):
            add(f"- warning: {w}")
        add("")
    add("Method: one cold run, then warm runs alternating typed and tagged until the 95 % "
        "confidence interval of each median (order statistics) is within ±5 % of it, at least "
        "5 and at most 100 runs or a time budget per query; times are measured in the client "
        "around `Store.select` (request to Python rows). Speedup = tagged median / typed median; "
        "its range comes from the two confidence intervals (min–max when too few runs). "
        "Typed and tagged answers are compared row for row; each store's answers are compared "
        "with the first store's.\n")
    return "\n".join(out) + "\n"


def _loads(doc: dict[str, Any], add: Any) -> None:
    add("## Loading\n")
    add("| store | how | schema | triples | seconds | triples/s | peak RSS (client / server) |")
    add("|---|---|---|---:|---:|---:|---|")
    for name, sec in doc["stores"].items():
        if "error" in sec:
            add(f"| {_STORE_TITLES.get(name, name)} | failed: {sec['error'][:80]} | | | | | |")
            continue
        for schema, ld in sec["load"].items():
            rss = sec["peak_rss"].get(schema, {})
            add(f"| {_STORE_TITLES.get(name, name)} | {sec['load_note']} | {schema} | "
                f"{ld['triples']:,} | {ld['seconds']:.1f} | {ld['triples_per_s'] or 0:,.0f} | "
                f"{_gib(rss.get('client'))} / {_gib(rss.get('server'))} |")
    add("")
    ref = doc["reference"]["load"]
    add("Issue reference: " + "; ".join(f"{k} {v}" for k, v in ref.items()) + ".\n")


def _lower_bound(doc: dict[str, Any], r: dict[str, Any]) -> str:
    """``> N×`` when typed answered and tagged ran past the time limit."""
    cold = r.get("typed_cold_s")
    if cold and str(r.get("error", "")).startswith("tagged"):
        return f"> {doc['timeout_s'] / cold:.0f}×"
    return "–"


def _speedup(doc: dict[str, Any], store: str, q: str) -> dict[str, Any] | None:
    r = doc["stores"].get(store, {}).get("results", {}).get(q)
    return r.get("typed_speedup") if r else None


def _paper_table(doc: dict[str, Any], add: Any) -> None:
    stores = [s for s in doc["stores"] if "results" in doc["stores"][s]]
    paper = doc["paper_speedup"]
    dbs = list(next(iter(paper.values())).keys())
    add("## Typed speedup (tagged time / typed time) next to the paper and the issue's reference\n")
    add("| query | " + " | ".join(_STORE_TITLES.get(s, s) for s in stores) + " | "
        + " | ".join(f"paper: {d}" for d in dbs) + " | issue reference (ox. mem / disk / server / Virtuoso) |")
    add("|---|" + "---:|" * (len(stores) + len(dbs)) + "---|")
    ref = doc["reference"]["speedup"]
    for q in ("q1", "q5", "q7"):
        cells = []
        for s in stores:
            sp = _speedup(doc, s, q)
            r = doc["stores"][s]["results"].get(q) or {}
            cells.append(_lower_bound(doc, r) if not sp
                         else f"**{_x(sp['speedup'])}** ({_x(sp['low'])}–{_x(sp['high'])})")
        refs = " / ".join(_x(ref[s][q]) for s in ("memory", "oxigraph", "oxigraph-server", "virtuoso"))
        add(f"| {q.upper()} | " + " | ".join(cells) + " | "
            + " | ".join(_x(paper[q][d]) for d in dbs) + f" | {refs} |")
    add("\nrdflib holds a smaller scale than the others (see its epochs below).\n"
        if "rdflib" in stores and doc["stores"]["rdflib"]["epochs"] != doc["shape"]["epochs"] else "")


def _query_tables(doc: dict[str, Any], add: Any) -> None:
    add("## Query times per store (warm median, min–max; cold run)\n")
    skipped = [q for q in doc["queries"] if q.get("skip")]
    for name, sec in doc["stores"].items():
        if "results" not in sec:
            continue
        add(f"### {_STORE_TITLES.get(name, name)} ({sec['epochs']} epochs)\n")
        add("| query | rows | typed median | typed min–max | typed cold | tagged median | "
            "tagged min–max | tagged cold | runs | typed speedup | identical |")
        add("|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|")
        for q, r in sec["results"].items():
            if "typed" not in r:
                cold = r.get("typed_cold_s")
                add(f"| {q} | | {'–' if cold is None else _t(cold)} (cold) | | | "
                    f"{r.get('error', '')} | | | | {_lower_bound(doc, r)} | |")
                continue
            ty, tg, sp = r["typed"], r["tagged"], r["typed_speedup"]
            same = _identical(r)
            add(f"| {q} | {r['rows']} | {_t(ty['median_s'])} | {_t(ty['min_s'])}–{_t(ty['max_s'])} | "
                f"{_t(ty['cold_s'])} | {_t(tg['median_s'])} | {_t(tg['min_s'])}–{_t(tg['max_s'])} | "
                f"{_t(tg['cold_s'])} | {ty['repetitions']} | {_x(sp['speedup'])} | {same} |")
        add("")
    no_answer = doc.get("no_answer") or []
    if skipped or no_answer:
        add("Not measured: " + "; ".join(
            [f"{q['name']} ({q['skip']})" for q in skipped]
            + [f"{n} (no answer on this data)" for n in no_answer]) + ".\n")


def _identical(r: dict[str, Any]) -> str:
    """The last column: typed vs tagged here, and this store vs the first one."""
    if not r["identical"]:
        return f"**NO**: {r.get('mismatch', '')[:160]}"
    cross = r.get("cross_store")
    if not cross:
        return "yes"
    if cross.startswith("float rounding"):
        return "yes (vs the first store: float rounding only)"
    return f"yes, but **not the first store's answer**: {cross[:160]}"


def _targets(doc: dict[str, Any], add: Any) -> None:
    tr = doc.get("target_results") or {}
    if not tr:
        return
    add("## Targets\n")
    for name, t in tr.items():
        mark = "met" if t.get("met") else "**missed**"
        detail = ", ".join(
            str(v) if k == "why" else f"{k} {_t(v) if k.endswith('_s') or k == 'seconds' else _x(v)}"
            for k, v in t.items() if k not in ("met", "target_s"))
        add(f"- {name}: {mark} ({detail})")
    add("")


def _clauses(doc: dict[str, Any], add: Any) -> None:
    add("## Triple patterns per query (clauses), typed vs tagged\n")
    add("| query | typed | tagged |")
    add("|---|---:|---:|")
    for q in doc["queries"]:
        c = q.get("clauses")
        if c:
            add(f"| {q['name']} | {c.get('typed', '–')} | {c.get('tagged', '–')} |")
    if doc.get("clause_parts"):
        add("\nPer query part (the paper's Table 3 for Q7), from `provkg bench clauses`:\n")
        add("```\n" + doc["clause_parts"].rstrip() + "\n```")
    add("")
