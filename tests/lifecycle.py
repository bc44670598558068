"""A small scientific-ML lifecycle with known contents, captured for real, for query tests.

``build_lifecycle()`` runs three workflows through ``provkg.capture`` (a memory sink):
curation (a SEG-Y file's coordinates and slice count), preparation (two training sets cut
from two SEG-Y files with tile size, noise threshold and a slice range) and learning
(three trainings with different hyperparameters, epochs and batches, a validation and an
evaluation stage, learning-rate adaptations, a grayscale filter). Event times are then set
to the planned clock (``PlannedTimes``), chosen to cross a day, a month, a year and a leap
day, so durations are known exactly. The returned :class:`Lifecycle` holds the events, the
specs, the domain KG triples and the plan, from which tests compute expected answers in
plain Python.

``load_lifecycle(store, lc, schema=...)`` maps the events with the real mapper and writes
the triples (and the domain KG) into a store. The service and demo tests may reuse both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from provkg import capture
from provkg.spec import Spec, parse_spec
from provkg.term import Triple, iri, literal
from provkg.vocab import GEO, RDF, RDFS, SEIS

__all__ = ["Lifecycle", "TrainingPlan", "build_lifecycle", "load_lifecycle", "KG"]

KG = "https://example.org/kg/"

SPECS = {
    "seismic-curation": """
workflow: seismic-curation
phase: curation
transformations:
  - name: extract
    used: [{name: segy, role: data_reference}]
    generated:
      - {name: coordinates, concept: seis:coordinates}
      - {name: slices, concept: seis:numberOfSlices}
""",
    "seismic-preparation": """
workflow: seismic-preparation
phase: preparation
transformations:
  - name: make_dataset
    used:
      - {name: segy, role: data_reference}
      - {name: tile_size, concept: seis:tileSize}
      - {name: noise_threshold, concept: seis:noiseThreshold}
      - {name: slice_start, concept: seis:sliceStart}
      - {name: slice_end, concept: seis:sliceEnd}
    generated: [{name: train_set, role: dataset}]
""",
    "flower-training": """
workflow: flower-training
phase: learning
transformations:
  - name: training
    kind: training
    used:
      - {name: learning_rate, role: hyperparameter}
      - {name: optimizer, role: hyperparameter}
      - {name: dropout, role: hyperparameter}
      - {name: train_set, role: dataset}
      - {name: filter}
      - {name: architecture, role: model_schema}
      - {name: conv_layers, role: model_schema}
    generated:
      - {name: model, role: model}
      - {name: loss, role: evaluation_measure}
      - {name: accuracy, role: evaluation_measure}
  - name: epoch
    kind: section
    of: training
    generated: [{name: loss, role: evaluation_measure}, {name: accuracy, role: evaluation_measure}]
  - name: batch
    kind: section
    of: epoch
    generated: [{name: loss, role: evaluation_measure}]
  - name: adaptation
    kind: adaptation
    used: [{name: learning_rate, role: hyperparameter}, {name: technique}]
    generated: [{name: learning_rate, role: hyperparameter}]
  - name: validation
    kind: validation
    used: [{name: model, role: model}]
    generated: [{name: loss, role: evaluation_measure}, {name: accuracy, role: evaluation_measure}]
  - name: val_epoch
    kind: section
    of: validation
  - name: val_batch
    kind: section
    of: val_epoch
    generated: [{name: loss, role: evaluation_measure}]
  - name: evaluation
    kind: evaluation
    used: [{name: model, role: model}]
    generated: [{name: accuracy, role: evaluation_measure}, {name: loss, role: evaluation_measure}]
""",
}


@dataclass
class Timed:
    index: int
    begin: datetime
    end: datetime
    measures: dict[str, float]
    id: str = ""
    children: list[Timed] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return (self.end - self.begin).total_seconds()


@dataclass
class TrainingPlan:
    key: str
    hyperparameters: dict[str, object]
    dataset: str  # location URI of the training set
    model: str  # location URI of the model
    measures: dict[str, float]  # loss, accuracy the training generates
    start: datetime
    filter: str | None = None
    schema: dict[str, object] = field(default_factory=dict)  # model-schema entries
    adaptations: list[tuple[int, str, float]] = field(default_factory=list)  # (epoch, technique, new lr)
    epoch_measures: list[dict[str, float]] = field(default_factory=list)
    batch_losses: list[list[float]] = field(default_factory=list)  # per epoch
    validation: dict[str, Any] | None = None  # {"measures": {...}, "batch_losses": [[...]]}
    evaluation: dict[str, float] | None = None
    id: str = ""
    epochs: list[Timed] = field(default_factory=list)
    validation_epochs: list[Timed] = field(default_factory=list)


@dataclass
class DatasetPlan:
    location: str
    segy: str  # location of the SEG-Y file
    tile_size: int
    noise_threshold: float
    slice_start: int
    slice_end: int


@dataclass
class SegyPlan:
    location: str
    kg_file: str
    basin: str
    field: str
    kg_slices: int
    kg_wkt: str
    captured: dict[str, object] | None  # {"coordinates": ..., "slices": ...} or None


@dataclass
class Lifecycle:
    events: list[dict[str, Any]]
    specs: dict[str, Spec]
    kg: list[Triple]
    segys: list[SegyPlan]
    datasets: list[DatasetPlan]
    trainings: list[TrainingPlan]

    def training(self, key: str) -> TrainingPlan:
        return next(t for t in self.trainings if t.key == key)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _plan() -> tuple[list[SegyPlan], list[DatasetPlan], list[TrainingPlan]]:
    segys = [
        SegyPlan("file:///raw/f3.segy", KG + "f3-segy", "North Sea Basin", "F3 Block", 999,
                 "POLYGON((4.1 54.9, 4.3 54.9, 4.3 55.0, 4.1 54.9))",
                 {"coordinates": "POINT(4.2 54.95)", "slices": 651}),
        SegyPlan("file:///raw/campos.segy", KG + "campos-segy", "Campos Basin", "Marlim", 120,
                 "POINT(-40.1 -22.4)", None),
    ]
    datasets = [DatasetPlan("file:///data/train-a.h5", segys[0].location, 64, 0.1, 100, 300),
                DatasetPlan("file:///data/train-b.h5", segys[1].location, 32, 0.25, 0, 50)]
    t1 = TrainingPlan(
        "t1", {"learning_rate": 0.001, "optimizer": "adam", "dropout": 0.4}, datasets[0].location,
        "file:///models/t1.pt", {"loss": 0.9, "accuracy": 0.59}, _utc("2024-02-28T23:59:58"),
        schema={"architecture": "AlexNet", "conv_layers": 5},
        epoch_measures=[{"loss": 3.5, "accuracy": 0.2}, {"loss": 2.5, "accuracy": 0.4},
                        {"loss": 1.25, "accuracy": 0.59}],
        batch_losses=[[3.75, 3.25], [2.75, 2.125], [1.5, 1.0625]],
        validation={"measures": {"loss": 1.1, "accuracy": 0.55}, "batch_losses": [[1.3, 1.2]]},
        evaluation={"accuracy": 0.57, "loss": 0.05})
    t2 = TrainingPlan(
        "t2", {"learning_rate": 0.0005, "optimizer": "sgd", "dropout": 0.7}, datasets[0].location,
        "file:///models/t2.pt", {"loss": 1.4, "accuracy": 0.37}, _utc("2024-12-31T23:59:59"),
        filter="grayscale", schema={"architecture": "AlexNet", "conv_layers": 4},
        epoch_measures=[{"loss": 2.0, "accuracy": 0.3}, {"loss": 1.5, "accuracy": 0.37}],
        batch_losses=[[2.25, 1.875], [1.625, 1.4375]],
        validation={"measures": {"loss": 1.6, "accuracy": 0.33}, "batch_losses": [[1.7, 1.65]]})
    t3 = TrainingPlan(
        "t3", {"learning_rate": 0.002, "optimizer": "adam", "dropout": 0.4}, datasets[1].location,
        "file:///models/t3.pt", {"loss": 0.7, "accuracy": 0.65}, _utc("2024-03-31T23:59:59.5"),
        filter="grayscale", schema={"architecture": "VGG", "conv_layers": 8},
        adaptations=[(1, "LearningRateScheduler", 0.001), (2, "LearningRateScheduler", 0.00025)],
        epoch_measures=[{"loss": 1.5, "accuracy": 0.5}, {"loss": 1.0, "accuracy": 0.6},
                        {"loss": 0.75, "accuracy": 0.65}],
        batch_losses=[[1.75, 1.25], [1.125, 0.875], [0.8125, 0.6875]])
    return segys, datasets, [t1, t2, t3]


class PlannedTimes:
    """Begin / end times by event id, applied to the captured events afterwards."""

    def __init__(self) -> None:
        self.times: dict[str, tuple[datetime, datetime]] = {}

    def set(self, task_id: str, begin: datetime, end: datetime) -> None:
        self.times[task_id] = (begin, end)

    def apply(self, events: list[dict[str, Any]]) -> None:
        for ev in events:
            if ev["id"] in self.times:
                begin, end = self.times[ev["id"]]
                ev["time"] = (begin if ev["event"] == "begin" else end).timestamp()


def _sections(wf: capture.Workflow, clock: PlannedTimes, parent: capture.Task, name: str,
              child: str | None, losses: list[list[float]], start: datetime,
              measures: list[dict[str, float]] | None = None) -> tuple[list[Timed], datetime]:
    """Epochs (with batches) under ``parent``: batch b of epoch e lasts 0.5 + 0.25 b + 0.125 e s."""
    from datetime import timedelta

    out, now = [], start
    for e, batch_losses in enumerate(losses):
        epoch_begin = now
        with wf.task(name, parent=parent, index=e) as epoch:
            timed = Timed(e, epoch_begin, epoch_begin, dict(measures[e]) if measures else {},
                          id=epoch.id)
            for b, loss in enumerate(batch_losses):
                with wf.task(child, parent=epoch, index=b) as batch:  # type: ignore[arg-type]
                    batch.generate(loss=loss)
                length = timedelta(seconds=0.5 + 0.25 * b + 0.125 * e)
                clock.set(batch.id, now, now + length)
                timed.children.append(Timed(b, now, now + length, {"loss": loss}, id=batch.id))
                now += length + timedelta(seconds=0.0625)
            if measures:
                epoch.generate(**measures[e])
        now += timedelta(seconds=0.5)
        timed.end = now
        clock.set(epoch.id, epoch_begin, now)
        out.append(timed)
        now += timedelta(seconds=0.25)
    return out, now


def build_lifecycle() -> Lifecycle:
    """Capture the lifecycle (see the module docstring) and return its events and plan."""
    from datetime import timedelta

    segys, datasets, trainings = _plan()
    sink = capture.MemorySink()
    clock = PlannedTimes()
    t0 = _utc("2024-01-15T08:00:00")

    with capture.workflow("seismic-curation", sink=sink, run_id="curation-1") as wf:
        for s in segys:
            if s.captured is None:
                continue
            with wf.task("extract", used={"segy": capture.ref(s.location, domain=s.kg_file)}) as t:
                t.generate(**s.captured)
            clock.set(t.id, t0, t0 + timedelta(seconds=3))
    clock.set("curation-1", t0, t0 + timedelta(seconds=4))

    with capture.workflow("seismic-preparation", sink=sink, run_id="preparation-1") as wf:
        for d in datasets:
            segy = next(s for s in segys if s.location == d.segy)
            used = {"segy": capture.ref(d.segy, domain=segy.kg_file), "tile_size": d.tile_size,
                    "noise_threshold": d.noise_threshold, "slice_start": d.slice_start,
                    "slice_end": d.slice_end}
            with wf.task("make_dataset", used=used) as t:
                t.generate(train_set=capture.ref(d.location))
            clock.set(t.id, t0 + timedelta(minutes=1), t0 + timedelta(minutes=2))
    clock.set("preparation-1", t0 + timedelta(minutes=1), t0 + timedelta(minutes=3))

    with capture.workflow("flower-training", sink=sink, run_id="learning-1") as wf:
        for plan in trainings:
            used = {**plan.hyperparameters, "train_set": capture.ref(plan.dataset), **plan.schema}
            if plan.filter is not None:
                used["filter"] = plan.filter
            with wf.task("training", used=used) as training:
                plan.id = training.id
                plan.epochs, now = _sections(wf, clock, training, "epoch", "batch",
                                             plan.batch_losses, plan.start, plan.epoch_measures)
                lr = plan.hyperparameters["learning_rate"]
                for epoch, technique, new_lr in plan.adaptations:
                    with wf.task("adaptation", parent=training, index=epoch,
                                 used={"learning_rate": lr, "technique": technique}) as a:
                        a.generate(learning_rate=new_lr)
                    clock.set(a.id, plan.epochs[epoch].begin, plan.epochs[epoch].begin)
                    lr = new_lr
                training.generate(model=capture.ref(plan.model), **plan.measures)
            clock.set(training.id, plan.start, now)
            model = capture.ref(plan.model)
            if plan.validation:
                with wf.task("validation", used={"model": model}) as val:
                    plan.validation_epochs, end = _sections(
                        wf, clock, val, "val_epoch", "val_batch", plan.validation["batch_losses"],
                        now)
                    val.generate(**plan.validation["measures"])
                clock.set(val.id, now, end)
                now = end
            if plan.evaluation:
                with wf.task("evaluation", used={"model": model}) as ev:
                    ev.generate(**plan.evaluation)
                clock.set(ev.id, now, now + timedelta(seconds=2))
    clock.set("learning-1", trainings[0].start, _utc("2025-01-02T00:00:00"))

    events = [dict(e) for e in sink.events]
    clock.apply(events)
    specs = {name: parse_spec(text) for name, text in SPECS.items()}
    return Lifecycle(events, specs, _kg(segys), segys, datasets, trainings)


def _kg(segys: list[SegyPlan]) -> list[Triple]:
    """The domain KG: each SEG-Y file's survey, basin, field and geometry."""
    out: list[Triple] = []
    for s in segys:
        f, survey = iri(s.kg_file), iri(s.kg_file + "/survey")
        basin, fld, geom = (iri(KG + "basin/" + s.basin.replace(" ", "_")),
                            iri(KG + "field/" + s.field.replace(" ", "_")), iri(s.kg_file + "/geom"))
        out += [(f, iri(RDF.type), iri(SEIS.SegyFile)), (f, iri(SEIS.survey), survey),
                (f, iri(SEIS.numberOfSlices), literal(s.kg_slices)),
                (survey, iri(RDF.type), iri(SEIS.Survey)), (survey, iri(SEIS.basin), basin),
                (survey, iri(SEIS.field), fld), (survey, iri(GEO.hasGeometry), geom),
                (geom, iri(GEO.asWKT), literal(s.kg_wkt, GEO.wktLiteral)),
                (basin, iri(RDF.type), iri(SEIS.Basin)), (basin, iri(RDFS.label), literal(s.basin)),
                (fld, iri(RDF.type), iri(SEIS.Field)), (fld, iri(RDFS.label), literal(s.field)),
                (fld, iri(SEIS.basin), basin)]
    return out


def load_lifecycle(store: Any, lc: Lifecycle, *, schema: str = "typed") -> int:
    """Map ``lc`` with the real mapper into ``store`` (plus the domain KG); triples written."""
    from provkg.mapper import map_events, map_spec

    triples: list[Triple] = []
    for spec in lc.specs.values():
        triples.extend(map_spec(spec, schema=schema))
    triples.extend(map_events(lc.events, lc.specs, schema=schema))
    triples.extend(lc.kg)
    return store.add(triples)
