"""What a Lightning-style trainer holds, read by duck typing; imports no framework.

- :func:`optimizer_settings` / :func:`trainer_settings`: the optimizers', schedulers' and
  ``Trainer(...)`` arguments' settings as dotted names (hyperparameters of the training);
- :func:`learning_rates` and :func:`scheduler_technique`: each parameter group's learning
  rate, and what changed it (for :class:`provkg.integrations._common.LearningRates`);
- :func:`metric_base`, :func:`without_step_twins` and :func:`logged_names`: Lightning's
  ``x_step`` / ``x_epoch`` names of one metric, and the names a loop's steps logged;
- :func:`package_version`: an installed distribution's version, None when it is not there.

Every reader takes the trainer as ``Any``: what it needs is attributes, not a class.
"""

from __future__ import annotations

import inspect
from importlib import metadata
from typing import Any

from provkg.integrations._common import plain, settings

__all__ = ["TRAINER_SPECIAL", "learning_rates", "logged_names", "metric_base",
           "optimizer_settings", "package_version", "scheduler_technique", "trainer_settings",
           "without_step_twins"]

#: Trainer arguments read another way than the attribute of their name
TRAINER_SPECIAL = frozenset({"self", "plugins", "callbacks", "logger", "accelerator", "strategy",
                             "devices", "precision", "profiler", "enable_checkpointing",
                             "enable_progress_bar"})


def package_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None (not installed, or unreadable)."""
    try:
        return metadata.version(distribution)
    except Exception:
        return None


def metric_base(name: str) -> str:
    """``name`` without Lightning's ``_step`` / ``_epoch`` suffix."""
    for suffix in ("_step", "_epoch"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def without_step_twins(values: dict[str, float]) -> dict[str, float]:
    """``values`` without ``x_step`` / ``x_epoch`` when ``x`` is there too (Lightning's
    names of one metric logged both on_step and on_epoch)."""
    return {k: v for k, v in values.items() if metric_base(k) == k or metric_base(k) not in values}


def optimizer_settings(trainer: Any) -> dict[str, Any]:
    """Each optimizer's class and its first parameter group's settings (lr, betas,
    weight_decay, ...; later groups: what differs), each scheduler's class, Lightning
    config and ``state_dict`` settings."""
    out: dict[str, Any] = {}
    optimizers = list(trainer.optimizers)
    for i, optimizer in enumerate(optimizers):
        prefix = "optimizer." if len(optimizers) == 1 else f"optimizer_{i}."
        out[f"{prefix}class"] = type(optimizer).__name__
        groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
        if groups:
            out.update(settings(groups[0], prefix))
        for j, group in enumerate(groups[1:], 1):
            out.update(settings({k: v for k, v in group.items() if groups[0].get(k) != v},
                                f"{prefix}group_{j}."))
    configs = list(trainer.lr_scheduler_configs)
    for i, config in enumerate(configs):
        prefix = "scheduler." if len(configs) == 1 else f"scheduler_{i}."
        scheduler = config.scheduler
        out[f"{prefix}class"] = type(scheduler).__name__
        out.update(settings({k: getattr(config, k, None) for k in ("interval", "frequency", "monitor")
                             if getattr(config, k, None) is not None}, prefix))
        try:
            state = scheduler.state_dict()
        except Exception:
            state = {}
        out.update(settings({k: v for k, v in state.items() if not k.startswith("_")
                             and k != "optimizer"}, prefix))
    return out


def trainer_settings(trainer: Any) -> dict[str, Any]:
    """Every argument of ``Trainer(...)``, as the trainer holds it after resolving defaults
    (``trainer.max_epochs``, ``trainer.precision``, ...), named ``trainer.<argument>``."""
    found: dict[str, Any] = {
        "accelerator": type(trainer.accelerator).__name__,
        "strategy": type(trainer.strategy).__name__,
        "devices": trainer.num_devices,
        "precision": trainer.precision,
        "logger": [type(logger).__name__ for logger in trainer.loggers],
        "callbacks": [type(callback).__name__ for callback in trainer.callbacks],
        "profiler": type(trainer.profiler).__name__,
        "enable_checkpointing": bool(trainer.checkpoint_callbacks),
        "enable_progress_bar": trainer.progress_bar_callback is not None,
    }
    for name in inspect.signature(type(trainer).__init__).parameters:
        if name in TRAINER_SPECIAL:
            continue
        for attribute in (name, f"_{name}"):
            try:
                value = getattr(trainer, attribute)
            except Exception:  # a property that needs a running loop
                continue
            found[name] = value
            break
    return settings(found, "trainer.")


def learning_rates(trainer: Any) -> dict[tuple[int, int], float]:
    """``{(optimizer index, parameter group index): learning rate}`` of every group that has
    a numeric ``lr``."""
    out: dict[tuple[int, int], float] = {}
    for i, optimizer in enumerate(trainer.optimizers):
        for j, group in enumerate(optimizer.param_groups):
            lr = plain(group.get("lr"))
            if isinstance(lr, (int, float)) and not isinstance(lr, bool):
                out[(i, j)] = float(lr)
    return out


def scheduler_technique(trainer: Any, optimizer_index: int) -> str:
    """The class name of the scheduler of that optimizer (``"manual"`` when none is)."""
    optimizers = list(trainer.optimizers)
    optimizer = optimizers[optimizer_index] if optimizer_index < len(optimizers) else None
    for config in trainer.lr_scheduler_configs:
        if getattr(config.scheduler, "optimizer", None) is optimizer:
            return type(config.scheduler).__name__
    return "manual"


def logged_names(trainer: Any) -> set[str]:
    """The names the running loop's steps logged (its result collection's)."""
    try:
        return {metric.meta.name for metric in trainer._results.values()}
    except Exception:
        return set()
