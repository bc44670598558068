"""The typed graph of a small lifecycle is consistent with the ontologies (HermiT)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mapper_support import WORKFLOW, lifecycle_events, lifecycle_spec

from provkg.mapper import map_events, map_spec
from provkg.ontology import load_owlready_world, run_reasoner
from provkg.vocab import PROVML


@pytest.mark.slow
@pytest.mark.parametrize("schema", ["typed", "sprov"])
def test_the_mapped_lifecycle_is_consistent_with_the_ontologies(tmp_path: Path, schema: str) -> None:
    spec = lifecycle_spec()
    triples = set(map_spec(spec, schema=schema)) | set(
        map_events(lifecycle_events(trainings=1, epochs=1, batches=2), {WORKFLOW: spec}, schema=schema))
    path = tmp_path / f"{schema}.nt"
    path.write_text("".join(f"{s} {p} {o} .\n" for s, p, o in sorted(triples)), encoding="utf-8")
    world = load_owlready_world([path])
    run_reasoner(world)  # raises ProvkgError when inconsistent
    # nothing imported gives PROV's own properties domains that leak into the data (found
    # by black-box testing: ProvONE's made every derived value a prov:Plan)
    values = list(world.search(iri="https://w3id.org/provkg/id/value/*"))
    assert values
    for value in values:
        inferred = {c.iri for c in value.is_a for c in c.ancestors()}
        assert "http://www.w3.org/ns/prov#Plan" not in inferred, value.iri
        assert "http://www.w3.org/ns/prov#Entity" in inferred, value.iri
    if schema == "typed":
        # the reasoner saw our instances: a training execution is a learning-stage execution
        training = world.search_one(iri="https://w3id.org/provkg/id/task/run-1/training-0")
        assert training is not None
        ancestors = {c.iri for c in training.is_a for c in c.ancestors()}
        assert PROVML.TrainingExecution in ancestors


@pytest.mark.slow
def test_the_check_would_catch_an_inconsistent_graph(tmp_path: Path) -> None:
    from provkg.errors import ProvkgError

    path = tmp_path / "bad.nt"
    x = "<https://w3id.org/provkg/id/task/x>"
    path.write_text(f"{x} <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{PROVML.TrainingExecution}> .\n"
                    f"{x} <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{PROVML.Model}> .\n")
    with pytest.raises(ProvkgError, match="inconsistent"):
        run_reasoner(load_owlready_world([path]))


@pytest.mark.slow
def test_a_checkpoint_read_as_a_dataset_keeps_the_typed_graph_consistent(tmp_path: Path) -> None:
    """One file, two roles: written as a model by a training, read as a dataset by another
    workflow's training (found by black-box testing: MLS's Model / Data disjointness made
    such stores inconsistent)."""
    from provkg.spec import parse_spec

    specs = {name: parse_spec(f"""
workflow: {name}
phase: learning
transformations:
  - name: training
    kind: training
    used: [{{name: train_set, role: dataset}}, {{name: init, role: hyperparameter}}]
    generated: [{{name: model, role: model}}]
""", source=name) for name in ("teacher", "student")}
    ckpt = "file:///lake/teacher.pt"
    events = [
        {"type": "workflow", "event": "begin", "id": "t", "time": 1.0, "workflow": "teacher"},
        {"type": "task", "event": "end", "id": "t/train", "time": 2.0, "workflow_id": "t",
         "transformation": "training", "status": "finished",
         "generated": [{"name": "model", "location": ckpt}]},
        {"type": "workflow", "event": "begin", "id": "s", "time": 3.0, "workflow": "student"},
        {"type": "task", "event": "begin", "id": "s/train", "time": 3.0, "workflow_id": "s",
         "transformation": "training", "used": [{"name": "train_set", "location": ckpt},
                                                  {"name": "init", "location": ckpt}]},
    ]
    triples = set(map_events(events, specs, schema="typed"))
    for spec in specs.values():
        triples |= set(map_spec(spec, schema="typed"))
    model = f"<https://w3id.org/provkg/id/value/{ckpt}>"
    for role in (PROVML.Model, PROVML.LearningDataset, PROVML.LearningHyperparameterValue):
        assert (model, "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", f"<{role}>") in triples
    path = tmp_path / "typed.nt"
    path.write_text("".join(f"{s} {p} {o} .\n" for s, p, o in sorted(triples)), encoding="utf-8")
    run_reasoner(load_owlready_world([path]))  # raises ProvkgError when inconsistent


@pytest.mark.slow
def test_one_value_in_every_role_at_once_keeps_the_typed_graph_consistent(tmp_path: Path) -> None:
    """A value id passed on from role to role (a learning-rate finder's measure used as the
    training's hyperparameter: found by black-box testing, MLS's ModelEvaluation /
    HyperParameterSetting disjointness made the store inconsistent). Every pair of value
    roles at once, so no alignment of a value class may clash with another's."""
    from provkg.mapper.typed import VALUE_CLASS
    from provkg.spec import parse_spec

    roles = sorted(VALUE_CLASS)
    used = ", ".join(f"{{name: a_{r}, role: {r}}}" for r in roles)
    spec = parse_spec(f"""
workflow: relay
phase: learning
transformations:
  - name: training
    kind: training
    used: [{used}]
""", source="relay")
    events = [{"type": "task", "event": "begin", "id": "r/train", "time": 2.0, "workflow_id": "r",
               "transformation": "training",
               "used": [{"name": f"a_{r}", "value": 0.003, "id": "relay-value"} for r in roles]},
              {"type": "workflow", "event": "begin", "id": "r", "time": 1.0, "workflow": "relay"}]
    triples = set(map_events(events, {"relay": spec}, schema="typed")) | set(map_spec(spec, schema="typed"))
    value = "<https://w3id.org/provkg/id/value/relay-value>"
    classes = {o for s, p, o in triples
               if s == value and p == "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"}
    assert {f"<{c[1:-1]}>" for c in VALUE_CLASS.values()} <= classes
    path = tmp_path / "typed.nt"
    path.write_text("".join(f"{s} {p} {o} .\n" for s, p, o in sorted(triples)), encoding="utf-8")
    run_reasoner(load_owlready_world([path]))  # raises ProvkgError when inconsistent
