"""A Workflow Run Crate (RO-Crate 1.1, Workflow Run Crate profile 0.5, which is defined on 1.1) of
what an export covers.

The crate holds each workflow's prospective spec as the workflow (``File``,
``SoftwareSourceCode``, ``ComputationalWorkflow``; the main entity is the workflow with the most
runs), one ``CreateAction`` per run (its ``@id`` the run's IRI in the graph) with the workflow as
``instrument``, its inputs as ``object`` and its outputs as ``result``, its agents, start and end
time and status, and the whole PROV document of the export as ``provenance.json`` (PROV-JSON).
A run's inputs are the values its executions used that none of them generated; its outputs the
values its stages (not their sections: epochs, batches) generated. A value with a location is a
``File`` whose ``@id`` is that location (not copied: with ``with_data``, a local file is copied
into ``data/``); any other value a ``PropertyValue``. Each is an ``exampleOfWork`` of a
``FormalParameter`` of the workflow: its prospective attribute (``@id`` the attribute's IRI).
"""

from __future__ import annotations

import io
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from provkg.term import literal
from provkg.vocab import DEFAULT_BASE, PROV, PROVKG, PROVLAKE, RDFS, SPROV, XSD

if TYPE_CHECKING:
    import pyoxigraph
    from rocrate.rocrate import ROCrate

    from provkg.service.export_graph import ProvClasses
    from provkg.spec import Spec

__all__ = ["WORKFLOW_RUN_PROFILE", "build_crate"]

WORKFLOW_RUN_PROFILE = "https://w3id.org/ro/wfrun/workflow/0.5"
_PROFILES = {WORKFLOW_RUN_PROFILE: "Workflow Run Crate", "https://w3id.org/ro/wfrun/process/0.5":
             "Process Run Crate", "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate"}
_LANGUAGE = "https://w3id.org/provkg/ns#ProspectiveSpec"
_TYPES = {XSD.integer: "Integer", XSD.decimal: "Integer", XSD.double: "Float", XSD.boolean: "Boolean"}


@dataclass
class _Run:
    iri: str
    workflow: str
    activities: set[str]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    #: value -> the executions that used (inputs) or generated (outputs) it
    by: dict[str, set[str]] = field(default_factory=dict)


def _rows(graph: pyoxigraph.Store, query: str) -> list[tuple[Any, ...]]:
    solutions = graph.query(query, use_default_graph_as_union=True)
    names = [v.value for v in solutions.variables]  # type: ignore[union-attr]
    return [tuple(s[n] for n in names) for s in solutions]  # type: ignore[union-attr]


def _values(var: str, iris: set[str]) -> str:
    return f"VALUES ?{var} {{ {' '.join(f'<{i}>' for i in sorted(iris))} }}"


def _one(graph: pyoxigraph.Store, node: str, prop: str) -> Any:
    rows = _rows(graph, f"SELECT ?o WHERE {{ <{node}> <{prop}> ?o }} ORDER BY ?o LIMIT 1")
    return rows[0][0] if rows else None


def _name(graph: pyoxigraph.Store, node: str) -> str:
    label = _one(graph, node, RDFS.label)
    return str(label.value) if label is not None else unquote(node.rstrip("/").rsplit("/", 1)[-1])


def _is_section(graph: pyoxigraph.Store, activity: str, run: str) -> bool:
    """An epoch, a batch: no run of its own (typed, tagged), or of an S-PROV section component."""
    if activity == run:
        return False
    return bool(_rows(graph, f"""SELECT (1 AS ?yes) WHERE {{
        {{ <{activity}> <{PROV.wasAssociatedWith}>/<{PROV.actedOnBehalfOf}>/<{SPROV.type}> "section" }}
        UNION {{ FILTER NOT EXISTS {{ <{activity}> <{PROVLAKE.isPartOf}> ?r }}
                 FILTER NOT EXISTS {{ <{activity}> a <{SPROV.Invocation}> }} }} }} LIMIT 1"""))


def _runs(graph: pyoxigraph.Store, run_activities: dict[str, set[str]], base: str) -> list[_Run]:
    runs = []
    for run, activities in sorted(run_activities.items()):
        workflow = next((p.value for (p,) in _rows(graph, f"SELECT ?p WHERE {{ <{run}> <{PROV.wasInfluencedBy}> ?p }} "
                                                           "ORDER BY ?p") if p.value.startswith(f"{base}spec/")), None)
        entry = _Run(run, workflow or f"{base}spec/", activities)
        users: dict[str, set[str]] = defaultdict(set)
        for e, a in _rows(graph, f"SELECT DISTINCT ?e ?a WHERE {{ {_values('a', activities)} "
                                 f"?a <{PROV.used}> ?e . FILTER(isIRI(?e)) }}"):
            users[e.value].add(a.value)
        used = set(users)
        generated: dict[str, set[str]] = defaultdict(set)
        for e, a in _rows(graph, f"SELECT DISTINCT ?e ?a WHERE {{ {_values('a', activities)} "
                                 f"?e <{PROV.wasGeneratedBy}> ?a . "
                                 f"FILTER NOT EXISTS {{ ?e a <{PROVKG.term('SectionSummary')}> }} }}"):
            generated[e.value].add(a.value)
        entry.inputs = sorted(used - set(generated))
        stages = {a for a in activities if not _is_section(graph, a, run)}
        entry.outputs = sorted(e for e, by in generated.items() if by & stages)
        entry.by = {**{e: users[e] for e in entry.inputs}, **{e: generated[e] & stages for e in entry.outputs}}
        runs.append(entry)
    return runs


def _parameter(graph: pyoxigraph.Store, crate: ROCrate, value: str, run: _Run, base: str,
               location: str | None) -> Any:
    """The ``FormalParameter`` ``value`` is an example of: its prospective attribute of a
    transformation one of the run's executions followed, else one named after the value."""
    from rocrate.model.contextentity import ContextEntity

    attrs = [a.value for (a,) in _rows(graph, f"SELECT ?a WHERE {{ <{value}> <{PROV.wasDerivedFrom}> ?a . "
                                              f"FILTER(STRSTARTS(STR(?a), {literal(base + 'spec/')})) }} ORDER BY ?a")]
    plans = {p.value for (p,) in _rows(graph, f"SELECT DISTINCT ?p WHERE {{ {_values('a', run.by[value])} "
                                              f"?a <{PROV.wasInfluencedBy}> ?p }}")}
    link = PROVLAKE.hasOutput if value in run.outputs else PROVLAKE.hasInput
    declared = {a.value for (a,) in _rows(graph, f"SELECT ?a WHERE {{ {_values('t', plans)} ?t <{link}> ?a }}")}
    attrs.sort(key=lambda a: (a not in declared, a))  # an input (output) the spec declares first
    attr = next((a for a in attrs if a.rsplit("/", 1)[0] in plans), attrs[0] if attrs else None)
    name = _name(graph, attr) if attr else _name(graph, value)
    ident = attr or f"#parameter/{name}"
    if crate.get(ident) is None:
        sample = _one(graph, value, PROV.value)
        kind = "File" if location else _TYPES.get(sample.datatype.value, "Text") if sample is not None else "Text"
        crate.add(ContextEntity(crate, ident, properties={"@type": "FormalParameter", "name": name,
                                                          "additionalType": kind}))
    return crate.get(ident)


def _data_entity(graph: pyoxigraph.Store, crate: ROCrate, value: str, run: _Run, base: str,
                 with_data: bool, copied: Counter[str]) -> Any:
    from rocrate.model.contextentity import ContextEntity

    loc = _one(graph, value, PROVLAKE.location)
    location = str(loc.value) if loc is not None else None
    parameter = _parameter(graph, crate, value, run, base, location)
    if location is not None:
        existing = crate.get(location) or next((e for e in crate.data_entities if e.get("url") == location), None)
        if existing is not None:
            return existing, parameter
        described: dict[str, Any] = {"name": Path(urlsplit(location).path).name or location,
                                     "exampleOfWork": parameter}
        path = Path(unquote(urlsplit(location).path)) if location.startswith("file:") else None
        if with_data and path is not None and path.is_file():
            copied[path.name] += 1
            dest = f"data/{path.name}" if copied[path.name] == 1 else f"data/{copied[path.name]}-{path.name}"
            described["url"] = location
            return crate.add_file(str(path), dest_path=dest, properties=described), parameter
        return crate.add_file(location, properties=described), parameter
    if crate.get(value) is None:
        stated = _one(graph, value, PROV.value)
        properties: dict[str, Any] = {"@type": "PropertyValue", "name": parameter["name"],
                                      "exampleOfWork": parameter}
        if stated is not None:
            properties["value"] = _json_value(stated)
        crate.add(ContextEntity(crate, value, properties=properties))
    return crate.get(value), parameter


def _json_value(term: Any) -> Any:
    kind = term.datatype.value
    try:
        if kind == XSD.integer:
            return int(term.value)
        if kind == XSD.double:
            return float(term.value) if term.value not in ("NaN", "INF", "-INF") else term.value
        if kind == XSD.boolean:
            return term.value in ("true", "1")
    except ValueError:
        pass
    return term.value


def _agent(graph: pyoxigraph.Store, crate: ROCrate, agent: str, classes: ProvClasses) -> Any:
    from rocrate.model.contextentity import ContextEntity

    if crate.get(agent) is None:
        kinds = {c.value for (c,) in _rows(graph, f"SELECT ?c WHERE {{ <{agent}> a ?c }}")}
        software = PROV.term("SoftwareAgent") in kinds or SPROV.ComponentInstance in kinds
        crate.add(ContextEntity(crate, agent, properties={
            "@type": "SoftwareApplication" if software else "Person", "name": _name(graph, agent)}))
    return crate.get(agent)


def build_crate(graph: pyoxigraph.Store, run_activities: dict[str, set[str]], specs: dict[str, Spec],
                classes: ProvClasses, prov_json: bytes, *, title: str, with_data: bool = False,
                base: str = DEFAULT_BASE) -> ROCrate:
    """The crate of the runs ``run_activities`` (run IRI -> its executions in the export)."""
    from rocrate.model.computerlanguage import ComputerLanguage
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    from provkg import __version__

    crate = ROCrate(version="1.1")
    root = crate.root_dataset
    root["name"] = f"provkg export: {title}"
    root["description"] = (f"Workflow Run Crate of {title}: provkg's provenance graph of {len(run_activities)} "
                           "run(s), with the full provenance as PROV-JSON (provenance.json).")
    root["license"] = "not stated: the exported data's license is for its publisher to set"
    root["datePublished"] = datetime.now(UTC).replace(microsecond=0).isoformat()
    for profile, name in _PROFILES.items():
        root.append_to("conformsTo", crate.add(ContextEntity(crate, profile, properties={
            "@type": "CreativeWork", "name": name, "version": profile.rsplit("/", 1)[-1]})))
    language = crate.add(ComputerLanguage(crate, _LANGUAGE, properties={
        "name": "provkg prospective spec", "alternateName": "provkg spec",
        "url": {"@id": "https://w3id.org/provkg"}, "version": __version__}))
    runs = _runs(graph, run_activities, base)
    workflows: dict[str, Any] = {}
    per_workflow = Counter(r.workflow for r in runs)
    copied: Counter[str] = Counter()
    for workflow in sorted(per_workflow, key=lambda w: (-per_workflow[w], w)):
        name = _name(graph, workflow)
        spec = specs.get(name)
        document = spec.model_dump(mode="json", exclude_none=True) if spec is not None else {"workflow": name}
        source = json.dumps(document, indent=2, ensure_ascii=False).encode("utf-8")
        workflows[workflow] = crate.add_workflow(
            io.BytesIO(source), dest_path=f"workflows/{_file_name(name)}.spec.json", main=not workflows,
            lang=language, properties={"name": name, "encodingFormat": "application/json",
                                       "identifier": workflow, "version": __version__})
    for run in runs:
        wf = workflows[run.workflow]
        ins: list[Any] = []
        outs: list[Any] = []
        for values, out, prop in ((run.inputs, ins, "input"), (run.outputs, outs, "output")):
            for value in values:
                entity, parameter = _data_entity(graph, crate, value, run, base, with_data, copied)
                out.append(entity)
                if parameter not in (wf.get(prop) or []):
                    wf.append_to(prop, parameter)
        properties: dict[str, Any] = {
            "name": f"run {_name(graph, run.iri)} of {_name(graph, run.workflow)}",
            "description": f"{len(run.activities)} execution(s); the run's IRI in the provenance graph is its @id"}
        for prop, key in ((PROV.startedAtTime, "startTime"), (PROV.endedAtTime, "endTime")):
            if (t := _one(graph, run.iri, prop)) is not None:
                properties[key] = t.value
        status = _one(graph, run.iri, PROVKG.term("status"))
        if status is not None:
            properties["actionStatus"] = {"@id": "http://schema.org/" + (
                "FailedActionStatus" if status.value == "failed" else "CompletedActionStatus"
                if status.value == "finished" else "ActiveActionStatus")}
        agents = [_agent(graph, crate, a.value, classes) for (a,) in _rows(
            graph, f"SELECT DISTINCT ?ag WHERE {{ <{run.iri}> <{PROV.wasAssociatedWith}> ?ag . "
                   f"FILTER NOT EXISTS {{ ?ag a <{SPROV.ComponentInstance}> }} }} ORDER BY ?ag")]
        if agents:
            properties["agent"] = agents[0] if len(agents) == 1 else agents
        action = crate.add_action(wf, identifier=run.iri, object=ins, result=outs, properties=properties)
        root.append_to("mentions", action)
    crate.add_file(io.BytesIO(prov_json), dest_path="provenance.json", properties={
        "name": "the export's provenance (W3C PROV-JSON)", "encodingFormat": "application/json",
        "conformsTo": {"@id": "https://www.w3.org/submissions/prov-json/"}})
    return crate


def _file_name(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._")
    return safe or "workflow"
