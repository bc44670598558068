"""provkg.integrations.keras: a real Keras 3 training (torch backend, CPU), recorded by the
callback alone, ingested with no spec, and asked the canned queries; checked against the
numbers of Keras's own History."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

# Keras picks its backend once, at its first import: torch here, without leaving the
# variable set for the rest of the process (a keras imported earlier is used as it is).
_backend_before = os.environ.get("KERAS_BACKEND")
if "keras" not in sys.modules:
    os.environ["KERAS_BACKEND"] = "torch"
try:
    pytest.importorskip("torch")
    keras = pytest.importorskip("keras")
finally:
    if _backend_before is None:
        os.environ.pop("KERAS_BACKEND", None)
    else:
        os.environ["KERAS_BACKEND"] = _backend_before
if keras.backend.backend() != "torch":
    pytest.skip(f"keras was imported with the {keras.backend.backend()} backend", allow_module_level=True)

import numpy as np  # noqa: E402

import provkg  # noqa: E402
from provkg import capture  # noqa: E402
from provkg.integrations.keras import ProvenanceCallback  # noqa: E402

#: Keras's own LearningRateScheduler reads the rate through Variable.__array__, which numpy 2 warns about
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")

WORKFLOW = "keras-mlp"
EPOCHS, BATCH, BATCHES_PER_EPOCH = 3, 10, 12
SAMPLES = int(BATCH * BATCHES_PER_EPOCH / 0.8)  # validation_split=0.2 leaves 12 batches


def _data(folder: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(SAMPLES, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * rng.normal(size=(SAMPLES, 1))).astype("float32")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "train.npz"
    np.savez(path, x=x, y=y)
    return path, x, y


def _halve_at_2(epoch: int, lr: float) -> float:
    return lr * 0.5 if epoch == 2 else lr


def _train(root: Path, *, run_id: str, lr: float, batches: str = "full", sink: str | None = None,
           evaluate: bool = False, **options: Any) -> dict[str, Any]:
    """Fit (and evaluate) a small MLP with the callback first in the list (before the
    scheduler and the checkpoint, the harder order); Keras's History and the rest."""
    keras.utils.set_random_seed(0)
    path, x, y = _data(root / "data")
    callback = ProvenanceCallback(sink=sink or f"file:{root}/events", workflow=WORKFLOW, run_id=run_id,
                                  batches=batches, dataset=path, **options)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1)], name=f"mlp_{run_id}")
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=lr), loss="mse", metrics=["mae"])
    checkpoints = root / "ckpt" / run_id
    history = model.fit(x, y, epochs=EPOCHS, batch_size=BATCH, validation_split=0.2, verbose=0,
                        callbacks=[callback, keras.callbacks.LearningRateScheduler(_halve_at_2),
                                   keras.callbacks.ModelCheckpoint(str(checkpoints / "e{epoch:02d}.keras"))])
    out = {"history": history.history, "lr": lr, "checkpoints": checkpoints, "callback": callback}
    if evaluate:
        out["evaluated"] = model.evaluate(x[:40], y[:40], verbose=0, return_dict=True, callbacks=[callback])
    return out


def _events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.open()]


def _task_iri(task_id: str) -> str:
    return f"https://w3id.org/provkg/id/task/{task_id}"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("keras")
    runs = {run_id: _train(root, run_id=run_id, lr=lr, evaluate=run_id == "fast")
            for run_id, lr in (("fast", 0.05), ("slow", 0.002))}
    events = _events(root / "events")
    trainings = {e["workflow_id"]: e["id"] for e in events
                 if e["type"] == "task" and e["event"] == "begin" and e.get("kind") == "training"}
    store = provkg.open_store("memory:")
    provkg.ingest_paths(store, [root / "events"], progress=False)
    yield {"root": root, "runs": runs, "events": events, "trainings": trainings, "store": store}
    store.close()


def test_d3_per_epoch_loss_is_the_history(two_runs: dict[str, Any]) -> None:
    for run_id, run in two_runs["runs"].items():
        for measure in ("loss", "mae"):
            rows = provkg.run_query(two_runs["store"], "d3", {"training": two_runs["trainings"][run_id],
                                                              "measure": measure}).as_dicts()
            assert [int(r["epoch"]) for r in rows] == list(range(EPOCHS))
            assert [r["loss"] for r in rows] == pytest.approx(run["history"][measure], rel=1e-12)
            assert all(r["seconds"] is not None and r["seconds"] >= 0 for r in rows)


def test_d6_the_scheduler_changes_the_rate_at_epoch_2(two_runs: dict[str, Any]) -> None:
    runs = two_runs["runs"]
    rows = provkg.run_query(two_runs["store"], "d6", {"workflow": WORKFLOW, "measure": "loss"}).as_dicts()
    best = min(runs, key=lambda r: runs[r]["history"]["loss"][-1])
    assert [(r["training"], int(r["epoch"]), r["technique"]) for r in rows] == \
        [(_task_iri(two_runs["trainings"][best]), 2, "LearningRateScheduler")]
    assert rows[0]["new_value"] == pytest.approx(runs[best]["history"]["learning_rate"][2], rel=1e-12)
    adaptations = [e for e in two_runs["events"] if e.get("kind") == "adaptation"]
    assert sorted((e["workflow_id"], e["index"]) for e in adaptations) == [("fast", 2), ("slow", 2)]
    for event in adaptations:
        old = next(v["value"] for v in event["used"] if v["name"] == "learning_rate")
        assert old == pytest.approx(runs[event["workflow_id"]]["history"]["learning_rate"][1], rel=1e-12)


def test_d5_ranks_the_runs_by_their_validation(two_runs: dict[str, Any]) -> None:
    best_val = {r: min(run["history"]["val_loss"]) for r, run in two_runs["runs"].items()}
    rows = provkg.run_query(two_runs["store"], "d5", {"workflow": WORKFLOW, "k": 2, "measure": "val_loss",
                                                      "stage": "validation"}).as_dicts()
    ranked = sorted(best_val, key=best_val.__getitem__)
    assert [r["training"] for r in rows] == [_task_iri(two_runs["trainings"][r]) for r in ranked]
    assert [r["value"] for r in rows] == pytest.approx([best_val[r] for r in ranked], rel=1e-12)


def test_validations_are_children_of_the_training(two_runs: dict[str, Any]) -> None:
    for run_id, run in two_runs["runs"].items():
        begun = [e for e in two_runs["events"] if e.get("kind") == "validation" and e["event"] == "begin"
                 and e["workflow_id"] == run_id]
        assert [e["index"] for e in begun] == list(range(EPOCHS))
        assert {e["parent"] for e in begun} == {two_runs["trainings"][run_id]}
        models = [[v["location"] for v in e["used"] if v.get("role") == "model"] for e in begun]
        saved = [capture.ref(run["checkpoints"] / f"e{n:02d}.keras").location for n in (1, 2)]
        assert models == [[], saved[:1], saved[1:]]  # the latest file saved before each
        ended = {e["id"]: e for e in two_runs["events"] if e["event"] == "end"}
        got = [{v["name"]: v["value"] for v in ended[e["id"]]["generated"]} for e in begun]
        assert [g["val_loss"] for g in got] == pytest.approx(run["history"]["val_loss"], rel=1e-12)
        assert all(set(g) == {"val_loss", "val_mae"} for g in got)


def test_checkpoint_lineage_reaches_the_dataset(two_runs: dict[str, Any]) -> None:
    last = two_runs["runs"]["fast"]["checkpoints"] / f"e{EPOCHS:02d}.keras"
    assert last.exists()
    rows = provkg.run_query(two_runs["store"], "lineage", {"data": str(last)}).as_dicts()
    dataset = capture.ref(two_runs["root"] / "data" / "train.npz").location
    assert f"https://w3id.org/provkg/id/value/{dataset}" in {r["derived_from"] for r in rows}
    training = _task_iri(two_runs["trainings"]["fast"])
    assert any(r["activity"] == training and r["depth"] == 1 for r in rows)
    ended = next(e for e in two_runs["events"] if e["id"] == two_runs["trainings"]["fast"] and e["event"] == "end")
    models = {v["name"]: v["location"] for v in ended["generated"] if v.get("role") == "model"}
    assert models["model"] == capture.ref(last).location
    assert sorted(k for k in models if k != "model") == [f"checkpoint.e{n:02d}" for n in range(1, EPOCHS + 1)]


def test_runs_lists_every_run_with_its_hyperparameters(two_runs: dict[str, Any]) -> None:
    rows = provkg.run_query(two_runs["store"], "runs", {"workflow": WORKFLOW}).as_dicts()
    by_training = {r["training"]: r for r in rows}
    assert set(by_training) == {_task_iri(t) for t in two_runs["trainings"].values()}
    for run_id, run in two_runs["runs"].items():
        row = by_training[_task_iri(two_runs["trainings"][run_id])]
        assert row["label"] == f"mlp_{run_id}" and row["status"] == "finished"
        pairs = row["hyperparameters"].split("; ")
        for expected in ("epochs=3", f"batch_size={BATCH}", "validation_split=0.2", "shuffle=true",
                         "steps=12", "optimizer.class=Adam", "optimizer.beta_1=0.9",
                         "compile.loss=mse", 'compile.metrics=["mae"]', "model.layers=2",
                         f"model.name=mlp_{run_id}", "model.parameters=97",
                         'callbacks=["ProvenanceCallback","LearningRateScheduler","ModelCheckpoint"]'):
            assert expected in pairs, (expected, pairs)
        # Keras numbers its optimizers' names within a process: adam, adam_1, ...
        assert any(p.startswith("optimizer.name=adam") for p in pairs)
        rate = float(next(p for p in pairs if p.startswith("learning_rate=")).split("=", 1)[1])
        assert rate == pytest.approx(run["lr"], rel=1e-6)
        evaluations = row["evaluations"].split("; ")
        assert any(p.startswith("loss=") for p in evaluations) and any(p.startswith("val_loss=") for p in evaluations)


def test_the_data_sets_and_the_environment(two_runs: dict[str, Any]) -> None:
    begins = {e["id"]: e for e in two_runs["events"] if e["type"] == "workflow" and e["event"] == "begin"}
    assert set(begins) == {"fast", "slow", "fast-evaluate"}
    tags = begins["fast"]["tags"]
    assert tags["framework"] == "keras" and tags["keras"] == keras.__version__
    assert tags["backend"] == "torch" and tags["torch"] == __import__("torch").__version__
    assert tags["device"] == "cpu"
    training = next(e for e in two_runs["events"] if e["id"] == two_runs["trainings"]["fast"])
    used = {v["name"]: v for v in training["used"]}
    whole = capture.ref(two_runs["root"] / "data" / "train.npz").location
    for name, size in (("train_set", BATCH * BATCHES_PER_EPOCH), ("val_set", SAMPLES - BATCH * BATCHES_PER_EPOCH)):
        assert used[name]["role"] == "dataset" and used[name]["location"] == whole
        assert used[name]["derived_from"] == [whole]
        assert used[f"{name}.size"]["value"] == size and used[f"{name}.shape"]["value"] == [size, 4]
        assert used[f"{name}.target_shape"]["value"] == [size, 1]
    assert used["model.layers"]["role"] == "model_hyperparameter"


def test_evaluate_is_a_run_of_its_own(two_runs: dict[str, Any]) -> None:
    fast = two_runs["runs"]["fast"]
    evaluation = next(e for e in two_runs["events"] if e.get("kind") == "evaluation")
    assert evaluation["workflow_id"] == "fast-evaluate"
    assert evaluation["dependencies"] == [two_runs["trainings"]["fast"]]
    used = {v["name"]: v for v in evaluation["used"]}
    assert used["model"]["location"] == capture.ref(fast["checkpoints"] / f"e{EPOCHS:02d}.keras").location
    assert used["test_set.size"]["value"] == 40
    ended = next(e for e in two_runs["events"] if e["id"] == evaluation["id"] and e["event"] == "end")
    assert {v["name"]: v["value"] for v in ended["generated"]} == pytest.approx(fast["evaluated"], rel=1e-12)
    rows = provkg.run_query(two_runs["store"], "d5", {"workflow": WORKFLOW, "k": 1, "measure": "loss",
                                                      "stage": "evaluation"}).as_dicts()
    assert [r["training"] for r in rows] == [_task_iri(two_runs["trainings"]["fast"])]
    assert rows[0]["value"] == pytest.approx(fast["evaluated"]["loss"], rel=1e-12)


def test_batches_full_one_section_per_batch(two_runs: dict[str, Any]) -> None:
    batches = [e for e in two_runs["events"] if e.get("transformation") == "batch" and e["event"] == "end"
               and e["workflow_id"] == "fast"]
    assert len(batches) == EPOCHS * BATCHES_PER_EPOCH
    assert all({v["name"] for v in e["generated"]} == {"loss", "mae"} for e in batches)
    epochs = [e for e in two_runs["events"] if e.get("transformation") == "epoch" and e["event"] == "end"
              and e["workflow_id"] == "fast"]
    assert [{v["name"] for v in e["generated"]} for e in epochs] == [{"loss", "mae"}] * EPOCHS


@pytest.mark.parametrize("batches", ["summary", "none"])
def test_batches_summary_and_none(tmp_path: Path, batches: str) -> None:
    run = _train(tmp_path, run_id=f"b-{batches}", lr=0.01, batches=batches)
    events = _events(tmp_path / "events")
    sections = [e for e in events if e.get("transformation") == "batch" and e["event"] == "begin"]
    if batches == "none":
        assert sections == []
    else:
        assert len(sections) == EPOCHS * BATCHES_PER_EPOCH
        assert {e["granularity"] for e in sections} == {"summary"}
    with provkg.open_store("memory:") as store:
        provkg.ingest_paths(store, [tmp_path / "events"], progress=False)
        training = next(e["id"] for e in events if e.get("kind") == "training")
        rows = provkg.run_query(store, "d3", {"training": training, "measure": "loss"}).as_dicts()
        assert [r["loss"] for r in rows] == pytest.approx(run["history"]["loss"], rel=1e-12)
        assert len(provkg.run_query(store, "d6", {"workflow": WORKFLOW, "measure": "loss"}).as_dicts()) == 1


def test_an_unreachable_sink_never_stops_training(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = _train(tmp_path, run_id="away", lr=0.01, sink=f"http://127.0.0.1:{port}",
                 spool=str(tmp_path / "spool"), flush_timeout=1.0, evaluate=True)
    assert len(run["history"]["loss"]) == EPOCHS and "loss" in run["evaluated"]
    assert any((tmp_path / "spool").rglob("*")), "undelivered events wait in the spool"


class _BrokenLog:
    def end(self, values: Any) -> bool:
        raise LookupError("a task that cannot record")


def test_a_hook_that_fails_inside_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    callback = ProvenanceCallback(sink="memory:", workflow=WORKFLOW, batches="every")
    assert callback.batches == "full"
    assert callback.on_epoch_begin(0) is None  # no fit began: nothing to record
    callback._batches = _BrokenLog()  # type: ignore[assignment]
    # (a failure is logged once per hook name and exception type in the process: one no
    # other test raises, so this one is logged here)
    assert callback.on_train_batch_end(0, logs={"loss": 1.0}) is None
    assert "on_train_batch_end failed" in caplog.text and "a task that cannot record" in caplog.text
