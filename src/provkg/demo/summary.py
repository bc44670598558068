"""What one demo run produced, as its own Python code measured it (``provkg-demo/run.json``).

The summary is the demo's ground truth: the report and the tests compare the knowledge
graph's answers with it, and a re-run with the same settings reuses it instead of training
again (``--fresh`` starts over).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TrainingSummary", "RunSummary", "summarize", "read_summary", "write_summary"]

FILE_NAME = "run.json"


@dataclass
class TrainingSummary:
    config: str
    run_id: str
    training_id: str
    model: str                      # location URI of the final model (its value id)
    hyperparameters: dict[str, Any]
    filter: str
    final_loss: float
    final_accuracy: float
    min_batch_loss: float
    epoch_losses: list[float]
    batch_losses: list[list[float]]
    batches_per_epoch: list[int]
    adaptations: list[list[float]]  # [epoch, old learning rate, new learning rate]
    validation: dict[str, float]
    validation_min_batch_loss: float
    evaluation: dict[str, float]
    checkpoints: list[str]
    layers: list[str]


@dataclass
class RunSummary:
    settings: dict[str, Any]
    kg_file: str
    file_name: str
    raw_file: str
    curated_file: str
    extracted: dict[str, Any]
    slice_start: int
    slice_end: int
    tile_size: int
    noise_threshold: float
    datasets: dict[str, str]        # split -> location URI
    dataset_tiles: dict[str, int]
    trainings: list[TrainingSummary] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def best(self) -> TrainingSummary:
        """The configuration whose model has the least final *training* loss (what q3 finds,
        and the model q1, q2 and the lineage picture follow)."""
        return min(self.trainings, key=lambda t: t.final_loss)

    @property
    def most_accurate(self) -> TrainingSummary:
        """The greatest final *training* accuracy: what d4-d6 and d8 rank the trainings by
        (a model can fit its training set and still test poorly: see
        :attr:`most_accurate_on_test`)."""
        return max(self.trainings, key=lambda t: t.final_accuracy)

    @property
    def least_accurate(self) -> TrainingSummary:
        """The least final *training* accuracy (d8's "worst")."""
        return min(self.trainings, key=lambda t: t.final_accuracy)

    @property
    def most_accurate_on_test(self) -> TrainingSummary:
        """The greatest accuracy on the held-out test set: the honest "most accurate"."""
        return max(self.trainings, key=lambda t: t.evaluation.get("accuracy", float("-inf")))

    @property
    def most_accurate_on_validation(self) -> TrainingSummary:
        """The greatest accuracy on the validation set."""
        return max(self.trainings, key=lambda t: t.validation.get("accuracy", float("-inf")))

    def training(self, config: str) -> TrainingSummary:
        return next(t for t in self.trainings if t.config == config)


def summarize(result: Any, *, settings: dict[str, Any], kg_file: str) -> RunSummary:
    """A :class:`RunSummary` of the example's ``LifecycleResult``."""
    prep = result.preparation
    summary = RunSummary(
        settings=settings, kg_file=kg_file, file_name=result.raw_path.name,
        raw_file=result.raw_uri, curated_file=result.curation.curated_uri,
        extracted=asdict(result.curation.extracted),
        slice_start=prep.params.slice_start, slice_end=prep.params.slice_end,
        tile_size=prep.params.tile_size, noise_threshold=prep.params.noise_threshold,
        datasets={k: d.uri for k, d in prep.datasets.items()},
        dataset_tiles={k: d.tiles for k, d in prep.datasets.items()})
    for t in result.trainings:
        c = t.config
        summary.trainings.append(TrainingSummary(
            config=c.name, run_id=t.run_id, training_id=t.training_id, model=t.model_uri,
            hyperparameters={"learning_rate": c.learning_rate, "alpha": c.alpha,
                             "momentum": c.momentum, "batch_size": c.batch_size,
                             "epochs": len(t.epoch_losses)},
            filter=c.filter, final_loss=t.final_loss, final_accuracy=t.epoch_accuracies[-1],
            min_batch_loss=t.min_batch_loss, epoch_losses=t.epoch_losses,
            batch_losses=t.batch_losses, batches_per_epoch=[len(b) for b in t.batch_losses],
            adaptations=[list(a) for a in t.adaptations], validation=t.validation,
            validation_min_batch_loss=min(t.validation_batch_losses),
            evaluation=t.evaluation, checkpoints=t.checkpoints, layers=t.layers))
    return summary


def write_summary(summary: RunSummary, out_dir: Path) -> Path:
    path = out_dir / FILE_NAME
    path.write_text(json.dumps(asdict(summary), indent=1), encoding="utf-8")
    return path


def read_summary(out_dir: Path) -> RunSummary | None:
    """The summary a previous run left in ``out_dir``, or None (missing or unreadable)."""
    path = out_dir / FILE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        trainings = [TrainingSummary(**t) for t in data.pop("trainings")]
        return RunSummary(**data, trainings=trainings)
    except (OSError, ValueError, TypeError, KeyError):
        return None
