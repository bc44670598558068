"""A seeded, deterministic stand-in for the PROV-ML paper's synthetic datasets (section 5.4).

Eight parallel learning workflows, each with a training, a validation and an evaluation
stage; every stage runs ``epochs`` epoch sections of ``*_batches`` batch sections. Each
batch records its loss (and, in training, its hyperparameters); each training epoch uses
hyperparameters and generates a model (a file by reference) and its evaluations; the
validation and evaluation epochs use that model and evaluate it. The learning workflows
each train on their own dataset, which a preparation run cut from one seismic cube (a SEG-Y
file) as a set of slices of the same length, as in the paper's use case ("the trainer
selects up to 8 different sets of seismic slices", section 5.3); so a query about one
dataset aggregates one workflow's 60,000 training batches, the paper's section 5.4 figure.
A curation run extracted each file's metadata; the file's value denotes a resource of a
small seismic domain KG (survey, field, basin, geometry). One more preparation run, over
a second file, is a decoy no training uses.

Events are plain wire-format v1 dicts (``provkg.events``), built fast, grouped so that
the triples of one group never repeat the triples of another ``bulk`` group: the mapper
can be fed group by group and duplicates removed within a group only.

The paper's 10,168,890 triples per dataset is met at ``scale=1`` with the shape
:data:`PAPER_SHAPE` (exact counts are reported by ``provkg bench schemas``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

__all__ = [
    "CURATION_WORKFLOW",
    "LEARNING_WORKFLOW",
    "PAPER_SHAPE",
    "PAPER_TRIPLES",
    "PREPARATION_WORKFLOW",
    "EventGroup",
    "Shape",
    "count_groups",
    "domain_kg_turtle",
    "final_model_location",
    "iter_event_groups",
    "iter_events",
    "model_location",
    "shape_for_scale",
    "spec_texts",
]

#: triples per dataset in the paper (section 5.4)
PAPER_TRIPLES = 10_168_890

LEARNING_WORKFLOW = "seismic-training"
PREPARATION_WORKFLOW = "seismic-preparation"
CURATION_WORKFLOW = "seismic-curation"

#: seconds since the epoch of the first learning workflow's start (2023-11-14T22:13:20Z)
_T0 = 1_700_000_000.0
_KG = "https://w3id.org/provkg/kg/seismic/"


@dataclass(frozen=True)
class Shape:
    """How much provenance the generator writes. ``epochs`` is what ``--scale`` changes."""

    workflows: int = 8
    epochs: int = 300
    training_batches: int = 200
    validation_batches: int = 29
    evaluation_batches: int = 28
    #: hyperparameters every training batch uses (a learning-rate schedule per step)
    batch_hyperparameters: tuple[str, ...] = ("learning_rate", "momentum")
    #: hyperparameters every training epoch uses
    epoch_hyperparameters: tuple[str, ...] = ("learning_rate", "momentum", "dropout")
    #: evaluation measures every epoch (of each stage) generates
    measures: tuple[str, ...] = ("loss", "accuracy")
    seed: int = 2020
    #: ``full``: every batch as triples (the paper); ``summary``: batches kept as one summary
    #: per epoch (spec ``granularity: summary``, docs/reference/graph.md); ``both``: every
    #: batch and the per-epoch rollups
    granularity: str = "full"


#: the shape whose typed and tagged datasets come closest to the paper's triple count
PAPER_SHAPE = Shape()


def shape_for_scale(scale: float, *, base: Shape = PAPER_SHAPE) -> Shape:
    """``base`` with its epochs scaled (at least one); everything else kept."""
    if not (0 < scale <= 10):
        raise ValueError(f"scale must be in (0, 10], got {scale}")
    return replace(base, epochs=max(1, round(base.epochs * scale)))


# ---------------------------------------------------------------------------
# prospective side: specs (YAML, docs/reference/spec-format.md) and the domain KG


def _attr(name: str, role: str, concept: str | None = None) -> str:
    extra = f", concept: {concept}" if concept else ""
    return f"      - {{name: {name}, role: {role}{extra}}}\n"


def spec_texts(shape: Shape = PAPER_SHAPE) -> dict[str, str]:
    """The three prospective specs (workflow name -> YAML text) the events refer to."""
    curation = (
        f"workflow: {CURATION_WORKFLOW}\nphase: curation\ntransformations:\n"
        "  - name: extract_metadata\n    kind: transformation\n    used:\n"
        + _attr("segy_file", "data_reference")
        + "    generated:\n"
        + _attr("number_of_slices", "plain", "seis:numberOfSlices")
        + _attr("coordinates", "plain", "seis:coordinates")
        + _attr("inline_start", "plain", "seis:inlineStart")
        + _attr("inline_end", "plain", "seis:inlineEnd")
    )
    preparation = (
        f"workflow: {PREPARATION_WORKFLOW}\nphase: preparation\ntransformations:\n"
        "  - name: prepare_datasets\n    kind: transformation\n    used:\n"
        + _attr("segy_file", "data_reference")
        + _attr("slice_start", "dataset_characteristic", "seis:sliceStart")
        + _attr("slice_end", "dataset_characteristic", "seis:sliceEnd")
        + _attr("tile_size", "dataset_characteristic", "seis:tileSize")
        + _attr("noise_threshold", "dataset_characteristic", "seis:noiseThreshold")
        + "    generated:\n"
        + "".join(_attr(n, "dataset") for n in ("train_set", "validation_set", "test_set"))
    )
    measures = "".join(_attr(m, "evaluation_measure") for m in shape.measures)
    # spelled out: an innermost section left unset would get rollups (``both``)
    granularity = f"    granularity: {shape.granularity}\n"
    learning = (
        f"workflow: {LEARNING_WORKFLOW}\nphase: learning\ntransformations:\n"
        "  - name: training\n    kind: training\n    used:\n"
        + _attr("train_set", "dataset")
        + "".join(_attr(h, "hyperparameter") for h in _STAGE_HYPERPARAMETERS)
        + "    generated:\n" + _attr("model", "model") + measures
        + "  - name: training_epoch\n    kind: section\n    of: training\n    used:\n"
        + "".join(_attr(h, "hyperparameter") for h in shape.epoch_hyperparameters)
        + "    generated:\n" + _attr("checkpoint", "model") + measures
        + "  - name: training_batch\n    kind: section\n    of: training_epoch\n" + granularity
        + ("    used:\n" + "".join(_attr(h, "hyperparameter") for h in shape.batch_hyperparameters)
           if shape.batch_hyperparameters else "")
        + "    generated:\n" + _attr("loss", "evaluation_measure")
    )
    for stage, data in (("validation", "validation_set"), ("evaluation", "test_set")):
        learning += (
            f"  - name: {stage}\n    kind: {stage}\n    used:\n" + _attr(data, "dataset")
            + _attr("model", "model") + "    generated:\n" + measures
            + f"  - name: {stage}_epoch\n    kind: section\n    of: {stage}\n    used:\n"
            + _attr("checkpoint", "model") + "    generated:\n" + measures
            + f"  - name: {stage}_batch\n    kind: section\n    of: {stage}_epoch\n" + granularity
            + "    generated:\n" + _attr("loss", "evaluation_measure")
        )
    return {CURATION_WORKFLOW: curation, PREPARATION_WORKFLOW: preparation, LEARNING_WORKFLOW: learning}


@dataclass(frozen=True)
class _Seismic:
    key: str
    file_name: str
    survey: str
    field: str
    basin: str
    slices: int
    wkt: str

    @property
    def location(self) -> str:
        return f"file:///data/seismic/{self.file_name}"

    @property
    def resource(self) -> str:
        return f"{_KG}segy/{self.key}"


_SEISMIC = (
    _Seismic("f3", "netherlands-f3.sgy", "F3 Block", "F3", "North Sea Basin", 651,
             "POLYGON((4.18 54.83, 4.86 54.83, 4.86 55.04, 4.18 55.04, 4.18 54.83))"),
    _Seismic("parihaka", "parihaka-3d.sgy", "Parihaka 3D", "Parihaka", "Taranaki Basin", 1037,
             "POLYGON((173.6 -38.9, 174.1 -38.9, 174.1 -38.6, 173.6 -38.6, 173.6 -38.9))"),
)


@dataclass(frozen=True)
class _Preparation:
    run: str
    seismic: int  # index into _SEISMIC
    slice_start: int
    slice_end: int
    tile_size: int
    noise_threshold: float

    def dataset(self, name: str) -> str:
        return _dataset_location(self.run, name)


def _preparations(shape: Shape) -> list[_Preparation]:
    """One run per learning workflow (equal-length slice sets of the first cube, in the
    workflows' order), then the decoy over the second file."""
    length = _SEISMIC[0].slices // max(8, shape.workflows)
    return [_Preparation(f"prep-{k + 1}", 0, k * length, (k + 1) * length, 64, 0.05)
            for k in range(shape.workflows)] + [_Preparation("prep-decoy", 1, 250, 600, 128, 0.1)]


def domain_kg_turtle() -> str:
    """The small seismic domain KG (Turtle) the SEG-Y values denote."""
    out = [
        "@prefix seis: <https://w3id.org/provkg/seismic#> .",
        "@prefix geo: <http://www.opengis.net/ont/geosparql#> .",
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .",
        "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .",
        "",
    ]
    for s in _SEISMIC:
        basin, fld, survey = (f"<{_KG}{kind}/{s.key}>" for kind in ("basin", "field", "survey"))
        out += [
            f"{basin} a seis:Basin ; rdfs:label \"{s.basin}\" .",
            f"{fld} a seis:Field ; rdfs:label \"{s.field}\" ; seis:basin {basin} .",
            f"{survey} a seis:Survey ; rdfs:label \"{s.survey}\" ; seis:field {fld} ; seis:basin {basin} .",
            f"<{s.resource}> a seis:SegyFile ; rdfs:label \"{s.file_name}\" ; seis:fileName \"{s.file_name}\" ;",
            f"    seis:survey {survey} ; seis:field {fld} ; seis:basin {basin} ;",
            f"    seis:numberOfSlices {s.slices} ; seis:coordinates \"{s.wkt}\" ;",
            f"    geo:hasGeometry <{s.resource}/geometry> .",
            f"<{s.resource}/geometry> a geo:Geometry ; geo:asWKT \"{s.wkt}\"^^geo:wktLiteral .",
            "",
        ]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# retrospective side: events

_STAGE_HYPERPARAMETERS = ("learning_rate", "batch_size", "epochs", "optimizer", "weight_decay")
_LEARNING_RATES = (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005)
_OPTIMIZERS = ("sgd", "adam", "rmsprop", "adamw")


@dataclass
class EventGroup:
    """Events whose triples may repeat among themselves but never in another bulk group.

    ``shared`` groups (workflow runs, stages, curation, preparation: a few hundred
    events) may repeat each other's triples (a model the validation and evaluation
    stages use too).
    """

    events: list[dict] = field(default_factory=list)
    shared: bool = False


def _value(name: str, value: object) -> dict:
    return {"name": name, "value": value}


def _task(events: list[dict], run: str, tid: str, transformation: str, t0: float, t1: float, *,
          parent: str | None = None, index: int | None = None,
          used: list[dict] | None = None, generated: list[dict] | None = None) -> None:
    begin = {"type": "task", "event": "begin", "id": tid, "time": t0, "workflow_id": run,
             "transformation": transformation}
    end = {"type": "task", "event": "end", "id": tid, "time": t1, "workflow_id": run,
           "transformation": transformation, "status": "finished"}
    if parent is not None:
        begin["parent"] = end["parent"] = parent
    if index is not None:
        begin["index"] = end["index"] = index
    if used:
        begin["used"] = used
    if generated:
        end["generated"] = generated
    events.append(begin)
    events.append(end)


def _workflow(events: list[dict], run: str, workflow: str, t0: float, t1: float) -> None:
    common = {"type": "workflow", "id": run, "workflow": workflow, "agent": "geoscientist"}
    events.append({**common, "event": "begin", "time": t0,
                   "environment": {"host": "hpc-node-01", "cluster": "synthetic"}})
    events.append({**common, "event": "end", "time": t1, "status": "finished"})


def _lineage_groups(shape: Shape) -> Iterator[EventGroup]:
    """Curation of each SEG-Y file, then the preparation runs that cut datasets from them."""
    group = EventGroup(shared=True)
    for i, s in enumerate(_SEISMIC):
        run = f"curation-{s.key}"
        t0 = _T0 - 7200 + 60 * i
        _workflow(group.events, run, CURATION_WORKFLOW, t0, t0 + 30)
        _task(group.events, run, f"{run}/extract", "extract_metadata", t0 + 1, t0 + 29,
              used=[{"name": "segy_file", "location": s.location, "domain": s.resource}],
              generated=[_value("number_of_slices", s.slices), _value("coordinates", s.wkt),
                         _value("inline_start", 100), _value("inline_end", 100 + s.slices)])
    for i, p in enumerate(_preparations(shape)):
        s = _SEISMIC[p.seismic]
        t0 = _T0 - 3600 + 60 * i
        _workflow(group.events, p.run, PREPARATION_WORKFLOW, t0, t0 + 50)
        _task(group.events, p.run, f"{p.run}/prepare", "prepare_datasets", t0 + 1, t0 + 49,
              used=[{"name": "segy_file", "location": s.location, "domain": s.resource},
                    _value("slice_start", p.slice_start), _value("slice_end", p.slice_end),
                    _value("tile_size", p.tile_size), _value("noise_threshold", p.noise_threshold)],
              generated=[{"name": n, "location": p.dataset(n), "derived_from": [s.location]}
                         for n in ("train_set", "validation_set", "test_set")])
    yield group


def _dataset_location(run: str, name: str) -> str:
    return f"file:///data/{run}/{name}.h5"


def model_location(workflow_index: int, epoch: int) -> str:
    """Where the checkpoint a training epoch saved is stored (its value id)."""
    return f"file:///models/w{workflow_index + 1}/epoch-{epoch:03d}.pt"


def final_model_location(workflow_index: int) -> str:
    """Where the model a training generated is stored (its value id)."""
    return f"file:///models/w{workflow_index + 1}/model.pt"


#: validation and evaluation losses run a little above the training loss
_STAGE_FACTORS = (1.08, 1.12)


@dataclass(frozen=True)
class _Config:
    """One learning workflow's hyperparameters and the speed / loss curve they give."""

    index: int
    learning_rate: float
    batch_size: int
    optimizer: str
    weight_decay: float
    momentum: float
    dropout: float
    batch_seconds: float
    tau: float
    floor: float

    @property
    def run(self) -> str:
        return f"w{self.index + 1}"


def _configs(shape: Shape) -> list[_Config]:
    rng = random.Random(shape.seed)
    out = []
    for k in range(shape.workflows):
        lr = _LEARNING_RATES[k % len(_LEARNING_RATES)]
        out.append(_Config(
            index=k, learning_rate=lr, batch_size=(32, 64, 128)[k % 3],
            optimizer=_OPTIMIZERS[k % len(_OPTIMIZERS)], weight_decay=(1e-4, 5e-4)[k % 2],
            momentum=round(0.85 + 0.1 * rng.random(), 4), dropout=round(0.1 + 0.3 * rng.random(), 4),
            batch_seconds=round(0.2 + 0.1 * rng.random(), 4),
            tau=30.0 + 400.0 * abs(math.log10(lr) + 2.3) / 2, floor=0.15 + 0.1 * rng.random(),
        ))
    return out


def _loss(cfg: _Config, epoch: int) -> float:
    return cfg.floor + 2.0 * math.exp(-epoch / cfg.tau)


def _learning_groups(shape: Shape) -> Iterator[EventGroup]:
    configs = _configs(shape)
    preparations = _preparations(shape)
    epoch_seconds = {c.run: _epoch_seconds(shape, c) for c in configs}
    head = EventGroup(shared=True)
    for c in configs:
        t0 = _T0 + 0.5 * c.index
        t1 = t0 + shape.epochs * epoch_seconds[c.run] + 10
        final = _loss(c, shape.epochs - 1)
        model = final_model_location(c.index)
        prep = preparations[c.index]
        train_set = prep.dataset("train_set")
        stage_sets = {"validation": prep.dataset("validation_set"),
                      "evaluation": prep.dataset("test_set")}
        _workflow(head.events, c.run, LEARNING_WORKFLOW, t0, t1)
        _task(head.events, c.run, f"{c.run}/training", "training", t0 + 1, t1 - 1,
              used=[{"name": "train_set", "location": train_set},
                    _value("learning_rate", c.learning_rate), _value("batch_size", c.batch_size),
                    _value("epochs", shape.epochs), _value("optimizer", c.optimizer),
                    _value("weight_decay", c.weight_decay)],
              generated=[{"name": "model", "location": model}]
              + [_value(m, _measure(m, final)) for m in shape.measures])
        for (stage, data), factor in zip(stage_sets.items(), _STAGE_FACTORS):
            _task(head.events, c.run, f"{c.run}/{stage}", stage, t0 + 1, t1 - 1,
                  used=[{"name": data.rsplit("/", 1)[1].removesuffix(".h5"), "location": data},
                        {"name": "model", "location": model}],
                  generated=[_value(m, _measure(m, final * factor)) for m in shape.measures])
    # the runs and stages end after their epochs, as a capture sends them: a training's rollup
    # of its epochs is then written once, at its end (a stage that ended first would have it
    # written again at every epoch, and a file keeps every version)
    tail = EventGroup(shared=True, events=[e for e in head.events if e["event"] == "end"])
    head.events = [e for e in head.events if e["event"] != "end"]
    yield head
    for c in configs:
        rng = random.Random(shape.seed * 1009 + c.index)
        t = _T0 + 0.5 * c.index + 2
        for epoch in range(shape.epochs):
            group = EventGroup()
            t = _epoch_events(group.events, shape, c, epoch, t, rng)
            yield group
    yield tail


def _epoch_seconds(shape: Shape, c: _Config) -> float:
    per = c.batch_seconds * 1.05
    return (shape.training_batches + 0.4 * (shape.validation_batches + shape.evaluation_batches)) * per + 3


def _epoch_events(events: list[dict], shape: Shape, c: _Config, epoch: int, t: float,
                  rng: random.Random) -> float:
    """One epoch of the three stages; returns the time it ends."""
    run, model = c.run, model_location(c.index, epoch)
    lr = round(c.learning_rate * 0.98 ** epoch, 8)
    mean = _loss(c, epoch)
    rand = rng.random
    epoch_id = f"{run}/training/e{epoch}"
    start = t
    t += 0.01
    batch_min = math.inf
    for b in range(shape.training_batches):
        d = round(c.batch_seconds * (0.9 + 0.2 * rand()), 6)
        loss = round(mean * (0.85 + 0.3 * rand()), 6)
        batch_min = min(batch_min, loss)
        used = [_value(h, _batch_hyperparameter(h, c, lr, b, shape)) for h in shape.batch_hyperparameters]
        _task(events, run, f"{epoch_id}/b{b}", "training_batch", round(t, 6), round(t + d, 6),
              parent=epoch_id, index=b, used=used, generated=[_value("loss", loss)])
        t += d + 0.001
    epoch_hp = {"learning_rate": lr, "momentum": c.momentum, "dropout": c.dropout}
    _task(events, run, epoch_id, "training_epoch", round(start, 6), round(t, 6),
          parent=f"{run}/training", index=epoch,
          used=[_value(h, epoch_hp[h]) for h in shape.epoch_hyperparameters],
          generated=[{"name": "checkpoint", "location": model}]
          + [_value(m, _measure(m, mean)) for m in shape.measures])
    for stage, batches, factor in (("validation", shape.validation_batches, _STAGE_FACTORS[0]),
                                   ("evaluation", shape.evaluation_batches, _STAGE_FACTORS[1])):
        sid = f"{run}/{stage}/e{epoch}"
        start = t
        t += 0.01
        for b in range(batches):
            d = round(0.4 * c.batch_seconds * (0.9 + 0.2 * rand()), 6)
            loss = round(mean * factor * (0.85 + 0.3 * rand()), 6)
            _task(events, run, f"{sid}/b{b}", f"{stage}_batch", round(t, 6), round(t + d, 6),
                  parent=sid, index=b, generated=[_value("loss", loss)])
            t += d + 0.001
        _task(events, run, sid, f"{stage}_epoch", round(start, 6), round(t, 6),
              parent=f"{run}/{stage}", index=epoch,
              used=[{"name": "checkpoint", "location": model}],
              generated=[_value(m, _measure(m, mean * factor)) for m in shape.measures])
    return t + 0.01


def _batch_hyperparameter(name: str, c: _Config, lr: float, batch: int, shape: Shape) -> float:
    if name == "learning_rate":  # a cosine schedule inside the epoch
        return round(lr * (0.55 + 0.45 * math.cos(math.pi * batch / shape.training_batches)), 9)
    if name == "momentum":
        return round(c.momentum + 0.0001 * (batch % 10), 6)
    return float(batch)


def _measure(name: str, loss: float) -> float:
    if name == "loss":
        return round(loss, 6)
    # accuracy (and any other measure) rises as the loss falls
    return round(max(0.0, min(1.0, 1.0 - loss / 3.0)), 6)


def iter_event_groups(shape: Shape = PAPER_SHAPE) -> Iterator[EventGroup]:
    """All events of one dataset, in groups (see :class:`EventGroup`). Deterministic."""
    yield from _lineage_groups(shape)
    yield from _learning_groups(shape)


def iter_events(shape: Shape = PAPER_SHAPE) -> Iterator[dict]:
    """All events of one dataset, one by one."""
    for group in iter_event_groups(shape):
        yield from group.events


def count_groups(shape: Shape) -> int:
    """How many groups :func:`iter_event_groups` yields (for progress bars)."""
    return 3 + shape.workflows * shape.epochs
