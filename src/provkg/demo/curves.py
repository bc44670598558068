"""What a configuration's figure plots, read back from the knowledge graph.

Everything here comes from the store, not from the training code's memory: batch and epoch
losses, epoch accuracies, the learning-rate adaptations (the epoch each took effect in), and
the validation and test measures of the final model. :mod:`provkg.demo.plots` draws exactly
these numbers, so a test can check the figure by checking them.

x positions: epoch ``e`` is drawn at ``x = e``; its batches spread over ``(e - 0.5, e + 0.5]``.
An adaptation recorded with index ``e`` (it took effect before epoch ``e``'s first batch, as
the d6 query reports it) is marked at ``x = e``, the epoch the report's tables name.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from provkg.demo.summary import TrainingSummary
from provkg.store import Store
from provkg.term import iri, mint_iri

__all__ = ["Adaptation", "TrainingCurves", "training_curves", "loss_limits"]

_PREFIXES = """\
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX provkg: <https://w3id.org/provkg/ns#>
PREFIX provml: <https://w3id.org/provkg/provml#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
"""

_BATCH_LOSSES = _PREFIXES + """\
SELECT ?epoch ?batch ?loss WHERE {
  VALUES ?training { TRAINING }
  ?e prov:wasInformedBy ?training ; provkg:index ?epoch .
  ?b prov:wasInformedBy ?e ; provkg:index ?batch .
  ?v prov:wasGeneratedBy ?b ; prov:wasDerivedFrom ?attr ; prov:value ?loss .
  ?attr rdfs:label "loss" .
} ORDER BY ?epoch ?batch"""

# what the training's direct children generated: its epochs (loss, accuracy), its adaptations
# (the new learning rate), its validation and its evaluation on the test set
_CHILD_MEASURES = _PREFIXES + """\
SELECT ?kind ?index ?name ?value WHERE {
  VALUES ?training { TRAINING }
  VALUES (?type ?kind) { (provml:TrainingSectionExecution "epoch")
                         (provkg:AdaptationExecution "adaptation")
                         (provml:ValidationExecution "validation")
                         (provml:EvaluationExecution "test") }
  ?task prov:wasInformedBy ?training ; a ?type .
  OPTIONAL { ?task provkg:index ?index }
  ?v prov:wasGeneratedBy ?task ; prov:wasDerivedFrom ?attr ; prov:value ?value .
  ?attr rdfs:label ?name .
} ORDER BY ?kind ?index ?name"""

# the learning rate an adaptation replaced (what it used)
_ADAPTED_FROM = _PREFIXES + """\
SELECT ?index ?value WHERE {
  VALUES ?training { TRAINING }
  ?task prov:wasInformedBy ?training ; a provkg:AdaptationExecution ; provkg:index ?index ;
        prov:used ?u .
  ?u prov:wasDerivedFrom ?attr ; prov:value ?value . ?attr rdfs:label "learning_rate" .
}"""


@dataclass(frozen=True)
class Adaptation:
    """A learning-rate change that took effect at ``epoch`` (drawn at ``x == epoch``)."""

    epoch: int
    old_rate: float | None
    new_rate: float

    @property
    def x(self) -> float:
        return float(self.epoch)

    @property
    def label(self) -> str:
        old = "?" if self.old_rate is None else f"{self.old_rate:.3g}"
        return f"epoch {self.epoch}: learning rate {old} → {self.new_rate:.3g}"


@dataclass
class TrainingCurves:
    """One configuration's plotted numbers (x of an epoch = its index, from 1)."""

    config: str
    filter: str
    batch_x: list[float] = field(default_factory=list)
    batch_loss: list[float] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)
    epoch_accuracy: list[float] = field(default_factory=list)
    adaptations: list[Adaptation] = field(default_factory=list)
    validation: dict[str, float] = field(default_factory=dict)   # loss, accuracy
    test: dict[str, float] = field(default_factory=dict)         # loss, accuracy, f1_macro

    @property
    def last_epoch(self) -> int:
        return max(self.epochs, default=1)

    def losses(self) -> list[float]:
        """Every loss the loss panel draws (for a y-range shared by all configurations)."""
        extra = [d["loss"] for d in (self.validation, self.test) if "loss" in d]
        return [*self.batch_loss, *self.epoch_loss, *extra]


def training_curves(store: Store, training: TrainingSummary) -> TrainingCurves:
    """The numbers of ``training``'s figure, as the store holds them."""
    node = iri(mint_iri("task", training.training_id))
    curves = TrainingCurves(training.config, training.filter)
    per_epoch: dict[int, list[float]] = defaultdict(list)
    for epoch, _batch, loss in store.select(_BATCH_LOSSES.replace("TRAINING", node)).rows:
        per_epoch[_number(epoch, int)].append(_number(loss, float))
    for epoch in sorted(per_epoch):
        losses = per_epoch[epoch]
        for i, loss in enumerate(losses):
            curves.batch_x.append(epoch - 0.5 + (i + 1) / len(losses))
            curves.batch_loss.append(loss)
    epochs: dict[int, dict[str, float]] = defaultdict(dict)
    new_rates: dict[int, float] = {}
    for kind, index, name, value in store.select(_CHILD_MEASURES.replace("TRAINING", node)).rows:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue  # a checkpoint reference, not a measure
        if kind == "epoch" and index is not None:
            epochs[_number(index, int)][str(name)] = float(value)
        elif kind == "adaptation" and index is not None and name == "learning_rate":
            new_rates[_number(index, int)] = float(value)
        elif kind == "validation":
            curves.validation[str(name)] = float(value)
        elif kind == "test":
            curves.test[str(name)] = float(value)
    for epoch in sorted(epochs):
        curves.epochs.append(epoch)
        curves.epoch_loss.append(epochs[epoch].get("loss", float("nan")))
        curves.epoch_accuracy.append(epochs[epoch].get("accuracy", float("nan")))
    old_rates = {_number(i, int): _number(v, float)
                 for i, v in store.select(_ADAPTED_FROM.replace("TRAINING", node)).rows}
    curves.adaptations = [Adaptation(e, old_rates.get(e), new_rates[e]) for e in sorted(new_rates)]
    return curves


def _number(value: object, kind: type[int] | type[float]) -> Any:
    """A number of a result row as ``kind`` (the store gives numeric literals as numbers)."""
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"not a number in the provenance graph: {value!r}")
    return kind(value)


def loss_limits(all_curves: list[TrainingCurves]) -> tuple[float, float]:
    """One log-scale y-range for the loss panels of every configuration, so curves of
    different configurations compare by eye; a little room above and below."""
    positive = [v for c in all_curves for v in c.losses() if v > 0]
    if not positive:
        return (0.1, 10.0)
    return (min(positive) / 1.3, max(positive) * 1.3)
