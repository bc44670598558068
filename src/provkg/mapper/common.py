"""What every target schema shares: minted IRIs, the spec resolved to terms, the state
a stream of events carries (which run belongs to which workflow, unknown names seen).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from provkg.errors import MappingError
from provkg.mapper import tagged, typed
from provkg.mapper.terms import PK, PL, A, P
from provkg.schemas import Schema, schema_names
from provkg.spec import Spec
from provkg.term import datetime_literal, iri, mint_iri
from provkg.vocab import DEFAULT_BASE, PREFIXES, XSD

__all__ = [
    "SCHEMAS",
    "MapState",
    "Minter",
    "TransformationTerms",
    "WorkflowTerms",
    "as_dict",
    "known_schema",
    "domain_term",
    "section_index",
]

SCHEMAS = tuple(s.value for s in Schema)


def known_schema(schema: str) -> Schema:
    """``schema`` as its :class:`~provkg.schemas.Schema`.

    Raises:
        MappingError: no schema has that name."""
    found = Schema.named(schema)
    if found is None:
        raise MappingError(f"unknown schema {schema!r}: expected one of {schema_names()}")
    return found


#: ids made only of characters ``mint_iri`` leaves as they are (then quoting is a no-op)
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.\-~:@/]*")


class Minter:
    """``<iri>`` terms of instances under one base, memoised (parents and runs repeat).

    Same IRIs as :func:`provkg.term.mint_iri`; ids that need no percent-encoding skip it.
    """

    def __init__(self, base: str = DEFAULT_BASE):
        # instances never under a vocabulary's namespace (a base of provml# would
        # mint provml#task/... among the classes)
        clash = next((ns for ns in PREFIXES.values() if base.startswith(ns)), None)
        if clash is not None:
            raise MappingError(f"the IRI base {base!r} is inside the vocabulary namespace "
                               f"{clash}: give instances a base of their own (default {DEFAULT_BASE})")
        self.base = base
        self.run = lru_cache(maxsize=4096)(self._kind("run"))
        self.task = lru_cache(maxsize=65536)(self._kind("task"))
        self.value = self._kind("value")
        self.agent = lru_cache(maxsize=1024)(self._kind("agent"))

    def _kind(self, kind: str) -> Any:
        base = self.base
        prefix = "<" + base + kind + "/"
        plain = _PLAIN_ID.fullmatch

        def mint(ident: str) -> str:
            # IRI-safe as it is, and no segment that may be a dot segment (see mint_iri)
            if plain(ident) and ident[:1] != "." and "/." not in ident:
                return prefix + ident + ">"
            return "<" + mint_iri(kind, ident, base=base) + ">"

        return mint

    def spec(self, *parts: str) -> str:
        return "<" + mint_iri("spec", *parts, base=self.base) + ">"

    def other(self, kind: str, *parts: str) -> str:
        """Kinds minted from one part or several (``process/R`` and ``process/R/HOST/PID``):
        every part encodes '/', so a run id with '/' never meets a longer form."""
        return "<" + mint_iri(kind, *parts, base=self.base, composite=True) + ">"


@dataclass(slots=True)
class TransformationTerms:
    """One prospective transformation as the mapper needs it."""

    name: str
    term: str                    # <spec/wf/tr>
    execution_class: str         # class of its executions in the chosen schema
    known: bool                  # the spec declares it
    summary: bool = False        # per-parent summaries (rollups): Spec.rolled_up
    detail: bool = True          # granularity full or both: every execution
    #: name -> (term, value class, declared by the spec)
    attributes: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    kind: str = "transformation"


@dataclass(slots=True)
class WorkflowTerms:
    """One workflow's prospective terms for one schema (plain PROVLake when there is no spec)."""

    name: str
    term: str
    run_class: str
    spec: Spec | None
    transformations: dict[str, TransformationTerms] = field(default_factory=dict)
    #: the spec has sections kept as summaries (``granularity: summary``) ...
    has_summaries: bool = False
    #: ... and these transformations are their parents (``of``)
    summary_parents: frozenset[str] = frozenset()


def _workflow_terms(name: str, spec: Spec | None, *, schema: str, mint: Minter) -> WorkflowTerms:
    is_typed = known_schema(schema).typed_classes
    wt = WorkflowTerms(name=name, term=mint.spec(name), spec=spec,
                       run_class=typed.run_class(spec.phase if spec else None) if is_typed
                       else PL.WorkflowExecution)
    if spec is None:
        return wt
    for t in spec.transformations:
        exec_class = (typed.execution_class(t.kind, spec.stage_kind(t.name)) if is_typed
                      else PL.DataTransformationExecution)
        tt = TransformationTerms(name=t.name, term=mint.spec(name, t.name), execution_class=exec_class,
                                 known=True, summary=spec.rolled_up(t.name),
                                 detail=spec.detailed(t.name), kind=t.kind)
        for a in [*t.used, *t.generated]:
            if a.name not in tt.attributes:
                vclass = typed.VALUE_CLASS[a.role] if is_typed else PL.AttributeValue
                tt.attributes[a.name] = (mint.spec(name, t.name, a.name), vclass, True)
        wt.transformations[t.name] = tt
    summarised = [t for t in spec.transformations if spec.rolled_up(t.name)]
    wt.has_summaries = bool(summarised)
    wt.summary_parents = frozenset(t.of for t in summarised if t.of)
    return wt


class MapState:
    """What a stream of events carries from one event to the next.

    Keep one per ingest session and pass it to every ``map_events`` call so runs
    seen in earlier batches are known in later ones. ``specs`` may be a dict the
    caller adds to later (a spec registered after its events).
    """

    def __init__(self, specs: Mapping[str, Spec] | None = None, *, schema: str = "typed",
                 base: str = DEFAULT_BASE, max_pending: int = 100_000):
        self.schema = known_schema(schema)
        self.specs: Mapping[str, Spec] = specs if specs is not None else {}
        self.base = base
        self.mint = Minter(base)
        #: an agent's classes: its schema's and prov:Agent (tagged: the same class, once)
        self.agent_classes = tuple(dict.fromkeys(
            (typed.AGENT_CLASS if self.schema.typed_classes else tagged.AGENT_CLASS, P.Agent)))
        #: run id -> prospective workflow name
        self.runs: dict[str, str] = {}
        #: tasks whose run is not known yet: run id -> their events (bounded by max_pending)
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.pending_count = 0
        self.max_pending = max_pending
        # unknown names seen: counted, reported as warnings
        self.no_spec: Counter[str] = Counter()
        self.unknown_transformations: Counter[tuple[str, str]] = Counter()
        self.unknown_attributes: Counter[tuple[str, str, str]] = Counter()
        self.unresolved_runs: Counter[str] = Counter()
        #: section begins that name no parent: kept under their run, where the queries that
        #: walk stage -> epoch -> batch do not look (d3 / p1 find none of them)
        self.parentless_sections: Counter[tuple[str, str]] = Counter()
        #: values of summarised sections (granularity: summary) the spec does not declare
        self.summary_unknown: Counter[tuple[str, str, str]] = Counter()
        #: events of summarised sections mapped in full (S-PROV has no summaries)
        self.summary_in_full: Counter[tuple[str, str]] = Counter()
        #: run ids sent with two workflows (a reused SLURM job id): run -> the workflows
        self.run_clashes: dict[str, set[str]] = {}
        self.bad_times = 0
        self._second_text: dict[int, str] = {}
        self._terms: dict[str, tuple[int, WorkflowTerms]] = {}
        #: per-section summaries (granularity: summary), created on first need
        self.summaries: Any = None
        #: write a parent's summaries when it ends (sessions) or only at finish (one whole stream)
        self.summary_close_on_end = True
        #: an ingest service merges the summary state the store holds before writing
        #: (``provkg.service.ingest.Ingestor``); otherwise the mapper assumes there is none
        self.summary_store = False
        #: :class:`provkg.mapper.summary_cache.SummaryCache` of a long-lived service, or None
        self.summary_cache: Any = None

    def workflow(self, name: str) -> WorkflowTerms:
        """The terms of workflow ``name`` (rebuilt when its spec changes)."""
        spec = self.specs.get(name)
        cached = self._terms.get(name)
        if cached is not None and cached[0] == id(spec):
            return cached[1]
        wt = _workflow_terms(name, spec, schema=self.schema, mint=self.mint)
        self._terms[name] = (id(spec), wt)
        return wt

    def transformation(self, wt: WorkflowTerms, name: str) -> TransformationTerms:
        """The terms of transformation ``name`` of ``wt``; plain PROVLake when the spec lacks it."""
        tt = wt.transformations.get(name)
        if tt is None:
            tt = TransformationTerms(name=name, term=self.mint.spec(wt.name, name),
                                     execution_class=PL.DataTransformationExecution, known=False)
            wt.transformations[name] = tt
        if not tt.known and wt.spec is not None:
            self.unknown_transformations[(wt.name, name)] += 1
        return tt

    def attribute(self, wt: WorkflowTerms, tt: TransformationTerms, name: str) -> tuple[str, str, bool]:
        """(attribute term, value class, declared) for a value called ``name`` of ``tt``;
        plain PROVLake (and counted) when the spec does not declare it."""
        at = tt.attributes.get(name)
        if at is None:
            at = (self.mint.spec(wt.name, tt.name, name), PL.AttributeValue, False)
            tt.attributes[name] = at
        if not at[2] and tt.known:
            self.unknown_attributes[(wt.name, tt.name, name)] += 1
        return at

    def run_of(self, run_id: str, workflow: str) -> None:
        """Record that run ``run_id`` is of ``workflow``; a second workflow for the same id is
        remembered for a warning (both are kept: one run node, two workflows)."""
        known = self.runs.get(run_id)
        if known is not None and known != workflow:
            self.run_clashes.setdefault(run_id, {known}).add(workflow)
        self.runs[run_id] = workflow

    def time(self, seconds: float) -> str | None:
        """The xsd:dateTime literal of an event time (exactly ``term.datetime_literal``);
        None (and counted) past the year 9999."""
        try:
            return _fast_datetime_literal(seconds, self._second_text)
        except (ValueError, OverflowError, OSError):
            self.bad_times += 1
            return None

    def warnings(self) -> list[str]:
        """Unknown names seen so far, one sentence each (what was stored and how)."""
        plain = self.schema.untyped_names
        out = [f"workflow {w!r} has no spec: {_n(n, 'event')} stored {plain}"
               for w, n in sorted(self.no_spec.items())]
        out += [f"transformation {t!r} is not in the spec of {w!r}: {_n(n, 'event')} stored {plain}"
                for (w, t), n in sorted(self.unknown_transformations.items())]
        out += [f"attribute {a!r} is not in transformation {t!r} of {w!r}: "
                f"{_n(n, 'value')} stored {plain}"
                for (w, t, a), n in sorted(self.unknown_attributes.items())]
        out += [f"attribute {a!r} is not in transformation {t!r} of {w!r}, whose executions are kept "
                f"only as summaries of their declared measures: {_n(n, 'value')} not stored"
                for (w, t, a), n in sorted(self.summary_unknown.items())]
        out += [f"transformation {t!r} of {w!r} has granularity: summary, which S-PROV does not "
                f"use: {_n(n, 'event')} stored in full"
                for (w, t), n in sorted(self.summary_in_full.items())]
        out += [f"run {r!r}: no workflow event seen yet; {_n(n, 'task event')} kept pending until it arrives"
                for r, n in sorted(self.unresolved_runs.items())]
        out += [f"section {t!r} of {w!r} is `of:` another transformation, but {_n(n, 'execution')} "
                "named no parent: stored under their run, out of reach of the queries that walk "
                "from a stage to its sections (give parent=, e.g. wf.sections(..., parent=training))"
                for (w, t), n in sorted(self.parentless_sections.items())]
        out += [f"run id {r!r} was sent by workflows {', '.join(map(repr, sorted(ws)))}: they are one "
                "run node now; give each run an id of its own (e.g. job id + workflow)"
                for r, ws in sorted(self.run_clashes.items())]
        parked = self.summaries.parked if self.summaries is not None else 0
        if parked:
            out.append(f"{_n(parked, 'parent')} had not ended when the session did: their summary "
                       "sections are kept as pending records until the parent's end event arrives")
        orphans = self.summaries.orphans if self.summaries is not None else 0
        if orphans:
            out.append(f"{_n(orphans, 'summary-section execution')} without a parent yet (no event "
                       "of theirs names one, and the event that does has not arrived): kept as "
                       "pending records until it does")
        if self.bad_times:
            out.append(f"{_n(self.bad_times, 'event')} with a time past the year 9999: times not stored")
        return out


_DATETIME_SUFFIX = 'Z"^^<' + XSD.dateTime + ">"


def microseconds(seconds: float) -> int:
    """Whole microseconds since the epoch of an event time, rounded as ``datetime`` (and so
    every ``xsd:dateTime`` provkg writes) rounds them: half to even on the fraction of the
    second. ``round(seconds * 1e6)`` differs by one for some times (the product rounds)."""
    frac, whole = math.modf(seconds)
    return int(whole) * 1_000_000 + round(frac * 1e6)


def _fast_datetime_literal(seconds: float, cache: dict[int, str]) -> str:
    """``term.datetime_literal(seconds)`` without ``strftime`` per call: the date and time
    of day are cached per whole second; microseconds as :func:`microseconds` has them.
    ``tests/test_mapper_properties.py`` checks equality."""
    sec, us = divmod(microseconds(seconds), 1_000_000)
    text = cache.get(sec)
    if text is None:
        if len(cache) > 65536:
            cache.clear()
        text = cache[sec] = '"' + datetime_literal(sec)[1:20]
    return f"{text}.{us:06d}{_DATETIME_SUFFIX}"


_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def domain_term(uri: str) -> str:
    """``<uri>`` for a captured domain IRI; a ``%`` that starts no escape becomes ``%25``
    (the wire format lets it through, RDF parsers refuse it)."""
    return iri(_STRAY_PERCENT.sub("%25", uri) if "%" in uri else uri)


def location_bridge(value: str, vid: str | None, loc: str, mint: Minter) -> list[tuple[str, str, str]]:
    """For a generated value captured with both an ``id`` and a ``location``: the data at
    that location (the node a consumer that knows only the path, ``capture.ref(path)``,
    uses) derives from this value, and is its ``provkg:locationOf`` (which tells this
    bridge apart from other derivations). Without it lineage stopped between the two nodes.
    Nothing for any other value (a used value's id is the producer's; no cycle is added)."""
    if vid is None or vid == loc:
        return []
    node = mint.value(loc)
    return [(node, P.wasDerivedFrom, value), (node, PK.locationOf, value), (node, A, P.Entity)]


def section_index(e: dict[str, Any], transformation: str) -> int | None:
    """A section event's position: its ``index``, else one recorded as a value: an integer
    value named after the section (``epoch`` of the epoch section, ``batch`` of a batch), or
    ``index`` / ``step``; another section's number (a batch's ``epoch``) is not its own. The
    detail's ``provkg:index`` and a rollup's facts both take it from here."""
    index = e.get("index")
    if index is not None:
        return index
    names = (transformation, "index", "step")
    for key in ("used", "generated"):
        for v in e.get(key) or ():
            if v.get("name") in names and type(v.get("value")) is int:
                return int(v["value"])
    return None


def as_dict(event: Any) -> dict[str, Any]:
    """A wire-format event as a plain dict (pydantic models are dumped)."""
    if isinstance(event, dict):
        return event
    try:
        return event.model_dump()
    except AttributeError as exc:
        raise MappingError(f"an event is a dict or an events.WorkflowEvent / TaskEvent, "
                           f"not {type(event).__name__}") from exc


def _n(count: int, word: str) -> str:
    """``1 event``, ``3 events``: warnings are read by people."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"
