"""The listing queries the web UI reads (workflows, data, epochs, about), on every backend and
in both capture styles, over the workflow of test_queries_generic (two trainings, their
epochs, validations and evaluations, a raw file linked to a KG resource)."""

from __future__ import annotations

import pytest
from test_queries_generic import KG_FILE, SPEC, _events, _t, _v

from provkg.mapper import map_events, map_spec
from provkg.service.querying import run_query
from provkg.spec import parse_spec
from provkg.term import iri, literal, mint_iri
from provkg.vocab import RDFS, SEIS

EMPTY_SPEC = """\
workflow: not-run-yet
phase: learning
transformations:
  - {name: training, kind: training}
"""


@pytest.fixture(params=("typed", "tagged"))
def loaded(request, store):
    schema = request.param
    spec = parse_spec(SPEC)
    store.add([*map_spec(spec, schema=schema), *map_spec(parse_spec(EMPTY_SPEC), schema=schema),
               *map_events(_events(), {"gen": spec}, schema=schema),
               (iri(KG_FILE), iri(SEIS.survey), iri("https://example.org/kg/survey-1")),
               (iri(KG_FILE), iri(RDFS.label), literal("raw survey file"))])
    return store, schema


def _q(loaded, name: str, **params: object) -> list[list]:
    store, schema = loaded
    return run_query(store, name, params, schema=schema).rows


def test_workflows_counts_runs_and_trainings_and_lists_a_spec_without_runs(loaded):
    assert _q(loaded, "workflows") == [["gen", 1, 2], ["not-run-yet", 0, 0]]


def test_data_lists_the_datasets_used_and_the_models_generated(loaded):
    rows = _q(loaded, "data", workflow="gen")
    assert sorted(map(tuple, rows)) == sorted([
        (_v("set-1"), "dataset", _t("t1")), (_v("shared"), "dataset", _t("t1")),
        (_v("clean"), "dataset", _t("t2")), (_v("shared"), "dataset", _t("t2")),
        (_v("model-t1"), "model", _t("t1")), (_v("model-t2"), "model", _t("t2"))])


def test_epochs_gives_each_stage_its_epochs_and_own_measures(loaded):
    t1 = _q(loaded, "epochs", training="t1")
    # the training's epoch 0 and own accuracy; its validation (used its model) and its
    # evaluation (read the model by its location)
    assert [r for r in t1 if r[0] == "training"] == [
        ["training", None, None, "accuracy", 0.9], ["training", 0, 5.0, "accuracy", pytest.approx(0.8)]]
    assert [r for r in t1 if r[0] != "training"] == [["evaluation", None, None, "accuracy", 0.5],
                                                     ["validation", None, None, "accuracy", 0.6]]
    t2 = {(r[0], r[3]): r[4] for r in _q(loaded, "epochs", training="t2") if r[1] is None}
    # t2's validation depends on it, its evaluation is its child
    assert t2 == {("training", "accuracy"): 0.8, ("validation", "accuracy"): 0.7,
                  ("evaluation", "accuracy"): 0.65}
    assert _q(loaded, "epochs", training="no-such-training") == []


def test_about_lists_both_directions_of_a_kg_resource(loaded):
    rows = _q(loaded, "about", resource=KG_FILE)
    out = {(r[1], r[2]) for r in rows if r[0] == "out"}
    assert (SEIS.survey, "https://example.org/kg/survey-1") in out
    assert (RDFS.label, "raw survey file") in out
    incoming = [r for r in rows if r[0] == "in"]
    assert incoming and all(r[1] == "https://w3id.org/provkg/ns#denotes" or "denotes" in r[1]
                            for r in incoming)
    assert rows == sorted(rows, key=lambda r: (r[0] != "out", r[1], str(r[2])))


def test_about_binds_its_parameter():
    from provkg.errors import BadParameter
    from provkg.service.querying import render_query

    with pytest.raises(BadParameter, match="resource"):
        render_query("about", {"resource": "not an iri> } DROP ALL"})
    assert mint_iri("task", "x") in render_query("about", {"resource": mint_iri("task", "x")})
