"""The graph contract's SHACL shapes (``ontology/shapes/*.ttl``) and ``provkg validate``: the mapper's
golden graphs, the demo's graph and hostile lifecycles (out of order, re-delivered, split into
sessions, tasks before their run, hostile ids and values, undeclared names, section summaries)
ingested for real conform; a graph that breaks the contract gives violations naming the node and
the path."""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
import rdflib
from mapper_support import SPEC_YAML, lifecycle_events, lifecycle_spec
from rdflib import RDF, Literal, Namespace, URIRef

from provkg.cli import main
from provkg.errors import BadParameter
from provkg.service.ingest import ingest_events
from provkg.service.validate import SCHEMA_SHAPES, shape_paths, shapes_dir, validate_graph, validate_store
from provkg.spec import Spec, load_spec
from provkg.store import open_store

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = list(SCHEMA_SHAPES)
ID = Namespace("https://w3id.org/provkg/id/")
PROV = Namespace("http://www.w3.org/ns/prov#")
PROVKG = Namespace("https://w3id.org/provkg/ns#")
PROVLAKE = Namespace("https://w3id.org/provkg/provlake#")
PROVML = Namespace("https://w3id.org/provkg/provml#")
SHAPES = Namespace("https://w3id.org/provkg/shapes#")
XSD = Namespace("http://www.w3.org/2001/XMLSchema#")


def _golden_graph(schema: str) -> rdflib.Graph:
    return rdflib.Graph().parse(GOLDEN / f"{schema}.nq", format="nt")  # default graph only: N-Triples lines


def _golden_spec() -> Spec:
    return load_spec(GOLDEN / "lifecycle.spec.yaml")


def _golden_events() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (GOLDEN / "lifecycle.events.jsonl").read_bytes().splitlines()]


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(argv))
    return rc, out.getvalue()


def _ingested(tmp_path: Path, sessions: list[list[dict[str, Any]]], specs: list[Spec], schema: str) -> str:
    """A real on-disk Oxigraph store holding ``sessions`` ingested one ingest session each."""
    url = f"oxigraph:{tmp_path / f'store-{schema}'}"
    with open_store(url) as store:
        for events in sessions:
            ingest_events(store, events, specs=specs, schema=schema)
    return url


def _assert_conforms(url: str, schema: str) -> None:
    with open_store(url, existing=True, read_only=True) as store:
        report = validate_store(store, [schema])
    assert report.triples > 100
    assert report.conforms, "\n".join(f"{v.focus} {v.path}: {v.message} [{v.shape}]" for v in report.violations)


# ---------------------------------------------------------------- the shape files


def test_every_shape_file_parses_and_names_its_shapes():
    files = sorted(p.name for p in shapes_dir().glob("*.ttl"))
    assert files == ["common.ttl", "prov-base.ttl", "provlake.ttl", "sprov.ttl", "tagged.ttl", "typed.ttl"]
    for path in shapes_dir().glob("*.ttl"):
        graph = rdflib.Graph().parse(path, format="turtle")
        named = {s for s in graph.subjects(RDF.type, URIRef("http://www.w3.org/ns/shacl#NodeShape"))}
        assert named and all(isinstance(s, URIRef) and s.startswith(str(SHAPES)) for s in named), path.name


def test_each_schema_takes_the_common_shapes_and_its_own():
    assert [p.name for p in shape_paths(["typed"])] == ["common.ttl", "provlake.ttl", "typed.ttl"]
    assert [p.name for p in shape_paths(["sprov", "tagged"], prov_base=True)] == [
        "common.ttl", "sprov.ttl", "provlake.ttl", "tagged.ttl", "prov-base.ttl"]
    with pytest.raises(BadParameter, match="unknown schema 'owl'"):
        shape_paths(["owl"])


# ---------------------------------------------------------------- what conforms


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_mappers_golden_graphs_conform(schema):
    report = validate_graph(_golden_graph(schema), [schema])
    assert report.conforms, report.violations


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_golden_lifecycle_ingested_conforms_and_validate_says_so(tmp_path, schema):
    url = _ingested(tmp_path, [_golden_events()], [_golden_spec()], schema)
    assert _cli("init", "--store", url)[0] == 0  # the ontologies' graphs are not validated as data
    with open_store(url, existing=True, read_only=True) as store:
        everything = store.count()
    rc, out = _cli("validate", "--store", url)  # the schema found in the store
    assert rc == 0, out
    assert "conforms" in out and SCHEMA_SHAPES[schema][-1] + ".ttl" in out
    rc, out = _cli("validate", "--store", url, "--format", "json")
    answer = json.loads(out)
    assert rc == 0 and answer["conforms"] is True and answer["schemas"] == [schema] and answer["nodes"] == []
    assert 100 < answer["triples"] < everything - 1000


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("demo")
    url = f"oxigraph:{root / 'store'}"
    rc, _ = _cli("demo", "--small", "--store", url, "--out", str(root / "out"))
    assert rc == 0
    return url


def test_the_demos_graph_conforms(demo_store):
    rc, out = _cli("validate", "--store", demo_store)
    assert rc == 0, out
    with open_store(demo_store, existing=True, read_only=True) as store:
        report = validate_store(store)
    assert report.schemas == ["typed"] and report.triples > 2000 and report.conforms


def _twice_shuffled(events: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    again = [*events, *events]
    random.Random(seed).shuffle(again)
    return again


def _chunks(events: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    return [events[i:i + n] for i in range(0, len(events), n)]


_HOSTILE_RUN = 'exp:1/used/run "q" é%2F'
_HOSTILE_TEXT = 'x" } DROP ALL #\n[red]\x1b[31m{"a": 1}'


def _hostile_names(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The golden events with a run id full of IRI-minting edge cases and a value of SPARQL,
    markup, JSON and control characters."""
    text = orjson.dumps(events).decode().replace('"run-1', '"' + _HOSTILE_RUN.replace('"', '\\"'))
    text = text.replace('"StepLR"', orjson.dumps(_HOSTILE_TEXT).decode())
    return orjson.loads(text)


def _undeclared_names(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plus a task of a transformation the spec does not have, with a value of an undeclared name."""
    extra = [{"type": "task", "event": "begin", "id": "run-1/mystery", "time": 1700000003.4,
              "workflow_id": "run-1", "transformation": "mystery",
              "used": [{"name": "secret", "value": 7}]},
             {"type": "task", "event": "end", "id": "run-1/mystery", "time": 1700000003.5,
              "workflow_id": "run-1", "transformation": "mystery", "status": "finished",
              "generated": [{"name": "undeclared_output", "value": [1, None, "x"]}]}]
    return [*events[:-1], *extra, events[-1]]


_SUMMARY_SPEC_YAML = SPEC_YAML.replace("    of: epoch\n", "    of: epoch\n    granularity: summary\n")


HOSTILE = {
    "re-delivered, shuffled, four sessions": lambda: _chunks(_twice_shuffled(_golden_events(), 7), 9),
    "tasks before their run, one session each": lambda: _chunks(list(reversed(_golden_events())), 1),
    "hostile ids and values": lambda: [_hostile_names(_golden_events())],
    "undeclared transformation and names": lambda: [_undeclared_names(_golden_events())],
}


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_lifecycles_conform_after_ingest(tmp_path, case, schema):
    url = _ingested(tmp_path, HOSTILE[case](), [_golden_spec()], schema)
    _assert_conforms(url, schema)


@pytest.mark.parametrize("schema", ["typed", "tagged"])
def test_section_summaries_out_of_order_conform(tmp_path, schema):
    spec = lifecycle_spec(_SUMMARY_SPEC_YAML)
    events = lifecycle_events(trainings=2, epochs=2, batches=3)
    url = _ingested(tmp_path, _chunks(_twice_shuffled(events, 3), 11), [spec], schema)
    with open_store(url, existing=True, read_only=True) as store:
        assert store.ask(f"ASK {{ ?s a <{PROVKG.SectionSummary}> }}")
    _assert_conforms(url, schema)


# ---------------------------------------------------------------- what does not


def _without_start(graph: rdflib.Graph, task: URIRef) -> rdflib.Graph:
    broken = rdflib.Graph()
    broken += graph
    assert broken.value(task, PROV.startedAtTime) is not None
    broken.remove((task, PROV.startedAtTime, None))
    return broken


def test_a_task_without_start_time_is_a_violation_naming_the_node_and_path(tmp_path):
    task = ID["task/run-1/training-0/epoch-0"]
    report = validate_graph(_without_start(_golden_graph("typed"), task), ["typed"])
    assert [(v.focus, v.path, v.shape) for v in report.violations] == [
        (str(task), str(PROV.startedAtTime), str(SHAPES.TaskExecution))]
    # the same through the store and the command
    broken = tmp_path / "broken.nt"
    _without_start(_golden_graph("typed"), task).serialize(broken, format="nt", encoding="utf-8")
    url = f"oxigraph:{tmp_path / 'store'}"
    assert _cli("load", str(broken), "--store", url)[0] == 0
    rc, out = _cli("validate", "--store", url, "--schema", "typed")
    assert rc == 1
    lines = out.splitlines()
    at = lines.index(str(task))
    assert lines[at + 1].startswith("  prov:startedAtTime: ") and lines[at + 1].endswith("[pkgsh:TaskExecution]")
    assert "1 violations on 1 nodes" in lines[-1]
    rc, out = _cli("validate", "--store", url, "--schema", "typed", "--format", "json")
    answer = json.loads(out)
    assert rc == 1 and answer["conforms"] is False
    assert [(n["focus"], [r["path"] for r in n["results"]]) for n in answer["nodes"]] == [
        (str(task), [str(PROV.startedAtTime)])]


def _broken(schema: str, remove: list[tuple[Any, Any, Any]], add: list[tuple[Any, Any, Any]]) -> set[tuple]:
    graph = _golden_graph(schema)
    for triple in remove:
        assert list(graph.triples(triple)), triple
        graph.remove(triple)
    for triple in add:
        graph.add(triple)
    return {(v.focus, v.path, v.shape) for v in validate_graph(graph, [schema]).violations}


def test_what_the_graph_reference_requires_is_checked():
    run, training = ID["run/run-1"], ID["task/run-1/training-0"]
    loss = ID["value/run-1/training-0/loss"]
    # a run without its plan; a second status
    assert _broken("typed", [(run, PROV.wasInfluencedBy, None)], [(training, PROVKG.status, Literal("done"))]) >= {
        (str(run), str(PROV.wasInfluencedBy), str(SHAPES.WorkflowRun)),
        (str(training), str(PROVKG.status), str(SHAPES.ExecutionStatus))}
    # a generated value without its role; an environment that is no rdf:JSON
    found = _broken("typed", [(loss, PROV.wasDerivedFrom, None), (run, PROVKG.environment, None)],
                    [(run, PROVKG.environment, Literal("{}"))])
    assert (str(run), str(PROVKG.environment), str(SHAPES.ExecutionFacts)) in found
    assert (str(training), f"^{PROV.wasGeneratedBy}", str(SHAPES.TaskExecution)) in found
    # typed: a training execution of a validation; a derivation from an execution
    found = _broken("typed", [], [(training, PROV.wasInfluencedBy, ID["spec/flower-training/validation"]),
                                  (loss, PROV.wasDerivedFrom, training)])
    assert (str(loss), str(PROV.wasDerivedFrom), str(SHAPES.Derivation)) in found
    found = _broken("typed", [(training, PROV.wasInfluencedBy, None)],
                    [(training, PROV.wasInfluencedBy, ID["spec/flower-training/validation"])])
    assert (str(training), str(PROV.wasInfluencedBy), str(SHAPES.TrainingExecution)) in found
    # tagged: a tag outside the fixed set
    assert (str(ID["spec/flower-training/training"]), str(PROVLAKE.tag), str(SHAPES.TaggedTransformation)) in _broken(
        "tagged", [], [(ID["spec/flower-training/training"], PROVLAKE.tag, Literal("Fitting"))])
    # S-PROV: an invocation run by no component instance
    invocation = ID["task/run-1/evaluation"]
    assert (str(invocation), str(PROV.wasAssociatedWith), str(SHAPES.SprovInvocation)) in _broken(
        "sprov", [(invocation, PROV.wasAssociatedWith, None)], [])


# ---------------------------------------------------------------- prov-base.ttl (the W3C PROV base types)

BASE_TTL = """\
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix provlake: <https://w3id.org/provkg/provlake#> .
@prefix provml: <https://w3id.org/provkg/provml#> .
@prefix id: <https://w3id.org/provkg/id/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
id:spec\\/wf a provlake:Workflow, prov:Plan, prov:Entity ; rdfs:label "wf" .
id:spec\\/wf\\/training a provml:Training, prov:Plan, prov:Entity ; rdfs:label "training" ;
    provlake:isPartOf id:spec\\/wf ; provlake:hasOutput id:spec\\/wf\\/training\\/loss .
id:spec\\/wf\\/training\\/loss a provml:EvaluationMeasure, prov:Entity ; rdfs:label "loss" .
id:agent\\/alice a provml:Persona, prov:Agent .
id:run\\/r a provml:LearningProcessExecution, prov:Activity ;
    prov:startedAtTime "2024-01-01T00:00:00Z"^^xsd:dateTime ;
    prov:wasInfluencedBy id:spec\\/wf ; prov:wasAssociatedWith id:agent\\/alice ;
    prov:qualifiedAssociation id:association\\/run\\/r .
id:association\\/run\\/r a prov:Association ; prov:agent id:agent\\/alice ; prov:hadPlan id:spec\\/wf .
id:task\\/t a provml:TrainingExecution, prov:Activity ;
    prov:startedAtTime "2024-01-01T00:00:01Z"^^xsd:dateTime ;
    prov:wasInfluencedBy id:spec\\/wf\\/training ; provlake:isPartOf id:run\\/r ;
    prov:qualifiedAssociation id:association\\/task\\/t .
id:association\\/task\\/t a prov:Association ; prov:agent id:agent\\/alice ; prov:hadPlan id:spec\\/wf\\/training .
id:value\\/loss a provml:ModelEvaluation, prov:Entity ; prov:value 0.5 ;
    prov:wasGeneratedBy id:task\\/t ; prov:wasDerivedFrom id:spec\\/wf\\/training\\/loss .
"""


def _base_graph() -> rdflib.Graph:
    return rdflib.Graph().parse(data=BASE_TTL, format="turtle")


def test_a_graph_with_prov_base_types_and_qualified_associations_conforms():
    report = validate_graph(_base_graph(), ["typed"], prov_base=True)
    assert report.conforms, report.violations


def test_missing_base_types_and_plans_are_violations():
    graph = _base_graph()
    task, value, association = ID["task/t"], ID["value/loss"], ID["association/task/t"]
    graph.remove((task, RDF.type, PROV.Activity))
    graph.remove((value, RDF.type, PROV.Entity))
    graph.remove((association, PROV.hadPlan, None))
    found = {(v.focus, v.path, v.shape) for v in validate_graph(graph, ["typed"], prov_base=True).violations}
    assert (str(task), str(RDF.type), str(SHAPES.BaseExecution)) in found
    assert (str(value), str(RDF.type), str(SHAPES.BaseValue)) in found
    assert (str(association), str(PROV.hadPlan), str(SHAPES.BaseAssociation)) in found
    # without prov-base.ttl the schema's own shapes still hold: the types are the ontology's
    assert validate_graph(graph, ["typed"]).conforms


def test_an_execution_without_a_qualified_association_is_a_violation():
    graph = _base_graph()
    graph.remove((ID["run/r"], PROV.qualifiedAssociation, None))
    found = {(v.focus, v.path, v.shape) for v in validate_graph(graph, ["typed"], prov_base=True).violations}
    assert (str(ID["run/r"]), str(PROV.qualifiedAssociation), str(SHAPES.BaseExecution)) in found
