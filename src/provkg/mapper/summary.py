"""Per-section summaries for sections with ``granularity: summary`` (docs/reference/graph.md).

Instead of every batch, the parent (an epoch) gets one ``provkg:SectionSummary`` per
section transformation: how many executions, min / avg / max seconds, and per
evaluation measure min / avg / max.

A summary is a function of a *set* of per-execution facts (begin and end in integer
microseconds, index, the first value of each measure), and the set is written with
the summary as one canonical JSON literal (``provkg:summaryState``). So merging is a
set union: any order of the same events, any chunking into sessions and any number of
re-deliveries give the same facts, the same summary and the same literal (no new
triple). A session that sees a parent end (or section events of a parent it did not
see end) merges the state the store already holds before writing; the ingest service
reads it (:attr:`SectionSummaries.store_backed`), never per event.

Memory is bounded by the parents with unsaved changes plus a window of recently
written ones (:data:`_CLOSED_KEPT`), each holding its facts.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from provkg.mapper.common import MapState, TransformationTerms, WorkflowTerms
from provkg.mapper.summary_section import STATE, Key, Part, Section
from provkg.mapper.terms import PK
from provkg.term import Triple, literal
from provkg.vocab import RDF

__all__ = ["STATE", "SectionSummaries"]

#: summarised parents kept in memory after their summary was written, so events that
#: come late in the same session update it without reading the store
_CLOSED_KEPT = 1024

class _Parent:
    """The summary sections of one parent execution."""

    __slots__ = ("dirty", "ended", "key", "loaded", "sections", "stored", "wt")

    def __init__(self, key: Key, wt: WorkflowTerms, *, loaded: bool):
        self.key = key
        self.wt = wt
        self.sections: dict[str, Section] = {}
        self.ended = False      # its end event was seen (here or, per the store, earlier)
        self.loaded = loaded    # what the store held for it is merged in
        self.dirty = False      # changed since it was last written
        #: its triples in the store as far as this session knows (to retract when replaced)
        self.stored: set[Triple] = set()


class SectionSummaries:
    """Accumulates summary sections per parent; writes a parent's summaries when it ends.

    Without a store behind (``store_backed`` False: a whole stream, a benchmark's
    mapping) a parent is written when it ends; with one, the ingest service first merges
    what the store holds (:meth:`to_load`, :meth:`restore`) and then calls
    :meth:`emit_ready` after each batch and :meth:`park_all` at the session's end.
    """

    def __init__(self, st: MapState):
        self.st = st
        self.store_backed = bool(getattr(st, "summary_store", False))
        #: the states this process wrote, across sessions (a service's applier), or None
        self.cache = getattr(st, "summary_cache", None)
        #: parents with changes not written yet (or not ended yet)
        self.open: dict[Key, _Parent] = {}
        #: parents written and unchanged since, most recent last (bounded)
        self.closed: OrderedDict[Key, _Parent] = OrderedDict()
        #: parents dropped from ``closed`` whose writes may not have reached the store yet:
        #: the ingest service lets its writer drain before reading them (and then clears this)
        self.forgotten: set[Key] = set()
        #: triples written earlier that are no longer true: delete them *after* adding the
        #: triples mapped with them (the ingest service does)
        self.retract: set[Triple] = set()
        #: parents whose sections were parked as pending records at a session's end
        self.parked = 0
        #: executions whose events name no parent, kept as pending events at a session's end
        self.orphans = 0
        #: section task id -> its parent, from the event that named it (clients, provkg's
        #: capture library among them, name the parent on ``begin`` only); for the
        #: executions of parents held in memory
        self.parent_of: dict[str, Key] = {}
        #: events of sections whose parent is not known yet (their begin has not arrived)
        self.waiting: dict[str, list[tuple[dict[str, Any], WorkflowTerms, TransformationTerms]]] = {}
        self._orphan_records: list[Triple] = []

    # -- events ---------------------------------------------------------------

    def add(self, e: dict[str, Any], wt: WorkflowTerms, tt: TransformationTerms) -> None:
        if not tt.detail:  # a summary alone keeps declared measures only: say so
            for side in ("used", "generated"):
                for v in e.get(side) or ():
                    at = tt.attributes.get(v["name"])
                    if at is None or not at[2]:
                        self.st.summary_unknown[(wt.name, tt.name, v["name"])] += 1
        tid, parent = e["id"], e.get("parent")
        if parent is None:
            key = self.parent_of.get(tid)
            if key is None:  # wait for the event that names the parent
                self.waiting.setdefault(tid, []).append((e, wt, tt))
                return
        else:
            key = ("task", parent)
            self.parent_of[tid] = key
            if self.waiting:
                for args in self.waiting.pop(tid, ()):
                    self._add(key, *args)
        self._add(key, e, wt, tt)

    def assign(self, tid: str, key: Key) -> None:
        """The parent of waiting executions ``tid`` is ``key`` (found in the store)."""
        self.parent_of[tid] = key
        for args in self.waiting.pop(tid, ()):
            self._add(key, *args)

    def _add(self, key: Key, e: dict[str, Any], wt: WorkflowTerms, tt: TransformationTerms) -> None:
        # the per-batch hot path: a parent already open needs no _parent / _touch (a key is in
        # ``open`` or in ``closed``, never both)
        rec = self.open.get(key)
        opened = rec is not None
        if rec is None:
            rec = self._parent(key, wt)
        sec = rec.sections.get(tt.name)
        if sec is None:
            sec = rec.sections[tt.name] = self._section(wt, tt)
        self.parent_of.setdefault(e["id"], key)
        if sec.add(e):
            if opened:
                rec.dirty = True
            else:
                self._touch(rec)

    def close(self, e: dict[str, Any], wt: WorkflowTerms) -> list[Triple]:
        """A task ended: if it is the parent of summary sections, its summaries are due."""
        key = ("task", e["id"])
        rec = self.open.get(key) or self.closed.get(key)
        if rec is None:
            if e["transformation"] not in wt.summary_parents:
                return []
            rec = self._parent(key, wt)
        return self._ended(rec)

    def close_run(self, run_id: str, wt: WorkflowTerms) -> list[Triple]:
        """A run ended: summaries of sections directly under it are due."""
        key = ("run", run_id)
        if self.st.summary_close_on_end and not self.store_backed:
            self._drain(run_id)
        rec = self.open.get(key) or self.closed.get(key)
        if rec is None:
            if not wt.has_summaries:
                return []
            rec = self._parent(key, wt)
        return self._ended(rec)

    def _ended(self, rec: _Parent) -> list[Triple]:
        if not rec.ended:
            rec.ended = True
            self._touch(rec)
        if self.st.summary_close_on_end and not self.store_backed:
            return self.emit_ready()
        return []

    # -- the store (the ingest service) ------------------------------------------

    def to_load(self, *, ended_only: bool) -> list[Key]:
        """Parents whose stored summaries / pending records must be merged before writing."""
        return [k for k, r in self.open.items() if not r.loaded and (r.ended or not ended_only)]

    def restore(self, key: Key, *, states: list[tuple[str, bool]], events: list[dict[str, Any]],
                old: list[Triple], ended: bool) -> None:
        """Merge what the store holds for parent ``key``: summary states (text, whether a
        written summary or a pending record), pending section events of earlier provkg
        versions (their records ``old``), whether the parent has ended."""
        rec = self.open[key]
        if self.cache is not None:  # the states this process wrote: their facts, unparsed
            hits, states = self.cache.take(key, states)
            for name, facts, parts, stored, summarised in hits:
                tt = rec.wt.transformations.get(name)
                if tt is not None and tt.summary:
                    self._absorb(rec, name, tt, facts, parts, stored, summarised)
        for text, summarised in states:
            self._merge_stored(rec, text, summarised)
        for e in events:
            tt = rec.wt.transformations.get(e.get("transformation", ""))
            if tt is not None and tt.summary:
                self._add(key, e, rec.wt, tt)
        rec.stored.update(old)
        rec.ended |= ended
        rec.loaded = True
        self._touch(rec)

    def _merge_stored(self, rec: _Parent, text: str, summarised: bool) -> None:
        """Merge one stored state (parsed); the triples written with it become the parent's
        stored ones (retracted when replaced)."""
        doc = json.loads(text)
        name = doc.get("section")
        if not isinstance(name, str):
            return
        tt = rec.wt.transformations.get(name)
        if tt is None or not tt.summary:
            return  # the spec changed: leave the record alone
        was = self._section(rec.wt, tt)
        was.merge_state(rec.key[1], doc)
        if not summarised:
            was.parts = [(text, literal(text, RDF.JSON), frozenset(was.facts))]
        stored = frozenset(was.triples(self.st, rec.key, ended=summarised, state=text))
        self._absorb(rec, name, tt, was.facts, was.parts, stored, summarised)

    def _absorb(self, rec: _Parent, name: str, tt: TransformationTerms, facts: dict[str, Any],
                parts: list[Part], stored: frozenset[Triple], summarised: bool) -> None:
        sec = rec.sections.get(name)
        if sec is None:
            sec = rec.sections[name] = self._section(rec.wt, tt)
        sec.absorb(facts, parts)
        rec.stored.update(stored)
        rec.ended |= summarised
        # events of theirs that name no parent belong here (an execution already placed
        # keeps its parent); set operations: a running parent may hold tens of thousands
        self.parent_of.update(dict.fromkeys(facts.keys() - self.parent_of.keys(), rec.key))
        for tid in self.waiting.keys() & facts.keys():
            self.assign(tid, rec.key)

    def loose(self) -> list[str]:
        """Section task ids still waiting for an event that names their parent."""
        return sorted(self.waiting)

    def touch_tids(self, tids: list[str]) -> None:
        """Rewrite the parents of ``tids`` (pending records of theirs were just consumed)."""
        for tid in tids:
            key = self.parent_of.get(tid)
            rec = self.open.get(key) or self.closed.get(key) if key is not None else None
            if rec is not None:
                self._touch(rec)

    def settle_waiting(self) -> None:
        """End of a session with a store: executions that still wait for their parent are
        under their run when both their events are here and name none; otherwise their
        events are kept as pending records (``provkg:pendingEvent``) for the session that
        sees the event naming the parent."""
        from provkg.mapper.retro import event_json

        for tid in list(self.waiting):
            events = self.waiting[tid]
            kinds = {e["event"] for e, _, _ in events}
            if kinds == {"begin", "end"}:
                for args in self.waiting.pop(tid):
                    self._add(("run", args[0]["workflow_id"]), *args)
                continue
            del self.waiting[tid]
            if any(not tt.detail for _, _, tt in events):
                self.orphans += 1
            t = self.st.mint.task(tid)
            self._orphan_records += [(t, PK.pendingEvent, event_json(e)) for e, _, _ in events]

    # -- writing -------------------------------------------------------------------

    def emit_ready(self) -> list[Triple]:
        """The summaries of ended parents with changes (each merged with the store first
        when there is one)."""
        out: list[Triple] = []
        for key in [k for k, r in self.open.items() if r.ended]:
            rec = self.open.pop(key)
            if not rec.loaded:  # the ingest service loads before it asks; keep it for later
                self.open[key] = rec
                continue
            out += self._emit(rec, ended=True)
            self.closed[key] = rec
        while len(self.closed) > _CLOSED_KEPT:
            key, rec = self.closed.popitem(last=False)
            self._forget(rec)
        return out

    def park_all(self) -> list[Triple]:
        """End of an ingest session: parents that have not ended get pending records
        (``provkg:pendingParent`` + ``provkg:summaryState``), merged with what the store
        held, which the session that sees the parent end turns into its summaries; the
        others are summarised. The session's memory is released."""
        if self.store_backed:
            self.settle_waiting()
        else:
            self._drain()
        out: list[Triple] = []
        for rec in self.open.values():
            out += self._emit(rec, ended=rec.ended)
            # said only where the sections are kept as summaries alone: with ``both`` their
            # executions are stored and answer until the parent ends
            if not rec.ended and any(not sec.tt.detail for sec in rec.sections.values()):
                self.parked += 1
        out += self._orphan_records
        self.retract.difference_update(self._orphan_records)
        self._orphan_records = []
        self._reset()
        return out

    def flush_all(self) -> list[Triple]:
        """Summaries of every parent (end of a whole stream, nothing before or after it)."""
        self._drain()
        out = [t for rec in self.open.values() for t in self._emit(rec, ended=True)]
        self._reset()
        return out

    def _emit(self, rec: _Parent, *, ended: bool) -> list[Triple]:
        new: list[Triple] = []
        pid = rec.key[1]
        for name, sec in rec.sections.items():
            if ended:  # the rollup: one canonical state of every fact, its parts replaced
                text = sec.state(pid)
                written = sec.triples(self.st, rec.key, ended=True, state=text)
                sec.parts, sec.changed = [], set()
                texts = frozenset(((text, True),))
            else:
                sec.pending_parts(pid)
                written = sec.triples(self.st, rec.key, ended=False)
                texts = frozenset((t, False) for t, _, _ in sec.parts)
            if self.cache is not None:
                self.cache.put(rec.key, name, texts, sec.facts, sec.parts, frozenset(written))
            new += written
        keep = set(new)
        self.retract.difference_update(keep)
        self.retract.update(t for t in rec.stored if t not in keep)
        fresh = [t for t in new if t not in rec.stored]
        rec.stored = keep
        rec.dirty = False
        return fresh

    # -- bookkeeping ---------------------------------------------------------------

    def _parent(self, key: Key, wt: WorkflowTerms) -> _Parent:
        rec = self.open.get(key) or self.closed.get(key)
        if rec is None:
            rec = self.open[key] = _Parent(key, wt, loaded=not self.store_backed)
            rec.dirty = True
        return rec

    def _section(self, wt: WorkflowTerms, tt: TransformationTerms) -> Section:
        t = wt.spec.transformation(tt.name) if wt.spec is not None else None
        measures = {a.name: tt.attributes[a.name][0] for a in (t.generated if t else [])
                    if a.role == "evaluation_measure"}
        return Section(tt, measures)

    def _touch(self, rec: _Parent) -> None:
        rec.dirty = True
        if self.closed.pop(rec.key, None) is not None:
            self.open[rec.key] = rec

    def _forget(self, rec: _Parent) -> None:
        self.forgotten.add(rec.key)
        for sec in rec.sections.values():
            for tid in sec.facts:
                if self.parent_of.get(tid) == rec.key:
                    del self.parent_of[tid]

    def _reset(self) -> None:
        self.open.clear()
        self.closed.clear()
        self.parent_of.clear()

    def _drain(self, run_id: str | None = None) -> None:
        """Waiting events whose parent never came (of run ``run_id``, or all): sections
        directly under their run."""
        for tid in [t for t, evs in self.waiting.items()
                    if run_id is None or evs[0][0]["workflow_id"] == run_id]:
            for args in self.waiting.pop(tid):
                self._add(("run", args[0]["workflow_id"]), *args)
