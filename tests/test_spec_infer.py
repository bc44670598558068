"""``provkg spec infer`` drafts a spec from captured events; ``provkg spec register`` registers
it, and runs ingested without a spec are then typed: the canned queries answer."""

from __future__ import annotations

import json

import pytest

from provkg import capture
from provkg.cli import main
from provkg.spec import parse_spec
from provkg.spec.infer import infer_specs, merge_specs, spec_yaml


def _capture(folder) -> None:
    with capture.workflow("fit", sink=f"file:{folder}", run_id="run-1") as wf:
        with wf.task("training") as tr:
            tr.use(lr=0.1, batch_size=8, train_set=capture.ref("/data/train.h5"))
            for e, ep in wf.sections("epoch", range(3), parent=tr):
                ep.generate(loss=1.0 / (e + 1))
            tr.generate(accuracy=0.9, model=capture.ref("/models/m.pt"))


def test_infer_guesses_kinds_and_roles_from_names_and_marks_them(tmp_path, capsys):
    _capture(tmp_path / "events")
    assert main(["spec", "infer", str(tmp_path / "events")]) == 0
    out, err = capsys.readouterr()
    spec = parse_spec(out)  # the draft is a valid spec as it is
    training, epoch = spec.transformation("training"), spec.transformation("epoch")
    assert training.kind == "training" and epoch.kind == "section" and epoch.of == "training"
    assert {a.name: a.role for a in training.used} == {
        "lr": "hyperparameter", "batch_size": "hyperparameter", "train_set": "dataset"}
    assert {a.name: a.role for a in training.generated} == {
        "accuracy": "evaluation_measure", "model": "model"}
    assert [a.role for a in epoch.generated] == ["evaluation_measure"]
    assert out.count("  # guessed") == 7 and "guessed from names" in err


def test_register_types_the_runs_ingested_without_a_spec(tmp_path, capsys):
    _capture(tmp_path / "events")
    store = f"oxigraph:{tmp_path / 'db'}"
    assert main(["ingest", str(tmp_path / "events"), "--store", store]) == 0
    capsys.readouterr()
    assert main(["spec", "infer", str(tmp_path / "events")]) == 0
    (tmp_path / "spec.yaml").write_text(capsys.readouterr().out)
    assert main(["query", "d3", "-p", "training=run-1.1", "--store", store, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []  # untyped: no epochs of a training
    assert main(["spec", "register", str(tmp_path / "spec.yaml"), "--store", store]) == 0
    assert "registered" in capsys.readouterr().out
    assert main(["query", "d3", "-p", "training=run-1.1", "--store", store, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r[0], r[2]) for r in rows] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))]
    assert main(["spec", "register", str(tmp_path / "spec.yaml"), "--store", store]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_register_refuses_every_file_when_one_is_bad(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("workflow: w\nphase: learning\ntransformations: [{name: t, kind: training}]\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("workflow: w2\nphase: learning\ntransformations: [{name: t, kind: trainin}]\n")
    store = f"oxigraph:{tmp_path / 'db'}"
    assert main(["spec", "register", str(good), str(bad), "--store", store]) == 1
    assert "bad.yaml" in capsys.readouterr().err
    assert not (tmp_path / "db").exists() or main(["spec", "list", "--store", store, "--format", "json"]) == 0


def test_infer_without_guessing_keeps_only_what_events_say():
    events = [{"type": "workflow", "event": "begin", "id": "r", "time": 0, "workflow": "w"},
              {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "r",
               "transformation": "train", "used": [{"name": "lr", "value": 0.1}]}]
    assert infer_specs(events, guess=False) == {}  # nothing said: no spec implied
    said = [*events, {"type": "task", "event": "begin", "id": "v", "time": 2, "workflow_id": "r",
                      "transformation": "check", "kind": "validation",
                      "used": [{"name": "split", "value": "val", "role": "dataset_characteristic"}]}]
    spec = infer_specs(said, guess=False)["w"].spec
    assert [(t.name, t.kind) for t in spec.transformations] == [("train", "transformation"),
                                                                 ("check", "validation")]
    assert spec.transformation("train").used[0].role == "plain"
    assert spec.transformation("check").used[0].role == "dataset_characteristic"


def test_merge_adds_and_upgrades_but_keeps_what_was_said():
    first = infer_specs([{"type": "workflow", "event": "begin", "id": "r", "time": 0, "workflow": "w"},
                         {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "r",
                          "transformation": "train", "kind": "training",
                          "used": [{"name": "lr", "value": 0.1}]}], guess=False)["w"].spec
    later = infer_specs([{"type": "workflow", "event": "begin", "id": "r", "time": 0, "workflow": "w"},
                         {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "r",
                          "transformation": "train",
                          "used": [{"name": "lr", "value": 0.1, "role": "hyperparameter"}]},
                         {"type": "task", "event": "begin", "id": "x", "time": 1, "workflow_id": "r",
                          "transformation": "test", "kind": "evaluation"}], guess=False)["w"].spec
    merged = merge_specs(first, later)
    assert [(t.name, t.kind) for t in merged.transformations] == [("train", "training"), ("test", "evaluation")]
    assert merged.transformation("train").used[0].role == "hyperparameter"


def test_yaml_quotes_names_yaml_would_read_otherwise():
    events = [{"type": "workflow", "event": "begin", "id": "r", "time": 0, "workflow": "yes"},
              {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "r",
               "transformation": "null: #x", "used": [{"name": "1e3", "value": 1}]}]
    spec = parse_spec(spec_yaml(infer_specs(events)["yes"]))
    assert spec.workflow == "yes" and spec.transformations[0].name == "null: #x"
    assert spec.transformations[0].used[0].name == "1e3"
