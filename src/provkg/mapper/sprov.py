"""S-PROV (streaming provenance, Spinuso et al.): the same events in S-PROV terms.

Mapping (every IRI minted from ids, so any order of events gives the same graph)::

    spec workflow W      <spec/W>      a provone:Workflow ; rdfs:label "W"
    transformation tr    <spec/W/tr>   a s-prov:Component ; rdfs:label "tr" ; s-prov:type "<kind>"
    workflow run R       <run/R>       a s-prov:WFExecution ; prov:wasInfluencedBy <spec/W> ;
                                       s-prov:workflowName "W" ; s-prov:workflowId "R" ;
                                       prov:startedAtTime / prov:endedAtTime ; s-prov:lastEventTime (end) ;
                                       prov:wasAssociatedWith <agent/A>, <instance/...>
    the process of run R <process/R>   a s-prov:SystemProcess ; rdfs:label "host:pid" (from the
                                       run's environment; a task whose begin carries its own
                                       environment -- the capture library's workers do -- gets
                                       <process/R/host/pid>; an end event adds an instance only
                                       with an environment of its own)
    tr running in R      <instance/R/tr>  a s-prov:ComponentInstance ; prov:actedOnBehalfOf <spec/W/tr> ;
                                       prov:atLocation <process/...>
    task T               <task/T>      a s-prov:Invocation ; prov:wasAssociatedWith <instance/R/tr> ;
                                       [prov:wasAssociatedWith <agent/A>] ;
                                       [s-prov:invocationIndex N (provkg:index if N < 0)] ;
                                       prov:startedAtTime / prov:endedAtTime ;
                                       s-prov:lastEventTime (end) ; prov:wasInformedBy <task/PARENT>, <task/DEP> ;
                                       [provkg:status "failed" ; s-prov:message "..."]
    value V              <value/V>     a s-prov:Data (s-prov:ComponentParameters for hyperparameter
                                       roles) ; rdfs:label "name" ; [prov:value x] ;
                                       prov:used / prov:wasGeneratedBy ; prov:wasDerivedFrom <value/...> ;
                                       [provlake:location "uri"] ; [provlake:denotes <domain IRI>]
    adaptation task T    <instance/R/X> s-prov:wasChangedWith <value/NEW> ;
                                       s-prov:qualifiedChange <change/T> .
                         <change/T>    a s-prov:Change ; prov:entity <value/NEW> ; prov:atTime t ;
                                       prov:hadActivity <task/T>
                         (X: the one stage of the spec that uses the adapted hyperparameter;
                          the adaptation's own transformation when there is none or several;
                          values of several stages: a change per stage, <change/T/X>)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from provkg.events import default_value_id
from provkg.mapper import base
from provkg.mapper.common import (
    MapState,
    Minter,
    TransformationTerms,
    WorkflowTerms,
    domain_term,
    location_bridge,
)
from provkg.mapper.terms import LABEL, PK, PL, PO, SP, A, P
from provkg.spec import Spec
from provkg.term import Triple, id_from_iri, literal, location_form
from provkg.vocab import XSD

__all__ = ["adaptation_invocations_query", "late_change_update", "late_parameter_triples",
           "map_task_event", "map_workflow_event", "parameter_occurrences_query",
           "prospective_triples", "uses_query"]

_PARAMETER_ROLES = ("hyperparameter", "model_hyperparameter")


def prospective_triples(spec: Spec, *, mint: Minter) -> Iterator[Triple]:
    """The workflow as a ProvONE workflow and its transformations as S-PROV components."""
    wf = mint.spec(spec.workflow)
    yield wf, A, PO.Workflow
    for plan_type in base.PLAN_TYPES:
        yield wf, A, plan_type
    yield wf, LABEL, literal(spec.workflow)
    for t in spec.transformations:
        c = mint.spec(spec.workflow, t.name)
        yield c, A, SP.Component
        for plan_type in base.PLAN_TYPES:
            yield c, A, plan_type
        yield c, LABEL, literal(t.name)
        yield c, SP.type, literal(t.kind)


def map_workflow_event(e: dict[str, Any], st: MapState, out: list[Triple]) -> None:
    """Triples of a workflow begin / end event."""
    run_id, wf = e["id"], e["workflow"]
    st.run_of(run_id, wf)
    wt = st.workflow(wf)
    if wt.spec is None:
        st.no_spec[wf] += 1
    r = st.mint.run(run_id)
    out += [(r, A, SP.WFExecution), (r, A, base.ACTIVITY), (r, P.wasInfluencedBy, wt.term),
            (r, SP.workflowName, literal(wf)), (r, SP.workflowId, literal(run_id))]
    out += base.software_agent_triples(st.mint, run_id)
    if e["event"] == "begin":
        out += base.default_association(st.mint, "run", run_id, r, run_id, wt.term)
    t = st.time(e["time"])
    if t is None:
        pass
    elif e["event"] == "begin":
        out.append((r, P.startedAtTime, t))
    else:
        out += [(r, P.endedAtTime, t), (r, SP.lastEventTime, t)]
    if e.get("agent") is not None:
        _agent(e, "run", run_id, r, wt.term, st, out)
        out.append((base.software_agent(st.mint, run_id), P.actedOnBehalfOf, st.mint.agent(e["agent"])))
    env = e.get("environment")
    if env and env.get("host") is not None:
        proc = st.mint.other("process", run_id)
        out += [(proc, A, SP.SystemProcess), (proc, LABEL, literal(f"{env['host']}:{env.get('pid', '')}"))]
    for side in ("used", "generated"):
        for v in e.get(side) or ():
            _value(v, r, run_id, None, st, out, used=side == "used", run=True)


def _instance(e: dict[str, Any], tr: str, st: MapState, out: list[Triple],
              component: str, workflow: str) -> str:
    """The component instance ``tr`` of the event's run runs as (``workflow``: the run's
    plan, under which the run is associated with it)."""
    run_id = e["workflow_id"]
    env = e.get("environment")
    if env and env.get("host") is not None:
        host, pid = str(env["host"]), str(env.get("pid", ""))
        inst = st.mint.other("instance", run_id, tr, host, pid)
        proc = st.mint.other("process", run_id, host, pid)
        out += [(proc, A, SP.SystemProcess), (proc, LABEL, literal(f"{host}:{pid}"))]
    else:  # the run's process (labelled by the workflow event when it names a host)
        inst = st.mint.other("instance", run_id, tr)
        proc = st.mint.other("process", run_id)
        out.append((proc, A, SP.SystemProcess))
    run = st.mint.run(run_id)
    out += [(inst, A, SP.ComponentInstance), (inst, A, base.AGENT), (inst, P.actedOnBehalfOf, component),
            (inst, P.atLocation, proc), (run, P.wasAssociatedWith, inst)]
    out += base.associate(st.mint, "run", run_id, run, inst, workflow)
    return inst


def _agent(e: dict[str, Any], kind: str, execution_id: str, subject: str, plan: str, st: MapState,
           out: list[Triple]) -> None:
    """The event's agent: associated with ``subject`` (a ``kind`` run or task), qualified."""
    a = st.mint.agent(e["agent"])
    out += [(subject, P.wasAssociatedWith, a), (a, A, P.Agent), (a, LABEL, literal(e["agent"]))]
    out += base.associate(st.mint, kind, execution_id, subject, a, plan)


def map_task_event(e: dict[str, Any], st: MapState, out: list[Triple],
                   wt: WorkflowTerms | None, tt: TransformationTerms | None) -> None:
    """Triples of a task begin / end event (``wt`` / ``tt`` None: run not known yet)."""
    task_id = e["id"]
    t = st.mint.task(task_id)
    out += [(t, A, SP.Invocation), (t, A, base.ACTIVITY)]
    if wt is not None and tt is not None and e["event"] == "begin":
        out += base.default_association(st.mint, "task", task_id, t, e["workflow_id"], tt.term)
    if wt is not None and tt is not None and (e["event"] == "begin" or e.get("environment")):
        # the begin event says where the invocation ran (an end without an environment of its
        # own would otherwise add the run's process: one invocation at two instances)
        inst = _instance(e, tt.name, st, out, tt.term, wt.term)
        out.append((t, P.wasAssociatedWith, inst))
        out += base.associate(st.mint, "task", task_id, t, inst, tt.term)
    time_lit = st.time(e["time"])
    if e["event"] == "begin":
        if time_lit is not None:
            out.append((t, P.startedAtTime, time_lit))
    else:
        if time_lit is not None:
            out += [(t, P.endedAtTime, time_lit), (t, SP.lastEventTime, time_lit)]
        if e.get("status") == "failed":
            out.append((t, PK.status, literal("failed")))
        if e.get("message") is not None:
            out.append((t, SP.message, literal(e["message"])))
    if e.get("parent") is not None:
        out.append((t, P.wasInformedBy, st.mint.task(e["parent"])))
    for d in e.get("dependencies") or ():
        out.append((t, P.wasInformedBy, st.mint.task(d)))
    if e.get("agent") is not None and tt is not None:  # the task's own agent, as typed and tagged keep it
        _agent(e, "task", task_id, t, tt.term, st, out)
    index = e.get("index")
    if index is not None:
        # S-PROV's index is non-negative; another number is kept as the typed schema keeps it
        out.append((t, SP.invocationIndex, literal(index, XSD.nonNegativeInteger)) if index >= 0
                   else (t, PK.index, literal(index)))
    for side in ("used", "generated"):
        for v in e.get(side) or ():
            _value(v, t, task_id, wt.spec if wt else None, st, out, used=side == "used",
                   transformation=tt.name if tt else None)
    if tt is not None and tt.kind == "adaptation" and e["event"] == "end":
        _change(e, wt, tt, st, out)  # type: ignore[arg-type]


def _value(v: dict[str, Any], execution: str, owner_id: str, spec: Spec | None, st: MapState,
           out: list[Triple], *, used: bool, transformation: str | None = None,
           run: bool = False) -> None:
    name = v["name"]
    loc = v.get("location")
    if loc is not None:  # one node per place, however the client spelled it
        loc = location_form(loc)
    vt = st.mint.value(v.get("id") or loc or default_value_id(owner_id, name, used=used, run=run))
    out.append((execution, P.used, vt) if used else (vt, P.wasGeneratedBy, execution))
    role = None
    if spec is not None and transformation is not None:
        tr = spec.transformation(transformation)
        attr = tr.attribute(name) if tr is not None else None
        role = attr.role if attr is not None else None
        if tr is not None and attr is None:  # stored as plain s-prov:Data, and counted
            st.unknown_attributes[(spec.workflow, transformation, name)] += 1
    out.append((vt, A, SP.ComponentParameters if role in _PARAMETER_ROLES else SP.Data))
    out.append((vt, A, base.ENTITY))
    out.append((vt, LABEL, literal(name)))
    if v.get("value") is not None:
        out.append((vt, P.value, literal(v["value"])))
    if loc is not None:
        out.append((vt, PL.location, literal(loc, XSD.anyURI)))
        if not used:
            out += location_bridge(vt, v.get("id"), loc, st.mint)
    if v.get("domain") is not None:
        out.append((vt, PL.denotes, domain_term(v["domain"])))
    for src in v.get("derived_from") or ():
        out.append((vt, P.wasDerivedFrom, st.mint.value(src)))


def _changed_component(spec: Spec | None, adaptation: str, names: list[str]) -> str:
    """The transformation an adaptation changes: the one non-section stage that uses
    one of the adapted names; the adaptation itself when that is not exactly one."""
    if spec is None:
        return adaptation
    users = {t.name for t in spec.transformations if t.kind not in ("section", "adaptation")
             and any(a.name in names for a in t.used)}
    return users.pop() if len(users) == 1 else adaptation


def _change_targets(spec: Spec | None, adaptation: str, names: list[str]) -> dict[str, list[str]]:
    """The components an adaptation changed, each with the names it changed there: a value
    goes to the one stage that uses its name (:func:`_changed_component`), so an adaptation
    of a training's learning rate and of a filter's threshold changes both."""
    targets: dict[str, list[str]] = {}
    for name in names:
        targets.setdefault(_changed_component(spec, adaptation, [name]), []).append(name)
    return targets


def _change_id(task_id: str, target: str, targets: dict[str, list[str]]) -> tuple[str, ...]:
    """The parts of a change's IRI: ``change/T``, or ``change/T/<component>`` per component
    when the adaptation changed several."""
    return (task_id,) if len(targets) == 1 else (task_id, target)


def _change(e: dict[str, Any], wt: WorkflowTerms, tt: TransformationTerms, st: MapState,
            out: list[Triple]) -> None:
    generated = e.get("generated") or []
    if not generated:
        return
    targets = _change_targets(wt.spec, tt.name, [v["name"] for v in generated])
    at = st.time(e["time"])
    for target, names in targets.items():
        # the run's instance of the changed component, whatever process the adaptation ran
        # in: an invocation's own process is known only from its begin, which may come in a
        # later session than this end, where the change is then added (late_change_update)
        inst = _instance({**e, "environment": None}, target, st, out,
                         st.transformation(wt, target).term if target != tt.name else tt.term, wt.term)
        change = st.mint.other("change", *_change_id(e["id"], target, targets))
        if at is not None:
            out.append((change, P.atTime, at))
        out += [(change, A, SP.Change), (change, P.hadActivity, st.mint.task(e["id"])),
                (inst, SP.qualifiedChange, change), (inst, SP.hasChanged, literal(True))]
        for v in generated:
            if v["name"] in names:
                loc = v.get("location")
                vt = st.mint.value(v.get("id") or (location_form(loc) if loc is not None else None)
                                   or default_value_id(e["id"], v["name"], used=False))
                out += [(inst, SP.wasChangedWith, vt), (change, P.entity, vt)]


# -- a spec registered after its events ----------------------------------------------------


def parameter_occurrences_query(spec: Spec, *, mint: Minter, tasks: list[str] | None = None) -> str | None:
    """SELECT ?v ?t: each stored value ``?v`` an invocation ``?t`` of one of ``spec``'s
    components used or generated under a hyperparameter role (None: the spec has none).
    ``tasks`` (task ids): those invocations only."""
    params = [(mint.spec(spec.workflow, t.name), literal(a.name)) for t in spec.transformations
              for a in [*t.used, *t.generated] if a.role in _PARAMETER_ROLES]
    if not params:
        return None
    rows = " ".join(f"({c} {n})" for c, n in params)
    only = f"VALUES ?t {{ {' '.join(mint.task(t) for t in tasks)} }} " if tasks else ""
    return (f"SELECT DISTINCT ?v ?t WHERE {{ {only}VALUES (?c ?n) {{ {rows} }} ?i {P.actedOnBehalfOf} ?c . "
            f"?t {P.wasAssociatedWith} ?i ; {A} {SP.Invocation} . "
            f"{{ ?t {P.used} ?v }} UNION {{ ?v {P.wasGeneratedBy} ?t }} ?v {LABEL} ?n }}")


def uses_query(values: list[str]) -> str:
    """SELECT ?v ?o: every activity ``?o`` that used or generated one of ``values``."""
    return (f"SELECT DISTINCT ?v ?o WHERE {{ VALUES ?v {{ {' '.join(values)} }} "
            f"{{ ?o {P.used} ?v }} UNION {{ ?v {P.wasGeneratedBy} ?o }} }}")


def late_parameter_triples(param_uses: set[tuple[str, str]], all_uses: set[tuple[str, str]]
                           ) -> tuple[list[Triple], list[Triple]]:
    """(to add, to remove) for values stored before their spec: a value some component used
    or generated under a hyperparameter role (``param_uses``: (value, activity) as
    ``<iri>`` terms) is ``s-prov:ComponentParameters``, and stops being ``s-prov:Data``
    unless one of its uses (``all_uses``) is not such a use (a run's, another stage's)."""
    values = {v for v, _ in param_uses}
    add = [(v, A, SP.ComponentParameters) for v in sorted(values)]
    other = {v for v, o in all_uses if (v, o) not in param_uses}
    remove = [(v, A, SP.Data) for v in sorted(values - other)]
    return add, remove


def late_change_update(spec: Spec, adaptations: list[tuple[str, str, str, str, str, list[str]]],
                       *, mint: Minter) -> str | None:
    """SPARQL Update giving each ended adaptation invocation stored before ``spec`` was known
    its ``s-prov:Change`` on the component instance it changed (:func:`_changed_component`),
    as :func:`_change` does when the spec is known. ``adaptations``: (task IRI, its instance
    IRI, run IRI, run id, process IRI, names of its generated values), IRIs without brackets,
    from :func:`adaptation_invocations_query`. None: nothing to add."""
    changes = []
    for task, inst, run, run_id, _proc, names in adaptations:
        task_id = id_from_iri(task, "task", base=mint.base)
        adaptation = _adaptation_name(spec, inst, run_id, mint)
        if task_id is None or adaptation is None:
            continue
        targets = _change_targets(spec, adaptation, sorted(set(names)))
        run_proc = mint.other("process", run_id)  # as _change: the run's instance, process
        for target, changed in targets.items():
            target_inst = mint.other("instance", run_id, target)
            change = mint.other("change", *_change_id(task_id, target, targets))
            assoc = base.association_node(mint, "run", run_id, target_inst)
            changes += [f"(<{task}> {change} {target_inst} {mint.spec(spec.workflow, target)} "
                        f"{run_proc} <{run}> {assoc} {literal(name)})" for name in changed]
    if not changes:
        return None
    # as _instance: the run's association with the instance, qualified under the workflow
    return (f"INSERT {{ ?proc {A} {SP.SystemProcess} . ?inst {A} {SP.ComponentInstance} , {base.AGENT} ; "
            f"{P.actedOnBehalfOf} ?comp ; "
            f"{P.atLocation} ?proc ; {SP.qualifiedChange} ?change ; {SP.hasChanged} {literal(True)} ; "
            f"{SP.wasChangedWith} ?v . ?run {P.wasAssociatedWith} ?inst ; {base.QUALIFIED_ASSOCIATION} ?assoc . "
            f"?assoc {A} {base.ASSOCIATION} ; {base.HAS_AGENT} ?inst ; {base.HAD_PLAN} {mint.spec(spec.workflow)} . "
            f"?change {A} {SP.Change} ; {P.hadActivity} ?task ; {P.atTime} ?time ; {P.entity} ?v }} "
            f"WHERE {{ VALUES (?task ?change ?inst ?comp ?proc ?run ?assoc ?name) {{ {' '.join(changes)} }} "
            f"?v {P.wasGeneratedBy} ?task ; {LABEL} ?name . "
            f"OPTIONAL {{ ?task {P.endedAtTime} ?time }} }}")


def adaptation_invocations_query(spec: Spec, *, mint: Minter,
                                 tasks: list[str] | None = None) -> str | None:
    """SELECT ?task ?inst ?run ?rid ?proc ?name: the ended invocations of ``spec``'s
    adaptation transformations and the names of what they generated (None: no adaptation).
    ``tasks`` (task ids): only those, and only while they have no change."""
    components = " ".join(mint.spec(spec.workflow, t.name) for t in spec.transformations
                          if t.kind == "adaptation")
    if not components:
        return None
    only = (f"VALUES ?task {{ {' '.join(mint.task(t) for t in tasks)} }} "
            f"FILTER NOT EXISTS {{ ?change {P.hadActivity} ?task }} " if tasks else "")
    return (f"SELECT ?task ?inst ?run ?rid ?proc ?name WHERE {{ {only}VALUES ?c {{ {components} }} "
            f"?inst {P.actedOnBehalfOf} ?c ; {P.atLocation} ?proc . "
            f"?task {P.wasAssociatedWith} ?inst ; {A} {SP.Invocation} ; {SP.lastEventTime} ?end . "
            f"?v {P.wasGeneratedBy} ?task ; {LABEL} ?name . "
            f"?run {P.wasAssociatedWith} ?inst ; {A} {SP.WFExecution} ; {SP.workflowId} ?rid }}")


def _adaptation_name(spec: Spec, inst: str, run_id: str, mint: Minter) -> str | None:
    """Which of ``spec``'s adaptations instance ``inst`` (an IRI) of run ``run_id`` runs."""
    for t in spec.transformations:
        own = mint.other("instance", run_id, t.name)[1:-1]
        if t.kind == "adaptation" and (inst == own or inst.startswith(own + "/")):
            return t.name
    return None
