"""`provkg spec list | show | validate --store`: the specs a store holds, seen from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provkg.cli import main
from provkg.store import open_store

SPEC = """\
workflow: train
phase: learning
transformations:
  - {name: training, kind: training, used: [{name: lr, role: hyperparameter}]}
  - name: epoch
    kind: section
    of: training
    granularity: summary
"""


@pytest.fixture()
def store(tmp_path: Path, capsys) -> str:
    spec = tmp_path / "train.yaml"
    spec.write_text(SPEC)
    events = tmp_path / "e.jsonl"
    events.write_text('{"type": "workflow", "event": "begin", "id": "r1", "time": 1.5, '
                      '"workflow": "train"}\n')
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["ingest", str(events), "--spec", str(spec), "--store", url]) == 0
    capsys.readouterr()
    return url


def test_spec_list_names_each_workflow_with_its_shape(store: str, capsys) -> None:
    assert main(["spec", "list", "--store", store, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["columns"] == ["workflow", "phase", "transformations", "stages", "sections",
                              "summarised"]
    assert out["rows"] == [["train", "learning", 2, 1, 1, "epoch"]]


def test_spec_show_prints_the_stored_spec_with_its_defaults(store: str, capsys) -> None:
    assert main(["spec", "show", "train", "--store", store]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["workflow"] == "train"
    assert [t["name"] for t in shown["transformations"]] == ["training", "epoch"]
    assert shown["transformations"][0]["granularity"] == "full"  # a default, spelled out
    assert main(["spec", "show", "nope", "--store", store]) == 1
    err = capsys.readouterr().err
    assert "no spec for workflow 'nope'" in err and "specs for: train" in err


def test_spec_validate_with_a_store_compares_and_writes_nothing(store: str, tmp_path: Path,
                                                                capsys) -> None:
    with open_store(store) as s:
        before = s.count()
    same, changed, new = (tmp_path / n for n in ("same.yaml", "changed.yaml", "new.yaml"))
    same.write_text(SPEC)
    changed.write_text(SPEC.replace("lr", "learning_rate")
                       + "  - name: evaluation\n    kind: evaluation\n")
    new.write_text(SPEC.replace("workflow: train", "workflow: other"))
    assert main(["spec", "validate", str(same), str(changed), str(new), "--store", store]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("the same as the spec the store holds")
    assert "transformations added: evaluation" in out[1]
    assert "transformations changed: training (used -lr +learning_rate)" in out[1]
    assert "holds no spec for this workflow" in out[2]
    with open_store(store) as s:
        assert s.count() == before


def test_spec_validate_without_a_store_reads_none(tmp_path: Path, capsys, monkeypatch) -> None:
    spec = tmp_path / "train.yaml"
    spec.write_text(SPEC)
    monkeypatch.setenv("PROVKG_STORE", f"oxigraph:{tmp_path / 'missing'}")
    assert main(["spec", "validate", str(spec)]) == 0
    assert capsys.readouterr().out.strip().endswith("2 transformations)")
    assert not (tmp_path / "missing").exists()
    # found by black-box testing: "1 transformations", and two specs of one workflow said ok
    # while an ingest of both refuses them
    one, again = tmp_path / "one.yaml", tmp_path / "again.yaml"
    one.write_text("workflow: w\nphase: learning\ntransformations:\n  - {name: t, kind: training}\n")
    again.write_text(one.read_text().replace("name: t,", "name: u,"))
    assert main(["spec", "validate", str(one), str(again)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].endswith("1 transformation)")
    assert "are both specs of workflow 'w'" in err


def test_spec_messages_never_show_the_store_password(monkeypatch, capsys) -> None:
    """Found by black-box testing: `spec list` / `spec show` printed a remote store's URL with
    its password, where every other message writes ***."""
    from provkg.cli import specs as spec_commands
    from provkg.store.rdflib_store import RdflibStore

    url = "virtuoso+http://127.0.0.1:8890?user=dba&password=s3cret"
    monkeypatch.setattr(spec_commands, "open_store",
                        lambda *a, **k: RdflibStore(url=url))  # an empty store at that URL
    assert main(["spec", "list", "--store", url]) == 0
    assert main(["spec", "show", "nope", "--store", url]) == 1
    said = capsys.readouterr()
    assert "s3cret" not in said.out + said.err and "password=***" in said.err
