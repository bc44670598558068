"""Events + prospective specs -> triples (pure functions, no I/O).

Three target schemas: ``typed`` PROV-ML (default), ``tagged`` PROVLake (Listing 2 of
the PROV-ML paper) and ``sprov`` (S-PROV). Output triples are tuples of N-Triples
terms made with :mod:`provkg.term`; IRIs are minted from event ids, never blank nodes.

>>> from provkg.spec import parse_spec
>>> spec = parse_spec("workflow: w\\nphase: learning\\ntransformations: [{name: training, kind: training}]")
>>> events = [{"type": "workflow", "event": "begin", "id": "r1", "time": 0, "workflow": "w"},
...           {"type": "task", "event": "begin", "id": "t1", "time": 1, "workflow_id": "r1",
...            "transformation": "training"}]
>>> any("TrainingExecution" in o for _, _, o in map_events(events, {"w": spec}))
True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from provkg.errors import MappingError
from provkg.mapper import retro, sprov
from provkg.mapper.common import SCHEMAS, MapState, Minter, as_dict, known_schema
from provkg.mapper.prospective import prospective_triples
from provkg.mapper.summary import SectionSummaries
from provkg.spec import Spec
from provkg.term import Triple
from provkg.vocab import DEFAULT_BASE

__all__ = ["SCHEMAS", "MapState", "finish", "map_batch", "map_events", "map_spec"]

_CHUNK = 4096


def map_spec(spec: Spec, *, schema: str = "typed", base: str = DEFAULT_BASE) -> Iterator[Triple]:
    """The prospective triples of ``spec`` in ``schema``.

    Raises:
        MappingError: unknown schema.
    """
    target = known_schema(schema)
    mint = Minter(base)
    if not target.provlake_layout:
        return sprov.prospective_triples(spec, mint=mint)
    return prospective_triples(spec, schema=target, mint=mint)


def map_events(events: Iterable[Any], specs: Mapping[str, Spec] | None = None, *,
               schema: str = "typed", base: str = DEFAULT_BASE,
               state: MapState | None = None) -> Iterator[Triple]:
    """The retrospective triples of ``events`` (models or plain wire-format dicts).

    Events may come in any order and more than once. A task whose workflow run has
    not been seen yet waits (bounded) for the run's workflow event; at the end of the
    stream it is written as a pending record only (``provkg:pendingEvent``), which the
    ingest service maps once the run is known. Pass ``state`` to carry runs,
    pending tasks and section summaries across calls; then call :func:`finish` at
    the end of the session.

    Raises:
        MappingError: an event is not a dict / event model, or the schema is unknown.
    """
    own = state is None
    st = state if state is not None else MapState(specs, schema=schema, base=base)
    if own:
        st.summary_close_on_end = False  # the whole stream is here: summarise at the end
    out: list[Triple] = []
    for ev in events:
        _map_one(as_dict(ev), st, out)
        if len(out) >= _CHUNK:
            yield from out
            out = []
    out.extend(_flush_pending(st))
    if own:
        out.extend(finish(st))
    yield from out


def map_batch(events: Iterable[Any], st: MapState) -> list[Triple]:
    """Like :func:`map_events` with a state, as one list (the ingest service's fast path).
    Pending tasks stay pending in ``st`` (call :func:`finish` to write them)."""
    out: list[Triple] = []
    for ev in events:
        _map_one(ev if isinstance(ev, dict) else as_dict(ev), st, out)
    return out


def finish(st: MapState) -> list[Triple]:
    """What a session still holds, as triples: tasks whose run never came (pending
    records) and summary sections whose parent has not ended (pending records in a
    session; their summaries when ``map_events`` had the whole stream)."""
    out = _flush_pending(st)
    if st.summaries is not None:
        summaries = st.summaries
        out.extend(summaries.park_all() if st.summary_close_on_end else summaries.flush_all())
    return out


def _map_one(e: dict[str, Any], st: MapState, out: list[Triple]) -> None:
    kind = e.get("type")
    if kind == "task":
        run = e["workflow_id"]
        wf = st.runs.get(run)
        if wf is None:
            if st.pending_count < st.max_pending:
                st.pending.setdefault(run, []).append(e)
                st.pending_count += 1
            else:
                _write_unresolved(e, st, out)
            return
        wt = st.workflow(wf)
        if wt.spec is None:
            st.no_spec[wf] += 1
        tt = st.transformation(wt, e["transformation"])
        if tt.kind == "section" and e["event"] == "begin" and e.get("parent") is None:
            st.parentless_sections[(wt.name, tt.name)] += 1
        if not st.schema.provlake_layout:
            if tt.summary:  # no summaries in this layout: kept in full, and said
                st.summary_in_full[(wt.name, tt.name)] += 1
            sprov.map_task_event(e, st, out, wt, tt)
            return
        if tt.summary:  # rollups; with granularity both, the execution in full as well
            if st.summaries is None:
                st.summaries = SectionSummaries(st)
            st.summaries.add(e, wt, tt)
            if not tt.detail:
                if e["event"] == "end":
                    out.extend(st.summaries.close(e, wt))
                return
        retro.map_task_event(e, st, out, wt, tt)
        if e["event"] == "end" and (st.summaries is not None or wt.summary_parents):
            if st.summaries is None:  # a parent may end before its first section arrives
                st.summaries = SectionSummaries(st)
            out.extend(st.summaries.close(e, wt))
    elif kind == "workflow":
        if not st.schema.provlake_layout:
            sprov.map_workflow_event(e, st, out)
        else:
            retro.map_workflow_event(e, st, out)
            if e["event"] == "end" and (st.summaries is not None or st.workflow(e["workflow"]).has_summaries):
                if st.summaries is None:
                    st.summaries = SectionSummaries(st)
                out.extend(st.summaries.close_run(e["id"], st.workflow(e["workflow"])))
        waiting = st.pending.pop(e["id"], None)
        if waiting:
            st.pending_count -= len(waiting)
            for pe in waiting:
                _map_one(pe, st, out)
    else:
        raise MappingError(f"event 'type' must be 'workflow' or 'task', not {kind!r}")


def _write_unresolved(e: dict[str, Any], st: MapState, out: list[Triple]) -> None:
    # only the record: everything else the event implies depends on its workflow
    st.unresolved_runs[e["workflow_id"]] += 1
    out.extend(retro.pending_triples(e, st))


def _flush_pending(st: MapState) -> list[Triple]:
    out: list[Triple] = []
    for events in st.pending.values():
        for e in events:
            _write_unresolved(e, st, out)
    st.pending.clear()
    st.pending_count = 0
    return out
