"""Hugging Face Transformers: ``Trainer(callbacks=[ProvenanceCallback(sink=..., workflow=...)])``.

The callback records, with no spec and no other code (its events say their kinds and
roles, so ingest types them as PROV-ML):

- each ``trainer.train()`` as a run of ``workflow`` (its label: ``args.run_name``; tags and
  ``environment.*`` values: transformers, torch and accelerate versions, the device),
  holding a ``training`` task (kind training) that uses every hyperparameter (every
  ``TrainingArguments`` field by its own name, ``learning_rate`` included, the model
  config's scalars as ``model.*``, the optimizer's class and settings as ``optimizer.*``,
  the scheduler's class as ``scheduler.class``) and the train / eval data sets, and
  generates the last epoch's measures, the trainer's summary (``train_loss``,
  ``train_runtime``, ...) and each checkpoint folder ``on_save`` wrote (role model;
  ``model``: the best checkpoint, else the last one);
- an ``epoch`` section per epoch (index = the epoch number, an integer) generating, for
  each metric the epoch's training logs hold, the mean of its logged values (``loss``: the
  mean of the epoch's logged training losses, what query d3 reads), and under it a
  ``step`` section per optimizer step (``batches="full"``; ``"summary"``: kept as per-epoch
  summaries; ``"none"``: no steps) generating that step's logged metrics;
- a ``validation`` task (kind validation, parent the training, index = the epoch) per
  evaluation during training, using the eval set and the checkpoint the save that follows
  it writes, generating the ``eval_*`` metrics;
- an ``adaptation`` task when the first learning rate logged in an epoch differs from the
  previous epoch's (technique = ``args.lr_scheduler_type``);
- ``trainer.evaluate()`` / ``trainer.predict()`` outside training as a run of its own
  (``<run_id>-evaluate`` / ``<run_id>-predict``) holding an ``evaluation`` task that uses
  the data set and the model (the best checkpoint, else the last saved) and depends on the
  training.

A training log (``on_log``) belongs to the epoch open when it arrives; where no epoch is
open (an evaluation after an epoch's end) its float ``epoch`` is mapped by
:func:`epoch_of`. Only the world process zero records. Every hook is guarded
(:func:`_common.guarded`): provenance never raises into training, and delivery runs in the
capture library's background thread.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import transformers
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from provkg import capture
from provkg.integrations._common import (
    BATCHES,
    FILE_ATTRIBUTES,
    BatchLog,
    LearningRates,
    callback_options,
    dataset_values,
    environment,
    guarded,
    numbers,
    plain,
    record_adaptation,
    settings,
)

__all__ = ["BATCHES", "ProvenanceCallback", "epoch_of"]

#: what ``batches=`` takes: a section per step, per-epoch summaries of them, or none
#: the options ``capture.workflow`` takes besides its name, sink and run id
#: what a log holds that is no measure: where it was logged (the rate is a hyperparameter)
_NOT_MEASURES = frozenset({"epoch", "step", "learning_rate"})
#: slack for HF's float epochs (``e + k / n``): an epoch's last log is ``e + 1`` up to rounding
_EPSILON = 1e-9


def epoch_of(logged: Any) -> int:
    """The integer epoch a log with HF's float ``epoch`` belongs to: epoch ``e``'s k-th of
    n steps logs ``e + k/n``, so its last one ``e + 1`` (ceil minus one, at least 0).

    >>> [epoch_of(x) for x in (0.1, 1.0, 1.0000000001, 2.5, None)]
    [0, 0, 0, 2, 0]
    """
    if not isinstance(logged, (int, float)) or isinstance(logged, bool) or math.isnan(logged):
        return 0
    return max(0, math.ceil(logged - _EPSILON) - 1)


class ProvenanceCallback(TrainerCallback):
    """Records a Hugging Face ``Trainer``'s provenance (see the module's docstring).

    Args:
        sink: where events go: ``file:DIR``, ``http(s)://HOST:PORT``, ``mqtt://...``, a Sink.
        workflow: the workflow name (the runs' ``workflow``; what d5 / d6 / runs take).
        run_id: the training's run id (default: a random one); a later ``evaluate`` /
            ``predict`` records a run ``<run_id>-evaluate`` / ``<run_id>-predict``.
        batches: ``"full"``, ``"summary"`` or ``"none"`` (see :data:`BATCHES`).
        capture_options: passed to ``capture.workflow`` (``label``, ``tags``, ``phase``,
            ``agent``, ``flush_timeout``, ``spool``, ...); a ``label`` or ``tags`` given
            here win over ``args.run_name`` and the environment's.
    """

    def __init__(self, *, sink: str | capture.Sink, workflow: str, run_id: str | None = None,
                 batches: str = "full", **capture_options: Any) -> None:
        super().__init__()
        self.sink, self.workflow, self.run_id = sink, workflow, run_id
        self.batches, self.options = callback_options(batches, capture_options)
        self._wf: capture.Workflow | None = None
        self._run_ids: set[str] = set()
        self._training: capture.Task | None = None
        self._training_id: str | None = None  # the last training's, for later evaluations
        self._epoch: capture.Task | None = None
        self._epoch_index = 0
        self._epoch_first_step = 0
        self._epoch_logs: dict[str, list[float]] = {}
        self._epoch_lr_seen = False  # the open epoch's first learning rate was compared
        self._last_epoch: dict[str, float] = {}
        self._summary: dict[str, float] = {}  # the trainer's closing log (train_loss, ...)
        self._batches = BatchLog("step", granularity=self.batches)
        self._step_values: list[Any] | None = None  # the open step's, as on_log gives them
        self._check: capture.Task | None = None  # the open validation
        self._checkpoints: list[str] = []  # the folders on_save wrote, in order
        self._lrs = LearningRates()
        self._val_set_used = False

    # -- runs --------------------------------------------------------------------------

    def _open_run(self, args: Any, state: Any, stage: str) -> capture.Workflow | None:
        """The open run, else a new one for ``stage`` (None off the world process zero)."""
        if self._wf is not None:
            return self._wf
        if not getattr(state, "is_world_process_zero", True):
            return None
        run_id = self.run_id
        if run_id is not None and run_id in self._run_ids:
            run_id, n = f"{self.run_id}-{stage}", 2
            while run_id in self._run_ids:
                run_id, n = f"{self.run_id}-{stage}-{n}", n + 1
        tags, values = _environment(args)
        options = dict(self.options)
        options["tags"] = {**tags, **dict(options.get("tags") or {})}
        options.setdefault("phase", "learning")
        run_name = getattr(args, "run_name", None)
        if options.get("label") is None and isinstance(run_name, str) and run_name:
            options["label"] = run_name[:256]
        wf = capture.workflow(self.workflow, sink=self.sink, run_id=run_id, **options)
        self._run_ids.add(wf.id)
        wf.use(values)
        self._wf = wf.begin()
        return wf

    def _end_run(self, status: str = "finished", message: str | None = None) -> None:
        stopped = message or "the trainer stopped while this task was open"
        self._step_values = None  # a step still open ends with the run's status
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
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._wf is not None:  # Trainer has no exception hook: the last train() raised
            self._end_run("failed", "a new training began before this one ended")
        wf = self._open_run(args, state, "train")
        if wf is None:
            return
        values = _hyperparameters(args, kwargs.get("model"), kwargs.get("optimizer"),
                                  kwargs.get("lr_scheduler"))
        training = wf.task("training", kind="training", used=capture.hyperparameters(values))
        refs, about = _datasets(kwargs.get("train_dataloader"), "train_set", wf)
        training.use(capture.datasets(refs))
        training.use(capture.with_role("dataset_characteristic", about))
        self._training = training.begin()
        self._training_id = training.id
        self._lrs, self._checkpoints, self._val_set_used = LearningRates(), [], False
        self._last_epoch, self._summary = {}, {}

    @guarded
    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._wf is None or self._training is None:
            return
        self._end_step()
        done = state.epoch if isinstance(state.epoch, (int, float)) else 0
        self._epoch_index = max(0, math.floor(done + _EPSILON))
        self._epoch_first_step = state.global_step
        self._epoch_logs, self._epoch_lr_seen = {}, False
        self._epoch = self._wf.task("epoch", kind="section", parent=self._training,
                                    index=self._epoch_index).begin()

    @guarded
    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._wf is None or self._epoch is None or self.batches == "none":
            return
        self._end_step()
        self._batches.begin(state.global_step - self._epoch_first_step)
        self._step_values = []

    @guarded
    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if self._training is None or self._wf is None or not isinstance(logs, Mapping):
            return
        values = numbers(logs)
        if self._check is not None or _is_evaluation_log(values):
            return  # an evaluation's: on_evaluate records it
        if "train_runtime" in values:  # the trainer's closing summary
            self._summary = {k: v for k, v in values.items() if k not in _NOT_MEASURES}
            return
        lr = values.get("learning_rate")
        found = {k: v for k, v in values.items() if k not in _NOT_MEASURES}
        if self._epoch is None:
            return
        for name, value in found.items():
            self._epoch_logs.setdefault(name, []).append(value)
        if lr is not None and not self._epoch_lr_seen:
            self._epoch_lr_seen = True
            kind = getattr(args, "lr_scheduler_type", None)  # a str-valued SchedulerType
            technique = str(getattr(kind, "value", kind) or "manual")
            for change in self._lrs.changes({(0, 0): lr}):
                record_adaptation(self._wf, self._training, self._epoch_index, change, technique,
                                  several=False)
        if self._step_values is not None:
            self._step_values.append(capture.measures(found))
            if lr is not None:
                self._step_values.append(capture.hyperparameters(learning_rate=lr))

    @guarded
    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end_step()
        self._batches.flush(self._wf, self._epoch)
        epoch, self._epoch = self._epoch, None
        if epoch is None:
            return
        self._last_epoch = {name: math.fsum(logged) / len(logged)
                            for name, logged in self._epoch_logs.items() if logged}
        epoch.generate(capture.measures(self._last_epoch))
        epoch.end()

    @guarded
    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._training is None:
            return
        folder = _checkpoint_folder(args, state)
        if folder in self._checkpoints:
            return
        self._checkpoints.append(folder)
        self._training.generate(capture.models({f"checkpoint.{os.path.basename(folder)}":
                                                capture.ref(folder)}))

    @guarded
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        training = self._training
        if training is None:
            return
        self._end_step()
        training.generate(capture.measures({**self._last_epoch, **self._summary}))
        model = self._model_folder(args, state)
        if model is not None:
            training.generate(capture.models(model=capture.ref(model)))
        self._end_run()

    def _end_step(self) -> None:
        """The open step ends now (recorded with its epoch's next batch of steps)."""
        values, self._step_values = self._step_values, None
        if values is not None and self._batches.end(values):
            self._batches.flush(self._wf, self._epoch)

    # -- evaluations -------------------------------------------------------------------

    @guarded
    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # an evaluation the training loop runs (should_evaluate stays set until on_evaluate),
        # not a predict() called meanwhile
        if self._check is None and self._training is not None and getattr(control, "should_evaluate", False):
            self._check = self._begin_validation(state, kwargs.get("eval_dataloader"))

    @guarded
    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None,
                    **kwargs: Any) -> None:
        if self._training is None:
            self._evaluation_run("evaluate", "eval_set", args, state, metrics, kwargs)
            return
        check, self._check = self._check, None
        check = check or self._begin_validation(state, kwargs.get("eval_dataloader"))
        if check is None:
            return
        if getattr(control, "should_save", False):  # the save that follows writes this model
            check.use(capture.models(model=capture.ref(_checkpoint_folder(args, state))))
        check.generate(capture.measures(_measures(metrics)))
        check.end()

    @guarded
    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None,
                   **kwargs: Any) -> None:
        self._evaluation_run("predict", "test_set", args, state, metrics, kwargs)

    def _begin_validation(self, state: Any, loader: Any) -> capture.Task | None:
        if self._wf is None or self._training is None:
            return None
        refs, about = _datasets(loader, "val_set", self._wf)
        if not self._val_set_used and refs:
            self._training.use(capture.datasets(refs))
            self._training.use(capture.with_role("dataset_characteristic", about))
            self._val_set_used = True
        return self._wf.task("validation", kind="validation", parent=self._training,
                             index=epoch_of(state.epoch), used=capture.datasets(refs)).begin()

    def _evaluation_run(self, stage: str, name: str, args: Any, state: Any, metrics: Any,
                        kwargs: Mapping[str, Any]) -> None:
        """``trainer.evaluate`` / ``trainer.predict``: an ``evaluation`` task (in a run of its
        own outside training) using the data set and the model, depending on the training."""
        opened = self._wf is None
        wf = self._open_run(args, state, stage)
        if wf is None:
            return
        refs, about = _datasets(kwargs.get("eval_dataloader"), name, wf)
        task = wf.task("evaluation", kind="evaluation", used=capture.datasets(refs),
                       dependencies=[self._training_id] if self._training_id else None)
        task.use(capture.with_role("dataset_characteristic", about))
        model = self._model_folder(args, state)
        if model is not None:
            task.use(capture.models(model=capture.ref(model)))
        with task:
            task.generate(capture.measures(_measures(metrics)))
        if opened:
            self._end_run()

    def _model_folder(self, args: Any, state: Any) -> str | None:
        """The trainer's best checkpoint (``metric_for_best_model``), else the last saved."""
        best = getattr(state, "best_model_checkpoint", None)
        if isinstance(best, str) and best:
            return best
        return self._checkpoints[-1] if self._checkpoints else None


# -- what the hooks read ---------------------------------------------------------------


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except Exception:
        return None


def _environment(args: Any) -> tuple[dict[str, str], dict[str, Any]]:
    device = str(getattr(args, "device", "") or "") or None
    more = {"n_gpu": getattr(args, "n_gpu", None), "world_size": getattr(args, "world_size", None),
            "parallel_mode": plain(getattr(args, "parallel_mode", None))}
    versions = {"transformers": transformers.__version__, "torch": _version("torch"),
                "accelerate": _version("accelerate")}
    return environment("transformers", versions, device, **more)


def _hyperparameters(args: Any, model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Every ``TrainingArguments`` field (``args.to_dict()``: tokens masked) by its name, the
    resolved batch sizes, the model's class, size and config scalars (``model.*``), the
    optimizer's and the scheduler's settings."""
    values = settings(args.to_dict())
    for name in ("train_batch_size", "eval_batch_size"):
        try:
            values[name] = plain(getattr(args, name))
        except Exception:  # a property that needs a device
            pass
    if model is not None:
        values["model.class"] = type(model).__name__
        config = getattr(model, "config", None)
        to_dict = getattr(config, "to_dict", None)
        if callable(to_dict):
            values.update({f"model.{k}": v for k, v in to_dict().items()
                           if isinstance(v, (bool, int, float, str)) and isinstance(k, str)})
        try:
            values["model.parameters"] = sum(p.numel() for p in model.parameters())
        except Exception:
            pass
    values.update(_optimizer_settings(optimizer, scheduler))
    return values


def _unwrapped(held: Any, attribute: str) -> Any:
    """What accelerate's ``AcceleratedOptimizer`` / ``AcceleratedScheduler`` wraps."""
    inner = getattr(held, attribute, None)
    return inner if inner is not None and type(held).__name__.startswith("Accelerated") else held


def _optimizer_settings(optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """The optimizer's class and its first parameter group's settings (later groups: what
    differs, e.g. the no-decay group's ``weight_decay``), the scheduler's class. ``on_train_begin``
    comes after the scheduler's first factor was applied (0 under warmup): ``lr`` is the
    group's ``initial_lr``, the rate the scheduler scales."""
    out: dict[str, Any] = {}
    if optimizer is not None:
        optimizer = _unwrapped(optimizer, "optimizer")
        out["optimizer.class"] = type(optimizer).__name__
        # lr: the scheduler's base rate (``initial_lr``), not the factor already applied
        groups = [{**{k: v for k, v in g.items() if k not in ("params", "initial_lr")},
                   "lr": g.get("initial_lr", g.get("lr"))}
                  for g in getattr(optimizer, "param_groups", [])]
        if groups:
            out.update(settings(groups[0], "optimizer."))
        for j, group in enumerate(groups[1:], 1):
            out.update(settings({k: v for k, v in group.items() if groups[0].get(k) != v},
                                f"optimizer.group_{j}."))
    if scheduler is not None:
        out["scheduler.class"] = type(_unwrapped(scheduler, "scheduler")).__name__
    return out


def _datasets(loader: Any, name: str, wf: capture.Workflow) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data set a loader reads as (``{name: ref}``, its size and type), else ({}, {})."""
    dataset = getattr(loader, "dataset", None)
    if dataset is None:
        return {}, {}
    refs, about = dataset_values(name, dataset, run_id=wf.id)
    arrow = _arrow_file(dataset)
    if arrow is not None:  # a `datasets.Dataset`: where its Arrow cache lives
        refs = {name: capture.ref(arrow)}
    return refs, about


def _arrow_file(dataset: Any) -> str | None:
    """The first Arrow cache file of a Hugging Face ``datasets.Dataset`` (``cache_files``)
    that names no file of its own the way :func:`_common.dataset_values` reads (private:
    ``_common`` has no such reader)."""
    if any(isinstance(getattr(dataset, a, None), (str, os.PathLike)) for a in FILE_ATTRIBUTES):
        return None
    files = getattr(dataset, "cache_files", None)
    if isinstance(files, list) and files and isinstance(files[0], Mapping):
        filename = files[0].get("filename")
        if isinstance(filename, str) and filename:
            return filename
    return None


def _checkpoint_folder(args: Any, state: Any) -> str:
    """The folder the Trainer saves a checkpoint of this step to."""
    return os.path.join(os.fspath(args.output_dir), f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")


def _is_evaluation_log(values: Mapping[str, float]) -> bool:
    """A log an ``evaluate`` / ``predict`` wrote (``<prefix>_runtime``, not ``train_``)."""
    return any(k.endswith("_runtime") and not k.startswith("train_") for k in values)


def _measures(metrics: Any) -> dict[str, float]:
    return {k: v for k, v in numbers(metrics).items() if k not in _NOT_MEASURES} \
        if isinstance(metrics, Mapping) else {}
