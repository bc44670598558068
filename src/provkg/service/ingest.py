"""Ingest: captured events + prospective specs -> triples in a store.

The one place the mapper meets a store. An :class:`Ingestor` is an ingest session
(the mapper's state plus the store, :mod:`provkg.service.ingestor`); spec registration is
:mod:`provkg.service.registration`; the functions here (and those two re-exported) are the
use cases the CLI, the API and the demo call::

    register_spec(store, spec)                         # prospective triples (+ typed fix-up)
    ingest_events(store, events, specs={...})          # events already in memory
    ingest_paths(store, ["spool/"], specs={...})       # JSONL / .gz / .zst files, spool folders
    StoreSink(store, specs)                            # a capture sink writing in-process

Order does not matter (design decision S3): a task whose run is not known yet is kept
pending (in memory, then as a pending record in the store) until the run's workflow
event arrives; a spec registered after its events re-types what was stored plain (typed)
or adds the parameter classes and adaptation changes it implies (S-PROV).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provkg.errors import BadEvent, BadSpec
from provkg.mapper.terms import PL, SP, A, P
from provkg.schemas import Schema
from provkg.service.event_files import EVENT_SUFFIXES, event_files, read_events, total_bytes
from provkg.service.ingestor import Ingestor, IngestReport
from provkg.service.links import check_links, link_value
from provkg.service.progress import Progress, start
from provkg.service.registration import (
    _TYPED_EXECUTIONS,
    finish_registrations,
    register_spec,
    replacement_changes,
    spec_document,
    stored_specs,
)
from provkg.spec import Spec, load_spec
from provkg.store import Store
from provkg.term import literal
from provkg.vocab import DEFAULT_BASE

__all__ = [
    "IngestPlan",
    "IngestReport",
    "Ingestor",
    "StoreSink",
    "check_links",
    "finish_registrations",
    "given_specs",
    "ingest_events",
    "ingest_paths",
    "link_value",
    "mixed_schema_warning",
    "plan_ingest",
    "rare_collections",
    "register_spec",
    "spec_document",
    "stored_specs",
]


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """Ingest allocates millions of short-lived tuples and strings that form no cycles: with
    CPython's default threshold (a collection every 700 allocations) the cyclic garbage
    collector took 8-10 % of bulk ingest's CPU, and in the server, whose queue applier's chunks
    (lists of ~100,000 fresh triples) outlive the youngest generations, a full collection came
    every second and took ~90 ms with every request stopped (most of the POST p99 at 5,000
    events/s). Collect the youngest generation 100x less often."""
    before = gc.get_threshold()
    gc.set_threshold(70_000, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def ingest_events(store: Store, events: Iterable[Any], *,
                  specs: Mapping[str, Spec] | Iterable[Spec] | None = None,
                  schema: str = "typed", base: str = DEFAULT_BASE, batch_size: int = 5000) -> IngestReport:
    """Map ``events`` (dicts or event models) with ``specs`` and write them to ``store``.

    The specs' prospective triples are written too. Re-running adds no triple.

    Raises:
        MappingError: unknown schema or a malformed event.  StoreError: the store refused data.
    """
    started = time.perf_counter()
    ing = Ingestor(store, specs=specs, schema=schema, base=base, pipeline=True)
    batch: list[Any] = []
    try:
        with rare_collections():
            for e in events:
                batch.append(e)
                if len(batch) >= batch_size:
                    ing.ingest(batch)
                    batch = []
            if batch:
                ing.ingest(batch)
            report = ing.finish()
    finally:
        ing.close()
    report.seconds = time.perf_counter() - started
    return report


def ingest_paths(store: Store, paths: Iterable[str | Path], *,
                 specs: Mapping[str, Spec] | Iterable[Spec] | None = None, schema: str = "typed",
                 base: str = DEFAULT_BASE, progress: Progress | None = None, validate: bool = True,
                 chunk: int = 5000, notify: Callable[[str], object] | None = None) -> IngestReport:
    """Stream event files (JSONL, ``.gz``, ``.zst``) and spool folders into ``store``.

    Memory is bounded by ``chunk`` events or 8 MiB of their lines, whichever comes first (plus the
    mapper's bounded pending state).
    The bytes read are reported to ``progress`` (:mod:`provkg.service.progress`; None: not
    reported), labelled ``ingest``. ``notify`` is told at once what a user waiting should know
    (interrupted: the writes under way are finished before the interrupt goes on).
    ``validate=False`` skips the wire-format check (only for files provkg wrote).

    A bad line does not stop the ingest: it is skipped, every other event of every file
    is stored, and then one :class:`BadEvent` names each bad line (file, line, field) and
    each file that could not be read to its end; its ``report`` attribute is the report of
    what was stored.

    Raises:
        NotFound: a path does not exist.  BadEvent: bad lines or unreadable files (above).
    """
    started = time.perf_counter()
    skipped: list[str] = []
    files = event_files(list(paths), skipped)
    ing = Ingestor(store, specs=specs, schema=schema, base=base, pipeline=True)
    torn: list[str] = []
    bad_lines: list[str] = []
    bad_files: list[str] = []
    bar = start(progress, "ingest", total_bytes(files))
    try:
        with rare_collections():
            for f in files:
                try:
                    for events in read_events(f, validate=validate, chunk=chunk, on_bytes=bar.advance,
                                              on_torn=torn.append, on_bad=bad_lines.append):
                        ing.ingest(events)
                        bar.describe(f"{ing.report.events:,} events, {ing.report.triples:,} triples")
                except BadEvent as exc:  # the file cannot be read further: the others still can
                    bad_files.append(str(exc))
                    ing.report.partial_files += 1
                    continue
                ing.report.files += 1
            report = ing.finish()
    except KeyboardInterrupt:
        bar.close()
        # said before the writes under way finish (seconds on a big batch: a silent wait
        # after Ctrl-C would look like a hang)
        if notify is not None:
            notify("interrupted: finishing the write under way; what is written stays, and "
                   "running the same ingest again completes it (re-ingesting adds no triple)")
        raise
    finally:
        bar.close()
        ing.close()
    report.warnings = torn + report.warnings
    if skipped:
        shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
        files_word = "1 file" if len(skipped) == 1 else f"{len(skipped)} files"
        report.warnings.insert(0, f"{files_word} in the folders not read: {shown} "
                               f"(event files end in {', '.join(EVENT_SUFFIXES)}); give a file by "
                               "name to read it")
    report.seconds = time.perf_counter() - started
    if bad_lines or bad_files:
        error = BadEvent(_bad_input_message(bad_lines, bad_files))
        error.report = report  # type: ignore[attr-defined]
        raise error
    return report


#: bad lines named one by one in the error; the rest are counted
_MAX_BAD_LINES_SHOWN = 20


def _bad_input_message(bad_lines: list[str], bad_files: list[str]) -> str:
    """One error for everything :func:`ingest_paths` skipped, saying what was stored."""
    if len(bad_lines) == 1 and not bad_files:
        return (f"{bad_lines[0]}; that line was skipped and every other event stored; fix it and "
                "run again: re-ingesting adds no triple")
    if not bad_lines and len(bad_files) == 1:
        return bad_files[0]
    parts = []
    if bad_lines:
        shown = bad_lines[:_MAX_BAD_LINES_SHOWN]
        more = len(bad_lines) - len(shown)
        parts.append(f"{len(bad_lines)} bad lines were skipped and every other event stored; fix "
                     "them and run again (re-ingesting adds no triple):\n  " + "\n  ".join(shown)
                     + (f"\n  ... and {more} more" if more else ""))
    if bad_files:
        parts.append(f"{len(bad_files)} files could not be read to their end:\n  "
                     + "\n  ".join(bad_files))
    return "\n".join(parts)


class StoreSink:
    """A capture sink that maps and writes in-process (``capture.workflow(..., sink=StoreSink(...))``).

    ``send`` writes each batch at once; ``close`` writes what is still pending (it does
    not close the store, which the caller owns).
    """

    def __init__(self, store: Store, specs: Mapping[str, Spec] | Iterable[Spec] | None = None, *,
                 schema: str = "typed", base: str = DEFAULT_BASE):
        self.ingestor = Ingestor(store, specs=specs, schema=schema, base=base)

    def send(self, events: list[dict[str, Any]]) -> None:
        """Map and write a batch of wire-format event dicts."""
        self.ingestor.ingest(events)

    def register_spec(self, spec: Spec) -> int:
        """Add a spec while the sink is in use."""
        return self.ingestor.register_spec(spec)

    @property
    def report(self) -> IngestReport:
        return self.ingestor.report

    def close(self) -> None:
        self.ingestor.finish()


# -- the ingest of ``provkg ingest`` ----------------------------------------------


@dataclass
class IngestPlan:
    """What an ingest into a store maps its events with, and what to tell before it starts."""

    #: workflow -> spec: those the store holds, replaced by those given
    specs: dict[str, Spec]
    #: a given spec replaces a different one the store held (its stored runs are re-typed)
    notes: list[str] = field(default_factory=list)
    #: the store holds data of another schema
    warnings: list[str] = field(default_factory=list)


def given_specs(paths: Sequence[str]) -> list[Spec]:
    """The specs of the files ``paths``, one per workflow.

    Raises:
        BadSpec: a spec is invalid, or two files are specs of one workflow (the last one
            would win silently).  NotFound: a file does not exist."""
    given = [load_spec(s) for s in paths]
    seen: dict[str, str] = {}
    for path, spec in zip(paths, given):
        if spec.workflow in seen and seen[spec.workflow] != path:
            raise BadSpec(f"{path}: workflow {spec.workflow!r} already has a spec ({seen[spec.workflow]}); "
                          "give one --spec per workflow")
        seen[spec.workflow] = path
    return given


def plan_ingest(store: Store, given: Iterable[Spec], *, schema: str = "typed") -> IngestPlan:
    """Complete the spec registrations a crash interrupted, then take the specs ``store``
    holds (registered by earlier sessions or the server), replaced by those ``given``; with
    a note for each given spec that replaces a different one, and a warning when the store
    holds data of another schema."""
    given = list(given)
    finish_registrations(store)
    held = {s.workflow: s for s in stored_specs(store)}
    plan = IngestPlan({**held, **{s.workflow: s for s in given}})
    for spec in given:  # said, since the stored runs are re-typed
        changed = replacement_changes(held.get(spec.workflow), spec)
        if changed is not None:
            changes = "; ".join(changed)
            plan.notes.append(f"the spec of workflow {spec.workflow!r} given here replaces the "
                              "different one the store held; its stored runs are mapped again "
                              f"with it ({changes})")
    mixed = mixed_schema_warning(store, schema)
    if mixed:
        plan.warnings.append(mixed)
    return plan


def schemas_in_store(store: Store) -> set[Schema]:
    """The schemas whose executions the store holds, as far as one ASK each tells: typed
    (PROV-ML execution classes), tagged (PROVLake executions of an ML-tagged transformation)
    and sprov (``s-prov:Invocation``)."""
    from provkg.mapper.tagged import KIND_TAG, SECTION_TAG

    tags = " ".join(literal(t) for t in [*KIND_TAG.values(), *SECTION_TAG.values()] if t)
    asks = {
        Schema.TYPED: f"ASK {{ VALUES ?c {{ {' '.join(_TYPED_EXECUTIONS)} }} ?e {A} ?c }}",
        Schema.TAGGED: (f"ASK {{ VALUES ?tag {{ {tags} }} ?t {PL.tag} ?tag . "
                   f"?e {P.wasInfluencedBy} ?t . ?e {A} {PL.DataTransformationExecution} }}"),
        Schema.SPROV: f"ASK {{ ?i {A} {SP.Invocation} }}",
    }
    return {schema for schema, query in asks.items() if store.ask(query)}


def mixed_schema_warning(store: Store, schema: str) -> str | None:
    """A warning when ``store`` already holds data mapped in another schema than ``schema``:
    a query reads one schema (``--schema``), and the same events mapped twice give each task
    the classes of both."""
    others = sorted(schemas_in_store(store) - {schema})
    if not others:
        return None
    return (f"this store already holds data mapped in the {' and '.join(others)} schema, and "
            f"these events go in as {schema}: queries read one schema at a time (--schema), "
            "so keep each schema in a store of its own")
