"""The generic queries (lineage, impact, runs), the ``stage`` parameter of the ranking
queries, and the upstream filter / generated technique of d6-d8, on every backend and in
both capture styles (docs/reference/queries.md).

The workflow: raw data (linked to a KG resource) -> ``prepare`` -> a clean set -> ``filter``
(a transformation of that name, a ``filter_name`` value) -> a training set used by training
t1; training t2 uses the clean set and its own ``filter``. t1 is the best by its training
accuracy, t2 by its validation and its test accuracy. t1's validation uses its model, t2's
depends on t2 (``prov:wasInformedBy``); t1's evaluation reads the model by its location alone,
t2's is a child of t2.
"""

from __future__ import annotations

import pytest

from provkg.mapper import map_events, map_spec
from provkg.queries.catalog import canned_queries, get_query
from provkg.service.querying import run_query
from provkg.spec import parse_spec
from provkg.term import iri, literal, mint_iri
from provkg.vocab import RDFS

SPEC = """\
workflow: gen
phase: learning
transformations:
  - name: prepare
    used: [{name: raw, role: data_reference}]
    generated: [{name: clean, role: dataset}]
  - name: filter
    used: [{name: clean, role: dataset}, {name: mode}]
    generated: [{name: train_set, role: dataset}]
  - name: training
    kind: training
    used:
      - {name: train_set, role: dataset}
      - {name: learning_rate, role: hyperparameter}
      - {name: filter}
    generated:
      - {name: model, role: model}
      - {name: accuracy, role: evaluation_measure}
  - name: epoch
    kind: section
    of: training
    generated: [{name: accuracy, role: evaluation_measure}]
  - name: adaptation
    kind: adaptation
    used: [{name: learning_rate, role: hyperparameter}]
    generated: [{name: learning_rate, role: hyperparameter}, {name: technique}]
  - name: validation
    kind: validation
    used: [{name: model, role: model}]
    generated: [{name: accuracy, role: evaluation_measure}]
  - name: evaluation
    kind: evaluation
    used: [{name: model, role: model}]
    generated: [{name: accuracy, role: evaluation_measure}]
"""

KG_FILE = "https://example.org/kg/raw-survey"
RAW = "file:///data/raw.segy"
T0 = 1_700_000_000.0


def _task(run: str, tid: str, tr: str, t: float, *, used: list | None = None,
          generated: list | None = None, **begin: object) -> list[dict]:
    b = {"type": "task", "event": "begin", "id": tid, "time": t, "workflow_id": run,
         "transformation": tr, **begin}
    if used:
        b["used"] = used
    e = {"type": "task", "event": "end", "id": tid, "time": t + 5, "workflow_id": run,
         "transformation": tr, "status": "finished"}
    if generated:
        e["generated"] = generated
    return [b, e]


def _events() -> list[dict]:
    run = "r1"
    ev: list[dict] = [{"type": "workflow", "event": "begin", "id": run, "time": T0, "workflow": "gen"}]
    ev += _task(run, "prep", "prepare", T0 + 1,
                used=[{"name": "raw", "id": "raw", "location": RAW, "domain": KG_FILE}],
                generated=[{"name": "clean", "id": "clean"}])
    ev += _task(run, "filt", "filter", T0 + 10,
                used=[{"name": "clean", "id": "clean"}, {"name": "mode", "value": "grayscale"}],
                generated=[{"name": "train_set", "id": "set-1"}])
    for key, data, lr, acc, extra in (("t1", "set-1", 0.1, 0.9, []),
                                      ("t2", "clean", 0.01, 0.8, [{"name": "filter", "value": "sepia"}])):
        t = T0 + (20 if key == "t1" else 100)
        ev += _task(run, key, "training", t,
                    used=[{"name": "train_set", "id": data}, {"name": "train_set", "id": "shared"},
                          {"name": "learning_rate", "value": lr}, *extra],
                    generated=[{"name": "model", "id": f"model-{key}", "location": f"file:///m/{key}.pt"},
                               {"name": "accuracy", "value": acc}])
        ev += _task(run, f"{key}/e0", "epoch", t + 1, parent=key, index=0,
                    generated=[{"name": "accuracy", "value": acc - 0.1}])
    ev += _task(run, "t1/adapt", "adaptation", T0 + 22, parent="t1", index=3,
                used=[{"name": "learning_rate", "value": 0.1}],
                generated=[{"name": "learning_rate", "value": 0.05},
                           {"name": "technique", "value": "StepLR"}])
    ev += _task(run, "t2/adapt", "adaptation", T0 + 102, parent="t2", index=2,
                used=[{"name": "learning_rate", "value": 0.01}],
                generated=[{"name": "learning_rate", "value": 0.005},
                           {"name": "technique", "value": "Cosine"}])
    ev += _task(run, "v1", "validation", T0 + 40, used=[{"name": "model", "id": "model-t1"}],
                generated=[{"name": "accuracy", "value": 0.6}])
    ev += _task(run, "v2", "validation", T0 + 140, dependencies=["t2"],
                generated=[{"name": "accuracy", "value": 0.7}])
    ev += _task(run, "x1", "evaluation", T0 + 50, used=[{"name": "model", "location": "file:///m/t1.pt"}],
                generated=[{"name": "accuracy", "value": 0.5}])
    ev += _task(run, "x2", "evaluation", T0 + 150, parent="t2",
                generated=[{"name": "accuracy", "value": 0.65}])
    ev.append({"type": "workflow", "event": "end", "id": run, "time": T0 + 200, "workflow": "gen",
               "status": "finished"})
    return ev


SCHEMAS = ("typed", "tagged")


@pytest.fixture(params=SCHEMAS)
def loaded(request, store):
    spec = parse_spec(SPEC)
    schema = request.param
    store.add([*map_spec(spec, schema=schema), *map_events(_events(), {"gen": spec}, schema=schema),
               (iri(mint_iri("run", "r1")), iri(RDFS.label), literal("first sweep"))])
    return store, schema


def _v(value_id: str) -> str:
    return mint_iri("value", value_id)


def _t(task_id: str) -> str:
    return mint_iri("task", task_id)


def _q(loaded, name: str, **params: object) -> list[list]:
    store, schema = loaded
    return run_query(store, name, params, schema=schema).rows


def test_lineage_walks_back_to_raw_data_and_the_kg_without_spec_links(loaded):
    rows = _q(loaded, "lineage", data="model-t1")
    edges = {(r[0], r[1]): (r[2], r[3]) for r in rows}
    assert len(edges) == len(rows), "each edge once"
    assert edges[(_v("model-t1"), _v("set-1"))] == (_t("t1"), 1)
    assert edges[(_v("set-1"), _v("clean"))] == (_t("filt"), 2)
    assert edges[(_v("clean"), _v("raw"))] == (_t("prep"), 3)
    assert edges[(_v("raw"), KG_FILE)] == (None, 4)
    assert all("/spec/" not in r[1] for r in rows), "a value's prospective attribute is no lineage"
    # depth bounds the walk: direct parents only
    assert {r[1] for r in _q(loaded, "lineage", data="model-t1", depth=1)} == {
        _v("set-1"), _v("shared"), _v("t1/used/learning_rate")}
    # a location names the value captured there
    assert {r[1] for r in _q(loaded, "lineage", data="file:///m/t1.pt", depth=1)} >= {_v("model-t1")}


def test_impact_walks_forward_to_the_models_to_retrain(loaded):
    rows = _q(loaded, "impact", data="clean")
    edges = {(r[0], r[1]): (r[2], r[3]) for r in rows}
    assert edges[(_v("clean"), _v("set-1"))] == (_t("filt"), 1)
    assert edges[(_v("clean"), _v("model-t2"))] == (_t("t2"), 1)
    assert edges[(_v("set-1"), _v("model-t1"))] == (_t("t1"), 2)
    assert edges[(_v("model-t1"), _v("v1/accuracy"))] == (_t("v1"), 3)
    assert {r[1] for r in _q(loaded, "impact", data="raw", depth=1)} == {_v("clean")}


def test_runs_lists_every_training_with_its_run_label_and_pairs(loaded):
    rows = _q(loaded, "runs", workflow="gen")
    assert [r[:4] for r in rows] == [[_t("t1"), mint_iri("run", "r1"), "first sweep", "finished"],
                                     [_t("t2"), mint_iri("run", "r1"), "first sweep", "finished"]]
    assert [r[5] for r in rows] == [5.0, 5.0]
    assert [r[6:] for r in rows] == [["learning_rate=0.1", "accuracy=0.9"],
                                     ["learning_rate=0.01", "accuracy=0.8"]]


@pytest.mark.parametrize(("stage", "best"), [("training", "t1"), ("validation", "t2"),
                                             ("evaluation", "t2")])
def test_the_stage_parameter_ranks_by_the_checking_stage(loaded, stage, best):
    assert [r[0] for r in _q(loaded, "d4", workflow="gen", stage=stage)] == [_t(best)]
    top = _q(loaded, "d5", workflow="gen", k=1, stage=stage)
    assert [r[0] for r in top] == [_t(best)]
    assert [r[0] for r in _q(loaded, "p2", workflow="gen", k=2, stage=stage)][0] == _t(best)
    d8 = {r[1]: r[0] for r in _q(loaded, "d8", workflow="gen", stage=stage)}
    assert d8["best"] == _t(best)
    assert {r[0] for r in _q(loaded, "d6", workflow="gen", stage=stage)} == {_t(best)}
    assert {r[0] for r in _q(loaded, "q3", dataset="set-1", measure="accuracy", stage=stage)} == {
        _v("model-t1")}
    value = {"training": 0.9, "validation": 0.6, "evaluation": 0.5}[stage]
    assert _q(loaded, "d4", workflow="gen", stage=stage)[0][2] == (
        value if best == "t1" else {"validation": 0.7, "evaluation": 0.65}[stage])


@pytest.mark.parametrize(("stage", "order"), [("training", ["t1", "t2"]), ("validation", ["t2", "t1"]),
                                              ("evaluation", ["t2", "t1"])])
def test_q7_orders_by_the_checking_stage(loaded, stage, order):
    rows = _q(loaded, "q7", dataset="shared", measure="accuracy", stage=stage)
    assert [r[0] for r in rows] == [_v(f"model-{key}") for key in order]


def test_d6_reads_a_technique_the_adaptation_generated(loaded):
    rows = _q(loaded, "d6", workflow="gen")
    assert rows == [[_t("t1"), 3, "StepLR", 0.05]]


def test_d7_d8_find_the_filter_upstream_or_on_the_training(loaded):
    assert _q(loaded, "d7", workflow="gen", hyperparameter="learning_rate", value=0.1) == [
        [_t("t1"), "grayscale"]]
    assert _q(loaded, "d7", workflow="gen", hyperparameter="learning_rate", value=0.01) == [
        [_t("t2"), "sepia"]]
    d8 = {r[1]: (r[0], r[2], r[3]) for r in _q(loaded, "d8", workflow="gen")}
    assert d8 == {"best": (_t("t1"), "grayscale", 1), "worst": (_t("t2"), "sepia", 1)}


def test_the_catalog_says_which_queries_need_a_domain():
    assert {q.name for q in canned_queries() if not q.generic} == {"q1", "q2", "q5", "q6"}
    assert get_query("q1").domain == "seismic"
    assert get_query("lineage").generic and get_query("runs").domain is None


def test_the_query_reference_says_what_the_domain_field_says():
    from pathlib import Path
    text = (Path(__file__).parents[1] / "docs" / "reference" / "queries.md").read_text(encoding="utf-8")
    for q in canned_queries():
        section = text.split(f"\n### {q.name}\n", 1)[1].split("\n### ", 1)[0]
        (needs,) = [line for line in section.splitlines() if line.startswith("Needs: ")]
        assert needs.startswith("Needs: **generic**") == q.generic, q.name


@pytest.mark.parametrize("named", ["epoch", "index", "step"])
def test_an_epoch_number_recorded_as_a_value_is_the_section_s_index(embedded_store, named):
    """d3 by epoch finds epochs whose number was captured as a value (``epoch=3``) instead of
    as the section's ``index``; a batch's ``epoch`` value is not the batch's own number."""
    from provkg import ingest_events
    from provkg.spec import parse_spec

    spec = parse_spec("workflow: w\nphase: learning\ntransformations:\n - {name: training, kind: training}\n"
                      " - {name: epoch, kind: section, of: training, generated: [{name: loss, role: evaluation_measure}]}\n"
                      " - {name: batch, kind: section, of: epoch}\n")
    ev = [{"type": "workflow", "event": "begin", "id": "r", "time": 0, "workflow": "w"},
          {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "r", "transformation": "training"}]
    for i in range(2):
        ev += [{"type": "task", "event": "begin", "id": f"e{i}", "time": 2 + i, "workflow_id": "r",
                "transformation": "epoch", "parent": "t", "used": [{"name": named, "value": i}]},
               {"type": "task", "event": "begin", "id": f"e{i}/b", "time": 2 + i, "workflow_id": "r",
                "transformation": "batch", "parent": f"e{i}", "used": [{"name": "epoch", "value": 7}]},
               {"type": "task", "event": "end", "id": f"e{i}", "time": 2.5 + i, "workflow_id": "r",
                "transformation": "epoch", "generated": [{"name": "loss", "value": 1 / (i + 1)}]}]
    ingest_events(embedded_store, ev, specs=[spec])
    rows = run_query(embedded_store, "d3", {"training": "t", "measure": "loss"}).rows
    assert [(r[0], r[2]) for r in rows] == [(0, 1.0), (1, 0.5)]
    batch_index = embedded_store.select(
        "SELECT ?i WHERE { <https://w3id.org/provkg/id/task/e0/b> "
        "<https://w3id.org/provkg/ns#index> ?i }").rows
    assert batch_index == []
