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
