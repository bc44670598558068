"""The PROV base layer (docs/reference/graph.md, "What any PROV tool reads"): base types and
qualified associations in every schema, read without reasoning by SPARQL and by the ``prov``
package, and the value -> spec-attribute link that lineage and impact never walk."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import orjson
import prov
import pyoxigraph as ox
import pytest
import rdflib
from prov.model import ProvActivity, ProvAgent, ProvAssociation, ProvEntity

from provkg import ingest_paths, load_spec, open_store, run_query
from provkg.mapper import map_events, map_spec
from provkg.service.loading import init_store
from provkg.store import Store
from provkg.term import iri, mint_iri
from provkg.vocab import DEFAULT_BASE, PROV, RDF

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = ["typed", "tagged", "sprov"]
TYPE = iri(RDF.type)
ACTIVITY, ENTITY, AGENT, PLAN = iri(PROV.Activity), iri(PROV.Entity), iri(PROV.Agent), iri(PROV.Plan)
QUALIFIED = iri(PROV.term("qualifiedAssociation"))
HAS_AGENT, HAD_PLAN = iri(PROV.term("agent")), iri(PROV.term("hadPlan"))
PREFIX = "PREFIX prov: <http://www.w3.org/ns/prov#> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "


def _events() -> list[dict]:
    return [orjson.loads(line) for line in (GOLDEN / "lifecycle.events.jsonl").read_bytes().splitlines()]


def _spec():
    return load_spec(GOLDEN / "lifecycle.spec.yaml")


def _graph(schema: str) -> set[tuple[str, str, str]]:
    spec = _spec()
    return set(map_spec(spec, schema=schema)) | set(map_events(_events(), {spec.workflow: spec}, schema=schema))


def _with(g: set, predicate: str, obj: str) -> set[str]:
    return {s for s, p, o in g if p == predicate and o == obj}


def _objects(g: set, subject: str, predicate: str) -> set[str]:
    return {o for s, p, o in g if s == subject and p == predicate}


def _executions() -> dict[str, str]:
    """Each run and task of the golden events -> its plan (workflow or transformation)."""
    spec = _spec()
    out = {}
    for e in _events():
        if e["type"] == "workflow":
            out[iri(mint_iri("run", e["id"]))] = iri(mint_iri("spec", e["workflow"]))
        else:
            out[iri(mint_iri("task", e["id"]))] = iri(mint_iri("spec", spec.workflow, e["transformation"]))
    return out


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_execution_value_agent_and_plan_has_its_prov_type(schema: str) -> None:
    g = _graph(schema)
    executions = _executions()
    assert _with(g, TYPE, ACTIVITY) == set(executions)
    # entities: every value (what is used, generated or derived), and nothing that is an activity
    values = {o for _, p, o in g if p == iri(PROV.used)} | {s for s, p, _ in g if p == iri(PROV.wasGeneratedBy)}
    values |= {t for s, p, o in g if p == iri(PROV.wasDerivedFrom) for t in (s, o)}  # spec attributes too
    entities = _with(g, TYPE, ENTITY)
    assert values and values <= entities
    assert not entities & set(executions)
    agents = ({o for _, p, o in g if p in (iri(PROV.wasAssociatedWith), HAS_AGENT)}
              | {t for s, p, o in g if p == iri(PROV.actedOnBehalfOf) for t in (s,)})
    assert agents and agents <= _with(g, TYPE, AGENT)
    assert not _with(g, TYPE, AGENT) & set(executions)
    # plans: the workflow and every transformation, entities to a tool that does not read PROV-O
    spec = _spec()
    plans = {iri(mint_iri("spec", spec.workflow))} | {iri(mint_iri("spec", spec.workflow, t.name))
                                                      for t in spec.transformations}
    assert _with(g, TYPE, PLAN) == plans
    assert plans <= entities


@pytest.mark.parametrize("schema", SCHEMAS)
def test_each_execution_has_a_qualified_association_with_its_plan(schema: str) -> None:
    g = _graph(schema)
    for execution, plan in _executions().items():
        associations = _objects(g, execution, QUALIFIED)
        assert associations, execution
        for a in associations:
            assert _objects(g, a, TYPE) == {iri(PROV.term("Association"))}
            assert _objects(g, a, HAD_PLAN) == {plan}, a
            (agent,) = _objects(g, a, HAS_AGENT)  # exactly one agent per association
            assert AGENT in _objects(g, agent, TYPE)
        # the agent of every binary wasAssociatedWith is the agent of one of its associations
        assert _objects(g, execution, iri(PROV.wasAssociatedWith)) <= {
            agent for a in associations for agent in _objects(g, a, HAS_AGENT)}
    run, software = iri(mint_iri("run", "run-1")), iri(mint_iri("software", "run-1", composite=True))
    assert _objects(g, software, iri(PROV.actedOnBehalfOf)) == {iri(mint_iri("agent", "alice"))}
    batch = iri(mint_iri("task", "run-1/training-0/epoch-0/batch-0"))
    assert {agent for a in _objects(g, batch, QUALIFIED) for agent in _objects(g, a, HAS_AGENT)} >= {software}
    assert len(_objects(g, run, QUALIFIED)) >= 2  # its software agent's and alice's


def test_typed_and_tagged_get_the_same_base_triples() -> None:
    base = {ACTIVITY, ENTITY, AGENT, PLAN, iri(PROV.term("SoftwareAgent")), iri(PROV.term("Association"))}
    layer = lambda g: {t for t in g if (t[1] == TYPE and t[2] in base) or t[1] in (QUALIFIED, HAS_AGENT, HAD_PLAN)}
    assert layer(_graph("typed")) == layer(_graph("tagged"))


def _ingested(tmp_path: Path, schema: str) -> Store:
    store = open_store(f"oxigraph:{tmp_path / schema}")
    init_store(store)
    ingest_paths(store, [GOLDEN / "lifecycle.events.jsonl"], specs=[_spec()], schema=schema)
    return store


def _count(store: Store, pattern: str) -> int:
    return int(store.select(PREFIX + f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {pattern} }}").rows[0][0])


def _prov_document(store: Store) -> prov.model.ProvDocument:
    """The store's default graph as the ``prov`` package reads RDF (a prefix for the instance
    base: prov needs one to name the records)."""
    dump = io.BytesIO()
    store.dump(dump)
    triples = [ox.Triple(q.subject, q.predicate, q.object)
               for q in ox.parse(dump.getvalue(), format=ox.RdfFormat.N_QUADS)
               if isinstance(q.graph_name, ox.DefaultGraph)]  # not the ontologies' graphs
    graph = rdflib.Graph()
    graph.parse(data=ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES), format="nt")
    graph.bind("id", DEFAULT_BASE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # prov warns of the schema classes it keeps as prov:type
        return prov.read(io.StringIO(graph.serialize(format="turtle")), format="rdf", rdf_format="turtle")


@pytest.mark.parametrize("schema", SCHEMAS)
def test_sparql_and_the_prov_package_find_the_executions_without_reasoning(tmp_path: Path, schema: str) -> None:
    with _ingested(tmp_path, schema) as store:
        assert store.ask(PREFIX + "ASK { prov:Plan rdfs:subClassOf prov:Entity }")  # PROV-O is loaded
        assert _count(store, "?x a prov:Activity") == len(_executions()) == 9
        # what the ontologies entail for the core classes is asserted: no tool needs to reason
        assert _count(store, "?x a/rdfs:subClassOf* prov:Activity") == 9
        assert _count(store, "?x a/rdfs:subClassOf* prov:Entity") == _count(store, "?x a prov:Entity")
        components = 0 if schema != "sprov" else len(_spec().transformations)  # s-prov:Component ⊑ prov:Agent
        assert _count(store, "?x a/rdfs:subClassOf* prov:Agent") == _count(store, "?x a prov:Agent") + components
        counts = {name: _count(store, f"?x a prov:{name}") for name in ("Activity", "Entity", "Agent", "Association")}
        doc = _prov_document(store)
        read = {name: len(list(doc.get_records(cls))) for name, cls in
                (("Activity", ProvActivity), ("Entity", ProvEntity), ("Agent", ProvAgent),
                 ("Association", ProvAssociation))}
        assert all(counts.values())
        assert read == counts
        plans = {str(a.get_attribute("prov:plan").pop()) for a in doc.get_records(ProvAssociation)}
        assert len(plans) == 8  # the workflow and the 7 transformations that ran (one each)


@pytest.mark.parametrize("schema", ["typed", "tagged"])
def test_lineage_and_impact_never_walk_to_a_spec_attribute(tmp_path: Path, schema: str) -> None:
    spec_prefix = DEFAULT_BASE + "spec/"
    with _ingested(tmp_path, schema) as store:
        # the link is there (the paper's PROVLake pattern, which the canned queries read) ...
        model = iri(mint_iri("value", "model-0"))
        assert store.ask(f"ASK {{ {model} {iri(PROV.wasDerivedFrom)} ?a FILTER(STRSTARTS(STR(?a), \"{spec_prefix}\")) }}")
        lineage = run_query(store, "lineage", {"data": "model-0"}, schema=schema)
        assert lineage.rows  # the model has a lineage (its training's inputs) ...
        seen = {str(x) for row in lineage.rows for x in row if x is not None}
        assert not any(x.startswith(spec_prefix) for x in seen)  # ... and no spec attribute in it
        impact = run_query(store, "impact", {"data": "run-1/training-0/used/learning_rate"}, schema=schema)
        assert impact.rows
        assert not any(str(x).startswith(spec_prefix) for row in impact.rows for x in row if x is not None)
