"""What a framework callback costs a training: provkg's Lightning callback vs none vs MLflow autolog.

One small real training (a 2-layer MLP, 256 -> 1024 -> 2, on synthetic data, CPU, 100
batches of 128 per epoch, 3 epochs) is run in each mode, the modes interleaved round after round so a busy machine
weighs on all alike; wall and process CPU time (the callback's background delivery thread
counts: it is in this process) per epoch, as medians over the rounds, with each mode's
overhead against the baseline measured in the same round.

    .venv/bin/python benchmarks/integrations.py [--rounds 5] [--out benchmarks/results/integrations.md]

Target (issue "adoption"): <= 1 % overhead per epoch with batches="full", and cheaper than
MLflow autolog.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")

import lightning as L  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

EPOCHS, BATCHES, BATCH_SIZE, FEATURES, HIDDEN = 3, 100, 128, 256, 1024


class _MLP(L.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 2))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


def _data() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCHES * BATCH_SIZE, FEATURES, generator=g)
    y = (x[:, 0] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=BATCH_SIZE)


def _train(callbacks: list[L.Callback], before: Callable[[], object] | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one fit."""
    torch.manual_seed(0)
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks)
    if before is not None:
        before()
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.fit(_MLP(), _data())
    return time.perf_counter() - wall, time.process_time() - cpu


def _modes(work: Path) -> dict[str, Callable[[int], tuple[float, float]]]:
    from provkg.integrations.lightning import ProvenanceCallback

    def provkg(batches: str) -> Callable[[int], tuple[float, float]]:
        def run(i: int) -> tuple[float, float]:
            cb = ProvenanceCallback(sink=f"file:{work / f'events-{batches}-{i}'}", workflow="bench",
                                    run_id=f"{batches}-{i}", batches=batches, spool=str(work / "spool"))
            return _train([cb])
        return run

    def mlflow_autolog(i: int) -> tuple[float, float]:
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{work / 'mlflow.db'}")
        if mlflow.get_experiment_by_name("bench") is None:  # artifacts in the scratch folder
            mlflow.create_experiment("bench", artifact_location=(work / "artifacts").as_uri())
        mlflow.set_experiment("bench")

        def start() -> None:
            mlflow.pytorch.autolog(log_models=False, silent=True)
        try:
            return _train([], before=start)
        finally:
            mlflow.pytorch.autolog(disable=True)
            mlflow.end_run()

    return {"no callback": lambda i: _train([]), "provkg batches=full": provkg("full"),
            "provkg batches=summary": provkg("summary"), "mlflow autolog": mlflow_autolog}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        modes = _modes(Path(tmp))
        for run in modes.values():  # warm-up: imports, first-call costs
            run(-1)
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        overheads: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for i in range(args.rounds):
            base = modes["no callback"](i)
            times["no callback"].append(base)
            for name, run in modes.items():
                if name == "no callback":
                    continue
                got = run(i)
                times[name].append(got)
                overheads[name].append((got[0] / base[0] - 1, got[1] / base[1] - 1))
    lines = ["# Framework callbacks: what they cost a training", "",
             f"Lightning {L.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
             f"{os.cpu_count()} cores; MLP {FEATURES}-{HIDDEN}-2, {EPOCHS} epochs x {BATCHES} batches of "
             f"{BATCH_SIZE}, one torch "
             f"thread; {args.rounds} rounds, modes interleaved; medians. Overhead: against the "
             "no-callback fit of the same round.", "",
             "| mode | wall s per epoch | CPU s per epoch | wall overhead (range over rounds) | CPU overhead (range) |",
             "|---|---|---|---|---|"]
    for name in modes:
        wall = statistics.median(t[0] for t in times[name]) / EPOCHS
        cpu = statistics.median(t[1] for t in times[name]) / EPOCHS
        if overheads[name]:
            walls = sorted(o[0] * 100 for o in overheads[name])
            cpus = sorted(o[1] * 100 for o in overheads[name])
            extra = (f"{statistics.median(walls):+.1f} % ({walls[0]:+.0f} .. {walls[-1]:+.0f}) | "
                     f"{statistics.median(cpus):+.1f} % ({cpus[0]:+.0f} .. {cpus[-1]:+.0f})")
        else:
            extra = "- | -"
        lines.append(f"| {name} | {wall:.3f} | {cpu:.3f} | {extra} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
