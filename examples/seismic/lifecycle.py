"""The whole seismic lifecycle: acquisition stand-in, curation, preparation, learning.

``run_lifecycle`` is what ``provkg demo`` calls. It knows nothing about stores or queries:
its workflows only talk to ``provkg.capture`` through the sink they are given, exactly like a
scientist's scripts would. It returns what its own Python code computed (file names, slice
ranges, losses, the best configuration), so the demo and the tests can check the knowledge
graph's answers against it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .cube import FACIES, SurveyGeometry, synthesize_cube, write_segy
from .curation import Annotation, CurationResult, curate
from .learning import Config, TrainingResult, train_configuration
from .preparation import PreparationParams, PreparationResult, prepare

__all__ = ["Sizes", "DEFAULT", "SMALL", "configurations", "Progress", "LifecycleResult",
           "run_lifecycle", "SurveyGeometry", "Annotation", "FACIES"]


@dataclass(frozen=True)
class Sizes:
    """How much work the demo does (``--small`` for tests, ``--epochs`` to override)."""

    epochs: int = 6
    slice_start: int = 1008
    slice_end: int = 1039
    tile_size: int = 16
    tile_stride: int = 8
    noise_threshold: float = 0.25


DEFAULT = Sizes()
SMALL = Sizes(epochs=2, slice_start=1012, slice_end=1031, tile_stride=16)


def configurations(epochs: int) -> list[Config]:
    """The three hyperparameter configurations; the second decays its rate mid-training."""
    return [
        Config("mlp64-zscore", learning_rate=0.05, alpha=1e-4, momentum=0.9, batch_size=32,
               hidden_layers=(64,), filter="tile-zscore"),
        Config("mlp128x32-agc", learning_rate=0.1, alpha=1e-3, momentum=0.9, batch_size=64,
               hidden_layers=(128, 32), filter="agc", decay_at_epoch=max(2, epochs // 2 + 1)),
        Config("mlp32-clip", learning_rate=0.01, alpha=1e-4, momentum=0.5, batch_size=128,
               hidden_layers=(32,), filter="clip-3"),
    ]


class Progress:
    """Callbacks the lifecycle reports through (the demo draws them with rich)."""

    def phase(self, name: str, description: str, total: int) -> None:
        """A phase starts; ``total`` steps will follow."""

    def advance(self, steps: int = 1) -> None:
        """Some steps of the current phase are done."""

    def note(self, text: str) -> None:
        """A line worth showing."""

    def epoch_done(self, *, workflow: Any, result: TrainingResult, epoch: int) -> None:
        """An epoch's events were handed to the capture library (online analysis hook)."""


@dataclass
class LifecycleResult:
    """Ground truth from the lifecycle's own Python code."""

    raw_path: Path
    raw_uri: str
    interpretation_path: Path
    curation: CurationResult
    preparation: PreparationResult
    trainings: list[TrainingResult] = field(default_factory=list)
    sizes: Sizes = DEFAULT

    @property
    def best(self) -> TrainingResult:
        """The configuration whose model has the least final training loss."""
        return min(self.trainings, key=lambda t: t.final_loss)


def run_lifecycle(*, out_dir: Path, geometry: SurveyGeometry, annotation: Annotation,
                  file_name: str, survey_name: str, open_sink: Callable[[], Any],
                  sizes: Sizes = DEFAULT, progress: Progress | None = None,
                  run_prefix: str = "seismic-demo", seed: int = 7,
                  agent: str | None = None) -> LifecycleResult:
    """Run the three phases; every workflow gets a sink from ``open_sink()``."""
    progress = progress or Progress()
    out_dir.mkdir(parents=True, exist_ok=True)

    progress.phase("acquisition", "synthetic cube -> SEG-Y", 2)
    cube = synthesize_cube(geometry, seed=seed)
    raw_path = write_segy(cube, out_dir / "raw" / file_name, survey_name=survey_name)
    progress.advance()
    interpretation_path = out_dir / "interpretation" / "facies.npy"
    interpretation_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(interpretation_path, cube.facies)
    progress.advance()
    progress.note(f"wrote {raw_path.name}: {geometry.inlines} inlines x {geometry.crosslines} "
                  f"crosslines x {geometry.samples} samples @ {geometry.sample_interval_ms} ms")

    progress.phase("curation", "segyio geometry, KG links, despiking", 1)
    curation = curate(raw_path, annotation=annotation, out_dir=out_dir / "curated",
                      sink=open_sink(), crs=geometry.crs, run_id=f"{run_prefix}-curation",
                      agent=agent)
    progress.advance()
    progress.note(f"{curation.extracted.number_of_slices} slices, inlines "
                  f"{curation.extracted.inline_start}-{curation.extracted.inline_end}, "
                  f"{curation.spikes_removed} spikes removed")

    progress.phase("preparation", "slices -> tiles -> HDF5 sets", 1)
    params = PreparationParams(sizes.slice_start, sizes.slice_end, sizes.tile_size,
                               sizes.tile_stride, sizes.noise_threshold)
    preparation = prepare(curation.curated_path, interpretation_path=interpretation_path,
                          params=params, facies=FACIES, out_dir=out_dir / "prepared",
                          sink=open_sink(), run_id=f"{run_prefix}-preparation", agent=agent)
    progress.advance()
    sets = ", ".join(f"{d.split} {d.tiles}" for d in preparation.datasets.values())
    progress.note(f"{preparation.tiles_kept} tiles kept, {preparation.tiles_dropped} dropped "
                  f"as low-signal; {sets}")

    result = LifecycleResult(raw_path, raw_path.resolve().as_uri(), interpretation_path,
                             curation, preparation, sizes=sizes)
    configs = configurations(sizes.epochs)
    train_tiles = preparation.datasets["train"].tiles
    batches = sum(-(-train_tiles // c.batch_size) for c in configs) * sizes.epochs
    progress.phase("learning", f"{len(configs)} MLP configurations", batches)
    for config in configs:
        training = train_configuration(
            config, datasets=preparation.datasets, classes=sorted(FACIES), epochs=sizes.epochs,
            out_dir=out_dir / "models", sink=open_sink(),
            run_id=f"{run_prefix}-{config.name}", seed=seed, agent=agent,
            on_epoch=progress.epoch_done, on_batch=progress.advance)
        result.trainings.append(training)
        progress.note(f"{config.name}: final loss {training.final_loss:.4f}, test accuracy "
                      f"{training.evaluation['accuracy']:.3f}")
    return result


def with_epochs(sizes: Sizes, epochs: int | None) -> Sizes:
    """``sizes`` with another epoch count (``--epochs``)."""
    return sizes if epochs is None else replace(sizes, epochs=epochs)
