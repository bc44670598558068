"""Phase 3, learning: a seismic facies classifier, trained, validated and evaluated per configuration.

One ``seismic-learning`` workflow run per hyperparameter configuration, captured against
``specs/learning.yaml``: a training stage (epochs, and batches inside epochs, each with its
loss), a checkpoint per epoch written with joblib and captured by reference, a scheduled
learning-rate step decay recorded as an ``adaptation`` task, then validation (with batch
sections) and evaluation on held-out inlines. The model is scikit-learn's ``MLPClassifier``
fed mini-batches through ``partial_fit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import joblib
import numpy as np
from sklearn.metrics import f1_score, log_loss
from sklearn.neural_network import MLPClassifier

from provkg import capture

__all__ = ["Config", "FILTERS", "TrainingResult", "train_configuration", "set_learning_rate"]

WORKFLOW = "seismic-learning"


def _tile_zscore(x: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=(1, 2), keepdims=True)
    return (x - mean) / (x.std(axis=(1, 2), keepdims=True) + 1e-6)


def _agc(x: np.ndarray) -> np.ndarray:
    # automatic gain control: each trace segment of a tile scaled to unit RMS
    return x / (np.sqrt(np.mean(x ** 2, axis=2, keepdims=True)) + 1e-6)


def _clip(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -3.0, 3.0) / 3.0


#: amplitude filters a configuration may apply to every tile (the ``filter`` attribute)
FILTERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tile-zscore": _tile_zscore,
    "agc": _agc,
    "clip-3": _clip,
}


@dataclass(frozen=True)
class Config:
    """One hyperparameter configuration."""

    name: str
    learning_rate: float
    alpha: float
    momentum: float
    batch_size: int
    hidden_layers: tuple[int, ...]
    filter: str
    decay_at_epoch: int | None = None   # a step decay takes effect at this epoch
    decay_factor: float = 0.3


@dataclass
class TrainingResult:
    config: Config
    run_id: str
    training_id: str
    model_uri: str
    model_path: Path
    epoch_losses: list[float] = field(default_factory=list)
    epoch_accuracies: list[float] = field(default_factory=list)
    batch_losses: list[list[float]] = field(default_factory=list)    # per epoch
    batch_seconds: list[list[float]] = field(default_factory=list)   # per epoch
    checkpoints: list[str] = field(default_factory=list)
    adaptations: list[tuple[int, float, float]] = field(default_factory=list)  # epoch, old, new
    validation_batch_losses: list[float] = field(default_factory=list)
    validation: dict[str, float] = field(default_factory=dict)
    evaluation: dict[str, float] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        return self.epoch_losses[-1]

    @property
    def min_batch_loss(self) -> float:
        return min(min(e) for e in self.batch_losses)


def set_learning_rate(model: MLPClassifier, value: float) -> None:
    """Change the learning rate of an MLP between ``partial_fit`` calls.

    scikit-learn builds the SGD optimizer on the first ``partial_fit`` and keeps it, so
    ``set_params`` alone would only take effect on a fresh fit: the optimizer's rate is
    updated too (``_optimizer`` is private; checked here so a future change fails loudly).
    """
    optimizer = getattr(model, "_optimizer", None)
    if optimizer is None or not hasattr(optimizer, "learning_rate"):
        raise RuntimeError("this scikit-learn MLPClassifier has no SGD optimizer to adapt")
    model.set_params(learning_rate_init=value)
    optimizer.learning_rate = value


def _load(path: Path, filter_name: str) -> tuple[np.ndarray, np.ndarray]:
    with h5py.File(path, "r") as h5:
        tiles = h5["tiles"][:]
        labels = h5["labels"][:].astype(np.int64)
    return FILTERS[filter_name](tiles).reshape(len(tiles), -1), labels


def _layers(model: MLPClassifier) -> list[str]:
    sizes = [model.n_features_in_, *model.hidden_layer_sizes, len(model.classes_)]
    names = ["input"] + [f"dense-relu-{i + 1}" for i in range(len(sizes) - 2)] + ["softmax"]
    return [f"{n}:{s}" for n, s in zip(names, sizes)]


def train_configuration(config: Config, *, datasets: dict[str, Any], classes: list[int],
                        epochs: int, out_dir: Path, sink: Any, run_id: str, seed: int = 0,
                        on_epoch: Callable[..., None] | None = None,
                        on_batch: Callable[[], None] | None = None,
                        agent: str | None = None) -> TrainingResult:
    """Train, validate and evaluate one configuration; events go to ``sink``.

    ``datasets`` maps ``train`` / ``validation`` / ``test`` to objects with ``uri`` and
    ``path``. ``on_epoch(workflow=, result=, epoch=)`` is called after each epoch's events
    were handed to the capture library (the demo flushes and queries the store there).
    """
    c = config
    x_train, y_train = _load(datasets["train"].path, c.filter)
    rng = np.random.default_rng(seed)
    train_set = capture.ref(datasets["train"].uri)
    model_dir = out_dir / c.name
    model_dir.mkdir(parents=True, exist_ok=True)
    hyper = {"learning_rate": c.learning_rate, "alpha": c.alpha, "momentum": c.momentum,
             "batch_size": c.batch_size, "epochs": epochs}
    with capture.workflow(WORKFLOW, sink=sink, run_id=run_id, agent=agent) as wf:
        with wf.task("training", used={"train_set": train_set, **hyper,
                                       "hidden_layers": list(c.hidden_layers),
                                       "filter": c.filter, "seed": seed}) as training:
            result = TrainingResult(c, wf.id, training.id, "", model_dir / "model.joblib")
            model = MLPClassifier(hidden_layer_sizes=c.hidden_layers, solver="sgd",
                                  learning_rate="constant", learning_rate_init=c.learning_rate,
                                  momentum=c.momentum, alpha=c.alpha, batch_size="auto",
                                  random_state=seed)  # batches are cut by the loop below
            lr = c.learning_rate
            for epoch in range(1, epochs + 1):
                if c.decay_at_epoch == epoch:
                    with wf.task("adaptation", parent=training, index=epoch,
                                 used={"learning_rate": lr, "technique": "StepDecay"}) as adapt:
                        new_lr = lr * c.decay_factor
                        set_learning_rate(model, new_lr)
                        adapt.generate(learning_rate=new_lr)
                    result.adaptations.append((epoch, lr, new_lr))
                    lr = new_lr
                _run_epoch(wf, training, model, x_train, y_train, classes, rng, epoch=epoch,
                           learning_rate=lr, result=result, model_dir=model_dir,
                           train_set=train_set, on_batch=on_batch)
                if on_epoch is not None:
                    on_epoch(workflow=wf, result=result, epoch=epoch)
            joblib.dump(model, result.model_path)
            model_ref = capture.ref(result.model_path.resolve().as_uri(),
                                    derived_from=[train_set, result.checkpoints[-1]])
            result.model_uri = model_ref.location or ""
            result.layers = _layers(model)
            training.generate(model=model_ref, layers=result.layers, loss=result.final_loss,
                              accuracy=result.epoch_accuracies[-1])
        _validate(wf, model, model_ref, datasets["validation"], c, classes, result,
                  depends_on=training.id)
        _evaluate(wf, model, model_ref, datasets["test"], c, classes, result,
                  depends_on=training.id)
    return result


def _run_epoch(wf: Any, training: Any, model: MLPClassifier, x: np.ndarray, y: np.ndarray,
               classes: list[int], rng: np.random.Generator, *, epoch: int, learning_rate: float,
               result: TrainingResult, model_dir: Path, train_set: Any,
               on_batch: Callable[[], None] | None) -> None:
    order = rng.permutation(len(x))
    size = result.config.batch_size
    losses, seconds = [], []
    with wf.task("epoch", parent=training, index=epoch, used={"learning_rate": learning_rate}) as ep:
        for number, start in enumerate(range(0, len(order), size), 1):
            rows = order[start:start + size]
            with wf.task("batch", parent=ep, index=number) as batch:
                began = time.perf_counter()
                model.partial_fit(x[rows], y[rows], classes=classes)
                seconds.append(time.perf_counter() - began)
                losses.append(float(model.loss_))
                batch.generate(loss=losses[-1])
            if on_batch is not None:
                on_batch()
        accuracy = float(model.score(x, y))
        checkpoint = model_dir / f"epoch-{epoch:03d}.joblib"
        joblib.dump(model, checkpoint)
        checkpoint_ref = capture.ref(checkpoint.resolve().as_uri(), derived_from=[train_set])
        ep.generate(loss=float(np.mean(losses)), accuracy=accuracy, checkpoint=checkpoint_ref)
    result.epoch_losses.append(float(np.mean(losses)))
    result.epoch_accuracies.append(accuracy)
    result.batch_losses.append(losses)
    result.batch_seconds.append(seconds)
    result.checkpoints.append(checkpoint_ref.location or "")


def _validate(wf: Any, model: MLPClassifier, model_ref: Any, dataset: Any, c: Config,
              classes: list[int], result: TrainingResult, *, depends_on: str) -> None:
    x, y = _load(dataset.path, c.filter)
    with wf.task("validation", used={"model": model_ref, "validation_set": capture.ref(dataset.uri)},
                 dependencies=[depends_on]) as validation:
        with wf.task("validation_epoch", parent=validation, index=1) as epoch:
            for number, start in enumerate(range(0, len(x), c.batch_size), 1):
                with wf.task("validation_batch", parent=epoch, index=number) as batch:
                    xb, yb = x[start:start + c.batch_size], y[start:start + c.batch_size]
                    loss = float(log_loss(yb, model.predict_proba(xb), labels=classes))
                    batch.generate(loss=loss)
                result.validation_batch_losses.append(loss)
        result.validation = {
            "loss": float(log_loss(y, model.predict_proba(x), labels=classes)),
            "accuracy": float(model.score(x, y)),
        }
        validation.generate(**result.validation)


def _evaluate(wf: Any, model: MLPClassifier, model_ref: Any, dataset: Any, c: Config,
              classes: list[int], result: TrainingResult, *, depends_on: str) -> None:
    x, y = _load(dataset.path, c.filter)
    with wf.task("evaluation", used={"model": model_ref, "test_set": capture.ref(dataset.uri)},
                 dependencies=[depends_on]) as evaluation:
        predicted = model.predict(x)
        result.evaluation = {
            "accuracy": float(np.mean(predicted == y)),
            "f1_macro": float(f1_score(y, predicted, labels=classes, average="macro",
                                       zero_division=0)),
            "loss": float(log_loss(y, model.predict_proba(x), labels=classes)),
        }
        evaluation.generate(**result.evaluation)
