"""The small real trainings benchmarks/integrations.py times: one per framework, the same
work per batch (an MLP FEATURES -> HIDDEN -> 2 on BATCH_SIZE rows of synthetic data, CPU),
BATCHES batches per epoch, EPOCHS epochs.

Each ``train_*(callback_for)`` builds a fresh model, asks ``callback_for(framework)`` for the
callbacks to add (none for the baseline) and returns the seconds the fit itself took, wall
and process CPU. The scikit-learn one drives a ``partial_fit`` loop, recorded through the
callback's ``training`` block when one is given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # numpy's BLAS as torch: one thread
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

EPOCHS, BATCHES, BATCH_SIZE, FEATURES, HIDDEN = 3, 100, 128, 256, 1024

Callbacks = Callable[[str], list[Any]]
Timing = tuple[float, float]


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCHES * BATCH_SIZE, FEATURES, generator=g)
    return x, (x[:, 0] > 0).long()


def _timed(fit: Callable[[], object]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    fit()
    return time.perf_counter() - wall, time.process_time() - cpu


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 2))


def train_lightning(callbacks: Callbacks, before: Callable[[], object] | None = None) -> Timing:
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    class MLP(L.LightningModule):
        def __init__(self, lr: float = 0.05) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = _net()

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
            x, y = batch
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])

    torch.manual_seed(0)
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks("lightning"))
    if before is not None:
        before()
    loader = DataLoader(TensorDataset(*_data()), batch_size=BATCH_SIZE)
    return _timed(lambda: trainer.fit(MLP(), loader))


def train_keras(callbacks: Callbacks) -> Timing:
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(HIDDEN, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _data()
    return _timed(lambda: model.fit(x.numpy(), y.numpy(), batch_size=BATCH_SIZE, epochs=EPOCHS,
                                    verbose=0, shuffle=False, callbacks=callbacks("keras")))


class _Examples(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.x, self.y = _data()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class _Classifier(nn.Module):
    """An MLP as the HF Trainer takes a model: keyword inputs, a dict with its loss."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _net()

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


def train_transformers(callbacks: Callbacks, output: str) -> Timing:
    import transformers
    from transformers import PrinterCallback, Trainer, TrainingArguments

    transformers.set_seed(0)
    args = TrainingArguments(
        output_dir=output, num_train_epochs=EPOCHS, per_device_train_batch_size=BATCH_SIZE,
        learning_rate=0.05, logging_steps=1, report_to="none", save_strategy="no",
        use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0)
    trainer = Trainer(model=_Classifier(), args=args, train_dataset=_Examples(),
                      callbacks=callbacks("transformers"))
    trainer.remove_callback(PrinterCallback)  # disable_tqdm prints each step's logs instead
    return _timed(trainer.train)


def train_sklearn(callbacks: Callbacks) -> Timing:
    from sklearn.neural_network import MLPClassifier

    x, y = (a.numpy() for a in _data())
    clf = MLPClassifier(hidden_layer_sizes=(HIDDEN,), solver="sgd", learning_rate_init=0.05,
                        random_state=0)
    classes = np.unique(y)
    given = callbacks("sklearn")

    def loop() -> None:
        if not given:
            for _ in range(EPOCHS):
                for start in range(0, len(y), BATCH_SIZE):
                    clf.partial_fit(x[start:start + BATCH_SIZE], y[start:start + BATCH_SIZE],
                                    classes=classes)
            return
        with given[0].training(clf, x, y, dataset="data/bench.npz") as t:
            for _ in range(EPOCHS):
                for start in range(0, len(y), BATCH_SIZE):
                    t.partial_fit(x[start:start + BATCH_SIZE], y[start:start + BATCH_SIZE],
                                  classes=classes)
                t.epoch(loss=clf.loss_)

    return _timed(loop)
