"""``provkg demo``: the seismic scientific-ML lifecycle end to end, captured, linked and queried.

Layout. The lifecycle itself (synthetic SEG-Y, curation, preparation, learning) is user code
in ``examples/seismic/`` that imports only ``provkg.capture``; it ships in the wheel as
``provkg/_data/examples/seismic`` and :mod:`provkg.demo.example` imports it by path. This
package does what a user of provkg would do around such code:

- ``example``  find and import the example; read the domain KG's facts about the SEG-Y file
- ``summary``  what the lifecycle's own Python measured (``provkg-demo/run.json``)
- ``answers``  Q1-Q7 (and DNNProv's d6-d8) via ``run_query``, checked against the summary
- ``plots``    loss curves and the best model's lineage, drawn from the store
- ``report``   ``report.md`` / ``report.html``
- ``display``  rich progress per phase, online losses, answer tables

Re-running with the same settings reuses the previous run (its summary and its triples)
and only asks the questions again; ``--fresh`` (or ``--online``, which wants to watch
training) deletes the demo's provenance and output folder and starts over.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from provkg.config import writable_folder
from provkg.demo.answers import Answer, ask_all
from provkg.demo.display import PhaseProgress, print_answers
from provkg.demo.example import KG_FILE, example_dir, kg_facts, load_example, survey_geometry
from provkg.demo.plots import plot_lineage, plot_losses
from provkg.demo.report import Report, write_report
from provkg.demo.summary import FILE_NAME, RunSummary, read_summary, summarize, write_summary
from provkg.errors import ProvkgError
from provkg.spec import Spec, load_spec
from provkg.store import Store, display_url, open_store
from provkg.term import iri, literal, mint_iri
from provkg.vocab import PROV

__all__ = ["run", "RUN_PREFIX", "KG_GRAPH"]

#: every run, task and value id of the demo starts with this
RUN_PREFIX = "seismic-demo"
#: the named graph the domain KG is loaded into
KG_GRAPH = "https://w3id.org/provkg/id/graph/seismic-kg"
#: how long to wait for a server to apply the events sent with --sink
SINK_WAIT_S = 60.0


def run(args: argparse.Namespace) -> int:
    """Run the demo as ``provkg demo`` was asked to; 0 when every answer checks out."""
    started = time.perf_counter()
    example = load_example()
    base_sizes = example.SMALL if args.small else example.DEFAULT
    sizes = example.lifecycle.with_epochs(base_sizes, args.epochs)
    if sizes.epochs < 1:
        raise ProvkgError("--epochs must be at least 1")
    out = Path(args.out).resolve()
    console = Console(highlight=False)
    settings = {"store": display_url(args.store), "sink": args.sink, "out": str(out), "sizes": asdict(sizes)}
    specs = [load_spec(p) for p in sorted((example_dir() / "specs").glob("*.yaml"))]
    if args.sink and not args.store.split(":", 1)[0].endswith(("+http", "+https")):
        # a server holds its embedded store, and memory: / rdflib: die with this command: the
        # events sent would never show in --store (else found out only at the end of the run)
        raise ProvkgError(f"--sink sends the events to a server, so --store must be the store that "
                          f"server writes to, as a SPARQL endpoint both reach (oxigraph+http://..., "
                          f"virtuoso+http://...); {display_url(args.store)!r} cannot be")

    with open_store(args.store) as store:
        console.rule("[bold]provkg demo[/bold]: a seismic facies classifier, from SEG-Y to model")
        _load_knowledge(store, console)
        previous = None if (args.fresh or args.online) else read_summary(out)
        if previous is not None and previous.settings == settings and _holds(store, previous):
            summary = previous
            console.print(f"[yellow]reusing the run in {out} (same settings, its provenance is "
                          "in the store); --fresh starts over[/yellow]")
        else:
            writable_folder(out, "--out", "the demo's files")  # before anything is deleted
            if args.sink:  # reachable, and mapping as the demo's specs say, before anything goes
                _post_specs(args.sink, specs)
            _forget_previous(store, out)
            summary = _run_lifecycle(example, store, specs, args=args, out=out, sizes=sizes,
                                     settings=settings, console=console, started=started)
        console.rule("[bold]Questions to the knowledge graph[/bold] (PROV-ML paper, Table 1)")
        # the URL as shown (commands in the report): a password is masked
        answers = ask_all(store, summary, store_url=display_url(args.store))
        print_answers(console, answers)
        page = _report(store, summary, answers, out=out, store_url=display_url(args.store))
        triples = store.count()
    failed = [a.name for a in answers if a.ok is False]
    console.print(f"report: [bold]{page}[/bold] (and report.md); {triples:,} triples in "
                  f"{display_url(args.store)}; {time.perf_counter() - started:.1f} s")
    if failed:
        console.print(f"[bold red]the graph's answers to {', '.join(failed)} do not match what the "
                      "lifecycle measured[/bold red]")
        return 1
    return 0


def require(module: str, what: str) -> Any:
    """Import a provkg module the demo builds on, or say plainly which part is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProvkgError(f"provkg demo needs {module} ({what}), which this installation does "
                          f"not have: {exc}") from exc


def _load_knowledge(store: Store, console: Console) -> None:
    """Ontologies and the geoscientists' KG (both idempotent)."""
    require("provkg.service.loading", "loading the ontologies").init_store(store)
    store.clear(graph=KG_GRAPH)
    n = store.load_file(example_dir() / "kg" / "seismic-kg.ttl", graph=KG_GRAPH)
    console.print(f"loaded the ontologies and the seismic KG ({n} triples: basins, fields, wells, "
                  "surveys, SEG-Y files)")


def _holds(store: Store, summary: RunSummary) -> bool:
    """The store has the provenance of ``summary``'s models, up to the end of their runs
    (the last event a learning run sends)."""
    return all(store.ask(f"ASK {{ {iri(mint_iri('value', t.model))} {iri(PROV.wasGeneratedBy)} "
                         f"?task . {iri(mint_iri('run', t.run_id))} {iri(PROV.endedAtTime)} ?end }}")
               for t in summary.trainings)


#: what the demo writes in its --out folder; nothing else there is ever deleted
_OUTPUTS = ("raw", "interpretation", "curated", "prepared", "models", "figures", "report.md",
            "report.html", FILE_NAME)


def _forget_previous(store: Store, out: Path) -> None:
    """Delete the demo's earlier provenance (its runs, tasks and values) and the files it
    wrote in ``out`` (only those: ``--out`` may be a folder that holds other things)."""
    prefixes = [mint_iri(kind, RUN_PREFIX) for kind in ("run", "task", "value")]
    prefixes.append(mint_iri("value", out.as_uri() + "/"))
    test = " || ".join(f"STRSTARTS(STR(?s), {literal(p)})" for p in prefixes)
    store.update(f"DELETE {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o FILTER({test}) }}")
    store.update(f"DELETE {{ GRAPH ?g {{ ?s ?p ?o }} }} WHERE {{ GRAPH ?g {{ ?s ?p ?o FILTER({test}) }} }}")
    for name in _OUTPUTS:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _run_lifecycle(example: Any, store: Store, specs: list[Spec], *, args: argparse.Namespace,
                   out: Path, sizes: Any, settings: dict[str, Any], console: Console,
                   started: float) -> RunSummary:
    facts = kg_facts(store, KG_FILE)
    geometry = survey_geometry(example, facts)
    annotation = example.curation.Annotation(facts.file, facts.survey, facts.survey_label,
                                             facts.basin, facts.basin_label, facts.field,
                                             facts.field_label)
    open_sink = _sink_factory(store, specs, args.sink)
    online = _online_hook(store) if args.online else None
    with PhaseProgress(console, online=online) as progress:
        result = example.run_lifecycle(
            out_dir=out, geometry=geometry, annotation=annotation, file_name=facts.file_name,
            survey_name=facts.survey_label, open_sink=open_sink, sizes=sizes, progress=progress,
            run_prefix=RUN_PREFIX)
    summary = summarize(result, settings=settings, kg_file=facts.file)
    _wait_for_provenance(store, summary, sink=args.sink)
    summary.seconds = time.perf_counter() - started
    write_summary(summary, out)
    return summary


def _sink_factory(store: Store, specs: list[Spec], sink_url: str | None) -> Any:
    """A function giving each workflow its capture sink: the store in-process, or a server."""
    if sink_url is None:
        store_sink = require("provkg.service.ingest", "the in-process store sink").StoreSink
        return lambda: store_sink(store, specs)
    return lambda: sink_url  # (its specs were posted before the previous run was forgotten)


def _post_specs(sink_url: str, specs: list[Spec]) -> None:
    """Register the specs with the server, so it maps the events to typed PROV-ML."""
    import httpx

    headers = {"Content-Type": "application/yaml"}
    if os.environ.get("PROVKG_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['PROVKG_TOKEN']}"
    for spec in specs:
        path = example_dir() / "specs" / f"{spec.phase}.yaml"
        try:
            response = httpx.post(sink_url.rstrip("/") + "/v1/specs", headers=headers,
                                  content=path.read_bytes(), timeout=30.0)
        except httpx.HTTPError as exc:
            raise ProvkgError(f"cannot reach the provkg server at {sink_url}: {exc}") from exc
        if response.status_code >= 400:
            raise ProvkgError(f"the server at {sink_url} refused the spec {spec.workflow!r}: "
                              f"HTTP {response.status_code} {response.text[:200]}")


def _wait_for_provenance(store: Store, summary: RunSummary, *, sink: str | None) -> None:
    """Fail loudly when the captured events did not reach the store."""
    deadline = time.monotonic() + (SINK_WAIT_S if sink else 0.0)
    while not _holds(store, summary):
        if time.monotonic() >= deadline:
            where = (f"the events were sent to {sink}, but after {SINK_WAIT_S:.0f} s the store "
                     f"{summary.settings['store']} does not show them: give --store the URL of the "
                     "store that server writes to" if sink else
                     "the capture library could not write the events into the store (see the "
                     "messages above; undelivered batches wait in ./provkg-spool)")
            raise ProvkgError(f"the provenance of the trained models is missing: {where}")
        time.sleep(0.5)


def _online_hook(store: Store) -> Any:
    """After each epoch: deliver the captured events, ask the store for the live loss."""
    run_query = require("provkg.service.querying", "the canned queries").run_query

    def hook(*, workflow: Any, result: Any, epoch: int) -> str | None:
        workflow.flush(timeout=10.0)
        rows = run_query(store, "d3", {"training": result.training_id, "measure": "loss"})
        for row in rows.as_dicts():
            if row["epoch"] == epoch:
                return (f"{result.config.name} epoch {epoch}: loss {float(row['loss']):.4f} "
                        f"read from the store ({float(row['seconds']):.2f} s), "
                        f"training code says {result.epoch_losses[-1]:.4f}")
        return f"{result.config.name} epoch {epoch}: not in the store yet"

    return hook


def _report(store: Store, summary: RunSummary, answers: list[Answer], *, out: Path,
            store_url: str) -> Path:
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    lineage = plot_lineage(store, summary, figures / "lineage.png")
    losses = {t.config: plot_losses(store, t, figures / f"loss-{t.config}.png")
              for t in summary.trainings}
    e = summary.extracted
    intro = [
        f"The SEG-Y volume {summary.file_name} ({e['number_of_slices']} inlines "
        f"{e['inline_start']}-{e['inline_end']} x crosslines {e['crossline_start']}-"
        f"{e['crossline_end']}, {e['sample_interval_ms']:g} ms) was curated, cut into "
        f"{summary.tile_size}x{summary.tile_size} tiles from inlines {summary.slice_start}-"
        f"{summary.slice_end} (noise threshold {summary.noise_threshold:g}) and used to train "
        f"{len(summary.trainings)} scikit-learn MLP configurations for "
        f"{summary.settings['sizes']['epochs']} epochs.",
        f"Every step was captured with provkg.capture and mapped to typed PROV-ML triples in "
        f"{store_url}; the domain facts come from the geoscientists' knowledge graph "
        "(examples/seismic/kg/seismic-kg.ttl).",
        "Each table below is the graph's answer to a canned query, checked against the numbers "
        "the lifecycle's own Python code measured; the command under it re-runs the query.",
    ]
    _, page = write_report(Report(summary, answers, store_url, lineage, losses, intro), out)
    return page
