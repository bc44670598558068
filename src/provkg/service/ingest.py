"""Ingest: captured events + prospective specs -> triples in a store.

The one place the mapper meets a store. An :class:`Ingestor` is an ingest session
(the mapper's state plus the store); the functions below are the use cases the CLI,
the API and the demo call::

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

import argparse
import contextlib
import gc
import json
import logging
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from provkg.errors import BadEvent, BadSpec, MappingError, ProvkgError
from provkg.events import load_json
from provkg.mapper import SCHEMAS, MapState, finish, map_batch, map_spec, sprov, typed
from provkg.mapper.common import Minter
from provkg.mapper.summary import STATE, SectionSummaries
from provkg.mapper.terms import PK, PL, PML, SP, A, P
from provkg.service.event_files import EVENT_SUFFIXES, event_files, read_events, total_bytes
from provkg.service.links import check_links, cmd_check_links, cmd_link, link_value
from provkg.service.loading import compact_after_load
from provkg.spec import Spec, load_spec, parse_spec, spec_changes
from provkg.store import Store, open_store
from provkg.term import Triple, id_from_iri, iri, literal, mint_iri
from provkg.vocab import DEFAULT_BASE, RDF

log = logging.getLogger("provkg.ingest")

__all__ = [
    "IngestReport",
    "Ingestor",
    "StoreSink",
    "check_links",
    "cmd_check_links",
    "cmd_ingest",
    "cmd_link",
    "ingest_events",
    "ingest_paths",
    "link_value",
    "register_spec",
    "spec_document",
    "stored_specs",
]


@dataclass
class IngestReport:
    """What an ingest did: events read, triples written (given to the store), warnings."""

    events: int = 0
    triples: int = 0
    files: int = 0
    #: files read only up to a point (truncated, unreadable): their first events are stored
    partial_files: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "triples": self.triples, "files": self.files,
                "partial_files": self.partial_files, "seconds": round(self.seconds, 3),
                "warnings": list(self.warnings)}

    def files_read(self) -> str:
        """``2 files``, ``1 file and 1 in part``, for the summary line."""
        whole = f"{self.files} file{'s' if self.files != 1 else ''}"
        return whole + (f" and {self.partial_files} in part" if self.partial_files else "")

    def __str__(self) -> str:
        rate = f", {self.triples / self.seconds:,.0f} triples/s" if self.seconds > 0 else ""
        # triples mapped and handed to the store: one already stored (a re-run, a duplicate
        # event) is kept once, so the store may have grown by fewer
        return (f"{self.events:,} events -> {self.triples:,} triples mapped (the store keeps each "
                f"once) in {self.seconds:.1f} s{rate}"
                + (f"; {len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}"
                   if self.warnings else ""))


def register_spec(store: Store, spec: Spec, *, schema: str = "typed", base: str = DEFAULT_BASE) -> int:
    """Write ``spec``'s prospective triples; in typed mode also re-type what was stored
    before the spec was known (plain executions and values of that workflow get the
    PROV-ML classes their kind and role imply), in S-PROV mode add the parameter classes
    and adaptation changes the spec implies. Idempotent. Returns triples written.

    Raises:
        MappingError: unknown schema.  StoreError: the store refused the data.
    """
    wf = iri(mint_iri("spec", spec.workflow, base=base))
    document = literal(spec_document(spec), RDF.JSON)
    prospective = list(map_spec(spec, schema=schema, base=base))
    if _registered(store, wf, document, prospective):
        # registered before in this schema: every event since was mapped with it, so there
        # is nothing to re-type (the updates below read the whole workflow's history, which
        # on a large store takes longer than a small ingest itself)
        return 0
    # a crash between the steps below would leave the old spec half forgotten and the new one
    # half written, for good (kill -9 during POST /v1/specs: canned queries would answer
    # nothing); the marker says what was under way, and finish_registrations completes it
    pending = literal(json.dumps({"schema": schema, "spec": spec_document(spec)},
                                 sort_keys=True, ensure_ascii=False), RDF.JSON)
    _done_registering(store, wf)  # another registration's, cut short: this one replaces it
    store.add([(wf, PK.registering, pending)])
    replaced = _replaced_specs(store, wf, document)
    for old in replaced:
        _forget_spec(store, old, schema=schema, base=base)
    n = store.add(prospective)
    if schema in ("typed", "tagged"):
        mint = Minter(base)
        now = {t.name for t in spec.transformations if t.kind == "section"}
        sections = " ".join(mint.spec(spec.workflow, name) for name in sorted(now))
        if sections:  # a section's end, mapped without the spec, said it was a top-level task
            store.update(f"DELETE {{ ?x {PL.isPartOf} ?r }} WHERE {{ VALUES ?t {{ {sections} }} "
                         f"?x {P.wasInfluencedBy} ?t ; {PL.isPartOf} ?r }}")
        was = {t.name for old in replaced for t in old.transformations if t.kind == "section"}
        if was - now:  # sections no more: their executions are the run's own tasks, as a fresh
            # ingest with this spec makes them (else they are left in no run)
            gone = " ".join(mint.spec(spec.workflow, name) for name in sorted(was - now))
            store.update(f"INSERT {{ ?x {PL.isPartOf} ?r }} WHERE {{ VALUES ?t {{ {gone} }} "
                         f"?x {P.wasInfluencedBy} ?t ; {P.wasInformedBy}+ ?top . "
                         f"?top {PL.isPartOf} ?r }}")
    if schema == "typed":
        store.update(_retype_update(spec, base=base))
    elif schema == "sprov":
        _sprov_late_spec(store, spec, base=base)
    # the spec itself, for later sessions that are not given it (stored_specs)
    store.update(f"DELETE {{ {wf} {PK.specDocument} ?d }} WHERE {{ {wf} {PK.specDocument} ?d "
                 f"FILTER(!sameTerm(?d, {document})) }}")
    n += store.add([(wf, PK.specDocument, document)])
    _done_registering(store, wf)
    return n


def _done_registering(store: Store, wf: str) -> None:
    # by pattern: a long literal in DELETE DATA is not matched by every store (Virtuoso)
    store.update(f"DELETE {{ {wf} {PK.registering} ?p }} WHERE {{ {wf} {PK.registering} ?p }}")


def finish_registrations(store: Store, *, base: str = DEFAULT_BASE) -> list[str]:
    """Complete the spec registrations a crash interrupted (``provkg:registering``), so the
    store holds the new spec whole rather than parts of two; the workflows completed. Run by
    the processes that write (the server at start, ``provkg ingest``) before they read specs."""
    rows = store.select(f"SELECT ?wf ?p WHERE {{ ?wf {PK.registering} ?p }}", hide_system_graphs=False)
    done = []
    for wf, text in rows.rows:
        try:
            pending = json.loads(str(text))
            spec = parse_spec(pending["spec"], source=f"<spec being registered for {wf}>")
            schema = pending["schema"]
        except (ValueError, KeyError, TypeError, ProvkgError) as exc:
            log.warning("a spec registration of %s cannot be completed (%s); its marker stays", wf, exc)
            continue
        register_spec(store, spec, schema=schema, base=base)
        # registered whole before the crash (only the marker left): register_spec returned early
        _done_registering(store, iri(str(wf)))
        log.warning("completed the registration of the spec of workflow %r that an earlier "
                    "process did not finish", spec.workflow)
        done.append(spec.workflow)
    return done


def _registered(store: Store, wf: str, document: str, prospective: list[Triple]) -> bool:
    """Whether this very spec document is stored for ``wf`` with its prospective triples in
    this schema (the document alone does not say which schemas it was registered in)."""
    if not store.ask(f"ASK {{ {wf} {PK.specDocument} {document} }}"):
        return False
    return all(store.ask("ASK { " + " ".join(f"{s} {p} {o} ." for s, p, o in chunk) + " }")
               for chunk in _chunks(prospective, 16))  # a long ASK overflows rdflib and Virtuoso


def spec_document(spec: Spec) -> str:
    """``spec`` as JSON text that :func:`provkg.spec.parse_spec` reads back to the same spec."""
    return json.dumps(spec.model_dump(mode="json", exclude_none=True), sort_keys=True,
                      ensure_ascii=False)


def stored_specs(store: Store) -> list[Spec]:
    """The specs workflows in ``store`` were registered from (``provkg:specDocument``), so a
    session not given them (``provkg ingest`` without ``--spec``, a server started on a store
    the command line filled) still maps their events. A document that no longer validates
    (written by another provkg version) is skipped with a warning."""
    rows = store.select(f"SELECT ?wf ?d WHERE {{ ?wf {PK.specDocument} ?d }}",
                        hide_system_graphs=False)
    return [spec for wf, document in rows.rows
            if (spec := _stored_spec(wf, document)) is not None]


def _replaced_specs(store: Store, wf: str, document: str) -> list[Spec]:
    """The specs stored for workflow ``wf`` other than ``document`` (a changed spec); one
    that no longer validates keeps its triples."""
    rows = store.select(f"SELECT ?d WHERE {{ {wf} {PK.specDocument} ?d "
                        f"FILTER(!sameTerm(?d, {document})) }}", hide_system_graphs=False)
    return [spec for (text,) in rows.rows if (spec := _stored_spec(wf, text)) is not None]


def _stored_spec(wf: object, document: object) -> Spec | None:
    """A ``provkg:specDocument`` read back; None (logged) when it no longer validates
    (written by another provkg version)."""
    from provkg.spec import parse_stored_spec

    try:
        return parse_stored_spec(document if isinstance(document, str) else json.dumps(document),
                                 source=f"the spec stored for {wf}")
    except BadSpec as exc:
        log.warning("skipping the spec stored for %s: %s", wf, exc)
        return None


#: typed classes a spec gives runs, executions and values (undone when the spec changes)
_TYPED_EXECUTIONS = sorted({*typed.EXECUTION_CLASS.values(), *typed.SECTION_EXECUTION_CLASS.values(),
                            typed.DEFAULT_SECTION_EXECUTION_CLASS} - {PL.DataTransformationExecution})
_TYPED_VALUES = sorted(set(typed.VALUE_CLASS.values()) - {PL.AttributeValue, PL.DataReference})
#: (attribute class, class of its values) of each role whose values get a typed class
_VALUE_CLASS_OF = [(typed.ATTRIBUTE_CLASS[role], value_class)
                   for role, value_class in sorted(typed.VALUE_CLASS.items())
                   if value_class in _TYPED_VALUES]


def _forget_spec(store: Store, old: Spec, *, schema: str, base: str) -> None:
    """Undo what the replaced spec ``old`` said: its prospective triples (a changed role left
    the attribute with both classes, and tagged with both tags), and in typed mode the
    classes it gave stored runs, executions and values, which the new spec then gives
    again (``_retype_update``). Only when a changed spec is registered."""
    wf = mint_iri("spec", old.workflow, base=base)
    stores = mint_iri("store", old.workflow, base=base, composite=True)
    mine = (f"<{wf}>", f"<{wf}/", f"<{stores}/")
    stale = [t for t in map_spec(old, schema=schema, base=base) if t[0].startswith(mine)]
    for chunk in _chunks(stale, 2000):
        store.update("DELETE DATA { " + " ".join(f"{s} {p} {o} ." for s, p, o in chunk) + " }")
    if schema != "typed":
        return
    st = MapState({old.workflow: old}, schema="typed", base=base)
    wt = st.workflow(old.workflow)
    transformations = " ".join(tt.term for tt in wt.transformations.values())
    attributes = " ".join(term for tt in wt.transformations.values()
                          for term, _, _ in tt.attributes.values())
    parts = [(f"DELETE {{ ?r {A} {PML.LearningProcessExecution} }} INSERT {{ ?r {A} {PL.WorkflowExecution} }} "
              f"WHERE {{ ?r {P.wasInfluencedBy} {wt.term} ; {A} {PML.LearningProcessExecution} }}")]
    if transformations:
        parts.append(f"DELETE {{ ?x {A} ?c }} INSERT {{ ?x {A} {PL.DataTransformationExecution} }} "
                     f"WHERE {{ VALUES ?t {{ {transformations} }} VALUES ?c {{ {' '.join(_TYPED_EXECUTIONS)} }} "
                     f"?x {P.wasInfluencedBy} ?t ; {A} ?c }}")
    if attributes:
        typed_values = f"VALUES ?a {{ {attributes} }} VALUES ?c {{ {' '.join(_TYPED_VALUES)} }}"
        # plain first (the new spec's retype turns it into its class); then the old classes
        # go, except those another workflow's attribute gives the same value (a file two
        # workflows share keeps its other class)
        parts.append(f"INSERT {{ ?v {A} {PL.AttributeValue} }} "
                     f"WHERE {{ {typed_values} ?v {P.wasDerivedFrom} ?a ; {A} ?c }}")
        for attribute_class, value_class in _VALUE_CLASS_OF:  # one operation per class:
            # Virtuoso ignores a VALUES-bound class inside NOT EXISTS
            parts.append(f"DELETE {{ ?v {A} {value_class} }} WHERE {{ VALUES ?a {{ {attributes} }} "
                         f"?v {P.wasDerivedFrom} ?a ; {A} {value_class} FILTER NOT EXISTS {{ "
                         f"?v {P.wasDerivedFrom} ?other . ?other {A} {attribute_class} }} }}")
    store.update(" ;\n".join(parts))


def _sprov_late_spec(store: Store, spec: Spec, *, base: str, tasks: list[str] | None = None) -> None:
    """Add what ``spec`` says about its workflow's already-stored S-PROV events: parameter
    classes (decided here from two SELECTs: an update with nested NOT EXISTS took minutes on
    rdflib) and adaptation changes (:mod:`provkg.mapper.sprov`). ``tasks`` (ids): only what
    concerns those invocations."""
    mint = Minter(base)
    query = sprov.parameter_occurrences_query(spec, mint=mint, tasks=tasks)
    if query is not None:
        param_uses = {(iri(str(v)), iri(str(t))) for v, t in store.select(query).rows}
        if param_uses:
            values = sorted({v for v, _ in param_uses})
            all_uses: set[tuple[str, str]] = set()
            for chunk in _chunks(values, 500):
                all_uses |= {(iri(str(v)), iri(str(o)))
                             for v, o in store.select(sprov.uses_query(chunk)).rows}
            add, remove = sprov.late_parameter_triples(param_uses, all_uses)
            store.add(add)
            for part in _chunks(remove, 2000):
                store.update("DELETE DATA { " + " ".join(f"{a} {b} {c} ." for a, b, c in part) + " }")
    _late_changes(store, spec, mint=mint, tasks=tasks)


def _late_changes(store: Store, spec: Spec, *, mint: Minter, tasks: list[str] | None = None) -> None:
    """Give the ended adaptation invocations of ``spec`` (or of ``tasks``, those without one
    yet) stored without their change the ``s-prov:Change`` the mapper gives them when it
    sees their end after their begin (:func:`provkg.mapper.sprov.late_change_update`)."""
    query = sprov.adaptation_invocations_query(spec, mint=mint, tasks=tasks)
    if query is None:
        return
    tasks_found: dict[tuple[str, ...], list[str]] = {}
    for task, inst, run, rid, proc, name in store.select(query).rows:
        tasks_found.setdefault((task, inst, run, str(rid), proc), []).append(str(name))
    update = sprov.late_change_update(spec, [(*key, names) for key, names in tasks_found.items()],
                                      mint=mint)
    if update is not None:
        store.update(update)


def _retype_update(spec: Spec, *, base: str) -> str:
    """SPARQL Update giving already-stored runs, executions and values of ``spec``'s
    workflow their typed classes (found through their links to the prospective part)."""
    st = MapState({spec.workflow: spec}, schema="typed", base=base)
    wt = st.workflow(spec.workflow)
    execs = [(tt.term, tt.execution_class) for tt in wt.transformations.values()
             if tt.execution_class != PL.DataTransformationExecution]
    vals = [(term, vclass) for tt in wt.transformations.values()
            for term, vclass, _ in tt.attributes.values() if vclass != PL.AttributeValue]
    parts = []
    if wt.run_class != PL.WorkflowExecution:
        parts.append(f"DELETE {{ ?r {A} {PL.WorkflowExecution} }} INSERT {{ ?r {A} {wt.run_class} }} "
                     f"WHERE {{ ?r {P.wasInfluencedBy} {wt.term} ; {A} {PL.WorkflowExecution} }}")
    if execs:
        rows = " ".join(f"({t} {c})" for t, c in execs)
        parts.append(f"DELETE {{ ?x {A} {PL.DataTransformationExecution} }} INSERT {{ ?x {A} ?c }} "
                     f"WHERE {{ VALUES (?t ?c) {{ {rows} }} ?x {P.wasInfluencedBy} ?t ; "
                     f"{A} {PL.DataTransformationExecution} }}")
    if vals:
        rows = " ".join(f"({t} {c})" for t, c in vals)
        parts.append(f"DELETE {{ ?v {A} {PL.AttributeValue} }} INSERT {{ ?v {A} ?c }} "
                     f"WHERE {{ VALUES (?a ?c) {{ {rows} }} ?v {P.wasDerivedFrom} ?a ; "
                     f"{A} {PL.AttributeValue} }}")
    return " ;\n".join(parts) if parts else "INSERT DATA { }"


class _Writer:
    """Adds batches to the store in background threads, so mapping the next batch (Python)
    overlaps with loading this one (the store's native code, which releases the GIL).

    Small batches are gathered up to ``min_triples`` first: each bulk load into an on-disk
    Oxigraph store has a fixed cost, so fewer, larger loads are much faster. Up to
    ``store.parallel_adds`` loads run at once; memory stays bounded because ``put`` waits
    while one gathered buffer is already queued behind the running loads."""

    def __init__(self, store: Store, *, min_triples: int = 200_000,  # = Oxigraph's add chunk
                 max_bytes: int = 32 * 1024 * 1024):
        self.store = store
        self.min_triples = min_triples
        #: a buffer is handed over at this many bytes of objects too: else large values (long
        #: texts, lists) are held 200,000 triples' worth at a time, several times the file in RSS
        self.max_bytes = max_bytes
        self._bytes = 0
        self._queue: queue.Queue[list[Triple] | None] = queue.Queue(maxsize=1)
        self._buffer: list[Triple] = []
        self._error: BaseException | None = None
        self._threads = [threading.Thread(target=self._run, name=f"provkg-ingest-writer-{i}",
                                          daemon=True)
                         for i in range(max(1, store.parallel_adds))]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    # the mapper's own terms: trusted. Duplicates across batches (a task's begin
                    # and end) are left to the store, which keeps one copy: a set here cost 8 %
                    # of the CPU
                    self.store.add(item, trusted=True)
            except BaseException as exc:  # handed to the caller's thread by _check()
                self._error = exc
            finally:
                self._queue.task_done()

    def _check(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def _hand_over(self) -> None:
        buffer, self._buffer, self._bytes = self._buffer, [], 0
        if buffer:
            self._queue.put(buffer)

    def put(self, triples: list[Triple]) -> None:
        self._check()
        self._buffer.extend(triples)
        self._bytes += sum(map(len, [t[2] for t in triples]))
        if len(self._buffer) >= self.min_triples or self._bytes >= self.max_bytes:
            self._hand_over()

    def drain(self) -> None:
        """Wait until everything put so far is in the store."""
        self._hand_over()
        self._queue.join()
        self._check()

    def close(self) -> None:
        """Write what was put, then stop the threads (once; later calls do nothing)."""
        threads, self._threads = self._threads, []
        if not threads:
            return
        try:
            self.drain()
        finally:
            for _ in threads:
                self._queue.put(None)
            for thread in threads:
                thread.join()


class Ingestor:
    """One ingest session into one store: specs, the mapper's state, pending work.

    Thread-safe (a capture sink may call from its background thread). Call
    :meth:`finish` at the end so pending tasks and open section summaries are written.
    ``pipeline=True`` loads each batch in a background thread while the next one is
    mapped (bulk ingest); then triples are in the store only once :meth:`finish` returns.
    """

    def __init__(self, store: Store, *, specs: Mapping[str, Spec] | Iterable[Spec] | None = None,
                 schema: str = "typed", base: str = DEFAULT_BASE, register: bool = True,
                 pipeline: bool = False):
        if schema not in SCHEMAS:
            raise MappingError(f"unknown schema {schema!r}: expected one of {', '.join(SCHEMAS)}")
        self.store = store
        self.schema = schema
        self.base = base
        self.specs: dict[str, Spec] = {}
        self.state = MapState(self.specs, schema=schema, base=base)
        self.state.summary_store = True  # summaries merge what the store holds (_load)
        self.report = IngestReport()
        self._lock = threading.Lock()
        self._writer = _Writer(store) if pipeline else None
        # S-PROV: workflow -> ids of the tasks begun / ended in this session (_note_tasks)
        self._begins: dict[str, set[str]] = {}
        self._ends: dict[str, set[str]] = {}
        items = specs.values() if isinstance(specs, Mapping) else (specs or [])
        for s in items:
            if register:
                self.register_spec(s)
            else:
                self.specs[s.workflow] = s

    def register_spec(self, spec: Spec) -> int:
        """Add (or replace) a workflow's spec and write its prospective triples."""
        with self._lock:
            self.specs[spec.workflow] = spec
            return register_spec(self.store, spec, schema=self.schema, base=self.base)

    def ingest(self, events: Iterable[dict[str, Any] | Any]) -> int:
        """Map a batch of events (dicts or event models) and write it. Returns triples written."""
        batch = [e if isinstance(e, dict) else e.model_dump(exclude_none=True) for e in events]
        with self._lock:
            self._learn_runs(batch)
            n = self._map(batch)
            if self.schema == "sprov":  # after _map: the batch's own workflow events are known
                self._note_tasks(batch)
            n += self._resolve_pending(batch)
            self._retract_stale()
            self.report.events += len(batch)
            self.report.triples += n
            return n

    def finish(self) -> IngestReport:
        """Write what the session still holds; the session's report (warnings included)."""
        with self._lock:
            if self.state.summaries is None and self.schema != "sprov" and any(
                    t.granularity == "summary" for spec in self.specs.values() for t in spec.transformations):
                # no section event came, but what this session wrote may place earlier ones
                self.state.summaries = SectionSummaries(self.state)
            if self.state.summaries is not None:
                self._settle()  # what this session wrote is read back below
                self.report.triples += self._sweep_orphans()
                self._place_waiting()
                self.state.summaries.settle_waiting()
                self._load(self.state.summaries.to_load(ended_only=False))
            self.report.triples += self._write(finish(self.state))
            self._retract_stale()
            late = {wf: ids - self._ends.get(wf, set()) for wf, ids in self._begins.items()}
            if any(late.values()):
                # a begin whose end an earlier session stored before the spec was known: the
                # spec's registration could not tell which component that invocation ran
                # (its begin says it), so its parameters and change wait until now (else an
                # adaptation's s-prov:Change would never come)
                self._settle()
                for wf, ids in sorted(late.items()):
                    for chunk in _chunks(sorted(ids), 200):
                        _sprov_late_spec(self.store, self.specs[wf], base=self.base, tasks=chunk)
            self._begins.clear()
            self._ends.clear()
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            self.report.warnings = self.state.warnings()
            return self.report

    def close(self) -> None:
        """Stop the background writer without writing what is pending (after an error);
        a no-op after :meth:`finish`."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # the error that stopped the session is already on its way
                pass

    def _write(self, triples: list[Triple]) -> int:
        """Add ``triples`` (duplicates within the batch dropped: a task's begin and end
        both state its class and links). Returns how many distinct triples were given."""
        if not triples:
            return 0
        unique = list(set(triples))
        if self._writer is not None:
            self._writer.put(unique)
        else:
            self.store.add(unique, trusted=True)
        return len(unique)

    def _settle(self) -> None:
        """Before reading or updating the store: let queued batches land."""
        if self._writer is not None:
            self._writer.drain()
        if self.state.summaries is not None:
            self.state.summaries.forgotten.clear()

    def _map(self, events: list[dict[str, Any]]) -> int:
        """Map ``events`` and write them, with the summaries of the parents that ended
        merged with what the store holds for them (one read per batch, when some did)."""
        out = map_batch(events, self.state)
        summaries = self.state.summaries
        if summaries is not None:
            self._load(summaries.to_load(ended_only=True))
            out += summaries.emit_ready()
            if len(summaries.forgotten) > _FORGOTTEN_MAX:
                self._settle()
        return self._write(out)

    # -- order independence ------------------------------------------------

    def _note_tasks(self, batch: list[dict[str, Any]]) -> None:
        """Remember the task begins and ends of ``batch`` (S-PROV, runs with a spec):
        :meth:`finish` completes those begun here whose end an earlier session stored."""
        for e in batch:
            if e.get("type") != "task":
                continue
            wf = self.state.runs.get(e.get("workflow_id"))
            if wf in self.specs:
                seen = self._begins if e.get("event") == "begin" else self._ends
                seen.setdefault(wf, set()).add(e["id"])

    def _learn_runs(self, batch: list[dict[str, Any]]) -> None:
        """Look up in the store the workflows of runs this session has not seen."""
        runs = self.state.runs
        unknown = {e["workflow_id"] for e in batch if e.get("type") == "task" and e["workflow_id"] not in runs}
        if not unknown:
            return
        unknown -= {e["id"] for e in batch if e.get("type") == "workflow"}
        if not unknown:
            return
        spec_prefix = self.base + "spec/"
        # no _settle(): runs this session saw are in self.state.runs; the store is asked only
        # for runs earlier sessions wrote, which are already there (draining the background
        # writer here stalled bulk ingest once per batch)
        for chunk in _chunks(sorted(unknown), 200):
            values = " ".join(self.state.mint.run(r) for r in chunk)
            rows = self.store.select(
                f"SELECT ?run ?wf WHERE {{ VALUES ?run {{ {values} }} ?run {P.wasInfluencedBy} ?wf . "
                f"FILTER(STRSTARTS(STR(?wf), {literal(spec_prefix)})) }}")
            for run_iri, wf_iri in rows.rows:
                run_id = id_from_iri(str(run_iri), "run", base=self.base)
                # a workflow's IRI is one name (its '/' encoded); a transformation's has two
                raw = str(wf_iri)[len(spec_prefix):]
                if run_id is not None and "/" not in raw:
                    runs[run_id] = unquote(raw)

    def _load(self, keys: list[tuple[str, str]]) -> None:
        """Merge into the session what the store holds for the summary parents ``keys``:
        their summaries' or pending records' state, pending section events an earlier
        provkg version wrote, and whether the parent has ended."""
        summaries = self.state.summaries
        if not keys:
            return
        if summaries.forgotten.intersection(keys):
            self._settle()  # this session wrote them and may still hold the writes
        mint = self.state.mint
        for chunk in _chunks(keys, 200):
            terms = {(mint.task(p) if kind == "task" else mint.run(p)): (kind, p) for kind, p in chunk}
            rows = self.store.select(
                f"SELECT ?p ?kind ?text ?t WHERE {{ VALUES ?p {{ {' '.join(terms)} }} "
                f"{{ ?s {PK.pendingParent} ?p ; {STATE} ?x BIND(\"pending\" AS ?kind) BIND(STR(?x) AS ?text) }} "
                f"UNION {{ ?s {P.wasGeneratedBy} ?p ; {STATE} ?x BIND(\"summary\" AS ?kind) "
                f"BIND(STR(?x) AS ?text) }} "
                f"UNION {{ ?t {PK.pendingParent} ?p ; {PK.pendingEvent} ?x BIND(\"event\" AS ?kind) "
                f"BIND(STR(?x) AS ?text) }} "
                f"UNION {{ ?p {P.endedAtTime} ?x BIND(\"ended\" AS ?kind) }} }}")
            found: dict[tuple[str, str], dict[str, Any]] = {
                key: {"states": [], "events": [], "old": [], "ended": False} for key in terms.values()}
            for p, kind, text, t in rows.rows:
                parent = "<" + str(p) + ">"
                got = found.get(terms.get(parent))  # type: ignore[arg-type]
                if got is None:
                    continue
                if kind == "ended":
                    got["ended"] = True
                elif kind == "event":  # a record of provkg before summaryState
                    got["events"].append(load_json(str(text)))
                    task = "<" + str(t) + ">"
                    got["old"] += [(task, PK.pendingParent, parent),
                                   (task, PK.pendingEvent, literal(str(text), RDF.JSON))]
                else:
                    got["states"].append((str(text), kind == "summary"))
            for key, got in found.items():
                summaries.restore(key, **got)

    def _sweep_orphans(self) -> int:
        """Section events earlier sessions kept as pending records because nothing named
        their parent yet (``provkg:pendingEvent`` without ``provkg:pendingRun``; also the
        per-event records of provkg before ``provkg:summaryState``): map them again with
        what this session knows. One ASK per session; normally there are none."""
        orphan = f"?t {PK.pendingEvent} ?x FILTER NOT EXISTS {{ ?t {PK.pendingRun} ?r }}"
        if not self.store.ask(f"ASK {{ {orphan} }}"):
            return 0
        summaries = self.state.summaries
        rows = self.store.select(f"SELECT ?t ?p (STR(?x) AS ?text) WHERE {{ {orphan} "
                                 f"OPTIONAL {{ ?t {PK.pendingParent} ?p }} }} LIMIT {_ORPHANS_MAX}")
        events: list[dict[str, Any]] = []
        for t, p, text in rows.rows:
            tid = id_from_iri(str(t), "task", base=self.base)
            if tid is None:
                continue
            task = "<" + str(t) + ">"
            events.append(load_json(str(text)))
            summaries.retract.add((task, PK.pendingEvent, literal(str(text), RDF.JSON)))
            if p is not None:  # a record of an earlier provkg: its parent is known
                summaries.retract.add((task, PK.pendingParent, "<" + str(p) + ">"))
                key = self._parent_key(str(p))
                if key is not None:
                    summaries.parent_of.setdefault(tid, key)
        if not events:
            return 0
        self._learn_runs(events)
        written = self._map(events)
        summaries.touch_tids([e["id"] for e in events])
        return written

    def _parent_key(self, parent_iri: str) -> tuple[str, str] | None:
        for kind in ("task", "run"):
            found = id_from_iri(parent_iri, kind, base=self.base)
            if found is not None:
                return kind, found
        return None

    def _place_waiting(self) -> None:
        """End of a session: find in the store where section events that name no parent
        belong: the parent of an execution an earlier session saw in part
        (``provkg:pendingParent``), else the summaries of the parents of their run."""
        summaries = self.state.summaries
        mint = self.state.mint
        for chunk in _chunks(summaries.loose(), 200):
            rows = self.store.select(
                f"SELECT ?t ?p WHERE {{ VALUES ?t {{ {' '.join(mint.task(t) for t in chunk)} }} "
                f"?t {PK.pendingParent} ?p }}")
            for t, p in rows.rows:
                tid = id_from_iri(str(t), "task", base=self.base)
                key = self._parent_key(str(p))
                if tid is not None and key is not None and tid in summaries.waiting:
                    summaries.retract.add(("<" + str(t) + ">", PK.pendingParent, "<" + str(p) + ">"))
                    summaries.assign(tid, key)
        self._find_parents()

    def _find_parents(self) -> None:
        """Section end events that name no parent and whose execution no pending record
        knows (an execution summarised complete in an earlier session, delivered again):
        look for them in the summaries of the parents of their run (one read per run and
        section transformation, only for such events)."""
        summaries = self.state.summaries
        groups: dict[tuple[str, str], tuple[Any, list[str]]] = {}
        for tid, waiting in summaries.waiting.items():
            if all(e["event"] == "end" for e, _, _ in waiting):
                e, wt, tt = waiting[0]
                groups.setdefault((e["workflow_id"], tt.name), (wt, []))[1].append(tid)
        mint = self.state.mint
        for (run, section), (wt, tids) in groups.items():
            chain = _parent_chain(wt.spec, section)
            if not chain:
                continue
            # the parents' transformation, its parent's ... up to a stage, which is part of the run
            names = ["?p"] + [f"?up{i}" for i in range(1, len(chain))]
            where = []
            for i, name in enumerate(chain):
                where.append(f"{names[i]} {P.wasInfluencedBy} {mint.spec(wt.name, name)} .")
                if i + 1 < len(chain):
                    where.append(f"{names[i]} {P.wasInformedBy} {names[i + 1]} .")
            where.append(f"{names[-1]} {PL.isPartOf} {mint.run(run)} .")
            rows = self.store.select(
                f"SELECT ?p (STR(?st) AS ?text) WHERE {{ {' '.join(where)} "
                f"{{ ?s {P.wasGeneratedBy} ?p ; {STATE} ?st }} UNION {{ ?s {PK.pendingParent} ?p ; {STATE} ?st }} }}")
            wanted = set(tids)
            for p, doc_text in rows.rows:
                pid = id_from_iri(str(p), "task", base=self.base)
                doc = load_json(str(doc_text))
                if pid is None or doc.get("section") != section:
                    continue
                held = {pid + k for k in doc.get("under") or ()} | set(doc.get("other") or ())
                for tid in wanted & held:
                    summaries.assign(tid, ("task", pid))
                wanted -= held

    def _resolve_pending(self, batch: list[dict[str, Any]]) -> int:
        """Map the pending task events stored for runs whose workflow event just came."""
        arrived = sorted({e["id"] for e in batch if e.get("type") == "workflow"})
        if not arrived:
            return 0
        written = 0
        if self.state.unresolved_runs.keys() & set(arrived):
            self._settle()  # this session wrote records for these runs: let them land first
        for chunk in _chunks(arrived, 200):
            values = " ".join(self.state.mint.run(r) for r in chunk)
            rows = self.store.select(
                f"SELECT ?t ?run ?event WHERE {{ VALUES ?run {{ {values} }} "
                f"?t {PK.pendingRun} ?run ; {PK.pendingEvent} ?event }}")
            if not rows.rows:
                continue
            events = [load_json(str(ev)) for _, _, ev in rows.rows]
            written += self._map(events)
            self._settle()
            self.store.update(f"DELETE {{ ?t {PK.pendingRun} ?run ; {PK.pendingEvent} ?e }} "
                              f"WHERE {{ VALUES ?run {{ {values} }} ?t {PK.pendingRun} ?run ; "
                              f"{PK.pendingEvent} ?e }}")
        return written

    def _retract_stale(self) -> None:
        summaries = self.state.summaries
        if summaries is not None and summaries.retract:
            self._settle()
            for chunk in _chunks(sorted(summaries.retract), 2000):
                self.store.update("DELETE DATA { " + " ".join(f"{s} {p} {o} ." for s, p, o in chunk) + " }")
            summaries.retract.clear()


#: summary parents a session forgot before their writes surely landed: past this many,
#: the session lets its writer drain (then every write has landed)
_FORGOTTEN_MAX = 65_536
#: pending section events without a parent a session maps again (the rest: the next session)
_ORPHANS_MAX = 10_000


def _parent_chain(spec: Spec | None, section: str) -> list[str]:
    """The transformations above ``section`` (``of``, its ``of``, ...) up to a stage."""
    chain: list[str] = []
    t = spec.transformation(section) if spec is not None else None
    while t is not None and t.of and t.of not in chain and len(chain) < 16:
        chain.append(t.of)
        t = spec.transformation(t.of)
    return chain


def _chunks(items: list[Any], n: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


@contextlib.contextmanager
def _rare_collections() -> Iterator[None]:
    """Bulk ingest allocates millions of short-lived tuples and strings that form no cycles:
    with CPython's default threshold (a collection every 700 allocations) the cyclic garbage
    collector took 8-10 % of ingest's CPU. Collect the youngest generation 100x less often."""
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
        with _rare_collections():
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
                 base: str = DEFAULT_BASE, progress: bool = True, validate: bool = True,
                 chunk: int = 5000) -> IngestReport:
    """Stream event files (JSONL, ``.gz``, ``.zst``) and spool folders into ``store``.

    Memory is bounded by ``chunk`` events or 8 MiB of their lines, whichever comes first (plus the
    mapper's bounded pending state).
    ``progress`` shows a bar on stderr. ``validate=False`` skips the wire-format check
    (only for files provkg wrote).

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
    bar = _progress_bar(total_bytes(files), enabled=progress)
    try:
        with _rare_collections():
            for f in files:
                try:
                    for events in read_events(f, validate=validate, chunk=chunk, on_bytes=bar.update,
                                              on_torn=torn.append, on_bad=bad_lines.append):
                        ing.ingest(events)
                        bar.set_postfix_str(f"{ing.report.events:,} events, {ing.report.triples:,} "
                                            "triples", refresh=False)
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
        print("interrupted: finishing the write under way; what is written stays, and running "
              "the same ingest again completes it (re-ingesting adds no triple)", file=sys.stderr)
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


def _progress_bar(total: int, *, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc="ingest", disable=not enabled,
                file=sys.stderr, leave=False)


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


# -- CLI -------------------------------------------------------------------------


def cmd_ingest(args: argparse.Namespace) -> int:
    """``provkg ingest FILE|DIR... --spec S --schema typed|tagged|sprov``."""
    given = [load_spec(s) for s in args.spec]
    seen: dict[str, str] = {}
    for path, spec in zip(args.spec, given):
        if spec.workflow in seen and seen[spec.workflow] != path:
            # refused: the last one would win silently
            raise BadSpec(f"{path}: workflow {spec.workflow!r} already has a spec ({seen[spec.workflow]}); "
                          "give one --spec per workflow")
        seen[spec.workflow] = path
    with open_store(args.store) as store:
        finish_registrations(store)
        # specs registered by earlier sessions (or the server), replaced by those given here
        held = {s.workflow: s for s in stored_specs(store)}
        specs = {**held, **{s.workflow: s for s in given}}
        for spec in given:  # said, since the stored runs are re-typed
            if spec.workflow in held and spec_document(held[spec.workflow]) != spec_document(spec):
                changes = "; ".join(spec_changes(held[spec.workflow], spec))
                print(f"note: the spec of workflow {spec.workflow!r} given here replaces the "
                      "different one the store held; its stored runs are mapped again with it"
                      f" ({changes})", file=sys.stderr)
        mixed = mixed_schema_warning(store, args.schema)
        if mixed:  # said first: the ingest may take a while
            print(f"warning: {mixed}", file=sys.stderr)
        try:
            report = ingest_paths(store, args.paths, specs=specs, schema=args.schema,
                                  progress=sys.stderr.isatty())
        except BadEvent as exc:  # what was stored is reported too, then the error
            stored = getattr(exc, "report", None)
            if stored is not None:
                compact_after_load(store)
                _print_report(stored)
            raise
        compact_after_load(store)
    _print_report(report)
    return 0


def schemas_in_store(store: Store) -> set[str]:
    """The schemas whose executions the store holds, as far as one ASK each tells: typed
    (PROV-ML execution classes), tagged (PROVLake executions of an ML-tagged transformation)
    and sprov (``s-prov:Invocation``)."""
    from provkg.mapper.tagged import KIND_TAG, SECTION_TAG

    tags = " ".join(literal(t) for t in [*KIND_TAG.values(), *SECTION_TAG.values()] if t)
    asks = {
        "typed": f"ASK {{ VALUES ?c {{ {' '.join(_TYPED_EXECUTIONS)} }} ?e {A} ?c }}",
        "tagged": (f"ASK {{ VALUES ?tag {{ {tags} }} ?t {PL.tag} ?tag . "
                   f"?e {P.wasInfluencedBy} ?t . ?e {A} {PL.DataTransformationExecution} }}"),
        "sprov": f"ASK {{ ?i {A} {SP.Invocation} }}",
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


def _print_report(report: IngestReport) -> None:
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"ingested {report.files_read()}: {report}")
