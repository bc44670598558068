"""One summary section under one parent: the facts of its executions, their canonical JSON
state (``provkg:summaryState``) and the summary triples computed from them
(:mod:`provkg.mapper.summary` keeps these per parent and session)."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from provkg.mapper.common import MapState, TransformationTerms, microseconds, section_index
from provkg.mapper.terms import PK, A, P
from provkg.term import Triple, iri, literal, mint_iri
from provkg.vocab import PROVKG, RDF

__all__ = ["STATE", "Fact", "Key", "Part", "Section", "state_json"]

Key = tuple[str, str]   # ("task", parent task id) or ("run", run id)

#: ``provkg:summaryState``: the facts a summary (or a pending one) was computed from
STATE = iri(PROVKG.summaryState)


#: one section execution as far as its summary needs it: (begin µs, end µs, index, measures,
#: failed), each None until seen (failed: False until an end event says so, then for good);
#: measures are ((name, (distinct values, sorted)), ...) by name. A
#: tuple of atoms, not an object: the cyclic garbage collector stops tracking such tuples, and
#: a large ingest holds hundreds of thousands (an object each made mapping 1.5x slower)
Fact = tuple[int | None, int | None, int | None, tuple[tuple[str, tuple[Any, ...]], ...] | None, bool]


#: one ``provkg:summaryState`` of a pending record: its text, its N-Triples literal, the
#: executions it holds. A running parent's pending record is several parts, each written once.
Part = tuple[str, str, frozenset[str]]


def _merged(a: Fact, b: Fact) -> Fact | None:
    """``a`` with what ``b`` knows and ``a`` does not; None when nothing is new."""
    ma, mb = a[3], b[3]
    if mb is None or mb == ma:
        m = ma
    elif ma is None:
        m = mb
    else:
        # every distinct value, as the full graph keeps every prov:value of the measure's
        # node (a loss sent on the begin and another on the end: keeping the first one
        # would make the summary depend on the order events came in)
        d = dict(ma)
        for name, xs in mb:
            mine = d.get(name)
            d[name] = xs if mine is None else tuple(sorted({*mine, *xs}))
        m = tuple(sorted(d.items()))
    out = (a[0] if a[0] is not None else b[0], a[1] if a[1] is not None else b[1],
           a[2] if a[2] is not None else b[2], m, a[4] or b[4])
    return None if out == a else out


def _fact_json(f: Fact) -> tuple[Any, ...]:
    """A fact as its JSON array (a tuple, which both JSON writers write as an array)."""
    if f[4]:  # failed: written only when true, so the states written before the flag read the same
        return (f[0], f[1], f[2], dict(f[3] or ()), True)
    if f[3]:
        return (f[0], f[1], f[2], dict(f[3]))
    return f[:3]


def _fact_from_json(v: list[Any]) -> Fact:
    measures = None
    if len(v) > 3 and v[3]:  # a value per measure in states written before the lists
        measures = tuple(sorted((k, tuple(x) if isinstance(x, list) else (x,)) for k, x in v[3].items()))
    return (v[0], v[1], v[2], measures, len(v) > 4 and v[4] is True)


def state_json(doc: dict[str, Any]) -> str:
    """A state's canonical text: ``json.dumps(doc, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` exactly (states written by any provkg version compare as text), by
    orjson where it writes the same text, ~9x faster. It does not for a double in
    [1e-9, 1e-4) (``0.00001`` or ``1e-7``, json: ``1e-05``, ``1e-07``) or a non-finite one
    (``null``, json: ``NaN``), and refuses lone surrogates and integers beyond 64 bits: those
    states take ``json.dumps`` (so does any text holding ``e-`` or ``0.0000``)."""
    try:
        text = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        text = None
    if (text is None or b"e-" in text or b"0.0000" in text
            or (b"null" in text and _has_non_finite(doc))):
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.decode()


def _has_non_finite(x: Any) -> bool:
    if type(x) is float:
        return x - x != 0.0  # nan and ±inf only
    if isinstance(x, dict):
        return any(_has_non_finite(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_has_non_finite(v) for v in x)
    return False


def _number(x: Any) -> bool:
    """An int or a float, not a bool (a bool is an int to ``isinstance``)."""
    t = type(x)
    return t is float or t is int or (t is not bool and isinstance(x, (int, float)))


class Section:
    """One section transformation's executions under one parent."""

    __slots__ = ("changed", "facts", "measures_of", "parts", "tt")

    def __init__(self, tt: TransformationTerms, measures_of: dict[str, str]):
        self.tt = tt
        self.measures_of = measures_of          # evaluation-measure attribute -> its term
        self.facts: dict[str, Fact] = {}        # section task id -> fact
        #: the pending record's parts in the store (their union holds every fact but
        #: ``changed``), oldest first; empty once the parent's rollup is written
        self.parts: list[Part] = []
        #: executions whose facts changed since the last part was written
        self.changed: set[str] = set()

    def add(self, e: dict[str, Any]) -> bool:
        """Count event ``e``; True when it told something new (not a re-delivery)."""
        # the per-batch hot path of every rollup: the common shapes skip the general code
        measures: tuple[tuple[str, tuple[Any, ...]], ...] | None = None
        generated = e.get("generated")
        if generated:
            of = self.measures_of
            pairs = [(v["name"], x) for v in generated
                     if v["name"] in of and _number(x := v.get("value"))]
            if len(pairs) == 1:  # one measure per batch, the common case
                measures = ((pairs[0][0], (pairs[0][1],)),)
            elif pairs:  # measure name -> its distinct values, both sorted
                seen: dict[str, set[Any]] = {}
                for name, x in pairs:
                    seen.setdefault(name, set()).add(x)
                measures = tuple(sorted((k, tuple(sorted(xs))) for k, xs in seen.items()))
        us = microseconds(e["time"])  # the very microseconds of the batch's dateTimes
        index = section_index(e, self.tt.name)  # the detail's provkg:index, the same way
        if e["event"] == "begin":
            return self.merge(e["id"], (us, None, index, measures, False))
        return self.merge(e["id"], (None, us, index, measures, e.get("status") == "failed"))

    def merge(self, tid: str, fact: Fact) -> bool:
        old = self.facts.get(tid)
        if old is None:
            self.facts[tid] = fact
            self.changed.add(tid)
            return True
        new = _merged(old, fact)
        if new is None:
            return False
        self.facts[tid] = new
        self.changed.add(tid)
        return True

    def absorb(self, facts: dict[str, Fact], parts: list[Part]) -> None:
        """Merge facts the store holds (in ``parts``, or in a written rollup: no parts): they
        need no new part. ``facts`` may be taken as is (the cache gave them away, or a parse
        made them); what this session added before is merged on top of them, marked changed
        where it tells something new."""
        if len(facts) > len(self.facts):
            mine, self.facts = self.facts, facts
            for tid, f in mine.items():
                self.merge(tid, f)
        else:
            own = self.facts
            for tid, f in facts.items():
                old = own.get(tid)
                new = f if old is None else _merged(old, f)
                if new is not None:
                    own[tid] = new
        self.parts += parts

    def pending_parts(self, pid: str) -> None:
        """Make :attr:`parts` hold the changed facts as well: one new part
        for them; then, while the newest part holds as many executions as the one before,
        the two become one (a binary counter: O(log n) parts, and each fact rewritten
        O(log n) times, where one literal of all the facts, rewritten at every session's
        end, made a session cost in proportion to everything its running parents held)."""
        parts = list(self.parts)
        if self.changed or not parts:
            parts.append(self._part(pid, frozenset(self.changed)))
            self.changed = set()
        while len(parts) > 1 and len(parts[-1][2]) >= len(parts[-2][2]):
            newer, older = parts.pop(), parts.pop()
            parts.append(self._part(pid, older[2] | newer[2]))
        self.parts = parts

    def _part(self, pid: str, tids: frozenset[str]) -> Part:
        text = self.state(pid, tids)
        return text, literal(text, RDF.JSON), tids

    def state(self, pid: str, tids: frozenset[str] | None = None) -> str:
        """The facts (of ``tids``, else all) as canonical JSON (the same facts, the same
        text). Ids under the parent's id are kept as their suffix."""
        inner: dict[str, Any] = {}
        other: dict[str, Any] = {}
        n = len(pid)
        facts = self.facts
        for tid, f in (facts.items() if tids is None else ((t, facts[t]) for t in tids)):
            if tid.startswith(pid) and len(tid) > n:
                inner[tid[n:]] = _fact_json(f)
            else:
                other[tid] = _fact_json(f)
        doc: dict[str, Any] = {"section": self.tt.name, "under": inner}
        if other:
            doc["other"] = other
        return state_json(doc)

    def merge_state(self, pid: str, doc: dict[str, Any]) -> bool:
        changed = False
        for suffix, v in (doc.get("under") or {}).items():
            changed |= self.merge(pid + suffix, _fact_from_json(v))
        for tid, v in (doc.get("other") or {}).items():
            changed |= self.merge(tid, _fact_from_json(v))
        return changed

    def triples(self, st: MapState, key: Key, *, ended: bool, state: str | None = None) -> list[Triple]:
        """The summary (``ended``: of ``state``, else of all the facts) or the pending record
        (its :attr:`parts`, see :meth:`pending_parts`), and for executions seen only in part
        (a begin without its end, or the reverse) a link to the parent
        (``provkg:pendingParent``) so a later session finds where an event that names no
        parent belongs."""
        kind, pid = key
        parent = st.mint.task(pid) if kind == "task" else st.mint.run(pid)
        s = "<" + mint_iri("summary", kind, pid, self.tt.name, base=st.base) + ">"
        out: list[Triple] = [(st.mint.task(tid), PK.pendingParent, parent)
                             for tid, f in self.facts.items() if f[0] is None or f[1] is None]
        if not ended:
            out += [(s, STATE, term) for _, term, _ in self.parts]
            out.append((s, PK.pendingParent, parent))
            return out
        out.append((s, STATE, literal(state if state is not None else self.state(pid), RDF.JSON)))
        facts = self.facts.values()
        # hasSectionSummary: queries reach the summary from the parent in one lookup, not
        # through everything the parent generated (its models and measures as well)
        out += [(s, A, PK.SectionSummary), (s, A, P.Entity), (s, P.wasGeneratedBy, parent),
                (parent, PK.hasSectionSummary, s),
                (s, P.wasInfluencedBy, self.tt.term), (s, PK.executionCount, literal(len(self.facts)))]
        seconds = [f[1] - f[0] for f in facts if f[0] is not None and f[1] is not None]
        out.append((s, PK.timedCount, literal(len(seconds))))
        if seconds:  # int / int: correctly rounded, whatever the order of the executions
            out += [(s, PK.minSeconds, literal(min(seconds) / 1e6)),
                    (s, PK.avgSeconds, literal(sum(seconds) / (len(seconds) * 1_000_000))),
                    (s, PK.maxSeconds, literal(max(seconds) / 1e6))]
        indexes = [f[2] for f in facts if f[2] is not None]
        if indexes:
            out += [(s, PK.firstIndex, literal(min(indexes))), (s, PK.lastIndex, literal(max(indexes)))]
        out += [(s, PK.latestExecution, st.mint.task(tid)) for tid in _latest(self.facts)]
        values: dict[str, list[Any]] = {}
        for f in facts:
            for name, xs in f[3] or ():
                values.setdefault(name, []).extend(xs)
        for name in sorted(values):
            term = self.measures_of.get(name)
            if term is None:  # a measure the spec no longer declares
                continue
            vs = values[name]
            ms = "<" + mint_iri("summary", kind, pid, self.tt.name, name, base=st.base) + ">"
            out += [(s, PK.hasMeasureSummary, ms), (ms, A, PK.MeasureSummary), (ms, A, P.Entity),
                    (ms, P.wasDerivedFrom, term), (ms, PK.valueCount, literal(len(vs))),
                    (ms, PK.minValue, literal(min(vs))), (ms, PK.maxValue, literal(max(vs))),
                    # fsum: the correctly rounded sum, the same in any order (ints exactly)
                    (ms, PK.avgValue, literal(_mean(vs)))]
        return out


def _latest(facts: dict[str, Fact]) -> list[str]:
    """The executions with the greatest (index, end) among those that ended, have an index and
    did not fail (ties: all of them): p1's latest epoch, as its full-detail form picks it."""
    done = [(f[2], f[1], tid) for tid, f in facts.items()
            if f[1] is not None and f[2] is not None and not f[4]]
    if not done:
        return []
    top = max((i, end) for i, end, _ in done)
    return sorted(tid for i, end, tid in done if (i, end) == top)


def _mean(xs: list[Any]) -> float:
    if all(type(x) is int for x in xs):
        return sum(xs) / len(xs)
    return math.fsum(xs) / len(xs)
