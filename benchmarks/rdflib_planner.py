"""Does provkg's rdflib query planner (``provkg.store.rdflib_prepared`` + ``rdflib_plan``) pay
its way? Every canned query, typed and tagged, on one synthetic dataset in an ``rdflib:``
store, run with the planner (prepared templates, rewritten plans) and without it (the text
given straight to rdflib's ``Dataset.query``), side by side in one run; answers must be
identical. Each run is a forked child with a time limit, so a run past the limit is
stopped, not left running in the background.

    .venv/bin/python benchmarks/rdflib_planner.py --scale 0.01 --limit 60 \
        --out benchmarks/results/rdflib-planner.md
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import rdflib

from provkg.bench import synthetic
from provkg.bench.dataset import write_dataset
from provkg.bench.schemas import _finished, plan_queries
from provkg.store import open_store, rdflib_store

__all__ = ["main"]

MODES = ("planner", "plain")


def _plain(query: str, namespaces: dict) -> tuple[str, object]:
    """What rdflib does without provkg's planner: it parses and plans the text itself."""
    return query, lambda: None


def _run(store, text: str, mode: str, repeats: int, conn) -> None:  # in the forked child
    try:
        if mode == "plain":
            rdflib_store.prepare_query = _plain
        seconds = []
        rows = None
        for _ in range(repeats):
            start = time.perf_counter()
            rows = store.select(text, hide_system_graphs=False)
            seconds.append(time.perf_counter() - start)
        conn.send(("ok", seconds, rows))
    except Exception as exc:  # noqa: BLE001 -- reported in the table
        conn.send(("error", [], f"{type(exc).__name__}: {exc}"))


def _timed(store, text: str, mode: str, repeats: int, limit: float):
    """(seconds of each run, rows) or (None, reason) past ``limit`` seconds or on error."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_run, args=(store, text, mode, repeats, child))
    proc.start()
    child.close()
    if not parent.poll(limit):
        proc.kill()
        proc.join()
        return None, f"> {limit:g} s"
    status, seconds, rows = parent.recv()
    proc.join()
    return (seconds, rows) if status == "ok" else (None, rows)


def _cell(result) -> str:
    seconds, _ = result
    if seconds is None:
        return result[1]
    first, rest = seconds[0], seconds[1:]
    return f"{first:.3f}" + (f" / {statistics.median(rest):.3f}" if rest else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per run of a query")
    parser.add_argument("--repeats", type=int, default=3, help="runs per query and mode")
    parser.add_argument("--queries", help="comma-separated canned query names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/rdflib-planner.md"))
    args = parser.parse_args(argv)
    shape = synthetic.shape_for_scale(args.scale)
    plans = [p for p in plan_queries(shape, only=args.queries.split(",") if args.queries else None)
             if p.skip is None]
    lines = []
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as work:
        for schema in ("typed", "tagged"):
            data = write_dataset(shape, schema, Path(work) / f"{schema}.nt")
            store = open_store("rdflib:")
            start = time.perf_counter()
            store.load_file(data.path)
            load_s = time.perf_counter() - start
            sizes[schema] = data.triples
            print(f"{schema}: {data.triples} triples, loaded in {load_s:.1f} s", file=sys.stderr)
            for plan in plans:
                results = {m: _timed(store, plan.texts[schema], m, args.repeats, args.limit)
                           for m in MODES}
                done = [r for r in results.values() if r[0] is not None]
                if len(done) == 2:
                    a, b = (_finished(plan.name, r[1]) for r in done)
                    same = (a.rows == b.rows if plan.ordered else
                            sorted(map(repr, a.rows)) == sorted(map(repr, b.rows)))
                    answer = f"{len(a)} rows, identical" if same else "**DIFFERENT**"
                    ratio = f"{done[1][0][0] / done[0][0][0]:.1f}x"
                else:
                    answer = "—"
                    ratio = ("—" if results["planner"][0] is None
                             else f"> {args.limit / results['planner'][0][0]:.0f}x")
                lines.append(f"| {plan.name} | {schema} | {_cell(results['planner'])} | "
                             f"{_cell(results['plain'])} | {ratio} | {answer} |")
                print(lines[-1], file=sys.stderr)
            store.close()
    head = [
        "# rdflib: canned queries with and without provkg's planner",
        "",
        f"`benchmarks/rdflib_planner.py --scale {args.scale:g} --limit {args.limit:g} "
        f"--repeats {args.repeats}`: synthetic dataset (`provkg.bench.synthetic`, "
        f"{shape.epochs} epochs; " + ", ".join(f"{k} {n:,} triples" for k, n in sizes.items())
        + f"), one `rdflib:` store per schema; rdflib {rdflib.__version__}, "
        f"Python {platform.python_version()}, {platform.machine()}.",
        "",
        "Seconds: first run (parse + plan + evaluate) / median of the later runs. *planner*: "
        "`provkg.store.rdflib_prepared` (templates kept per query shape, plans rewritten by "
        "`provkg.store.rdflib_plan`); *plain*: the text given to rdflib's `Dataset.query`. "
        "*plain / planner*: first runs. A run past the limit is stopped.",
        "",
        "| query | schema | planner (s) | plain (s) | plain / planner | answers |",
        "|---|---|---|---|---|---|",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(head + lines) + "\n", encoding="utf-8")  # add the verdict by hand
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
