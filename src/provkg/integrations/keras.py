"""Keras 3 (any backend): ``model.fit(..., callbacks=[ProvenanceCallback(sink=..., workflow=...)])``.

The callback records, with no spec and no other code (its events say their kinds and
roles, so ingest types them as PROV-ML):

- each ``model.fit`` as a run of ``workflow`` (its label: ``model.name``; tags and
  ``environment.*`` values: the keras version, the backend and its version, the device),
  holding a ``training`` task (kind training) that uses every hyperparameter (the fit
  arguments by their names: ``epochs``, ``batch_size``, ``validation_split``, ...; the
  optimizer's ``get_config()`` as ``optimizer.*``; ``compile.*`` (loss, metrics); the
  initial ``learning_rate``; and, role model_hyperparameter, ``model.*``: name, class,
  layer count, parameter counts) and the train / validation data sets (role dataset: the
  file given as ``dataset=``, else an id of the run; their ``.size`` and ``.shape``), and
  generates the last epoch's logs and the files ModelCheckpoint saved (role model);
- an ``epoch`` section per epoch (index = epoch) generating the epoch's training logs
  (``loss``, ``accuracy``, ...), and under it a ``batch`` section per batch
  (``batches="full"``; ``"summary"``: per-epoch summaries; ``"none"``: no batches)
  generating Keras's batch logs (the running means of the epoch so far);
- a ``validation`` task (kind validation, parent the training, index = the epoch) per
  validation Keras ran, using the validation set and the latest checkpoint saved before it,
  generating the validation logs under Keras's own names: ``val_loss``, ``val_accuracy``
  (the History's names, so one name means one thing in the whole run);
- an ``adaptation`` task per learning-rate change (``optimizer.learning_rate`` read at each
  epoch start and at the epoch's first batch, once every callback's ``on_epoch_begin`` ran),
  technique: the LearningRateScheduler / ReduceLROnPlateau class, the optimizer's
  LearningRateSchedule class, else ``"manual"``;
- ``model.evaluate(..., callbacks=[the callback])`` outside fit as a run of its own
  (``<run_id>-evaluate``): an ``evaluation`` task using the test set and the latest
  checkpoint the fit saved, depending on the fit's training, generating the logs.

Keras hands a callback neither the fit arguments nor the other callbacks: they are read from
the running ``fit`` / ``evaluate`` frame's locals (after ``validation_split``, its ``x`` / ``y``
are the training part). Every hook is guarded (:func:`_common.guarded`): provenance never
raises into training; delivery runs in the capture library's background thread.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from importlib import metadata
from types import FrameType
from typing import Any

import keras

from provkg import capture
from provkg.integrations._common import (
    BATCHES,
    BatchLog,
    LearningRates,
    callback_options,
    environment,
    guarded,
    numbers,
    plain,
    record_adaptation,
    settings,
)

__all__ = ["BATCHES", "ProvenanceCallback"]

#: what ``batches=`` takes: a section per batch, per-epoch summaries of them, or none
#: the options ``capture.workflow`` takes besides its name, sink and run id
#: fit arguments recorded as hyperparameters under their own names (data and callbacks aside)
_FIT_ARGUMENTS = ("epochs", "batch_size", "validation_split", "shuffle", "class_weight",
                  "initial_epoch", "steps_per_epoch", "validation_steps", "validation_batch_size",
                  "validation_freq")
#: log names that are a setting, not a measure (LearningRateScheduler / ReduceLROnPlateau
#: write the rate into the epoch's logs; it is recorded as an adaptation instead)
_NOT_MEASURES = frozenset({"learning_rate", "lr"})


class ProvenanceCallback(keras.callbacks.Callback):
    """Records a Keras training's provenance (see the module's docstring).

    Args:
        sink: where events go: ``file:DIR``, ``http(s)://HOST:PORT``, ``mqtt://...``, a Sink.
        workflow: the workflow name (the runs' ``workflow``; what d5 / d6 / runs take).
        run_id: the fit's run id (default: a random one); a later fit / evaluate with this
            callback records a run ``<run_id>-fit`` / ``<run_id>-evaluate``.
        batches: ``"full"``, ``"summary"`` or ``"none"`` (see :data:`BATCHES`).
        dataset: where the data lives: a path / URI (the training data: with
            ``validation_split`` both parts are recorded as derived from it), or a mapping
            of ``train_set`` / ``val_set`` / ``test_set`` to paths. Without it the data sets
            are recorded by an id of the run.
        capture_options: passed to ``capture.workflow`` (``label``, ``tags``, ``phase``,
            ``agent``, ``flush_timeout``, ``spool``, ...); a ``label`` or ``tags`` given
            here win over the model's.
    """

    def __init__(self, *, sink: str | capture.Sink, workflow: str, run_id: str | None = None,
                 batches: str = "full", dataset: Any = None, **capture_options: Any) -> None:
        super().__init__()
        self.sink, self.workflow, self.run_id = sink, workflow, run_id
        self.batches, self.options = callback_options(batches, capture_options)
        self.dataset = dataset
        self._wf: capture.Workflow | None = None
        self._run_ids: set[str] = set()
        self._training: capture.Task | None = None
        self._training_id: str | None = None  # the last fit's, for a later evaluate run
        self._epoch: capture.Task | None = None
        self._epoch_index = 0
        self._last_logs: dict[str, Any] = {}  # the last ended epoch's logs ({}: none ended yet)
        self._first_batch = False  # the epoch's first batch is still to come
        self._batches = BatchLog(granularity=self.batches)
        self._check: capture.Task | None = None  # the open validation / evaluation
        self._validated: set[int] = set()  # epochs whose validation is recorded
        self._callbacks: list[Any] = []  # the fit's callbacks (Keras's CallbackList's)
        self._checkpoints: dict[str, None] = {}  # files ModelCheckpoint saved, in order
        self._seen_files: dict[str, tuple[int, int, int] | None] = {}
        self._val_ref: dict[str, Any] = {}
        self._lrs = LearningRates()

    # -- runs --------------------------------------------------------------------------

    def _open_run(self, stage: str) -> capture.Workflow:
        if self._wf is not None:  # a fit or evaluate that raised: its hooks never ended it
            self._end_run("failed", "Keras stopped before this run ended")
        run_id = self.run_id
        if run_id is not None and run_id in self._run_ids:
            run_id, n = f"{self.run_id}-{stage}", 2
            while run_id in self._run_ids:
                run_id, n = f"{self.run_id}-{stage}-{n}", n + 1
        tags, values = self._environment()
        options = dict(self.options)
        options["tags"] = {**tags, **dict(options.get("tags") or {})}
        options.setdefault("phase", "learning")
        name = getattr(self.model, "name", None)
        if options.get("label") is None and isinstance(name, str) and name:
            options["label"] = name[:256]
        wf = capture.workflow(self.workflow, sink=self.sink, run_id=run_id, **options)
        self._run_ids.add(wf.id)
        wf.use(values)
        self._wf = wf.begin()
        return wf

    def _environment(self) -> tuple[dict[str, str], dict[str, Any]]:
        backend = keras.backend.backend()  # also the name of its package: torch, jax, ...
        versions = {"keras": keras.__version__, backend: _version(backend)}
        tags, values = environment("keras", versions, _device(self.model), backend=backend)
        tags["backend"] = backend
        return tags, values

    def _end_run(self, status: str = "finished", message: str | None = None) -> None:
        stopped = message or "Keras stopped while this task was open"
        self._batches.stop(self._wf, self._epoch, status, stopped)
        for task in (self._epoch, self._check, self._training):
            if task is not None:
                task.end(status, stopped)
        self._epoch = self._check = self._training = None
        wf, self._wf = self._wf, None
        if wf is not None:
            wf.end(status, message)

    # -- the training ------------------------------------------------------------------

    @guarded
    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        wf = self._open_run("fit")
        fit = _frame_locals("fit", self.model)
        self._callbacks = list(getattr(fit.get("callbacks"), "callbacks", None) or [])
        self._checkpoints, self._seen_files, self._validated = {}, {}, set()
        self._last_logs = {}
        for path in self._checkpoint_paths(None, {}):  # fixed names: a save changes the file
            self._seen_files[path] = _signature(path)
        training = wf.task("training", kind="training",
                           used=capture.hyperparameters(self._hyperparameters(fit)))
        training.use(capture.with_role("model_hyperparameter", _model_settings(self.model)))
        split = bool(fit.get("validation_split")) and fit.get("validation_data") is not None
        train_ref, train_about = self._data("train_set", fit.get("x"), fit.get("y"), wf, split)
        training.use(capture.datasets(train_ref))
        training.use(capture.with_role("dataset_characteristic", train_about))
        self._val_ref = {}
        validation = fit.get("validation_data")
        if isinstance(validation, (tuple, list)) and validation:
            self._val_ref, about = self._data("val_set", validation[0],
                                              validation[1] if len(validation) > 1 else None, wf, split)
            training.use(capture.datasets(self._val_ref))
            training.use(capture.with_role("dataset_characteristic", about))
        self._training = training.begin()
        self._training_id = training.id
        self._lrs = LearningRates()
        self._lrs.changes(_learning_rates(self.model))

    @guarded
    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self._wf is None or self._training is None:
            return
        if self._last_logs:  # the previous epoch's saves: ModelCheckpoint may follow this callback
            self._note_checkpoints(self._epoch_index, self._last_logs)
        self._epoch_index = epoch
        self._note_learning_rate()
        self._epoch = self._wf.task("epoch", kind="section", parent=self._training,
                                    index=epoch).begin()
        self._first_batch = True

    @guarded
    def on_train_batch_begin(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self._wf is None or self._epoch is None:
            return
        if self._first_batch:  # a scheduler after this callback in the list has run now
            self._first_batch = False
            self._note_learning_rate()
        if self.batches != "none":
            self._batches.begin(batch)

    @guarded
    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        # the logs as they are (read when the batch is recorded): no device sync per batch
        held = {k: v for k, v in (logs or {}).items() if k not in _NOT_MEASURES}
        if self._batches.end(held):
            self._batches.flush(self._wf, self._epoch)

    @guarded
    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._batches.stop(self._wf, self._epoch, "finished", None)
        logs = dict(logs or {})
        self._last_logs = logs
        validation = {k: v for k, v in _measures(logs).items() if k.startswith("val_")}
        if validation and epoch not in self._validated and self._wf is not None \
                and self._training is not None:  # a loop that ran no on_test_* hooks
            check = self._validation(self._wf, epoch)
            check.generate(capture.measures(validation))
            check.end()
        task, self._epoch = self._epoch, None
        if task is not None:
            task.generate(capture.measures({k: v for k, v in _measures(logs).items()
                                            if not k.startswith("val_")}))
            task.end()

    @guarded
    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        training, self._training = self._training, None
        if training is not None:
            last = dict(logs or {}) or dict(self._last_logs)
            self._note_checkpoints(self._epoch_index, last)
            training.generate(capture.measures(_measures(last)))
            training.generate(capture.models(self._models()))
            training.end()
        self._last_logs = {}
        self._end_run()

    # -- validation and evaluation -----------------------------------------------------

    @guarded
    def on_test_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        if self._training is not None and self._wf is not None:  # fit's validation
            self._check = self._validation(self._wf, self._epoch_index).begin()
            return
        wf = self._open_run("evaluate")
        frame = _frame_locals("evaluate", self.model)
        refs, about = self._data("test_set", frame.get("x"), frame.get("y"), wf, False)
        check = wf.task("evaluation", kind="evaluation", used=capture.datasets(refs),
                        dependencies=[self._training_id] if self._training_id else None)
        check.use(capture.with_role("dataset_characteristic", about))
        latest = next(reversed(self._checkpoints), None) if self._checkpoints else None
        if latest is not None:
            check.use(capture.models(model=capture.ref(latest)))
        self._check = check.begin()

    @guarded
    def on_test_end(self, logs: Mapping[str, Any] | None = None) -> None:
        check, self._check = self._check, None
        if check is None:
            return
        values = _measures(logs)
        if self._training is not None:  # fit's validation: the History's val_ names
            values = {f"val_{k}": v for k, v in values.items()}
        check.generate(capture.measures(values))
        check.end()
        if self._training is None:
            self._end_run()

    def _validation(self, wf: capture.Workflow, epoch: int) -> capture.Task:
        """The validation of ``epoch``: used the validation set and the latest checkpoint."""
        self._validated.add(epoch)
        check = wf.task("validation", kind="validation", parent=self._training, index=epoch,
                        used=capture.datasets(self._val_ref))
        latest = next(reversed(self._checkpoints), None) if self._checkpoints else None
        if latest is not None:
            check.use(capture.models(model=capture.ref(latest)))
        return check

    # -- what the hooks read -----------------------------------------------------------

    def _hyperparameters(self, fit: Mapping[str, Any]) -> dict[str, Any]:
        values = settings({name: fit[name] for name in _FIT_ARGUMENTS if name in fit})
        params = getattr(self, "params", None) or {}
        adapter = getattr(fit.get("epoch_iterator"), "data_adapter", None)
        for name, value in (("epochs", params.get("epochs")), ("steps", params.get("steps")),
                            ("batch_size", getattr(adapter, "batch_size", None))):  # as Keras resolved them
            if values.get(name) is None and isinstance(value, int):
                values[name] = value
        values["callbacks"] = [type(c).__name__ for c in self._callbacks
                               if type(c).__name__ not in ("History", "ProgbarLogger")]
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            values["optimizer.class"] = type(optimizer).__name__
        for prefix, config in (("optimizer.", getattr(optimizer, "get_config", None)),
                               ("compile.", getattr(self.model, "get_compile_config", None))):
            try:
                found = config() if callable(config) else None
            except Exception:  # an optimizer of the user's without a config, a model not compiled
                found = None
            values.update(settings({k: v for k, v in (found or {}).items() if k != "optimizer"}, prefix))
        rates = _learning_rates(self.model)
        return {**values, "learning_rate": rates[(0, 0)]} if rates else values

    def _data(self, name: str, x: Any, y: Any, wf: capture.Workflow,
              split: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the ``dataset`` value, its characteristics) of the data used as ``name``: the
        file the callback was given (a part of it, when ``split``), else an id of the run."""
        location = self.dataset.get(name) if isinstance(self.dataset, Mapping) else \
            (self.dataset if name == "train_set" or (split and name == "val_set") else None)
        own_id = f"{wf.id}/data/{name}"
        if location is None:
            ref = capture.Ref(None, id=own_id)
        elif split:
            ref = capture.ref(os.fspath(location), id=own_id, derived_from=capture.ref(os.fspath(location)))
        else:
            ref = capture.ref(os.fspath(location))
        about: dict[str, Any] = {}
        if x is not None:
            about[f"{name}.type"] = type(x).__name__
            about.update(_shapes(x, f"{name}.shape"))
            size = _size(x)
            if size is not None:
                about[f"{name}.size"] = size
        if y is not None:
            about.update(_shapes(y, f"{name}.target_shape"))
        return {name: ref}, about

    def _note_learning_rate(self) -> None:
        if self._wf is None or self._training is None:
            return
        for change in self._lrs.changes(_learning_rates(self.model)):
            record_adaptation(self._wf, self._training, self._epoch_index, change,
                              self._technique(), several=False)

    def _technique(self) -> str:
        names = [type(c).__name__ for c in self._callbacks
                 if isinstance(c, (keras.callbacks.LearningRateScheduler, keras.callbacks.ReduceLROnPlateau))]
        schedule = getattr(getattr(self.model, "optimizer", None), "_learning_rate", None)
        if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            names.append(type(schedule).__name__)
        return "+".join(dict.fromkeys(names)) or "manual"

    def _checkpoint_paths(self, epoch: int | None, logs: Mapping[str, Any]) -> list[str]:
        """The file each ModelCheckpoint writes after ``epoch`` (its ``filepath`` filled in
        as ModelCheckpoint does: ``epoch + 1`` and the logs); None: the fixed names only."""
        out = []
        for callback in self._callbacks:
            if not isinstance(callback, keras.callbacks.ModelCheckpoint):
                continue
            template = str(getattr(callback, "filepath", "") or "")
            if "{" in template:
                if epoch is None:
                    continue
                try:
                    template = template.format(epoch=epoch + 1, **dict(logs))
                except Exception:  # a name of the batch (save_freq in batches): not known here
                    continue
            if template:
                out.append(os.path.abspath(template))
        return out

    def _note_checkpoints(self, epoch: int, logs: Mapping[str, Any]) -> None:
        """Remember the files ModelCheckpoint wrote during ``epoch`` (checked after it: that
        callback may come after this one): new, or changed since last looked at."""
        for path in self._checkpoint_paths(epoch, logs):
            now = _signature(path)
            if now is not None and now != self._seen_files.get(path):
                self._checkpoints.pop(path, None)
                self._checkpoints[path] = None  # the newest last
            self._seen_files[path] = now

    def _models(self) -> dict[str, Any]:
        """``model``: the newest file ModelCheckpoint wrote (with ``save_best_only``, the
        best); ``checkpoint.<file stem>``: every file it wrote."""
        out: dict[str, Any] = {}
        if self._checkpoints:
            out["model"] = capture.ref(next(reversed(self._checkpoints)))
        for path in self._checkpoints:
            # no "=" in names: the name=value columns of the queries split at it
            stem = os.path.basename(path).split(".")[0].replace("=", "_") or "checkpoint"
            name, n = f"checkpoint.{stem}", 2
            while name in out:
                name, n = f"checkpoint.{stem}-{n}", n + 1
            out[name] = capture.ref(path)
        return out


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except Exception:
        return None


def _frame_locals(function: str, model: Any) -> dict[str, Any]:
    """The locals of the running ``model.<function>`` (``fit`` / ``evaluate``), else {}."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_locals.get("self") is model:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def _device(model: Any) -> str | None:
    """Where the model's first weight lives (``cpu``, ``cuda:0``; a jax / tf device name)."""
    for weight in list(getattr(model, "weights", None) or [])[:1]:
        value = getattr(weight, "value", weight)
        device = getattr(value, "device", None)
        if device is None and callable(getattr(value, "devices", None)):
            device = next(iter(value.devices()), None)
        return str(device) if device is not None else None
    return None


def _signature(path: str) -> tuple[int, int, int] | None:
    """What tells a rewritten file from the same one (None: there is no file)."""
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return None


def _learning_rates(model: Any) -> dict[tuple[int, int], float]:
    """``{(0, 0): the optimizer's current rate}`` (a schedule's: at the current step)."""
    optimizer = getattr(model, "optimizer", None)
    try:  # the backend tensor, not the Variable (whose __array__ numpy 2 warns about)
        rate = optimizer.learning_rate if optimizer is not None else None
        lr = plain(keras.ops.convert_to_numpy(getattr(rate, "value", rate))) if rate is not None else None
    except Exception:  # no optimizer yet, or one without a learning rate
        return {}
    return {(0, 0): float(lr)} if isinstance(lr, (int, float)) and not isinstance(lr, bool) else {}


def _measures(logs: Mapping[str, Any] | None) -> dict[str, float]:
    return {k: v for k, v in numbers(logs or {}).items() if k not in _NOT_MEASURES}


def _model_settings(model: Any) -> dict[str, Any]:
    """The model's summary: name, class, layer count and classes, parameter counts."""
    layers = list(getattr(model, "layers", None) or [])
    values: dict[str, Any] = {"model.name": getattr(model, "name", None),
                              "model.class": type(model).__name__, "model.layers": len(layers),
                              "model.layer_classes": [type(layer).__name__ for layer in layers]}
    try:
        values["model.parameters"] = int(model.count_params())
        values["model.trainable_parameters"] = sum(math.prod(w.shape) for w in model.trainable_weights)
    except Exception:  # not built yet
        pass
    return settings({k: v for k, v in values.items() if v is not None})


def _shapes(value: Any, name: str) -> dict[str, Any]:
    """``{name: [dims]}`` of an array, ``{name.<key>: ...}`` of a dict / list of arrays."""
    members = value.items() if isinstance(value, Mapping) else \
        enumerate(value) if isinstance(value, (list, tuple)) else None
    if members is not None:
        out: dict[str, Any] = {}
        for key, member in members:
            out.update(_shapes(member, f"{name}.{key}"))
        return out
    shape = getattr(value, "shape", None)
    try:
        return {name: [None if d is None else int(d) for d in shape]} if shape is not None else {}
    except Exception:  # an unknown rank
        return {}


def _size(value: Any) -> int | None:
    """How many samples (a PyDataset or tf.data set: its length, in batches)."""
    if isinstance(value, Mapping):
        value = next(iter(value.values()), None)
    elif isinstance(value, (list, tuple)) and value and hasattr(value[0], "shape"):
        value = value[0]
    shape = getattr(value, "shape", None)
    try:
        return int(shape[0]) if shape else len(value)
    except Exception:
        return None
