"""Retrospective triples for the typed and tagged schemas (docs/reference/graph.md, "Retrospective part").

The two schemas differ only in the classes chosen (resolved once per spec in
:class:`~provkg.mapper.common.MapState`), so one walker serves both. Every
event maps on its own to the triples it implies: a begin and an end of the same
task both state its class and links, so an end without its begin, duplicates and
any order give the same set of triples.
"""

from __future__ import annotations

import json
from typing import Any

from provkg.events import default_value_id
from provkg.mapper import base
from provkg.mapper.common import (
    MapState,
    TransformationTerms,
    WorkflowTerms,
    domain_term,
    location_bridge,
    section_index,
)
from provkg.mapper.terms import LABEL, PK, PL, A, P
from provkg.term import literal, location_form
from provkg.vocab import XSD

__all__ = ["map_task_event", "map_workflow_event", "pending_triples"]

_FINISHED = literal("finished")
_RUN_STATUS = {"finished": _FINISHED, "failed": literal("failed")}
_FAILED = literal("failed")
_ANYURI = XSD.anyURI
_INTEGER = '"{}"^^<' + XSD.integer + ">"
_INFLUENCED_BY, _INFORMED_BY = P.wasInfluencedBy, P.wasInformedBy
_STARTED, _ENDED, _INDEX = P.startedAtTime, P.endedAtTime, PK.index
_USED, _GENERATED_BY, _DERIVED_FROM, _VALUE = P.used, P.wasGeneratedBy, P.wasDerivedFrom, P.value
_ACTIVITY, _ENTITY = base.ACTIVITY, base.ENTITY


def map_workflow_event(e: dict[str, Any], st: MapState, out: list[tuple[str, str, str]]) -> None:
    """Triples of a workflow begin / end event, appended to ``out``."""
    run_id, wf = e["id"], e["workflow"]
    st.run_of(run_id, wf)
    wt = st.workflow(wf)
    if wt.spec is None:
        st.no_spec[wf] += 1
    r = st.mint.run(run_id)
    out.append((r, A, wt.run_class))
    out.append((r, A, _ACTIVITY))
    out.append((r, P.wasInfluencedBy, wt.term))
    out += base.software_agent_triples(st.mint, run_id)
    when = st.time(e["time"])
    if e["event"] == "begin":
        if when is not None:
            out.append((r, P.startedAtTime, when))
        # stated by the begin, as the start time: the run's plan, under its software agent
        out += base.default_association(st.mint, "run", run_id, r, run_id, wt.term)
        if e.get("label") is not None:  # the run's readable name (the `runs` query shows it)
            out.append((r, LABEL, literal(e["label"])))
        for key, value in (e.get("tags") or {}).items():
            out.append((r, PK.tag, literal(f"{key}={value}")))
    else:
        if when is not None:
            out.append((r, P.endedAtTime, when))
        status = e.get("status") or "finished"
        out.append((r, PK.status, _RUN_STATUS.get(status) or literal(status)))
        if e.get("message") is not None:
            out.append((r, PK.message, literal(e["message"])))
    if e.get("agent") is not None:
        _agent(e, "run", run_id, r, wt.term, st, out)
        # the captured program acts for the run's agent (a task names no agent of its own)
        out.append((base.software_agent(st.mint, run_id), P.actedOnBehalfOf, st.mint.agent(e["agent"])))
    env = e.get("environment")
    if env:
        if env.get("host") is not None:
            out.append((r, PK.host, literal(str(env["host"]))))
        out.append((r, PK.environment, literal(env)))
    if e.get("used"):
        _values(e["used"], r, run_id, None, None, st, out, used=True, plain=True)
    if e.get("generated"):
        _values(e["generated"], r, run_id, None, None, st, out, used=False, plain=True)


def map_task_event(e: dict[str, Any], st: MapState, out: list[tuple[str, str, str]],
                   wt: WorkflowTerms, tt: TransformationTerms) -> None:
    """Triples of a task begin / end event, appended to ``out``.

    ``wt`` / ``tt`` are the task's workflow and transformation: an event whose run's
    workflow is not known yet is held (or written as a pending record, see
    :func:`pending_triples`) and comes here once it is.
    """
    # the hot path of bulk ingest: locals and module constants instead of lookups
    task_id = e["id"]
    mint = st.mint
    t = mint.task(task_id)
    append = out.append
    append((t, A, tt.execution_class))
    append((t, A, _ACTIVITY))
    append((t, _INFLUENCED_BY, tt.term))
    when = st.time(e["time"])
    get = e.get
    if e["event"] == "begin":
        if when is not None:
            append((t, _STARTED, when))
        out += base.default_association(mint, "task", task_id, t, e["workflow_id"], tt.term)
    else:
        if when is not None:
            append((t, _ENDED, when))
        if get("status") == "failed":
            append((t, PK.status, _FAILED))
        if get("message") is not None:
            append((t, PK.message, literal(e["message"])))
    parent = get("parent")
    if parent is not None:
        append((t, _INFORMED_BY, mint.task(parent)))
    if tt.kind != "section":
        # every task but a section, parent or not: clients name a parent on the begin event
        # alone, so an end event cannot tell an adaptation inside a training from a stage
        # (a parent on the begin would make it both). Sections are
        # reached from their stage (a pending event is mapped again with tt)
        append((t, PL.isPartOf, mint.run(e["workflow_id"])))
    deps = get("dependencies")
    if deps:
        # a section's parent is its prov:wasInformedBy (as in the paper's graphs), and the
        # queries walk stage -> epoch -> batch by it: a dependency between sections (epoch 2
        # waited for epoch 1) must not look like one more child, so it gets a sub-property
        dep = PK.dependsOn if tt.kind == "section" else _INFORMED_BY
        for d in deps:
            append((t, dep, mint.task(d)))
    index = get("index")
    if index is None and tt.kind == "section":
        index = section_index(e, tt.name)
    if index is not None:
        append((t, _INDEX, _INTEGER.format(index) if type(index) is int else literal(index)))
    if get("agent") is not None:
        _agent(e, "task", task_id, t, tt.term, st, out)
    env = get("environment")
    if env:  # as for a run: one JSON literal, not dropped
        append((t, PK.environment, literal(env)))
    used = get("used")
    if used:
        _values(used, t, task_id, wt, tt, st, out, used=True, plain=False)
    generated = get("generated")
    if generated:
        _values(generated, t, task_id, wt, tt, st, out, used=False, plain=False)


def _agent(e: dict[str, Any], kind: str, execution_id: str, subject: str, plan: str, st: MapState,
           out: list[tuple[str, str, str]]) -> None:
    """The event's agent: associated with ``subject`` (a ``kind`` run or task), qualified."""
    name = e["agent"]
    a = st.mint.agent(name)
    out.append((subject, P.wasAssociatedWith, a))
    out += base.associate(st.mint, kind, execution_id, subject, a, plan)
    out += [(a, A, c) for c in st.agent_classes]
    out.append((a, LABEL, literal(name)))


def _values(values: list[dict[str, Any]], execution: str, owner_id: str, wt: WorkflowTerms | None,
            tt: TransformationTerms | None, st: MapState, out: list[tuple[str, str, str]],
            *, used: bool, plain: bool) -> None:
    """``plain``: values of a workflow run itself (no transformation, ``wt`` and ``tt`` None):
    plain PROVLake. A task's values come with both."""
    mint_value = st.mint.value
    append = out.append
    attributes = tt.attributes if tt is not None else None
    for v in values:
        get = v.get
        name = v["name"]
        loc = get("location")
        if loc is not None:  # one node per place, however the client spelled it
            loc = location_form(loc)
        vid = get("id") or loc or default_value_id(owner_id, name, used=used, run=plain)
        vt = mint_value(vid)
        if used:
            append((execution, _USED, vt))
        else:
            append((vt, _GENERATED_BY, execution))
        append((vt, A, _ENTITY))
        if attributes is not None:
            at = attributes.get(name)
            if at is None or not at[2]:  # not declared: plain, and counted
                assert wt is not None and tt is not None  # attributes is tt's; a task's values have both
                at = st.attribute(wt, tt, name)
            append((vt, A, at[1]))
            append((vt, _DERIVED_FROM, at[0]))
        elif plain:
            append((vt, A, PL.AttributeValue))
        x = get("value")
        if x is not None:
            append((vt, _VALUE, literal(x)))
        if loc is not None:
            append((vt, PL.location, literal(loc, _ANYURI)))
            append((vt, A, PL.DataReference))
            if not used:
                out += location_bridge(vt, get("id"), loc, st.mint)
        dom = get("domain")
        if dom is not None:
            append((vt, PL.denotes, domain_term(dom)))
        for src in get("derived_from") or ():
            append((vt, _DERIVED_FROM, mint_value(src)))


def _compact(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _compact(v) for k, v in x.items() if v is not None and v != []}
    if isinstance(x, list):
        return [_compact(v) for v in x]
    return x


def event_json(e: dict[str, Any]) -> str:
    """An event as a canonical ``rdf:JSON`` literal (the same event, the same literal)."""
    text = json.dumps(_compact(e), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return literal(text, "http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")


def pending_triples(e: dict[str, Any], st: MapState) -> list[tuple[str, str, str]]:
    """A task event whose run is unknown, kept in the graph until the run's workflow
    event arrives (the ingest service then maps it properly and deletes these)."""
    t = st.mint.task(e["id"])
    return [(t, PK.pendingRun, st.mint.run(e["workflow_id"])), (t, PK.pendingEvent, event_json(e))]
