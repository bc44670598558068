"""Spec registration, in one place: a workflow's prospective triples, the spec's stored
document, and what a spec registered after its events (or replacing another) changes.

:func:`register_spec` writes the spec's triples; in typed mode it re-types what was stored
plain, in S-PROV mode it adds the parameter classes and adaptation changes the spec implies.
The spec's document is stored too (:func:`spec_document`; :func:`stored_specs` reads them
back), and a registration a crash cut short is completed by :func:`finish_registrations`.
Whether a spec replaces the one held for its workflow, and what that changes, is
:func:`replacement_changes` (for the CLI's notes and ``spec validate --store``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from provkg.errors import BadSpec, ProvkgError
from provkg.mapper import MapState, map_spec, sprov, typed
from provkg.mapper.common import Minter
from provkg.mapper.terms import PK, PL, PML, A, P
from provkg.spec import Spec, parse_spec, parse_stored_spec, spec_changes
from provkg.store import Store
from provkg.term import Triple, iri, literal, mint_iri
from provkg.vocab import DEFAULT_BASE, RDF

log = logging.getLogger("provkg.ingest")

__all__ = [
    "finish_registrations",
    "register_spec",
    "replacement_changes",
    "same_spec",
    "spec_data",
    "spec_document",
    "stored_specs",
]


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
        _drop_rollups(store, spec, replaced, mint)
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


def _drop_rollups(store: Store, spec: Spec, replaced: list[Spec], mint: Minter) -> None:
    """Delete the rollups of sections the replaced specs kept beside their executions
    (``both``, and the sections above them) and ``spec`` no longer rolls up: the queries would
    read them before the executions. Rollups of ``summary`` sections stay (the only record of
    their executions)."""
    gone = sorted({t.name for old in replaced for t in old.transformations
                   if old.rolled_up(t.name) and old.detailed(t.name) and not spec.rolled_up(t.name)})
    if not gone:
        return
    terms = " ".join(mint.spec(spec.workflow, name) for name in gone)
    store.update(f"DELETE {{ ?p {PK.hasSectionSummary} ?s . ?s ?x ?y . ?m ?mx ?my }} WHERE {{ "
                 f"VALUES ?t {{ {terms} }} ?s {P.wasInfluencedBy} ?t ; {A} {PK.SectionSummary} ; ?x ?y . "
                 f"OPTIONAL {{ ?p {PK.hasSectionSummary} ?s }} "
                 f"OPTIONAL {{ ?s {PK.hasMeasureSummary} ?m . ?m ?mx ?my }} }}")


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


def spec_data(spec: Spec) -> dict[str, Any]:
    """``spec`` as JSON-ready data, every default spelled out and no None (what the store keeps,
    and what ``GET /v1/specs`` answers)."""
    data = spec.model_dump(mode="json", exclude_none=True)
    for t in data["transformations"]:  # an unset granularity as the spec resolves it
        t["granularity"] = spec.granularity(t["name"])
    return data


def spec_document(spec: Spec) -> str:
    """``spec`` as JSON text that :func:`provkg.spec.parse_spec` reads back to the same spec."""
    return json.dumps(spec_data(spec), sort_keys=True, ensure_ascii=False)


def same_spec(a: Spec, b: Spec) -> bool:
    """Whether ``a`` and ``b`` are one spec document: registering one where the other is held
    changes nothing stored (:func:`register_spec` returns at once)."""
    return spec_document(a) == spec_document(b)


def replacement_changes(held: Spec | None, spec: Spec) -> list[str] | None:
    """What registering ``spec`` changes for its workflow, which had ``held``: None when it
    replaces nothing (no spec held, or the same document), else :func:`provkg.spec.spec_changes`'
    words, empty when only the order of transformations differs."""
    if held is None or same_spec(held, spec):
        return None
    return spec_changes(held, spec)


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
    # (task, instance, run, run id, process) -> names of what the task generated
    tasks_found: dict[tuple[str, str, str, str, str], list[str]] = {}
    for task, inst, run, rid, proc, name in store.select(query).rows:  # IRIs come as str
        key = (str(task), str(inst), str(run), str(rid), str(proc))
        tasks_found.setdefault(key, []).append(str(name))
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



def _chunks(items: list[Any], n: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]
