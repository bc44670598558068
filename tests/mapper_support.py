"""A small, deterministic learning lifecycle for the spec / mapper / ingest tests.

One workflow ``flower-training`` (phase learning): trainings with epochs and batches
(sections), an adaptation of the learning rate, a validation, and an evaluation. Values
cover every JSON type, data by reference (location), domain links and derivations.
"""

from __future__ import annotations

from typing import Any

from provkg.spec import Spec, parse_spec

SPEC_YAML = """\
workflow: flower-training
phase: learning
data_stores:
  - {name: lake, kind: file_system, location: "file:///lake"}
transformations:
  - name: training
    kind: training
    used:
      - {name: learning_rate, role: hyperparameter}
      - {name: epochs, role: hyperparameter}
      - {name: augment, role: hyperparameter}
      - {name: layers, role: model_hyperparameter}
      - {name: train_set, role: dataset, store: lake}
      - {name: slices, role: dataset_characteristic, concept: "seis:numberOfSlices"}
    generated:
      - {name: model, role: model, store: lake}
      - {name: loss, role: evaluation_measure}
      - {name: accuracy, role: evaluation_measure}
  - name: epoch
    kind: section
    of: training
    generated:
      - {name: loss, role: evaluation_measure}
  - name: batch
    kind: section
    of: epoch
    generated:
      - {name: loss, role: evaluation_measure}
  - name: lr_schedule
    kind: adaptation
    used:
      - {name: technique}
    generated:
      - {name: learning_rate, role: hyperparameter}
  - name: validation
    kind: validation
    used:
      - {name: model, role: model}
    generated:
      - {name: accuracy, role: evaluation_measure}
  - name: val_epoch
    kind: section
    of: validation
    generated:
      - {name: loss, role: evaluation_measure}
  - name: evaluation
    kind: evaluation
    used:
      - {name: model, role: model}
      - {name: note}
      - {name: nothing}
    generated:
      - {name: accuracy, role: evaluation_measure}
"""

WORKFLOW = "flower-training"

#: the spec with its innermost sections kept ``full`` (no rollups): for tests of a spec that
#: comes after its events, which gives what was stored before no rollups
SPEC_YAML_FULL = (SPEC_YAML.replace("    of: epoch\n", "    of: epoch\n    granularity: full\n")
                  .replace("    of: validation\n", "    of: validation\n    granularity: full\n"))


def lifecycle_spec(text: str = SPEC_YAML) -> Spec:
    return parse_spec(text, source="<lifecycle spec>")


def lifecycle_events(*, trainings: int = 2, epochs: int = 2, batches: int = 3,
                     run: str = "run-1", t0: float = 1_700_000_000.0) -> list[dict[str, Any]]:
    """Begin / end events of one run, in capture order."""
    ev: list[dict[str, Any]] = []
    t = t0

    def tick(dt: float = 0.25) -> float:
        nonlocal t
        t += dt
        return t

    ev.append({"type": "workflow", "event": "begin", "id": run, "time": t, "workflow": WORKFLOW,
               "agent": "alice", "environment": {"host": "gpu-1", "pid": 4242, "python": "3.11"}})
    for k in range(trainings):
        tr = f"{run}/training-{k}"
        lr = 0.01 / (k + 1)
        ev.append({"type": "task", "event": "begin", "id": tr, "time": tick(), "workflow_id": run,
                   "transformation": "training", "agent": "alice", "used": [
                       {"name": "learning_rate", "value": lr},
                       {"name": "epochs", "value": epochs},
                       {"name": "augment", "value": k % 2 == 0},
                       {"name": "layers", "value": [64, 32, [8, 8]]},
                       {"name": "train_set", "location": "file:///lake/train.h5",
                        "domain": "https://example.org/kg/survey-7"},
                       {"name": "slices", "value": 401, "id": "slices-of-train"},
                   ]})
        for e in range(epochs):
            ep = f"{tr}/epoch-{e}"
            ev.append({"type": "task", "event": "begin", "id": ep, "time": tick(), "workflow_id": run,
                       "transformation": "epoch", "parent": tr, "index": e})
            for b in range(batches):
                bt = f"{ep}/batch-{b}"
                ev.append({"type": "task", "event": "begin", "id": bt, "time": tick(0.125),
                           "workflow_id": run, "transformation": "batch", "parent": ep, "index": b})
                ev.append({"type": "task", "event": "end", "id": bt, "time": tick(0.125 * (b + 1)),
                           "workflow_id": run, "transformation": "batch", "parent": ep, "index": b,
                           "status": "finished",
                           "generated": [{"name": "loss", "value": round(1.0 / (1 + b + e + k), 6)}]})
            ev.append({"type": "task", "event": "end", "id": ep, "time": tick(), "workflow_id": run,
                       "transformation": "epoch", "parent": tr, "index": e, "status": "finished",
                       "generated": [{"name": "loss", "value": round(0.5 / (1 + e + k), 6)}]})
            if e == 0:
                ad = f"{tr}/adapt-{e}"
                ev.append({"type": "task", "event": "begin", "id": ad, "time": tick(), "workflow_id": run,
                           "transformation": "lr_schedule", "parent": tr, "index": e + 1,
                           "used": [{"name": "technique", "value": "StepLR"},
                                    {"name": "learning_rate", "id": f"{tr}/used/learning_rate"}]})
                ev.append({"type": "task", "event": "end", "id": ad, "time": tick(), "workflow_id": run,
                           "transformation": "lr_schedule", "parent": tr, "index": e + 1,
                           "status": "finished",
                           "generated": [{"name": "learning_rate", "value": lr / 2,
                                          "derived_from": [f"{tr}/used/learning_rate"]}]})
        ev.append({"type": "task", "event": "end", "id": tr, "time": tick(), "workflow_id": run,
                   "transformation": "training", "status": "finished", "generated": [
                       {"name": "model", "id": f"model-{k}", "location": f"file:///lake/model-{k}.pt",
                        "derived_from": ["slices-of-train"]},
                       {"name": "loss", "value": round(0.1 / (k + 1), 6)},
                       {"name": "accuracy", "value": 0.8 + 0.05 * k},
                   ]})
        va = f"{run}/validation-{k}"
        ev.append({"type": "task", "event": "begin", "id": va, "time": tick(), "workflow_id": run,
                   "transformation": "validation", "dependencies": [tr],
                   "used": [{"name": "model", "id": f"model-{k}", "location": f"file:///lake/model-{k}.pt"}]})
        ve = f"{va}/epoch-0"
        ev.append({"type": "task", "event": "begin", "id": ve, "time": tick(), "workflow_id": run,
                   "transformation": "val_epoch", "parent": va, "index": 0})
        ev.append({"type": "task", "event": "end", "id": ve, "time": tick(), "workflow_id": run,
                   "transformation": "val_epoch", "parent": va, "index": 0,
                   "generated": [{"name": "loss", "value": 0.2 + k}]})
        ev.append({"type": "task", "event": "end", "id": va, "time": tick(), "workflow_id": run,
                   "transformation": "validation", "dependencies": [tr], "status": "finished",
                   "generated": [{"name": "accuracy", "value": 0.75 + 0.05 * k}]})
    ev_id = f"{run}/evaluation"
    ev.append({"type": "task", "event": "begin", "id": ev_id, "time": tick(), "workflow_id": run,
               "transformation": "evaluation",
               "used": [{"name": "model", "id": "model-0", "location": "file:///lake/model-0.pt"},
                        {"name": "note", "value": 'a "quoted"\nnote é'}, {"name": "nothing", "value": None}]})
    ev.append({"type": "task", "event": "end", "id": ev_id, "time": tick(), "workflow_id": run,
               "transformation": "evaluation", "status": "failed", "message": "disk full",
               "generated": [{"name": "accuracy", "value": 1}]})
    ev.append({"type": "workflow", "event": "end", "id": run, "time": tick(), "workflow": WORKFLOW,
               "status": "finished"})
    return ev
