"""The demo's use case: run (or reuse) the seismic lifecycle, ask the graph, write the report.

:func:`run_demo` takes typed keyword arguments and returns a :class:`DemoResult`; it prints
nothing. What happens while it runs (the lifecycle's progress, a reused run, the online
losses) goes to a :class:`DemoListener`, which ``provkg demo`` (:mod:`provkg.cli.demo`) draws
in the terminal.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from provkg.config import writable_folder
from provkg.demo.answers import Answer, ask_all
from provkg.demo.example import KG_FILE, example_dir, kg_facts, load_example, survey_geometry
from provkg.demo.needs import require
from provkg.demo.readable import duration, significant
from provkg.demo.report import build_report, write_report
from provkg.demo.summary import FILE_NAME, RunSummary, read_summary, summarize, write_summary
from provkg.errors import ProvkgError
from provkg.spec import Spec, load_spec
from provkg.store import Store, display_url, open_store
from provkg.term import iri, literal, mint_iri
from provkg.vocab import PROV

__all__ = ["run_demo", "DemoResult", "DemoListener", "QuietListener", "OnlineHook", "RUN_PREFIX",
           "KG_GRAPH", "SINK_WAIT_S"]

#: every run, task and value id of the demo starts with this
RUN_PREFIX = "seismic-demo"
#: the named graph the domain KG is loaded into
KG_GRAPH = "https://w3id.org/provkg/id/graph/seismic-kg"
#: how long to wait for a server to apply the events sent with a sink
SINK_WAIT_S = 60.0

#: called after each epoch with the capture workflow, the training's running result and the
#: epoch number; returns a line worth showing (the live loss read from the store)
OnlineHook = Callable[..., "str | None"]


class DemoListener(Protocol):
    """What :func:`run_demo` reports while it runs."""

    def started(self) -> None:
        """The arguments are sound and the store is open: the demo begins."""

    def knowledge_loaded(self, triples: int) -> None:
        """The ontologies and the seismic KG (``triples`` of it) are in the store."""

    def reusing(self, out: Path) -> None:
        """The previous run in ``out`` has the same settings: it is reused, not redone."""

    def lifecycle(self, online: OnlineHook | None) -> AbstractContextManager[Any]:
        """A progress object for the lifecycle (``phase``, ``advance``, ``note``,
        ``epoch_done``) that calls ``online`` after each epoch and shows its line."""


class _QuietProgress:
    """The lifecycle's progress when nobody watches: the online hook still runs."""

    def __init__(self, online: OnlineHook | None) -> None:
        self.online = online

    def phase(self, name: str, description: str, total: int) -> None: ...

    def advance(self, steps: int = 1) -> None: ...

    def note(self, text: str) -> None: ...

    def epoch_done(self, *, workflow: Any, result: Any, epoch: int) -> None:
        if self.online is not None:
            self.online(workflow=workflow, result=result, epoch=epoch)


class QuietListener:
    """A :class:`DemoListener` that shows nothing."""

    def started(self) -> None: ...

    def knowledge_loaded(self, triples: int) -> None: ...

    def reusing(self, out: Path) -> None: ...

    @contextlib.contextmanager
    def lifecycle(self, online: OnlineHook | None) -> Iterator[_QuietProgress]:
        yield _QuietProgress(online)


@dataclass(frozen=True)
class DemoResult:
    """What one ``run_demo`` did and found."""

    summary: RunSummary
    answers: list[Answer]
    report_html: Path
    report_md: Path
    store_url: str       # as shown to people: a password is masked
    triples: int         # in the store at the end
    seconds: float       # this call, reused or not
    reused: bool         # the previous run's summary and triples were reused

    @property
    def failed(self) -> list[str]:
        """The answers that do not match what the lifecycle measured (empty: all check out)."""
        return [a.name for a in self.answers if a.ok is False]


def run_demo(*, store: str, out: Path | str = "provkg-demo", sink: str | None = None,
             online: bool = False, fresh: bool = False, epochs: int | None = None,
             small: bool = False, listener: DemoListener | None = None) -> DemoResult:
    """Run the seismic lifecycle into ``store`` (or reuse the same-settings run in ``out``),
    ask the graph Q1-Q7 and d6-d8, check each answer, and write ``out/report.{md,html}``.

    ``sink``: a provkg server's URL the events go to instead (``store`` must then be the
    SPARQL endpoint that server writes to). ``online``: query the store after each epoch
    (starts over, like ``fresh``). ``epochs``: per training (default 6, 2 with ``small``).

    Raises:
        ProvkgError: bad arguments, an unusable ``out`` or sink, or provenance that never
            reached the store.
    """
    started = time.perf_counter()
    listener = listener or QuietListener()
    example = load_example()
    base_sizes = example.SMALL if small else example.DEFAULT
    sizes = example.lifecycle.with_epochs(base_sizes, epochs)
    if sizes.epochs < 1:
        raise ProvkgError("--epochs must be at least 1")
    folder = Path(out).resolve()
    shown = display_url(store)  # the URL as shown (commands in the report): a password is masked
    settings = {"store": shown, "sink": sink, "out": str(folder), "sizes": asdict(sizes)}
    specs = [load_spec(p) for p in sorted((example_dir() / "specs").glob("*.yaml"))]
    if sink and not store.split(":", 1)[0].endswith(("+http", "+https")):
        # a server holds its embedded store, and memory: / rdflib: die with this command: the
        # events sent would never show in the store (else found out only at the end of the run)
        raise ProvkgError(f"--sink sends the events to a server, so --store must be the store that "
                          f"server writes to, as a SPARQL endpoint both reach (oxigraph+http://..., "
                          f"virtuoso+http://...); {shown!r} cannot be")
    with open_store(store) as graph:
        listener.started()
        listener.knowledge_loaded(_load_knowledge(graph))
        previous = None if (fresh or online) else read_summary(folder)
        reused = previous is not None and previous.settings == settings and _holds(graph, previous)
        if reused:
            assert previous is not None
            summary = previous
            listener.reusing(folder)
        else:
            writable_folder(folder, "--out", "the demo's files")  # before anything is deleted
            if sink:  # reachable, and mapping as the demo's specs say, before anything goes
                _post_specs(sink, specs)
            _forget_previous(graph, folder)
            summary = _run_lifecycle(example, graph, specs, sink=sink, online=online, out=folder,
                                     sizes=sizes, settings=settings, listener=listener,
                                     started=started)
        answers = ask_all(graph, summary, store_url=shown)
        md, page = write_report(build_report(graph, summary, answers, out=folder, store_url=shown),
                                folder)
        triples = graph.count()
    return DemoResult(summary, answers, page, md, shown, triples, time.perf_counter() - started,
                      reused)


def _load_knowledge(store: Store) -> int:
    """Ontologies and the geoscientists' KG (both idempotent); the KG's triple count."""
    require("provkg.service.loading", "loading the ontologies").init_store(store)
    store.clear(graph=KG_GRAPH)
    return int(store.load_file(example_dir() / "kg" / "seismic-kg.ttl", graph=KG_GRAPH))


def _holds(store: Store, summary: RunSummary) -> bool:
    """The store has the provenance of ``summary``'s models, up to the end of their runs
    (the last event a learning run sends)."""
    return all(store.ask(f"ASK {{ {iri(mint_iri('value', t.model))} {iri(PROV.wasGeneratedBy)} "
                         f"?task . {iri(mint_iri('run', t.run_id))} {iri(PROV.endedAtTime)} ?end }}")
               for t in summary.trainings)


#: what the demo writes in its out folder; nothing else there is ever deleted
_OUTPUTS = ("raw", "interpretation", "curated", "prepared", "models", "figures", "report.md",
            "report.html", FILE_NAME)


def _forget_previous(store: Store, out: Path) -> None:
    """Delete the demo's earlier provenance (its runs, tasks and values) and the files it
    wrote in ``out`` (only those: ``out`` may be a folder that holds other things)."""
    prefixes = [mint_iri(kind, RUN_PREFIX) for kind in ("run", "task", "value")]
    # the rollups of its epochs too: left, a new run's rollups would merge the old facts
    prefixes += [mint_iri("summary", kind, RUN_PREFIX) for kind in ("run", "task")]
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


def _run_lifecycle(example: Any, store: Store, specs: list[Spec], *, sink: str | None,
                   online: bool, out: Path, sizes: Any, settings: dict[str, Any],
                   listener: DemoListener, started: float) -> RunSummary:
    facts = kg_facts(store, KG_FILE)
    geometry = survey_geometry(example, facts)
    annotation = example.curation.Annotation(facts.file, facts.survey, facts.survey_label,
                                             facts.basin, facts.basin_label, facts.field,
                                             facts.field_label)
    open_sink = _sink_factory(store, specs, sink)
    with listener.lifecycle(_online_hook(store) if online else None) as progress:
        result = example.run_lifecycle(
            out_dir=out, geometry=geometry, annotation=annotation, file_name=facts.file_name,
            survey_name=facts.survey_label, open_sink=open_sink, sizes=sizes, progress=progress,
            run_prefix=RUN_PREFIX)
    summary = summarize(result, settings=settings, kg_file=facts.file)
    _wait_for_provenance(store, summary, sink=sink)
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


def _online_hook(store: Store) -> OnlineHook:
    """After each epoch: deliver the captured events, ask the store for the live loss."""
    run_query = require("provkg.service.querying", "the canned queries").run_query

    def hook(*, workflow: Any, result: Any, epoch: int) -> str | None:
        workflow.flush(timeout=10.0)
        rows = run_query(store, "d3", {"training": result.training_id, "measure": "loss"})
        for row in rows.as_dicts():
            if row["epoch"] == epoch:
                return (f"{result.config.name} epoch {epoch}: loss "
                        f"{significant(float(row['loss']))} read from the store "
                        f"({duration(float(row['seconds']))}), training code says "
                        f"{significant(result.epoch_losses[-1])}")
        return f"{result.config.name} epoch {epoch}: not in the store yet"

    return hook
