"""provkg.integrations.transformers: a real Hugging Face Trainer on CPU (a tiny BERT built
from a config: nothing comes from the hub), recorded by the callback alone, ingested with
no spec, and asked the canned queries; checked against the Trainer's own log_history."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments  # noqa: E402

import provkg  # noqa: E402
from provkg import capture  # noqa: E402
from provkg.integrations.transformers import ProvenanceCallback, _datasets, epoch_of  # noqa: E402

WORKFLOW = "tiny-bert"
EPOCHS, STEPS_PER_EPOCH, BATCH, LENGTH = 3, 10, 4, 8
#: the two runs of the module's fixture: learning rate and scheduler
RUNS = {"fast": (5e-3, "linear"), "slow": (1e-4, "constant_with_warmup")}


class FileExamples(torch.utils.data.Dataset):
    """Token ids and labels read from a file: it says where (``path``), as file-backed data sets do."""

    def __init__(self, path: Path) -> None:
        self.ids, self.labels = torch.load(path)
        self.path = str(path)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(LENGTH, dtype=torch.long),
                "labels": self.labels[i]}


def _write(path: Path, n: int, seed: int) -> Path:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 50, (n, LENGTH), generator=g)
    labels = (ids[:, 0] < 25).long()  # learnable: the first token says the class
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save((ids, labels), path)
    return path


def _train(root: Path, *, run_id: str, lr: float = 1e-3, scheduler: str = "linear",
           batches: str = "full", sink: str | None = None, after: bool = False,
           **options: Any) -> tuple[Any, Path]:
    """Train the tiny BERT with the callback (and evaluate / predict after it); (the
    trainer, its output folder)."""
    train = FileExamples(_write(root / "data" / "train.pt", STEPS_PER_EPOCH * BATCH, 1))
    val = FileExamples(_write(root / "data" / "val.pt", 12, 2))
    transformers.set_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=LENGTH, num_labels=2))
    output = root / "out" / run_id
    args = TrainingArguments(
        output_dir=str(output), run_name=f"{run_id}-run", num_train_epochs=EPOCHS,
        per_device_train_batch_size=BATCH, per_device_eval_batch_size=6, learning_rate=lr,
        lr_scheduler_type=scheduler, warmup_steps=STEPS_PER_EPOCH if "warmup" in scheduler else 0,
        eval_strategy="epoch", save_strategy="epoch", logging_steps=1, report_to="none",
        use_cpu=True, save_only_model=True, disable_tqdm=True, seed=0, dataloader_num_workers=0)
    callback = ProvenanceCallback(sink=sink or f"file:{root}/events", workflow=WORKFLOW,
                                  run_id=run_id, batches=batches, **options)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val,
                      callbacks=[callback])
    trainer.train()
    if after:
        trainer.evaluate()
        trainer.predict(val)
    return trainer, output


def _train_logs(trainer: Any) -> list[dict[str, Any]]:
    return [e for e in trainer.state.log_history if "loss" in e and "learning_rate" in e]


def _epoch_losses(trainer: Any) -> dict[int, float]:
    """The Trainer's own per-epoch loss: the mean of the epoch's logged training losses."""
    by_epoch: dict[int, list[float]] = {}
    for entry in _train_logs(trainer):
        by_epoch.setdefault(epoch_of(entry["epoch"]), []).append(entry["loss"])
    return {e: sum(v) / len(v) for e, v in by_epoch.items()}


def _expected_adaptations(trainer: Any) -> list[tuple[int, float, float]]:
    """(epoch, old, new) where an epoch's first logged learning rate differs from the last epoch's."""
    first: dict[int, float] = {}
    for entry in _train_logs(trainer):
        first.setdefault(epoch_of(entry["epoch"]), entry["learning_rate"])
    epochs = sorted(first)
    return [(e, first[p], first[e]) for p, e in zip(epochs, epochs[1:]) if first[p] != first[e]]


def _best_eval_loss(trainer: Any) -> float:
    return min(e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e)


def _events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.open()]


def _task_iri(task_id: str) -> str:
    return f"https://w3id.org/provkg/id/task/{task_id}"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("transformers")
    runs = {}
    for run_id, (lr, scheduler) in RUNS.items():
        trainer, output = _train(root, run_id=run_id, lr=lr, scheduler=scheduler, after=run_id == "fast")
        runs[run_id] = {"trainer": trainer, "output": output, "lr": lr, "scheduler": scheduler}
    events = _events(root / "events")
    trainings = {e["workflow_id"]: e["id"] for e in events
                 if e["type"] == "task" and e["event"] == "begin" and e.get("kind") == "training"}
    store = provkg.open_store("memory:")
    provkg.ingest_paths(store, [root / "events"], progress=False)
    yield {"root": root, "runs": runs, "events": events, "trainings": trainings, "store": store}
    store.close()


def test_epoch_of_maps_hf_float_epochs() -> None:
    assert [epoch_of(x) for x in (0.1, 0.9999, 1.0, 1.1, 3.0, -1.0, float("nan"), "x")] == \
        [0, 0, 0, 1, 2, 0, 0, 0]


def test_d3_per_epoch_loss_is_the_mean_of_the_logged_losses(two_runs: dict[str, Any]) -> None:
    for run_id, run in two_runs["runs"].items():
        assert len(_train_logs(run["trainer"])) == EPOCHS * STEPS_PER_EPOCH
        rows = provkg.run_query(two_runs["store"], "d3", {"training": two_runs["trainings"][run_id],
                                                          "measure": "loss"}).as_dicts()
        got = {int(r["epoch"]): r["loss"] for r in rows}
        expected = _epoch_losses(run["trainer"])
        assert sorted(got) == list(range(EPOCHS)) == sorted(expected)
        assert got == pytest.approx(expected, rel=1e-12)
        assert all(r["seconds"] is not None and r["seconds"] >= 0 for r in rows)


def test_d6_learning_rate_changes_at_the_right_epochs(two_runs: dict[str, Any]) -> None:
    runs = two_runs["runs"]
    best = min(runs, key=lambda r: _epoch_losses(runs[r]["trainer"])[EPOCHS - 1])
    expected = _expected_adaptations(runs[best]["trainer"])
    assert expected, "the schedulers change the rate between epochs"
    rows = provkg.run_query(two_runs["store"], "d6", {"workflow": WORKFLOW, "measure": "loss"}).as_dicts()
    assert [(r["training"], int(r["epoch"]), r["technique"]) for r in rows] == \
        [(_task_iri(two_runs["trainings"][best]), e, runs[best]["scheduler"]) for e, _, _ in expected]
    assert [r["new_value"] for r in rows] == pytest.approx([new for _, _, new in expected], rel=1e-12)
    for run_id, run in runs.items():  # each run's adaptations, with the old rate they replaced
        found = [(e["index"], {v["name"]: v["value"] for v in e["used"]}) for e in two_runs["events"]
                 if e.get("kind") == "adaptation" and e["workflow_id"] == run_id]
        assert [(i, used["learning_rate"], used["technique"]) for i, used in found] == \
            [(e, pytest.approx(old, rel=1e-12), run["scheduler"]) for e, old, _ in _expected_adaptations(run["trainer"])]
    assert [e for e, _, _ in _expected_adaptations(runs["slow"]["trainer"])] == [1]  # warmup: epoch 0 only


def test_d5_ranks_runs_by_validation_eval_loss(two_runs: dict[str, Any]) -> None:
    runs = two_runs["runs"]
    best = {r: _best_eval_loss(run["trainer"]) for r, run in runs.items()}
    ranked = sorted(best, key=best.__getitem__)
    rows = provkg.run_query(two_runs["store"], "d5", {"workflow": WORKFLOW, "k": 2, "measure": "eval_loss",
                                                      "stage": "validation"}).as_dicts()
    assert [r["training"] for r in rows] == [_task_iri(two_runs["trainings"][r]) for r in ranked]
    assert [r["value"] for r in rows] == pytest.approx([best[r] for r in ranked], rel=1e-12)
    assert f"learning_rate={runs[ranked[0]]['lr']}" in rows[0]["hyperparameters"]


def test_validations_each_epoch_check_the_checkpoint_saved_after_them(two_runs: dict[str, Any]) -> None:
    validations = [e for e in two_runs["events"] if e.get("kind") == "validation" and e["workflow_id"] == "fast"]
    assert [e["index"] for e in validations] == list(range(EPOCHS))
    assert [e["parent"] for e in validations] == [two_runs["trainings"]["fast"]] * EPOCHS
    ends = {e["id"]: e for e in two_runs["events"] if e["event"] == "end"}
    output = two_runs["runs"]["fast"]["output"]
    for epoch, check in enumerate(validations):
        ended = ends[check["id"]]
        models = [v["location"] for v in ended.get("used", []) if v.get("role") == "model"]
        step = (epoch + 1) * STEPS_PER_EPOCH
        assert models == [capture.ref(output / f"checkpoint-{step}").location]
        assert (output / f"checkpoint-{step}").is_dir()
        assert {v["name"] for v in ended["generated"]} >= {"eval_loss", "eval_runtime"}


def test_checkpoint_lineage_reaches_the_dataset(two_runs: dict[str, Any]) -> None:
    output = two_runs["runs"]["fast"]["output"]
    checkpoint = output / f"checkpoint-{EPOCHS * STEPS_PER_EPOCH}"
    assert checkpoint.is_dir()
    rows = provkg.run_query(two_runs["store"], "lineage", {"data": str(checkpoint)}).as_dicts()
    dataset = capture.ref(two_runs["root"] / "data" / "train.pt").location
    used = {r["derived_from"] for r in rows if r["activity"] == _task_iri(two_runs["trainings"]["fast"])}
    assert f"https://w3id.org/provkg/id/value/{dataset}" in used
    ended = next(e for e in two_runs["events"] if e["id"] == two_runs["trainings"]["fast"] and e["event"] == "end")
    models = {v["name"]: v["location"] for v in ended["generated"] if v.get("role") == "model"}
    assert models == {"model": capture.ref(checkpoint).location,
                      **{f"checkpoint.checkpoint-{s}": capture.ref(output / f"checkpoint-{s}").location
                         for s in (10, 20, 30)}}


def test_runs_lists_every_run_with_its_hyperparameters(two_runs: dict[str, Any]) -> None:
    rows = provkg.run_query(two_runs["store"], "runs", {"workflow": WORKFLOW}).as_dicts()
    by_training = {r["training"]: r for r in rows}
    for run_id, run in two_runs["runs"].items():
        row = by_training[_task_iri(two_runs["trainings"][run_id])]
        assert row["label"] == f"{run_id}-run"
        assert row["status"] == "finished"
        pairs = row["hyperparameters"]
        for expected in (f"learning_rate={run['lr']}", f"lr_scheduler_type={run['scheduler']}",
                         "num_train_epochs=3", "per_device_train_batch_size=4", "logging_steps=1",
                         "eval_strategy=epoch", "train_batch_size=4", "model.class=BertForSequenceClassification",
                         "model.hidden_size=16", "model.vocab_size=50", "optimizer.class=AdamW",
                         f"optimizer.lr={run['lr']}", "optimizer.betas=[0.9,0.999]",
                         "scheduler.class=LambdaLR"):
            assert expected in pairs, (expected, pairs)
        assert "loss=" in row["evaluations"] and "train_loss=" in row["evaluations"]


def test_the_run_says_its_environment_and_evaluate_predict_runs(two_runs: dict[str, Any]) -> None:
    events = two_runs["events"]
    begins = {e["id"]: e for e in events if e["type"] == "workflow" and e["event"] == "begin"}
    assert set(begins) == {"fast", "slow", "fast-evaluate", "fast-predict"}
    tags = begins["fast"]["tags"]
    assert tags["framework"] == "transformers" and tags["transformers"] == transformers.__version__
    assert tags["torch"] == torch.__version__ and tags["device"] == "cpu" and "accelerate" in tags
    evaluations = [e for e in events if e.get("kind") == "evaluation" and e["event"] == "begin"]
    assert sorted(e["workflow_id"] for e in evaluations) == ["fast-evaluate", "fast-predict"]
    last = capture.ref(two_runs["runs"]["fast"]["output"] / f"checkpoint-{EPOCHS * STEPS_PER_EPOCH}").location
    for evaluation in evaluations:
        assert evaluation["dependencies"] == [two_runs["trainings"]["fast"]]
        used = {v["name"]: v for v in evaluation["used"]}
        assert used["model"]["location"] == last and used["model"]["role"] == "model"
    generated = {e["workflow_id"]: {v["name"] for v in e["generated"]} for e in events
                 if e.get("type") == "task" and e["event"] == "end" and e["id"] in {x["id"] for x in evaluations}}
    assert "eval_loss" in generated["fast-evaluate"] and "test_loss" in generated["fast-predict"]
    rows = provkg.run_query(two_runs["store"], "d5", {"workflow": WORKFLOW, "k": 1, "measure": "test_loss",
                                                      "stage": "evaluation"}).as_dicts()
    assert [r["training"] for r in rows] == [_task_iri(two_runs["trainings"]["fast"])]


def test_steps_full_one_section_per_step(two_runs: dict[str, Any]) -> None:
    steps = [e for e in two_runs["events"] if e.get("transformation") == "step" and e["event"] == "end"
             and e["workflow_id"] == "fast"]
    assert len(steps) == EPOCHS * STEPS_PER_EPOCH
    assert all({v["name"] for v in e["generated"]} == {"loss", "grad_norm", "learning_rate"} for e in steps)


@pytest.mark.parametrize("batches", ["summary", "none"])
def test_steps_summary_and_none(tmp_path: Path, batches: str) -> None:
    trainer, _ = _train(tmp_path, run_id=f"b-{batches}", batches=batches)
    events = _events(tmp_path / "events")
    sections = [e for e in events if e.get("transformation") == "step" and e["event"] == "begin"]
    if batches == "none":
        assert sections == []
    else:
        assert len(sections) == EPOCHS * STEPS_PER_EPOCH
        assert {e["granularity"] for e in sections} == {"summary"}
    with provkg.open_store("memory:") as store:
        provkg.ingest_paths(store, [tmp_path / "events"], progress=False)
        training = next(e["id"] for e in events if e.get("kind") == "training")
        got = {int(r["epoch"]): r["loss"] for r in provkg.run_query(
            store, "d3", {"training": training, "measure": "loss"}).as_dicts()}
        assert got == pytest.approx(_epoch_losses(trainer), rel=1e-12)


def test_an_unreachable_sink_never_stops_training(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trainer, output = _train(tmp_path, run_id="away", sink=f"http://127.0.0.1:{port}", after=True,
                             spool=str(tmp_path / "spool"), flush_timeout=1.0)
    assert trainer.state.global_step == EPOCHS * STEPS_PER_EPOCH
    assert sorted(_epoch_losses(trainer)) == list(range(EPOCHS))
    assert (output / f"checkpoint-{EPOCHS * STEPS_PER_EPOCH}").is_dir()
    assert any((tmp_path / "spool").rglob("*")), "undelivered events wait in the spool"


def test_a_datasets_dataset_is_referenced_by_its_arrow_file(tmp_path: Path) -> None:
    class ArrowLike:  # what a `datasets.Dataset` shows: its cache files, no path of its own
        cache_files = [{"filename": str(tmp_path / "train.arrow")}]

        def __len__(self) -> int:
            return 7

    class Loader:
        dataset = ArrowLike()

    wf = capture.workflow(WORKFLOW, sink="memory:", run_id="arrow")
    refs, about = _datasets(Loader(), "train_set", wf)
    assert refs["train_set"].location == capture.ref(tmp_path / "train.arrow").location
    assert about == {"train_set.type": "ArrowLike", "train_set.size": 7}


def test_a_hook_that_fails_inside_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    callback = ProvenanceCallback(sink="memory:", workflow=WORKFLOW, batches="every")
    assert callback.batches == "full"
    assert callback.on_train_begin(object(), object(), object()) is None  # no trainer at all: logged
    assert callback.on_log(object(), object(), object(), logs={"loss": 1.0}) is None
    assert callback.on_evaluate(object(), object(), object(), metrics={"eval_loss": 1.0}) is None
    assert "on_train_begin failed" in caplog.text
