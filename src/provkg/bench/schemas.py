"""``provkg bench schemas``: the PROV-ML paper's typed vs tag-based experiment (section 5.4,
Fig. 10) with provkg's own generator, mapper, stores and canned queries.

Steps: build both datasets and bulk-load them into embedded Oxigraph (the timed pipeline);
then, one store after another, load both datasets by the store's fast path and run each
canned query that has an answer on this data (Q1, Q5, Q7 first) typed and tagged per
:mod:`provkg.bench.timing`; typed and tagged answers must be identical row for row. Results
go to ``--out`` as JSON, Markdown and a Fig. 10-style PNG (:mod:`provkg.bench.report`).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provkg.bench import answers, synthetic
from provkg.bench.dataset import DatasetReport, build_datasets
from provkg.bench.plans import explain_oxigraph, explain_virtuoso
from provkg.bench.servers import STORES, StoreRun, open_stores, unavailable
from provkg.bench.synthetic import Shape
from provkg.bench.timing import Timing, measure_pair, ratio_spread
from provkg.errors import ProvkgError, QueryTimeout, StoreError
from provkg.queries.builder import DIALECTS
from provkg.store import Rows, store_dialect

__all__ = [
    "PAPER_QUERIES",
    "QueryPlan",
    "cmd_schemas",
    "compare_answers",
    "measure_store",
    "plan_queries",
    "run_experiment",
]

#: the three queries of the paper's Fig. 10, measured first
PAPER_QUERIES = ("q1", "q5", "q7")


@dataclass
class QueryPlan:
    """One canned query as the benchmark runs it."""

    name: str
    question: str
    params: dict[str, object]
    texts: dict[str, str] = field(default_factory=dict)      # schema -> SPARQL
    dialect_texts: dict[str, dict[str, str]] = field(default_factory=dict)  # other dialects
    ordered: bool = False                                     # ORDER BY: row order matters
    skip: str | None = None                                   # why it is not measured

    def texts_for(self, dialect: str) -> dict[str, str]:
        """schema -> SPARQL as a store of ``dialect`` is sent it (see ``store_dialect``)."""
        return self.dialect_texts.get(dialect, self.texts)


def plan_queries(shape: Shape, *, only: list[str] | None = None) -> list[QueryPlan]:
    """Every canned query rendered typed and tagged with parameters pointing at ``shape``'s data
    (Q1, Q5, Q7 first); queries that cannot run on this data carry a ``skip`` reason."""
    from provkg.service.querying import query_catalog, render_query

    values = answers.query_parameters(shape)
    catalog = {q.name: q for q in query_catalog()}
    names = [n for n in PAPER_QUERIES if n in catalog] + [n for n in catalog if n not in PAPER_QUERIES]
    if only:
        unknown = sorted(set(only) - set(catalog))
        if unknown:
            raise ProvkgError(f"--queries: unknown {', '.join(unknown)}; known: {', '.join(catalog)}")
        names = [n for n in names if n in only]
    plans = []
    for name in names:
        q = catalog[name]
        params = {}
        for p in q.parameters:
            if p.name in values:
                params[p.name] = values[p.name]
        plan = QueryPlan(name=name, question=getattr(q, "question", ""), params=params)
        for schema in ("typed", "tagged"):
            try:
                plan.texts[schema] = render_query(name, params, schema=schema)
                for d in DIALECTS:
                    if d != "standard":
                        plan.dialect_texts.setdefault(d, {})[schema] = render_query(
                            name, params, schema=schema, dialect=d)
            except ProvkgError as exc:
                plan.skip = f"cannot render {schema}: {exc}"
                break
        plan.ordered = "ORDER BY" in plan.texts.get("typed", "").upper()
        plans.append(plan)
    return plans


def _canonical(rows: Rows) -> list[tuple]:
    return [tuple(r) for r in rows.rows]


def _finished(name: str, rows: Rows) -> Rows:
    """Rows as ``provkg query`` shows them: the catalog's column order, ``name=value`` pair
    columns decoded and sorted by name (GROUP_CONCAT order is up to each store)."""
    from provkg.queries.catalog import get_query

    q = get_query(name)
    return Rows(list(q.columns), q.finish(rows.columns, rows.rows))


def compare_answers(typed: Rows, tagged: Rows, *, ordered: bool) -> str | None:
    """None when both answers are identical row for row (as multisets, and in the same order
    when the query orders them); else a short description of the first difference."""
    if typed.columns != tagged.columns:
        return f"columns differ: {typed.columns} vs {tagged.columns}"
    a, b = _canonical(typed), _canonical(tagged)
    if len(a) != len(b):
        return f"{len(a)} typed rows vs {len(b)} tagged rows"
    if sorted(a, key=repr) != sorted(b, key=repr):
        only_a = [r for r in a if r not in set(b)][:2]
        only_b = [r for r in b if r not in set(a)][:2]
        return f"rows differ: typed only {only_a}, tagged only {only_b}"
    if ordered and a != b:
        first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        return f"same rows, different order from row {first}: {a[first]} vs {b[first]}"
    return None


@dataclass
class QueryResult:
    rows: int = 0
    typed: Timing | None = None
    tagged: Timing | None = None
    mismatch: str | None = None
    error: str | None = None
    answer: list[tuple] | None = None      # typed rows (sorted), for cross-store checks
    cross_store: str | None = None         # how the answer differs from the first store's
    typed_only: float | None = None        # typed cold seconds when tagged ran out of time
    order_note: str | None = None          # same rows, but not in ORDER BY's order in one answer

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"rows": self.rows, "identical": self.mismatch is None
                                  and self.error is None}
        if self.mismatch:
            out["mismatch"] = self.mismatch
        if self.error:
            out["error"] = self.error
        if self.cross_store:
            out["cross_store"] = self.cross_store
        if self.typed_only is not None:
            out["typed_cold_s"] = self.typed_only
        if self.order_note:
            out["order_note"] = self.order_note
        if self.typed and self.tagged:
            out["typed"] = self.typed.as_dict()
            out["tagged"] = self.tagged.as_dict()
            out["typed_speedup"] = ratio_spread(self.typed, self.tagged)
        return out


def measure_store(run: StoreRun, plans: list[QueryPlan], *, timeout: float, budget: float,
                  no_answer: set[str], progress: bool = False) -> dict[str, QueryResult]:
    """Time every plan on one store (typed and tagged alternately), checking the answers.

    A query other than Q1 / Q5 / Q7 whose typed and tagged cold runs both return no row is
    added to ``no_answer`` and not timed (here or on later stores)."""
    from tqdm import tqdm

    results: dict[str, QueryResult] = {}
    todo = [p for p in plans if p.skip is None and p.name not in no_answer]
    dialect = store_dialect(next(iter(run.workers.values())).url)
    for plan in tqdm(todo, desc=f"query {run.name:15}", unit="query", disable=not progress,
                     leave=True, dynamic_ncols=True):
        answers: dict[str, Rows] = {}
        texts = plan.texts_for(dialect)

        def runner(schema: str, texts: dict = texts, answers: dict = answers):
            def once() -> float:
                seconds, rows = run.workers[schema].select(texts[schema], timeout=timeout)
                answers.setdefault(schema, rows)
                return seconds
            return once

        res = QueryResult()
        try:
            cold_typed = runner("typed")()
        except (QueryTimeout, StoreError) as exc:
            res.error = f"typed: {exc}"
            _restart_dead(run)
            results[plan.name] = res
            continue
        try:
            cold = cold_typed, runner("tagged")()
            if plan.name not in PAPER_QUERIES and not answers["typed"].rows \
                    and not answers["tagged"].rows:
                no_answer.add(plan.name)
                continue
            res.typed, res.tagged = measure_pair(runner("typed"), runner("tagged"), budget_s=budget,
                                                 cold=cold)
        except (QueryTimeout, StoreError) as exc:
            # keep what was measured: a typed cold run and how long tagged ran before its limit
            res.error = f"{'tagged' if 'tagged' not in answers else 'warm run'}: {exc}"
            res.typed_only = cold_typed
            _restart_dead(run)
        results[plan.name] = res
        if "typed" in answers and "tagged" in answers:
            typed, tagged = (_finished(plan.name, answers[s]) for s in ("typed", "tagged"))
            res.rows = len(typed)
            res.mismatch = compare_answers(typed, tagged, ordered=plan.ordered)
            if res.mismatch and res.mismatch.startswith("same rows"):
                # the same answer; the store did not keep ORDER BY's order in one of them
                res.order_note, res.mismatch = res.mismatch, None
            res.answer = sorted(_canonical(typed), key=repr)
    return results


def _restart_dead(run: StoreRun) -> None:
    """A timed-out query's worker was killed: start it again (an embedded store reloads).

    A server store goes on running the abandoned query (neither Virtuoso nor Oxigraph
    stops on a closed connection), which would slow every later query: it is restarted on
    its database first."""
    for schema, w in run.workers.items():
        if not w.alive:
            run.restart_server(schema)
            w.start()


def run_experiment(*, scale: float, stores: list[str], out: Path, work: Path,
                   rdflib_scale: float | None = None, queries: list[str] | None = None,
                   timeout: float = 300.0, budget: float = 60.0, rdflib_timeout: float = 60.0,
                   progress: bool = True,
                   plot: bool = True, explain: bool = True,
                   explain_timeout: float = 1800, rollups: bool = True) -> dict[str, Any]:
    """The whole experiment; writes the results files and returns the results document.
    ``rollups``: also the rollup-backed canned forms (:mod:`provkg.bench.rollups`)."""
    from provkg.bench import report

    unknown = [s for s in stores if s not in STORES]
    if unknown:
        raise ProvkgError(f"--stores: unknown {', '.join(unknown)}; known: {', '.join(STORES)}")
    started = time.time()
    skipped = {s: lack for s in stores if (lack := unavailable(s)) is not None}
    for s, (reason, command) in skipped.items():
        _say(f"{s}: skipped: {reason}; add it with: {command}")
    stores = [s for s in stores if s not in skipped]
    if not stores:
        raise ProvkgError("no store to measure on this machine: " + "; ".join(
            f"{s}: {command}" for s, (_, command) in skipped.items()))
    work = work.resolve()  # servers run in their own folders: relative paths would break
    shape = synthetic.shape_for_scale(scale)
    data_dir = work / f"scale-{scale:g}"
    _say(f"pipeline: generate, map typed + tagged, bulk-load embedded Oxigraph (scale {scale:g})")
    datasets, pipeline_s = build_datasets(shape, data_dir, load_oxigraph="oxigraph" in stores,
                                          progress=progress)
    _say(f"pipeline: {pipeline_s:.1f} s; " + ", ".join(
        f"{s} {r.triples:,} triples" for s, r in datasets.items()))
    plans = plan_queries(shape, only=queries)
    doc = report.new_document(scale=scale, shape=shape, datasets=datasets, pipeline_s=pipeline_s,
                              plans=plans, started=started)
    doc["warnings"] += [f"{s}: skipped: {reason}; add it with: {command}"
                        for s, (reason, command) in skipped.items()]
    small: dict[str, DatasetReport] | None = None
    reference: dict[str, tuple[str, list[tuple]]] = {}
    no_answer: set[str] = set()
    for name in stores:
        store_shape, store_sets, store_plans = shape, datasets, plans
        if name == "rdflib" and rdflib_scale is not None and rdflib_scale < scale:
            store_shape = synthetic.shape_for_scale(rdflib_scale)
            if small is None:
                _say(f"rdflib: building the scale-{rdflib_scale:g} datasets it can hold")
                small, _ = build_datasets(store_shape, work / f"scale-{rdflib_scale:g}",
                                          load_oxigraph=False, progress=progress)
            store_sets = small
            store_plans = plan_queries(store_shape, only=queries)
        if name == "rdflib":  # its queries take minutes: the paper's three are enough to show it
            store_plans = [p for p in store_plans if p.name in PAPER_QUERIES]
        _say(f"{name}: loading both datasets")
        try:
            with open_stores(name, {s: Path(r.path) for s, r in store_sets.items()}, work,
                             oxigraph_dirs={s: Path(r.store_dir) for s, r in datasets.items()
                                            if r.store_dir},
                             pipeline_load={s: r.load_seconds + (r.compact_seconds or 0.0)
                                            for s, r in datasets.items()
                                            if r.load_seconds is not None}) as run:
                _say(f"{name}: loaded in " + ", ".join(
                    f"{s} {v:.1f} s" for s, v in run.load_seconds.items()))
                limit = min(timeout, rdflib_timeout) if name == "rdflib" else timeout
                results = measure_store(run, store_plans, timeout=limit, budget=budget,
                                        no_answer=no_answer, progress=progress)
                rss = {s: run.peak_rss(s) for s in run.workers}
                loaded = {s: w.load.triples if w.load else None for s, w in run.workers.items()}
                plans_dir = out / f"schemas-plans-{report.scale_tag(scale)}"
                explained = (explain_virtuoso(run, store_plans, plans_dir)
                             if explain and name == "virtuoso" else {})
        except (StoreError, QueryTimeout) as exc:
            doc["stores"][name] = {"error": str(exc)}
            _say(f"{name}: FAILED: {exc}")
            continue
        if store_shape is shape:
            for q, res in results.items():
                if res.answer is None:
                    continue
                first, rows = reference.setdefault(q, (name, res.answer))
                if q in ("q1", "q7") and first == name:
                    doc["answers"][q] = {"store": name, "rows": [list(r) for r in res.answer]}
                if res.answer != rows:
                    res.cross_store = _difference(first, rows, res.answer)
        doc["stores"][name] = report.store_section(
            name, run, results, rss=rss, loaded=loaded, shape=store_shape,
            datasets=store_sets, explained=explained)
        _say(report.store_summary(name, results))
    if rollups:
        from provkg.bench.rollups import measure_rollups

        doc["rollups"] = measure_rollups(shape, stores, plans, data_dir, work, reference=reference,
                                         timeout=timeout, budget=budget, progress=progress, say=_say)
        for store, section in doc["rollups"].get("stores", {}).items():
            for q, r in section.items():
                if isinstance(r, dict) and "typed" in r and not r["same_as_full_detail"]:
                    doc["problems"].append(f"{store} {q}: the rollup-backed answer differs from the full detail")
    no_explain = unavailable("explain")
    if explain and "oxigraph" in stores and no_explain is not None:
        doc["warnings"].append(f"query plans left out: {no_explain[0]}; add it with: {no_explain[1]}")
    elif explain and "oxigraph" in stores:
        doc["plans"] = explain_oxigraph(datasets, plans,
                                        out / f"schemas-plans-{report.scale_tag(scale)}",
                                        timeout=explain_timeout)
    doc["no_answer"] = sorted(no_answer)
    doc["timeout_s"], doc["budget_s"] = timeout, budget
    report.finish_document(doc, started=started)
    paths = report.write(doc, out, plot=plot)
    _say("results: " + ", ".join(str(p) for p in paths))
    return doc


def _close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _difference(first: str, expected: list[tuple], got: list[tuple]) -> str:
    """How ``got`` differs from the first store's answer; starts with ``float rounding`` when
    every value agrees within 1e-9 (a store computing seconds in doubles, not decimals)."""
    if len(expected) != len(got):
        return f"{len(got)} rows where {first} gave {len(expected)}"
    diff = next((a, b) for a, b in zip(expected, got) if a != b)
    close = all(len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
                for a, b in zip(expected, got))
    prefix = "float rounding only (within 1e-9): " if close else ""
    return f"{prefix}values differ from {first}'s, e.g. {diff[1]} vs {diff[0]}"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _check_args(args: argparse.Namespace, stores: list[str], queries: list[str] | None) -> None:
    """Refuse what would fail only after the long work: an unwritable --out would lose a
    whole run's results, and --scale 0 is an error, not a traceback."""
    from provkg.config import writable_folder
    from provkg.queries.catalog import get_query

    for name in ("scale", "rdflib_scale"):
        value = getattr(args, name, None)
        if value is not None and not 0 < value <= 10:
            raise ProvkgError(f"--{name.replace('_', '-')}: must be more than 0 and at most 10 "
                              "(1 is the paper's 10.17M triples)")
    for name in ("timeout", "rdflib_timeout", "budget", "explain_timeout"):
        value = getattr(args, name, None)
        if value is not None and not value > 0:
            raise ProvkgError(f"--{name.replace('_', '-')}: must be more than 0 seconds")
    if not stores:
        raise ProvkgError(f"--stores: name at least one of {', '.join(STORES)}")
    for q in queries or ():
        query = get_query(q)  # UnknownQuery names the known ones
        if "typed" not in query.schemas or "tagged" not in query.schemas:
            # it would generate, map and load everything to measure nothing
            raise ProvkgError(f"--queries: {q} runs on the {' / '.join(query.schemas)} schema; "
                              "this benchmark compares typed and tagged")
    writable_folder(args.out, "--out", "the results")
    writable_folder(getattr(args, "work", None) or "benchmarks/work", "--work",
                    "the data and stores")  # a traceback after the generator, before


def cmd_schemas(args: argparse.Namespace) -> int:
    """Handler of ``provkg bench schemas``; exit 1 when typed and tagged answers differ."""
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    queries = getattr(args, "queries", None)
    only = [q.strip() for q in queries.split(",") if q.strip()] if queries else None
    _check_args(args, stores, only)
    doc = run_experiment(
        scale=args.scale, stores=stores, out=Path(args.out),
        work=Path(getattr(args, "work", None) or "benchmarks/work"),
        rdflib_scale=getattr(args, "rdflib_scale", None),
        queries=only,
        timeout=getattr(args, "timeout", None) or 300.0,
        budget=getattr(args, "budget", None) or 60.0,
        rdflib_timeout=getattr(args, "rdflib_timeout", None) or 60.0,
        progress=not getattr(args, "quiet", False),
        explain_timeout=getattr(args, "explain_timeout", None) or 1800.0,
        rollups=not getattr(args, "no_rollups", False),
    )
    problems = doc.get("problems") or []
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0
