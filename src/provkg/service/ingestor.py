"""An ingest session: the mapper's state plus a store (:class:`Ingestor`), and its report.

Order does not matter (design decision S3): a task whose run is not known yet is kept
pending (in memory, then as a pending record in the store) until the run's workflow
event arrives.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from provkg.events import load_json
from provkg.mapper import MapState, finish, map_batch
from provkg.mapper.common import known_schema
from provkg.mapper.summary import STATE, SectionSummaries
from provkg.mapper.terms import PK, PL, P
from provkg.service.captured_specs import CapturedSpecs
from provkg.service.registration import _chunks, _sprov_late_spec, register_spec, stored_specs
from provkg.service.store_writer import StoreWriter
from provkg.spec import Spec
from provkg.store import Store
from provkg.term import Triple, id_from_iri, literal
from provkg.vocab import DEFAULT_BASE, RDF

log = logging.getLogger("provkg.ingest")

__all__ = ["IngestReport", "Ingestor"]


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
        self.store = store
        self.schema = known_schema(schema)
        self.base = base
        self.specs: dict[str, Spec] = {}
        self.state = MapState(self.specs, schema=schema, base=base)
        self.state.summary_store = True  # summaries merge what the store holds (_load)
        self.report = IngestReport()
        self._lock = threading.Lock()
        self._writer = StoreWriter(store) if pipeline else None
        self._captured = CapturedSpecs(
            lambda: {s.workflow: s for s in stored_specs(store)})
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
            n = self._register_captured(batch)
            n += self._map(batch)
            if not self.schema.provlake_layout:  # after _map: the batch's own workflow events are known
                self._note_tasks(batch)
            n += self._resolve_pending(batch)
            self._retract_stale()
            self.report.events += len(batch)
            self.report.triples += n
            return n

    def _register_captured(self, batch: list[dict[str, Any]]) -> int:
        """Register the specs ``batch``'s roles imply for workflows without a written one
        (:mod:`provkg.service.captured_specs`), before it is mapped; the triples written."""
        n = 0
        for spec, register in self._captured.implied(batch, self.state.runs, self.specs):
            self.specs[spec.workflow] = spec
            if register:
                self._settle()  # the runs it types again must be in the store
                n += register_spec(self.store, spec, schema=self.schema, base=self.base)
        return n

    def finish(self) -> IngestReport:
        """Write what the session still holds; the session's report (warnings included)."""
        with self._lock:
            if self.state.summaries is None and self.schema.keeps_summaries and any(
                    spec.rolled_up(t.name) for spec in self.specs.values() for t in spec.transformations):
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
            run = e.get("workflow_id")
            wf = None if run is None else self.state.runs.get(run)
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
                key = terms.get(parent)
                got = None if key is None else found.get(key)
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
    if spec is None:
        return chain
    t = spec.transformation(section)
    while t is not None and t.of and t.of not in chain and len(chain) < 16:
        chain.append(t.of)
        t = spec.transformation(t.of)
    return chain

