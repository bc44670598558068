"""`provkg export --format prov-*`: the `prov` package reads the export back with as many
activities, entities, agents, usages, generations and derivations as subclass-aware SPARQL
counts in the store (the golden lifecycle in every schema, and the demo), and the value ->
spec-attribute link is a role, never a derivation."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import orjson
import prov
import pytest
from prov import model as M

from provkg.cli import main
from provkg.ontology import import_paths
from provkg.service.ingest import ingest_events
from provkg.service.loading import init_store
from provkg.spec import load_spec
from provkg.store import Store, open_store
from provkg.vocab import DEFAULT_BASE

GOLDEN = Path(__file__).parent / "golden"
SPEC_PREFIX = f"{DEFAULT_BASE}spec/"
PROV_O_GRAPH = "https://example.org/test/prov-o"
_NOT_ONTOLOGY = "FILTER NOT EXISTS { GRAPH ?g { ?x a ?any . ?ont a owl:Ontology } }"


def golden_store(url: str, schema: str) -> str:
    """``url`` filled with the golden lifecycle mapped in ``schema``, with provkg's ontologies
    and PROV-O (so that ``rdfs:subClassOf*`` reaches the PROV classes in the store itself)."""
    spec = load_spec(GOLDEN / "lifecycle.spec.yaml")
    events = [orjson.loads(line) for line in (GOLDEN / "lifecycle.events.jsonl").read_bytes().splitlines()]
    with open_store(url) as store:
        ingest_events(store, events, specs=[spec], schema=schema)
        know_prov(store)
    return url


def know_prov(store: Store) -> None:
    init_store(store)
    store.load_file(next(p for p in import_paths() if p.name == "prov-o.ttl"), graph=PROV_O_GRAPH)


def _count(store: Store, where: str, *variables: str) -> int:
    rows = store.select("PREFIX prov: <http://www.w3.org/ns/prov#> PREFIX owl: <http://www.w3.org/2002/07/owl#> "
                        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
                        f"SELECT (COUNT(*) AS ?n) WHERE {{ SELECT DISTINCT {' '.join(variables)} WHERE {{ {where} }} }}")
    return int(rows.rows[0][0])


def store_counts(store: Store) -> dict[str, int]:
    """What the store holds, counted with SPARQL over its own subclass axioms: typed nodes
    outside the ontology graphs; each (activity, entity) pair once, qualified or not; every
    derivation but a value's link to its prospective attribute (a ``spec/`` IRI)."""
    typed = {kind: _count(store, f"?x a/rdfs:subClassOf* prov:{cls} . FILTER(isIRI(?x)) {_NOT_ONTOLOGY}", "?x")
             for kind, cls in (("activities", "Activity"), ("entities", "Entity"), ("agents", "Agent"))}
    return {**typed,
            "usages": _count(store, "{ ?a prov:used ?e } UNION { ?a prov:qualifiedUsage/prov:entity ?e }", "?a", "?e"),
            "generations": _count(store, "{ ?e prov:wasGeneratedBy ?a } UNION "
                                         "{ ?e prov:qualifiedGeneration/prov:activity ?a }", "?a", "?e"),
            "derivations": _count(store, f'?d prov:wasDerivedFrom ?s . FILTER(!STRSTARTS(STR(?s), "{SPEC_PREFIX}"))',
                                  "?d", "?s")}


def document_counts(document: M.ProvDocument) -> dict[str, int]:
    kinds = (("activities", M.ProvActivity), ("entities", M.ProvEntity), ("agents", M.ProvAgent),
             ("usages", M.ProvUsage), ("generations", M.ProvGeneration), ("derivations", M.ProvDerivation))
    return {name: len(list(document.get_records(kind))) for name, kind in kinds}


def export(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["export", *argv]) == 0
    return out.getvalue()


@pytest.fixture(scope="module", params=["typed", "tagged", "sprov"])
def golden(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    url = f"oxigraph:{tmp_path_factory.mktemp('golden-' + request.param) / 'db'}"
    return golden_store(url, request.param), request.param


def test_prov_json_reads_back_with_the_store_s_counts(golden: tuple[str, str], tmp_path: Path) -> None:
    url, schema = golden
    said = export(str(tmp_path / "all.json"), "--store", url)
    document = prov.read(str(tmp_path / "all.json"), format="json")
    with open_store(url, read_only=True) as store:
        expected = store_counts(store)
    assert document_counts(document) == expected
    assert expected["activities"] == 9 and expected["usages"] == 12
    assert expected["generations"] == _generations(schema)
    assert f"{expected['activities']} activities" in said and f"{expected['derivations']} derivations" in said


def test_no_derivation_points_to_a_spec_attribute_which_is_a_role_instead(golden: tuple[str, str],
                                                                          tmp_path: Path) -> None:
    url, schema = golden
    export(str(tmp_path / "all.json"), "--store", url)
    document = prov.read(str(tmp_path / "all.json"), format="json")
    derivations = list(document.get_records(M.ProvDerivation))
    sources = {str(d.get_attribute("prov:usedEntity").pop().uri) for d in derivations}
    assert sources and not any(s.startswith(SPEC_PREFIX) for s in sources)
    usages = list(document.get_records(M.ProvUsage))
    roles = {(str(u.get_attribute("prov:activity").pop().uri), str(u.get_attribute("prov:entity").pop().uri)):
             [r.uri for r in u.get_attribute("prov:role")] for u in usages}
    lr = (f"{DEFAULT_BASE}task/run-1/training-0", f"{DEFAULT_BASE}value/run-1/training-0/used/learning_rate")
    if schema == "sprov":  # S-PROV has no prospective attributes: no role to give
        assert not any(roles.values())
    else:
        assert roles[lr] == [f"{SPEC_PREFIX}flower-training/training/learning_rate"]
        assert all(r.startswith(SPEC_PREFIX) for rs in roles.values() for r in rs)


def test_activities_keep_their_times_and_values_their_json_types(golden: tuple[str, str], tmp_path: Path) -> None:
    url, _ = golden
    export(str(tmp_path / "all.json"), "--store", url)
    document = prov.read(str(tmp_path / "all.json"), format="json")
    by_id = {str(r.identifier.uri): r for r in document.get_records(M.ProvElement)}
    training = by_id[f"{DEFAULT_BASE}task/run-1/training-0"]
    assert training.get_startTime().isoformat() == "2023-11-14T22:13:20.250000+00:00"
    assert training.get_endTime().isoformat() == "2023-11-14T22:13:22.125000+00:00"
    values = {name: by_id[f"{DEFAULT_BASE}value/run-1/training-0/used/{name}"].get_attribute("prov:value").pop()
              for name in ("learning_rate", "epochs", "augment")}
    assert values == {"learning_rate": 0.01, "epochs": 1, "augment": True}


def test_prov_n_and_prov_jsonld_read_back_too(golden: tuple[str, str], tmp_path: Path) -> None:
    url, _ = golden
    export(str(tmp_path / "all.json"), "--store", url)
    expected = document_counts(prov.read(str(tmp_path / "all.json"), format="json"))
    for name, fmt in (("all.provn", "provn"), ("all.jsonld", "jsonld")):
        export(str(tmp_path / name), "--store", url)
        assert document_counts(prov.read(str(tmp_path / name), format=fmt)) == expected, name


def test_prov_xml_is_written_by_prov_and_reads_back(golden: tuple[str, str], tmp_path: Path) -> None:
    url, _ = golden
    assert main(["export", str(tmp_path / "all.provx"), "--store", url]) == 0
    back = document_counts(prov.read(str(tmp_path / "all.provx"), format="xml"))
    with open_store(url, read_only=True) as store:
        expected = store_counts(store)
    # S-PROV's component instances are both entities and agents: in PROV-XML prov reads such a
    # node back as one record (an entity), so only their sum is kept there
    for counts in (back, expected):
        counts["entities and agents"] = counts.pop("entities") + counts.pop("agents")
    assert back == expected
    assert back["activities"] == 9


def _generations(schema: str) -> int:
    """The golden lifecycle's 10, and in the PROVLake layouts its 3 rollups (an epoch's, a
    validation's and the training's of its epochs: PROV entities their parents generated)."""
    return 10 if schema == "sprov" else 13


def test_one_run_holds_its_executions_values_and_agents(golden: tuple[str, str], tmp_path: Path) -> None:
    url, schema = golden
    export(str(tmp_path / "run.json"), "--run", "run-1", "--store", url)
    document = prov.read(str(tmp_path / "run.json"), format="json")
    counts = document_counts(document)
    assert counts["activities"] == 9 and counts["usages"] == 12
    assert counts["generations"] == _generations(schema) and counts["agents"] >= 1


def test_a_lineage_holds_what_the_model_was_made_from_and_no_later_use(golden: tuple[str, str],
                                                                        tmp_path: Path) -> None:
    url, _ = golden
    export(str(tmp_path / "model.json"), "--lineage", "model-0", "--store", url)
    document = prov.read(str(tmp_path / "model.json"), format="json")
    activities = {str(a.identifier.uri) for a in document.get_records(M.ProvActivity)}
    entities = {str(e.identifier.uri) for e in document.get_records(M.ProvEntity)}
    assert activities == {f"{DEFAULT_BASE}task/run-1/training-0"}
    assert {f"{DEFAULT_BASE}value/model-0", f"{DEFAULT_BASE}value/slices-of-train",
            f"{DEFAULT_BASE}value/file:///lake/train.h5"} <= entities
    assert f"{DEFAULT_BASE}value/run-1/validation-0/accuracy" not in entities  # made from the model


# -- the demo -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("demo-export")
    url = f"oxigraph:{root / 'store'}"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", "--small", "--store", url, "--out", str(root / "out")]) == 0
    with open_store(url) as store:
        know_prov(store)
    return url


def test_the_demo_s_prov_json_export_has_every_count_of_the_store(demo_store: str, tmp_path: Path) -> None:
    export(str(tmp_path / "demo.json"), "--format", "prov-json", "--store", demo_store)
    document = prov.read(str(tmp_path / "demo.json"), format="json")
    with open_store(demo_store, read_only=True) as store:
        expected = store_counts(store)
    assert document_counts(document) == expected
    assert expected["activities"] > 50 and expected["derivations"] > 0
