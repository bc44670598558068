"""Events that carry their roles (a task's ``kind``, a value's ``role``) need no written spec:
ingest registers the spec they imply, grows it as later events say more, in one session or
many, and never changes a spec a user wrote."""

from __future__ import annotations

import pytest

from provkg import ingest_events, run_query
from provkg.service.captured_specs import CAPTURED
from provkg.service.registration import same_spec
from provkg.service.specs import specs_in_store
from provkg.spec import parse_spec
from provkg.vocab import PROVKG, RDFS


def _events(run: str = "r1", label: str | None = "first try") -> list[dict]:
    begin = {"type": "workflow", "event": "begin", "id": run, "time": 0, "workflow": "fit",
             "phase": "learning", "tags": {"team": "seismic"}}
    if label:
        begin["label"] = label
    t = f"{run}/t"
    ev = [begin, {"type": "task", "event": "begin", "id": t, "time": 1, "workflow_id": run,
                  "transformation": "training", "kind": "training",
                  "used": [{"name": "lr", "value": 0.1, "role": "hyperparameter"}]}]
    for i in range(3):
        e = f"{t}/e{i}"
        ev += [{"type": "task", "event": "begin", "id": e, "time": 2 + i, "workflow_id": run,
                "transformation": "epoch", "parent": t, "index": i, "kind": "section"},
               {"type": "task", "event": "end", "id": e, "time": 2.5 + i, "workflow_id": run,
                "transformation": "epoch",
                "generated": [{"name": "loss", "value": 1 / (i + 1), "role": "evaluation_measure"}]}]
    return ev + [{"type": "task", "event": "end", "id": t, "time": 9, "workflow_id": run,
                  "transformation": "training",
                  "generated": [{"name": "accuracy", "value": 0.9, "role": "evaluation_measure"}]},
                 {"type": "workflow", "event": "end", "id": run, "time": 10, "workflow": "fit"}]


LOSSES = [[0, 0.5, 1.0], [1, 0.5, 0.5], [2, 0.5, pytest.approx(1 / 3)]]


@pytest.mark.parametrize("split", [0, 2, 4, 7, 9])
def test_the_roles_events_carry_type_the_graph_in_one_session_or_two(store, split):
    events = _events()
    parts = [events[:split], events[split:]] if split else [events]
    for part in parts:
        report = ingest_events(store, part)
        assert report.warnings == []  # no "has no spec" warning: the events said it
    assert run_query(store, "d3", {"training": "r1/t"}).rows == LOSSES
    spec = specs_in_store(store)["fit"]
    assert spec.description == CAPTURED
    assert spec.transformation("epoch").of == "training"
    assert {a.name: a.role for a in spec.transformation("training").generated} == {
        "accuracy": "evaluation_measure"}


def test_a_written_spec_wins_over_the_roles_events_carry(embedded_store):
    written = parse_spec("workflow: fit\nphase: learning\ntransformations:\n"
                         "  - {name: training, kind: training, generated: [{name: accuracy, role: plain}]}\n"
                         "  - {name: epoch, kind: section, of: training}\n")
    ingest_events(embedded_store, [], specs=[written])
    ingest_events(embedded_store, _events())
    held = specs_in_store(embedded_store)["fit"]
    assert same_spec(held, written)  # never grown, never replaced


def test_the_run_label_and_tags_are_stored(embedded_store):
    ingest_events(embedded_store, _events())
    rows = embedded_store.select(
        f"SELECT ?l ?t WHERE {{ ?r <{RDFS.label}> ?l ; <{PROVKG.tag}> ?t }}").rows
    assert rows == [["first try", "team=seismic"]]


def test_plain_events_keep_their_warning_and_no_spec(embedded_store):
    plain = [{k: v for k, v in e.items() if k not in ("kind", "phase")} for e in _events()]
    for e in plain:
        for key in ("used", "generated"):
            if key in e:
                e[key] = [{k: v for k, v in item.items() if k != "role"} for item in e[key]]
    report = ingest_events(embedded_store, plain)
    assert any("has no spec" in w for w in report.warnings)
    assert "fit" not in specs_in_store(embedded_store)
