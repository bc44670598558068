"""provkg.integrations.lightning: a real Lightning training on CPU, recorded by the callback
alone, ingested with no spec, and asked the canned queries; checked against the numbers
Lightning's own CSVLogger wrote."""

from __future__ import annotations

import csv
import json
import socket
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import provkg  # noqa: E402
from provkg import capture  # noqa: E402
from provkg.integrations.lightning import ProvenanceCallback  # noqa: E402

#: Lightning's own notes on a tiny CPU run (few workers, a torch deprecation it triggers)
pytestmark = [pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
              pytest.mark.filterwarnings("ignore::lightning.fabric.utilities.warnings.PossibleUserWarning")]

WORKFLOW = "mlp-training"
EPOCHS, BATCHES_PER_EPOCH = 3, 12


class FileTensors(TensorDataset):
    """A data set read from a file: it says where (``path``), as file-backed data sets do."""

    def __init__(self, path: Path) -> None:
        x, y = torch.load(path)
        super().__init__(x, y)
        self.path = str(path)


class MLP(L.LightningModule):
    def __init__(self, lr: float = 0.01, hidden: int = 16, betas: tuple[float, float] = (0.9, 0.99)) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, 1))

    def _loss(self, batch: Any) -> Any:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test_loss", self._loss(batch))

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr, betas=self.hparams.betas,
                                     weight_decay=1e-4)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


def _data(folder: Path) -> tuple[Path, TensorDataset]:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(BATCHES_PER_EPOCH * 8, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(len(x), 1, generator=g)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "train.pt"
    torch.save((x, y), path)
    vx = torch.randn(32, 4, generator=g)
    return path, TensorDataset(vx, vx @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]))


def _train(root: Path, *, run_id: str, lr: float, batches: str = "full", sink: str | None = None,
           test: bool = False, **options: Any) -> tuple[Any, Path]:
    """Train (and test) the MLP with the callback; (the trainer, the CSVLogger's metrics file)."""
    torch.manual_seed(0)
    path, val_set = _data(root / "data")
    callback = ProvenanceCallback(sink=sink or f"file:{root}/events", workflow=WORKFLOW,
                                  run_id=run_id, batches=batches, **options)
    logger = CSVLogger(root / "logs", name=run_id)
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", logger=logger, log_every_n_steps=1,
                        callbacks=[callback, ModelCheckpoint(dirpath=root / "ckpt" / run_id,
                                                             monitor="val_loss", save_last=True)],
                        enable_progress_bar=False, enable_model_summary=False)
    model = MLP(lr=lr)
    trainer.fit(model, DataLoader(FileTensors(path), batch_size=8),
                DataLoader(val_set, batch_size=16))
    if test:
        trainer.test(model, DataLoader(val_set, batch_size=16), ckpt_path="best", verbose=False)
    return trainer, Path(logger.log_dir) / "metrics.csv"


def _logged(metrics_csv: Path, column: str) -> dict[int, float]:
    """Lightning's own per-epoch values of ``column`` (its CSVLogger's file)."""
    with metrics_csv.open() as f:
        return {int(row["epoch"]): float(row[column]) for row in csv.DictReader(f) if row.get(column)}


def _events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.open()]


def _ingest(folder: Path) -> Any:
    store = provkg.open_store("memory:")
    provkg.ingest_paths(store, [folder], progress=False)
    return store


def _task_iri(task_id: str) -> str:
    return f"https://w3id.org/provkg/id/task/{task_id}"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("lightning")
    runs = {}
    for run_id, lr in (("fast", 0.05), ("slow", 0.002)):
        trainer, metrics = _train(root, run_id=run_id, lr=lr, test=run_id == "fast")
        runs[run_id] = {"trainer": trainer, "metrics": metrics, "lr": lr}
    events = _events(root / "events")
    trainings = {e["workflow_id"]: e["id"] for e in events
                 if e["type"] == "task" and e["event"] == "begin" and e.get("kind") == "training"}
    store = _ingest(root / "events")
    yield {"root": root, "runs": runs, "events": events, "trainings": trainings, "store": store}
    store.close()


def test_d3_per_epoch_loss_is_what_lightning_logged(two_runs: dict[str, Any]) -> None:
    for run_id, run in two_runs["runs"].items():
        rows = provkg.run_query(two_runs["store"], "d3", {"training": two_runs["trainings"][run_id],
                                                          "measure": "train_loss"})
        got = {int(r["epoch"]): r["loss"] for r in rows.as_dicts()}
        logged = _logged(run["metrics"], "train_loss_epoch")
        assert sorted(got) == list(range(EPOCHS)) == sorted(logged)
        assert got == pytest.approx(logged, rel=1e-12)
        assert all(r["seconds"] is not None and r["seconds"] >= 0 for r in rows.as_dicts())


def test_d6_the_schedulers_change_at_epoch_2(two_runs: dict[str, Any]) -> None:
    rows = provkg.run_query(two_runs["store"], "d6", {"workflow": WORKFLOW, "measure": "train_loss"}).as_dicts()
    best = min(two_runs["runs"], key=lambda r: _logged(two_runs["runs"][r]["metrics"], "train_loss_epoch")[EPOCHS - 1])
    assert [(r["training"], int(r["epoch"]), r["technique"]) for r in rows] == \
        [(_task_iri(two_runs["trainings"][best]), 2, "StepLR")]
    assert rows[0]["new_value"] == pytest.approx(two_runs["runs"][best]["lr"] * 0.5)
    # every run's adaptation is in the events, with the old rate it replaced
    adaptations = [e for e in two_runs["events"] if e.get("kind") == "adaptation"]
    assert sorted((e["workflow_id"], e["index"]) for e in adaptations) == [("fast", 2), ("slow", 2)]


def test_d5_best_run_by_validation_measure(two_runs: dict[str, Any]) -> None:
    best_val = {r: min(_logged(run["metrics"], "val_loss").values()) for r, run in two_runs["runs"].items()}
    rows = provkg.run_query(two_runs["store"], "d5", {"workflow": WORKFLOW, "k": 2, "measure": "val_loss",
                                                      "stage": "validation"}).as_dicts()
    ranked = sorted(best_val, key=best_val.__getitem__)
    assert [r["training"] for r in rows] == [_task_iri(two_runs["trainings"][r]) for r in ranked]
    assert [r["value"] for r in rows] == pytest.approx([best_val[r] for r in ranked], rel=1e-12)
    assert f"optimizer.lr={two_runs['runs'][ranked[0]]['lr']}" in rows[0]["hyperparameters"]


def test_checkpoint_lineage_reaches_the_dataset(two_runs: dict[str, Any]) -> None:
    trainer = two_runs["runs"]["fast"]["trainer"]
    best = trainer.checkpoint_callback.best_model_path
    assert best
    rows = provkg.run_query(two_runs["store"], "lineage", {"data": best}).as_dicts()
    dataset = capture.ref(two_runs["root"] / "data" / "train.pt").location
    used = {r["derived_from"] for r in rows if r["activity"] == _task_iri(two_runs["trainings"]["fast"])}
    assert f"https://w3id.org/provkg/id/value/{dataset}" in used
    assert _asks_generated_by_training_that_used(two_runs["store"], best, dataset)


def _asks_generated_by_training_that_used(store: Any, checkpoint: str, dataset: str) -> bool:
    return store.ask(f"""PREFIX prov: <http://www.w3.org/ns/prov#>
        PREFIX provlake: <https://w3id.org/provkg/provlake#>
        ASK {{ ?model provlake:location ?where . FILTER(STR(?where) = "{capture.ref(checkpoint).location}")
               ?model prov:wasGeneratedBy ?training . ?training prov:used ?data .
               ?data provlake:location ?at . FILTER(STR(?at) = "{dataset}") }}""")


def test_runs_lists_every_run_with_its_hyperparameters(two_runs: dict[str, Any]) -> None:
    rows = provkg.run_query(two_runs["store"], "runs", {"workflow": WORKFLOW}).as_dicts()
    by_training = {r["training"]: r for r in rows}
    for run_id, run in two_runs["runs"].items():
        row = by_training[_task_iri(two_runs["trainings"][run_id])]
        assert row["label"] == f"{run_id}/version_0"
        assert row["status"] == "finished"
        pairs = row["hyperparameters"]
        for expected in (f"lr={run['lr']}", "optimizer.class=Adam", "optimizer.betas=[0.9,0.99]",
                         "optimizer.weight_decay=0.0001", "scheduler.class=StepLR", "scheduler.step_size=2",
                         "trainer.max_epochs=3", "trainer.precision=32-true",
                         "trainer.accumulate_grad_batches=1", "data.train.batch_size=8"):
            assert expected in pairs, (expected, pairs)
        assert "train_loss=" in row["evaluations"]


def test_the_run_says_its_environment_and_the_test_stage(two_runs: dict[str, Any]) -> None:
    begins = {e["id"]: e for e in two_runs["events"] if e["type"] == "workflow" and e["event"] == "begin"}
    assert set(begins) == {"fast", "slow", "fast-test"}
    tags = begins["fast"]["tags"]
    assert tags["framework"] == "lightning" and tags["lightning"] == L.__version__
    assert tags["torch"] == torch.__version__ and tags["device"] == "cpu"
    evaluation = next(e for e in two_runs["events"] if e.get("kind") == "evaluation")
    assert evaluation["dependencies"] == [two_runs["trainings"]["fast"]]
    used = {v["name"]: v for v in evaluation["used"]}
    best = two_runs["runs"]["fast"]["trainer"].checkpoint_callback.best_model_path
    assert used["model"]["location"] == capture.ref(best).location and used["model"]["role"] == "model"
    ended = next(e for e in two_runs["events"] if e["id"] == evaluation["id"] and e["event"] == "end")
    assert [v["name"] for v in ended["generated"]] == ["test_loss"]
    rows = provkg.run_query(two_runs["store"], "d5", {"workflow": WORKFLOW, "k": 1, "measure": "test_loss",
                                                      "stage": "evaluation"}).as_dicts()
    assert [r["training"] for r in rows] == [_task_iri(two_runs["trainings"]["fast"])]


def test_validations_use_the_latest_checkpoint(two_runs: dict[str, Any]) -> None:
    validations = [e for e in two_runs["events"] if e.get("kind") == "validation" and e["workflow_id"] == "fast"]
    assert [e["index"] for e in validations] == list(range(EPOCHS))
    assert [e["parent"] for e in validations] == [two_runs["trainings"]["fast"]] * EPOCHS
    models = [[v["location"] for v in e["used"] if v.get("role") == "model"] for e in validations]
    assert models[0] == [] and all(m and not m[0].endswith("last.ckpt") for m in models[1:])


def test_batches_full_one_section_per_batch(two_runs: dict[str, Any]) -> None:
    batches = [e for e in two_runs["events"] if e.get("transformation") == "batch" and e["event"] == "end"
               and e["workflow_id"] == "fast"]
    assert len(batches) == EPOCHS * BATCHES_PER_EPOCH
    assert all({v["name"] for v in e["generated"]} == {"loss", "train_loss"} for e in batches)


@pytest.mark.parametrize("batches", ["summary", "none"])
def test_batches_summary_and_none(tmp_path: Path, batches: str) -> None:
    _, metrics = _train(tmp_path, run_id=f"b-{batches}", lr=0.01, batches=batches)
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
        got = {int(r["epoch"]): r["loss"] for r in provkg.run_query(
            store, "d3", {"training": training, "measure": "train_loss"}).as_dicts()}
        assert got == pytest.approx(_logged(metrics, "train_loss_epoch"), rel=1e-12)
        per_epoch = provkg.run_query(store, "q4", {"dataset": str(tmp_path / "data" / "train.pt")}).as_dicts()
        if batches == "none":
            assert per_epoch == []
        else:
            assert sorted((int(r["epoch"]), int(r["batches"])) for r in per_epoch) == \
                [(e, BATCHES_PER_EPOCH) for e in range(EPOCHS)]


def test_an_unreachable_sink_never_stops_training(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trainer, metrics = _train(tmp_path, run_id="away", lr=0.01, sink=f"http://127.0.0.1:{port}",
                              spool=str(tmp_path / "spool"), flush_timeout=1.0)
    assert trainer.state.finished and trainer.current_epoch == EPOCHS
    assert sorted(_logged(metrics, "train_loss_epoch")) == list(range(EPOCHS))
    assert any((tmp_path / "spool").rglob("*")), "undelivered events wait in the spool"


def test_a_hook_that_fails_inside_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    callback = ProvenanceCallback(sink="memory:", workflow=WORKFLOW, batches="every")
    assert callback.batches == "full"
    assert callback.on_train_start(object(), object()) is None  # no trainer at all: logged
    assert callback.on_train_batch_end(object(), object(), None, None, 0) is None
    assert "on_train_start failed" in caplog.text
