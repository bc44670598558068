"""What the benchmark asks of the synthetic lifecycle (:mod:`provkg.bench.synthetic`), and
what the answers must be: parameters pointing at data that exists, and ground truth
recomputed from the generator's own numbers, independent of the mapper and the queries."""

from __future__ import annotations

import math
from dataclasses import dataclass

from provkg.bench.synthetic import (
    _SEISMIC,
    LEARNING_WORKFLOW,
    PAPER_SHAPE,
    Shape,
    _configs,
    _learning_groups,
    _preparations,
    final_model_location,
)
from provkg.term import mint_iri

__all__ = ["GroundTruth", "ground_truth", "query_parameters", "value_iri"]



def query_parameters(shape: Shape = PAPER_SHAPE) -> dict[str, object]:
    """A value for every parameter name the canned queries take, pointing at data that exists
    (the first learning workflow's model, dataset and slice range)."""
    prep = _preparations(shape)[0]
    return {
        "model": final_model_location(0),
        "data": final_model_location(0),
        "dataset": prep.dataset("train_set"),
        "slice_start": prep.slice_start,
        "slice_end": prep.slice_end,
        "training": "w1/training",
        "epoch": shape.epochs // 2,
        "workflow": LEARNING_WORKFLOW,
        "hyperparameter": "learning_rate",
        "value": _configs(shape)[0].learning_rate,
    }


@dataclass(frozen=True)
class GroundTruth:
    """Answers computed from the generator's own numbers, independent of mapper and queries."""

    #: final model location -> (least training batch loss, least validation batch loss) of
    #: the trainings on the queried dataset (``query_parameters``): Q7
    min_batch_loss: dict[str, tuple[float, float]]
    seismic_file: str                               # the SEG-Y location behind that dataset
    basin: str
    field: str
    slices: int
    slice_range: tuple[int, int]
    tile_size: int
    noise_threshold: float


def ground_truth(shape: Shape) -> GroundTruth:
    """Recompute the facts the tests check by walking the events (cheap at small scales)."""
    prep = _preparations(shape)[0]
    dataset = prep.dataset("train_set")
    trained_on = {ev["workflow_id"] for group in _learning_groups(shape) for ev in group.events
                  if ev.get("transformation") == "training" and ev["event"] == "begin"
                  and any(u.get("location") == dataset for u in ev.get("used", ()))}
    least: dict[str, dict[str, float]] = {}
    for group in _learning_groups(shape):
        for ev in group.events:
            tr = ev.get("transformation", "")
            if tr.endswith("_batch") and ev["event"] == "end" and ev["workflow_id"] in trained_on:
                run = ev["workflow_id"]
                stage = tr.removesuffix("_batch")
                loss = ev["generated"][0]["value"]
                mins = least.setdefault(run, {})
                mins[stage] = min(mins.get(stage, math.inf), loss)
    best = {final_model_location(int(run[1:]) - 1): (m["training"], m["validation"])
            for run, m in least.items()}
    s = _SEISMIC[prep.seismic]
    return GroundTruth(min_batch_loss=best, seismic_file=s.location, basin=s.basin,
                       field=s.field, slices=s.slices, slice_range=(prep.slice_start, prep.slice_end),
                       tile_size=prep.tile_size, noise_threshold=prep.noise_threshold)


def value_iri(location: str) -> str:
    """The IRI provkg mints for a value identified by its location (graph.md, Identity)."""
    return mint_iri("value", location)
