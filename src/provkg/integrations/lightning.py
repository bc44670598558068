"""PyTorch Lightning: ``Trainer(callbacks=[ProvenanceCallback(sink=..., workflow=...)])``.

The callback records, with no spec and no other code (its events say their kinds and
roles, so ingest types them as PROV-ML):

- each ``trainer.fit`` as a run of ``workflow`` (its label: the logger's name / version;
  tags and ``environment.*`` values: lightning and torch versions, the device), holding a
  ``training`` task (kind training) that uses every hyperparameter (the module's
  ``save_hyperparameters``, the optimizers' and schedulers' settings, the Trainer's
  arguments and the data loaders', as dotted names) and the train / validation data sets,
  and generates the last epoch's measures and the checkpoints ModelCheckpoint saved (role
  model: ``model`` is the best one);
- an ``epoch`` section per epoch (index = epoch) generating the epoch's logged metrics,
  and under it a ``batch`` section per batch (``batches="full"``; ``"summary"``: kept as
  per-epoch summaries; ``"none"``: no batches) generating its loss and step metrics;
- a ``validation`` task (kind validation, parent the training, index the epoch) per
  validation run outside the sanity check, generating the validation metrics and using the
  validation set and the latest checkpoint saved so far;
- an ``adaptation`` task per learning-rate change a scheduler made (seen at epoch start);
- ``trainer.test`` / ``trainer.validate`` as a run of their own holding an ``evaluation``
  (or ``validation``) task that uses the test set and the checkpoint tested (else the
  latest one the fit saved) and depends on the fit's training.

Only the process of global rank 0 records. Every hook is guarded (:func:`_common.guarded`):
provenance never raises into training, and delivery runs in the capture library's
background thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import lightning
from lightning.pytorch.callbacks import Callback

from provkg import capture
from provkg.integrations._common import (
    BATCHES,
    BatchLog,
    LearningRates,
    callback_options,
    environment,
    guarded,
    loader_datasets,
    loader_settings,
    loaders,
    numbers,
    plain,
    record_adaptation,
    run_label,
    settings,
)
from provkg.integrations._trainer import (
    learning_rates,
    logged_names,
    metric_base,
    optimizer_settings,
    package_version,
    scheduler_technique,
    trainer_settings,
    without_step_twins,
)

__all__ = ["BATCHES", "ProvenanceCallback"]

#: what ``batches=`` takes: a section per batch, per-epoch summaries of them, or none
#: the options ``capture.workflow`` takes besides its name, sink and run id


class ProvenanceCallback(Callback):
    """Records a Lightning training's provenance (see the module's docstring).

    Args:
        sink: where events go: ``file:DIR``, ``http(s)://HOST:PORT``, ``mqtt://...``, a Sink.
        workflow: the workflow name (the runs' ``workflow``; what d5 / d6 / runs take).
        run_id: the fit's run id (default: a random one); a later ``test`` / ``validate``
            with this callback records a run ``<run_id>-test`` / ``<run_id>-validate``.
        batches: ``"full"``, ``"summary"`` or ``"none"`` (see :data:`BATCHES`).
        capture_options: passed to ``capture.workflow`` (``label``, ``tags``, ``phase``,
            ``agent``, ``flush_timeout``, ``spool``, ...); a ``label`` or ``tags`` given
            here win over the logger's.
    """

    def __init__(self, *, sink: str | capture.Sink, workflow: str, run_id: str | None = None,
                 batches: str = "full", **capture_options: Any) -> None:
        super().__init__()
        self.sink, self.workflow, self.run_id = sink, workflow, run_id
        self.batches, self.options = callback_options(batches, capture_options)
        self._wf: capture.Workflow | None = None
        self._run_ids: set[str] = set()
        self._training: capture.Task | None = None
        self._training_id: str | None = None  # the last fit's, for later test / validate runs
        self._epoch: capture.Task | None = None
        self._batches = BatchLog(granularity=self.batches)
        self._check: capture.Task | None = None  # the open validation / evaluation
        self._check_before: dict[str, float] = {}
        self._check_logged: set[str] = set()
        self._checkpoints: dict[str, None] = {}  # saved checkpoint paths, in the order seen
        self._last_files: set[str] = set()  # those of them that are ModelCheckpoint's "last"
        self._lrs = LearningRates()
        self._step_only: set[str] = set()  # metrics logged on_step only: no epoch measure
        #: (the training loop's results, their count, [(name, result) logged on step]) as last looked up
        self._step_results: tuple[Any, int, list[tuple[str, Any]]] | None = None
        self._val_set_used = False

    # -- runs --------------------------------------------------------------------------

    def _open_run(self, trainer: Any, stage: str) -> capture.Workflow | None:
        """The open run, else a new one for ``stage`` (None off global rank 0)."""
        if self._wf is not None:
            return self._wf
        if not trainer.is_global_zero:
            return None
        run_id = self.run_id
        if run_id is not None and run_id in self._run_ids:
            run_id, n = f"{self.run_id}-{stage}", 2
            while run_id in self._run_ids:
                run_id, n = f"{self.run_id}-{stage}-{n}", n + 1
        tags, values = self._environment(trainer)
        options = dict(self.options)
        options["tags"] = {**tags, **dict(options.get("tags") or {})}
        options.setdefault("phase", "learning")
        if options.get("label") is None:
            logger = trainer.logger
            label = run_label(getattr(logger, "name", None), getattr(logger, "version", None)) \
                if logger is not None else None
            if label:
                options["label"] = label
        wf = capture.workflow(self.workflow, sink=self.sink, run_id=run_id, **options)
        self._run_ids.add(wf.id)
        wf.use(values)
        self._wf = wf.begin()
        return wf

    def _environment(self, trainer: Any) -> tuple[dict[str, str], dict[str, Any]]:
        import torch  # loaded already: Lightning imports it

        device = str(trainer.strategy.root_device)
        more: dict[str, Any] = {"accelerator": type(trainer.accelerator).__name__,
                                "devices": trainer.num_devices, "nodes": trainer.num_nodes}
        if device.startswith("cuda") and torch.cuda.is_available():
            more["device_name"] = torch.cuda.get_device_name(trainer.strategy.root_device)
        versions = {"lightning": lightning.__version__, "torch": torch.__version__,
                    "torchmetrics": package_version("torchmetrics")}
        return environment("lightning", versions, device, **more)

    def _end_run(self, status: str = "finished", message: str | None = None) -> None:
        stopped = message or "the trainer stopped while this task was open"
        self._batches.stop(self._wf, self._epoch, status, stopped)
        for task in (self._epoch, self._check, self._training):
            if task is not None:
                task.end(status, stopped)
        self._epoch = self._check = self._training = None
        wf, self._wf = self._wf, None
        if wf is not None:
            wf.end(status, message)

    @guarded
    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._checkpoints, self._last_files = {}, set()
        self._open_run(trainer, "fit")

    @guarded
    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._end_run()

    @guarded
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._end_run("failed", f"{type(exception).__name__}: {exception}"[:2000])

    # -- the training ------------------------------------------------------------------

    @guarded
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        wf = self._open_run(trainer, "fit")
        if wf is None:
            return
        training = wf.task("training", kind="training",
                           used=capture.hyperparameters(self._hyperparameters(trainer, pl_module)))
        refs, about = loader_datasets(trainer.train_dataloader, "train_set", run_id=wf.id)
        if trainer.val_dataloaders is not None:  # loaded by the sanity check
            more, more_about = loader_datasets(trainer.val_dataloaders, "val_set", run_id=wf.id)
            refs.update(more)
            about.update(more_about)
            self._val_set_used = True
        training.use(capture.datasets(refs))
        training.use(capture.with_role("dataset_characteristic", about))
        self._training = training.begin()
        self._training_id = training.id
        self._lrs = LearningRates()
        self._lrs.changes(learning_rates(trainer))
        self._step_only, self._step_results = set(), None

    @guarded
    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self._wf is None or self._training is None:
            return
        epoch = trainer.current_epoch
        self._note_checkpoints(trainer)
        lrs = learning_rates(trainer)
        for change in self._lrs.changes(lrs):
            record_adaptation(self._wf, self._training, epoch, change,
                              scheduler_technique(trainer, change.key[0]), several=len(lrs) > 1)
        self._epoch = self._wf.task("epoch", kind="section", parent=self._training,
                                    index=epoch).begin()

    @guarded
    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._epoch is not None and self.batches != "none":
            self._batches.begin(batch_idx)

    @guarded
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = self._step_values(trainer)
        if self._epoch is None or self.batches == "none":
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if "loss" not in step and loss is not None:
            detach = getattr(loss, "detach", None)  # holding the graph would hold its memory
            step["loss"] = detach() if callable(detach) else loss
        if self._batches.end(step):
            self._batches.flush(self._wf, self._epoch)

    @guarded
    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._batches.stop(self._wf, self._epoch, "finished", None)
        epoch, self._epoch = self._epoch, None
        if epoch is None:
            return
        epoch.generate(capture.measures(self._epoch_metrics(trainer)))
        epoch.end()

    @guarded
    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        training, self._training = self._training, None
        if training is None:
            return
        self._note_checkpoints(trainer)
        training.generate(capture.measures(self._epoch_metrics(trainer)))
        training.generate(capture.models(self._models(trainer)))
        training.end()

    # -- validation and test -----------------------------------------------------------

    @guarded
    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking:
            return
        if self._training is not None and self._wf is not None:  # within fit
            self._note_checkpoints(trainer)
            refs, about = loader_datasets(trainer.val_dataloaders, "val_set", run_id=self._wf.id)
            if not self._val_set_used:
                self._training.use(capture.datasets(refs))
                self._training.use(capture.with_role("dataset_characteristic", about))
                self._val_set_used = True
            latest = self._latest_checkpoint()
            check = self._wf.task("validation", kind="validation", parent=self._training,
                                  index=trainer.current_epoch, used=capture.datasets(refs))
            if latest is not None:
                check.use(capture.models(model=capture.ref(latest)))
            self._begin_check(trainer, check)
            return
        self._begin_stage(trainer, "validate", "validation", trainer.val_dataloaders, "val_set")

    @guarded
    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if self._check is not None:
            self._check_logged.update(logged_names(trainer))

    @guarded
    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._end_check(trainer)

    @guarded
    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._begin_stage(trainer, "test", "evaluation", trainer.test_dataloaders, "test_set")

    @guarded
    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        if self._check is not None:
            self._check_logged.update(logged_names(trainer))

    @guarded
    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._end_check(trainer)

    def _begin_stage(self, trainer: Any, stage: str, kind: str, held: Any, name: str) -> None:
        """A ``trainer.validate`` / ``trainer.test``: its run, and its validation /
        evaluation task using the data set and the checkpoint it checks."""
        wf = self._open_run(trainer, stage)
        if wf is None:
            return
        refs, about = loader_datasets(held, name, run_id=wf.id)
        tested = trainer.ckpt_path or self._latest_checkpoint()
        check = wf.task(kind, kind=kind, used=capture.datasets(refs),
                        dependencies=[self._training_id] if self._training_id else None)
        check.use(capture.with_role("dataset_characteristic", about))
        if tested:
            check.use(capture.models(model=capture.ref(os.fspath(tested))))
        self._begin_check(trainer, check)

    def _begin_check(self, trainer: Any, check: capture.Task) -> None:
        self._check = check.begin()
        self._check_before = numbers(trainer.callback_metrics)
        self._check_logged = set()

    def _end_check(self, trainer: Any) -> None:
        """End the open validation / evaluation with the metrics it logged: those its steps
        logged, and those new or changed since it began (logged at its epoch end)."""
        check, self._check = self._check, None
        if check is None:
            return
        now, before = numbers(trainer.callback_metrics), self._check_before
        logged = self._check_logged
        found = {k: v for k, v in now.items()
                 if k in logged or metric_base(k) in logged or k not in before or before[k] != v}
        check.generate(capture.measures(without_step_twins(found)))
        check.end()

    # -- what the hooks read -------------------------------------------------------------

    def _hyperparameters(self, trainer: Any, pl_module: Any) -> dict[str, Any]:
        values = settings(dict(getattr(pl_module, "hparams", None) or {}))
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is not None:
            values.update(settings(dict(getattr(datamodule, "hparams", None) or {}), "data."))
        values.update(optimizer_settings(trainer))
        values.update(trainer_settings(trainer))
        for split, held in (("train", trainer.train_dataloader),):
            for key, loader in loaders(held):
                values.update(loader_settings(loader, f"data.{split}{key}."))
        lrs = learning_rates(trainer)
        if lrs and "learning_rate" not in values:
            first = trainer.optimizers[0].param_groups[0]
            values["learning_rate"] = plain(first.get("initial_lr", first.get("lr")))
        return values

    def _step_values(self, trainer: Any) -> dict[str, Any]:
        """The values the current training step logged, by name, unread (tensors: read when
        the batch is recorded); notes the names logged on_step only (no epoch measure)."""
        try:  # each logged result's step value, as Lightning's own metrics(on_step=True)
            # the training loop's results (what trainer._results finds, walking the loops)
            results = getattr(getattr(trainer.fit_loop, "epoch_loop", None), "_results", None)
            if results is None:
                results = trainer._results
            # which results are logged on step changes only when one is added: looked up again then
            if self._step_results is None or self._step_results[0] is not results \
                    or self._step_results[1] != len(results):
                logged = [(r.meta.name, r) for _, r in results.valid_items()
                          if r.meta.on_step and isinstance(r.meta.name, str)]
                self._step_only.update(name for name, r in logged if not r.meta.on_epoch)
                self._step_results = (results, len(results), logged)
            return {name: r._forward_cache for name, r in self._step_results[2]
                    if r._forward_cache is not None}
        except Exception:  # another Lightning: the step-suffixed callback metrics
            step = {k[:-5]: v for k, v in trainer.callback_metrics.items() if k.endswith("_step")}
            values = without_step_twins(numbers(step))
            self._step_only.update(k for k in values if f"{k}_step" not in step)
            return values

    def _epoch_metrics(self, trainer: Any) -> dict[str, float]:
        values = without_step_twins(numbers(trainer.callback_metrics))
        return {k: v for k, v in values.items() if k not in self._step_only}

    def _note_checkpoints(self, trainer: Any) -> None:
        """Remember the files ModelCheckpoint saved (the top k, the best, the last)."""
        for callback in trainer.checkpoint_callbacks:
            for path in (*getattr(callback, "best_k_models", {}), callback.best_model_path):
                if path and str(path) not in self._checkpoints:
                    self._checkpoints[str(path)] = None
            last = getattr(callback, "last_model_path", "")
            if last and str(last) not in self._checkpoints:
                self._checkpoints[str(last)] = None
                self._last_files.add(str(last))

    def _latest_checkpoint(self) -> str | None:
        """The checkpoint saved last: an epoch's own file rather than ``last.ckpt``, which
        each save overwrites."""
        for path in reversed(self._checkpoints):
            if path not in self._last_files:
                return path
        return next(reversed(self._checkpoints), None) if self._checkpoints else None

    def _models(self, trainer: Any) -> dict[str, Any]:
        """``model``: the best checkpoint (else the last saved); ``checkpoint.<file stem>``:
        each checkpoint the fit saved."""
        out: dict[str, Any] = {}
        best = next((c.best_model_path for c in trainer.checkpoint_callbacks if c.best_model_path), None)
        best = best or self._latest_checkpoint()
        if best:
            out["model"] = capture.ref(best)
        for path in self._checkpoints:
            # no "=" in names: the name=value columns of the queries split at it
            stem = os.path.splitext(os.path.basename(path))[0].replace("=", "_") or "checkpoint"
            name, n = f"checkpoint.{stem}", 2
            while name in out:
                name, n = f"checkpoint.{stem}-{n}", n + 1
            out[name] = capture.ref(path)
        return out

