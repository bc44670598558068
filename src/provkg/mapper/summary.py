"""Per-section summaries for sections with ``granularity: summary`` (docs/graph.md).

Instead of every batch, the parent (an epoch) gets one ``provkg:SectionSummary`` per
section transformation: how many executions, min / avg / max seconds, and per
evaluation measure min / avg / max. State is bounded by the sections of the parents
still open (a set of task ids each, for duplicates); sums are exact (integer
microseconds, exact rationals) so any order of the same events gives the same numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from provkg.mapper.common import MapState, TransformationTerms, WorkflowTerms
from provkg.mapper.terms import PK, A, P
from provkg.term import Triple, literal, mint_iri

__all__ = ["SectionSummaries"]

#: closed parents remembered so a late section event can reopen (and replace) their summary
_CLOSED_KEPT = 1024


@dataclass(slots=True)
class _Measure:
    attribute: str
    count: int = 0
    total: Fraction = Fraction(0)
    low: Any = None
    high: Any = None

    def add(self, x: float) -> None:
        self.count += 1
        self.total += Fraction(x)
        if self.low is None or x < self.low:
            self.low = x
        if self.high is None or x > self.high:
            self.high = x


@dataclass(slots=True)
class _Section:
    """One section transformation's executions under one parent."""

    parent_key: tuple[str, str]    # ("task", id) or ("run", id)
    tt: TransformationTerms
    measures_of: dict[str, str]    # evaluation-measure attribute name -> attribute term
    begins: dict[str, int] = field(default_factory=dict)   # task id -> begin (µs)
    ends: dict[str, int] = field(default_factory=dict)
    counted: set[str] = field(default_factory=set)
    measure_seen: set[tuple[str, str]] = field(default_factory=set)
    count: int = 0
    total_us: int = 0
    low_us: int | None = None
    high_us: int | None = None
    first_index: int | None = None
    last_index: int | None = None
    measures: dict[str, _Measure] = field(default_factory=dict)
    #: the events themselves, parked in the store if the session ends before the parent
    raw: list[dict[str, Any]] = field(default_factory=list)

    def add(self, e: dict[str, Any]) -> None:
        self.raw.append(e)
        tid = e["id"]
        us = round(e["time"] * 1_000_000)
        index = e.get("index")
        if index is not None:
            self.first_index = index if self.first_index is None else min(self.first_index, index)
            self.last_index = index if self.last_index is None else max(self.last_index, index)
        for v in e.get("generated") or ():
            term = self.measures_of.get(v["name"])
            x = v.get("value")
            if term is None or isinstance(x, bool) or not isinstance(x, (int, float)):
                continue
            if (tid, v["name"]) in self.measure_seen:
                continue
            self.measure_seen.add((tid, v["name"]))
            self.measures.setdefault(v["name"], _Measure(term)).add(x)
        if tid in self.counted:
            return
        (self.begins if e["event"] == "begin" else self.ends)[tid] = us
        if tid in self.begins and tid in self.ends:
            d = self.ends.pop(tid) - self.begins.pop(tid)
            self.counted.add(tid)
            self.count += 1
            self.total_us += d
            self.low_us = d if self.low_us is None else min(self.low_us, d)
            self.high_us = d if self.high_us is None else max(self.high_us, d)

    def triples(self, st: MapState) -> list[Triple]:
        kind, pid = self.parent_key
        parent = st.mint.task(pid) if kind == "task" else st.mint.run(pid)
        s = "<" + mint_iri("summary", kind, pid, self.tt.name, base=st.base) + ">"
        # executions whose begin or end is missing count too (their time is unknown)
        executions = self.count + len(set(self.begins) | set(self.ends))
        out = [(s, A, PK.SectionSummary), (s, P.wasGeneratedBy, parent),
               (s, P.wasInfluencedBy, self.tt.term), (s, PK.executionCount, literal(executions))]
        if self.count:
            out += [(s, PK.minSeconds, literal(self.low_us / 1e6)),
                    (s, PK.avgSeconds, literal(float(Fraction(self.total_us, self.count * 1_000_000)))),
                    (s, PK.maxSeconds, literal(self.high_us / 1e6))]
        if self.first_index is not None:
            out += [(s, PK.firstIndex, literal(self.first_index)), (s, PK.lastIndex, literal(self.last_index))]
        for name, m in sorted(self.measures.items()):
            ms = "<" + mint_iri("summary", kind, pid, self.tt.name, name, base=st.base) + ">"
            out += [(s, PK.hasMeasureSummary, ms), (ms, A, PK.MeasureSummary),
                    (ms, P.wasDerivedFrom, m.attribute), (ms, PK.valueCount, literal(m.count)),
                    (ms, PK.minValue, literal(m.low)), (ms, PK.maxValue, literal(m.high)),
                    (ms, PK.avgValue, literal(float(m.total / m.count)))]
        return out


class SectionSummaries:
    """Accumulates summary sections per open parent; emits when the parent ends."""

    def __init__(self, st: MapState):
        self.st = st
        self.open: dict[tuple[str, str], dict[str, _Section]] = {}
        self.closed: OrderedDict[tuple[str, str], tuple[dict[str, _Section], list[Triple]]] = OrderedDict()
        #: summaries already written for parents a late event reopened
        self.stale: dict[tuple[str, str], list[Triple]] = {}
        #: triples written earlier that a late event made stale: delete them *after*
        #: adding the triples mapped with them (the ingest service does)
        self.retract: list[Triple] = []
        #: parents whose sections were parked as pending records at a session's end
        self.parked = 0
        #: section task id -> parent id, from the event that named it (clients, provkg's
        #: capture library among them, name the parent on ``begin`` only)
        self.parent_of: dict[str, str] = {}
        #: events of sections whose parent is not known yet (their begin has not arrived)
        self.waiting: dict[str, list[tuple[dict[str, Any], WorkflowTerms, TransformationTerms]]] = {}

    def add(self, e: dict[str, Any], wt: WorkflowTerms, tt: TransformationTerms) -> None:
        tid, parent = e["id"], e.get("parent")
        if parent is None:
            parent = self.parent_of.get(tid)
            if parent is None:  # wait for the event that names the parent
                self.waiting.setdefault(tid, []).append((e, wt, tt))
                return
            if e["event"] == "end":
                del self.parent_of[tid]
        else:
            self.parent_of[tid] = parent
            for args in self.waiting.pop(tid, ()):
                self._add(parent, *args)
        self._add(parent, e, wt, tt)

    def _drain(self, run_id: str | None = None) -> None:
        """Waiting events whose parent never came (of run ``run_id``, or all): sections
        directly under their run."""
        for tid in [t for t, evs in self.waiting.items()
                    if run_id is None or evs[0][0]["workflow_id"] == run_id]:
            for args in self.waiting.pop(tid):
                self._add(None, *args)

    def _add(self, parent: str | None, e: dict[str, Any], wt: WorkflowTerms,
             tt: TransformationTerms) -> None:
        key = ("task", parent) if parent is not None else ("run", e["workflow_id"])
        sections = self.open.get(key)
        if sections is None:
            reopened = self.closed.pop(key, None)
            if reopened is not None:
                sections, written = reopened
                self.stale[key] = written
            else:
                sections = {}
            self.open[key] = sections
        sec = sections.get(tt.name)
        if sec is None:
            t = wt.spec.transformation(tt.name) if wt.spec is not None else None
            measures = {a.name: tt.attributes[a.name][0] for a in (t.generated if t else [])
                        if a.role == "evaluation_measure"}
            sec = sections[tt.name] = _Section(key, tt, measures)
        sec.add(e)

    def close(self, parent_id: str) -> list[Triple]:
        """Summaries of the sections of a parent task that just ended."""
        if not self.st.summary_close_on_end:
            return []
        key = ("task", parent_id)
        sections = self.open.pop(key, None)
        if not sections:
            return []
        out = self._emit(key, sections)
        self.closed[key] = (sections, out)
        while len(self.closed) > _CLOSED_KEPT:
            self.closed.popitem(last=False)
        return out

    def close_run(self, run_id: str) -> list[Triple]:
        """Summaries of sections directly under a run that just ended."""
        key = ("run", run_id)
        if self.st.summary_close_on_end:
            self._drain(run_id)
        sections = self.open.pop(key, None) if self.st.summary_close_on_end else None
        return self._emit(key, sections) if sections else []

    def park_all(self) -> list[Triple]:
        """End of an ingest session: the sections of parents that have not ended become
        pending records (``provkg:pendingParent`` + ``provkg:pendingEvent``); the session
        that sees the parent end reads them back, so its summary counts them. Parents
        that ended in this session and were reopened by late events are summarised now."""
        from provkg.mapper.retro import event_json

        self._drain()
        out: list[Triple] = []
        for key, sections in self.open.items():
            if key in self.stale:
                out += self._emit(key, sections)
                continue
            parent = self.st.mint.task(key[1]) if key[0] == "task" else self.st.mint.run(key[1])
            for sec in sections.values():
                for e in sec.raw:
                    t = self.st.mint.task(e["id"])
                    out += [(t, PK.pendingParent, parent), (t, PK.pendingEvent, event_json(e))]
            self.parked += 1
        self.open.clear()
        return out

    def flush_all(self) -> list[Triple]:
        """Summaries of every parent still open (end of a whole stream)."""
        self._drain()
        out = [t for key, sections in self.open.items() for t in self._emit(key, sections)]
        self.open.clear()
        return out

    def _emit(self, key: tuple[str, str], sections: dict[str, _Section]) -> list[Triple]:
        out = [t for sec in sections.values() for t in sec.triples(self.st)]
        old = self.stale.pop(key, None)
        if old:
            keep = set(out)
            self.retract.extend(t for t in old if t not in keep)
        return out
