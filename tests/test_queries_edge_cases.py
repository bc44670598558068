"""Canned-query parameters and rankings on input found by black-box testing: a diverged
training whose measure is the string "NaN", integers Python reads but SPARQL cannot hold,
parameter names that must not be echoed."""

from __future__ import annotations

import pytest

from provkg.errors import BadParameter
from provkg.mapper import map_events, map_spec
from provkg.service.querying import render_query, run_query
from provkg.spec import parse_spec
from provkg.term import mint_iri

SPEC = """\
workflow: fit
phase: learning
transformations:
  - name: training
    kind: training
    used:
      - {name: learning_rate, role: hyperparameter}
    generated:
      - {name: model, role: model}
      - {name: accuracy, role: evaluation_measure}
"""


def _training(run: str, rate: float, accuracy: object, t0: float) -> list[dict]:
    tr = f"{run}/training"
    return [{"type": "workflow", "event": "begin", "id": run, "time": t0, "workflow": "fit"},
            {"type": "task", "event": "begin", "id": tr, "time": t0, "workflow_id": run,
             "transformation": "training", "used": [{"name": "learning_rate", "value": rate}]},
            {"type": "task", "event": "end", "id": tr, "time": t0 + 5, "workflow_id": run,
             "transformation": "training", "status": "finished",
             "generated": [{"name": "model", "id": f"{run}/model"},
                           {"name": "accuracy", "value": accuracy}]},
            {"type": "workflow", "event": "end", "id": run, "time": t0 + 6, "workflow": "fit",
             "status": "finished"}]


@pytest.fixture
def runs(embedded_store):
    spec = parse_spec(SPEC)
    # the capture library sends a NaN as the string "NaN" (JSON has no NaN)
    events = (_training("good", 0.01, 0.91, 1_700_000_000.0)
              + _training("worse", 0.1, 0.55, 1_700_000_100.0)
              + _training("diverged", 1.0, "NaN", 1_700_000_200.0))
    embedded_store.add([*map_spec(spec), *map_events(events, {"fit": spec})])
    return embedded_store


def test_a_nan_measure_is_neither_best_nor_worst(runs):
    good, worse = mint_iri("task", "good/training"), mint_iri("task", "worse/training")
    d4 = run_query(runs, "d4", {"workflow": "fit", "measure": "accuracy"}).rows
    assert d4 == [[good, 0.01, 0.91]]
    d5 = run_query(runs, "d5", {"workflow": "fit", "measure": "accuracy", "k": 3}).rows
    assert [r[:2] for r in d5] == [[good, 0.91], [worse, 0.55]]
    d8 = run_query(runs, "d8", {"workflow": "fit", "measure": "accuracy"}).rows
    assert {(r[0], r[1]) for r in d8} == {(good, "best"), (worse, "worst")}


@pytest.mark.parametrize("k", ["1_0", "\u0661", "99999999999999999999999", "3.0", "", " "])
def test_integer_parameters_are_ascii_and_64_bit(k):
    with pytest.raises(BadParameter, match="parameter 'k': expected an integer"):
        render_query("d5", {"workflow": "fit", "k": k})


def test_an_unknown_parameter_name_is_not_echoed():
    with pytest.raises(BadParameter) as err:
        render_query("d3", {"training": "x", "<img src=x onerror=alert(1)>": "1"})
    assert "<img" not in str(err.value) and "training, measure" in str(err.value)
    with pytest.raises(BadParameter, match="no parameter 'epochs'"):
        render_query("d3", {"training": "x", "epochs": "1"})
