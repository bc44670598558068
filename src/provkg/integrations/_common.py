"""What every framework callback shares; imports no framework (duck typing only).

- :func:`guarded`: a hook that never raises into training: a failure is logged once per
  hook and cause, and the hook returns None.
- :func:`settings`: a configuration (trainer arguments, an optimizer's defaults, a module's
  hyperparameters) as ``{dotted name: capturable value}``: tensors and numpy scalars become
  numbers, objects their class name, so nothing is refused by the capture library.
- :func:`numbers`: logged metrics as ``{name: float}`` (one-element tensors read out).
- :class:`LearningRates` and :func:`record_adaptation`: every learning-rate change between
  two epoch starts, recorded as an ``adaptation`` task (what query d6 reads).
- :func:`loaders` / :func:`loader_settings`: the data loaders a trainer holds (one, a list,
  a dict, a combined loader) and their settings;
- :func:`dataset_values`: a data set as a reference (its location when file-backed) and its
  size, what a training or an evaluation used; :func:`loader_datasets`: those of the data
  sets a trainer's loaders hold.
"""

from __future__ import annotations

import enum
import functools
import inspect
import logging
import math
import os
import re
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, TypeVar, cast

from provkg import capture
from provkg.capture.roles import flat_items

__all__ = ["BATCHES", "FILE_ATTRIBUTES", "FLUSH_EVERY", "WORKFLOW_OPTIONS", "BatchLog", "LearningRates",
           "callback_options", "LrChange", "dataset_values", "environment",
           "guarded", "loader_datasets", "loader_settings", "loaders", "numbers", "plain",
           "record_adaptation", "report_once", "run_label", "settings"]

logger = logging.getLogger("provkg.integrations")

F = TypeVar("F", bound=Callable[..., Any])

_seen: set[Hashable] = set()
_MAX_CAUSES = 10_000
#: a value :func:`plain` cannot turn into a capturable one
_SKIP = object()
#: the attributes that say where a file-backed data set lives, in the order they are tried
FILE_ATTRIBUTES = ("path", "file", "filename", "filepath", "file_path", "root", "root_dir",
                   "data_dir", "data_path", "data_file", "directory")
#: most list members :func:`plain` keeps (longer lists are no setting: left out)
_MAX_LIST = 1_000


def report_once(cause: Hashable, message: str) -> None:
    """Log ``message`` (a warning) the first time ``cause`` is seen."""
    if cause in _seen:
        return
    if len(_seen) >= _MAX_CAUSES:
        _seen.clear()
    _seen.add(cause)
    try:
        logger.warning("provkg.integrations: %s", message)
    except Exception:  # a broken logging handler must not reach training either
        pass


def guarded(method: F) -> F:
    """``method`` that never raises (an ``Exception``; a KeyboardInterrupt still goes on):
    what it failed at is logged once per hook and cause, and training goes on."""

    @functools.wraps(method)
    def hook(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            report_once((method.__module__, method.__qualname__, type(exc)),
                        f"{method.__qualname__} failed, provenance of this step is incomplete "
                        f"(training goes on): {exc!r}")
            return None

    return cast(F, hook)


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as the capture library takes it (a JSON scalar, a list of them, a ref), else
    ``_SKIP``: one-element tensors and numpy scalars as numbers, small tensors and tuples as
    lists, paths as text, enums by value, classes and objects by their class name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, capture.Ref):
        return value
    if isinstance(value, enum.Enum):
        return plain(value.value, depth + 1)
    if isinstance(value, PurePath):
        return value.as_posix()
    item = getattr(value, "item", None)
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    if callable(item) and (size is None or (callable(size) and size() == 1) or size == 1):
        try:
            return plain(item(), depth + 1)  # a tensor or numpy scalar
        except Exception:
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, type):
        try:
            value = tolist()
        except Exception:
            return type(value).__name__
    if isinstance(value, (list, tuple, set, frozenset)) and depth < 4:
        members = list(value)
        if isinstance(value, (set, frozenset)):
            members = sorted(members, key=repr)
        if len(members) > _MAX_LIST:
            return _SKIP
        out = [plain(m, depth + 1) for m in members]
        return [m for m in out if m is not _SKIP]
    if isinstance(value, type):
        return value.__name__
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    return type(value).__name__


def settings(values: Any, prefix: str = "") -> dict[str, Any]:
    """A configuration (a mapping, dataclass, Namespace, pydantic model, OmegaConf config) as
    ``{prefix + dotted name: value}`` with every value made capturable (:func:`plain`); an
    empty nested mapping and values that cannot be captured are left out.

    >>> settings({"optimizer": {"lr": 0.1, "betas": (0.9, 0.99)}, "fn": len}, "x.")
    {'x.optimizer.lr': 0.1, 'x.optimizer.betas': [0.9, 0.99], 'x.fn': 'len'}
    """
    out: dict[str, Any] = {}
    for name, value in flat_items(values):
        if isinstance(value, Mapping) and not value:
            continue
        fitted = plain(value)
        if fitted is not _SKIP:
            out[prefix + name] = fitted
    return out


def numbers(metrics: Mapping[str, Any], names: Iterable[str] | None = None) -> dict[str, float]:
    """``{name: float}`` of the metrics that are one number (``names``: only those)."""
    wanted = None if names is None else set(names)
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or (wanted is not None and name not in wanted):
            continue
        kind = type(value)
        if kind is float or kind is int:
            out[name] = float(value)
            continue
        if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
            number = value.item()  # a 0-d tensor or a numpy scalar: the per-batch path
        else:
            number = plain(value)
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            out[name] = float(number)
    return out


def run_label(name: Any, version: Any) -> str | None:
    """A readable run name from a logger's name and version (``lightning_logs/version_3``:
    the folder Lightning's loggers write to), or None when it has neither."""
    parts = []
    if isinstance(name, str) and name:
        parts.append(name)
    if isinstance(version, int) and not isinstance(version, bool):
        parts.append(f"version_{version}")
    elif isinstance(version, str) and version:
        parts.append(version)
    return "/".join(parts)[:256] or None


@dataclass(frozen=True)
class LrChange:
    """One learning rate that changed: which optimizer / parameter group, from what to what."""

    key: tuple[int, int]
    old: float
    new: float


class LearningRates:
    """The learning rate of each (optimizer, parameter group), seen at each epoch start:
    :meth:`changes` says which changed since the last look."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], float] = {}

    def changes(self, current: Mapping[tuple[int, int], float]) -> list[LrChange]:
        """The changes since the previous call (none on the first), remembering ``current``."""
        out = [LrChange(key, self._seen[key], lr) for key, lr in current.items()
               if key in self._seen and not _same_number(self._seen[key], lr)]
        self._seen.update(current)
        return out


def _same_number(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def record_adaptation(wf: capture.Workflow, training: capture.Task, epoch: int,
                      change: LrChange, technique: str, *, several: bool) -> None:
    """An ``adaptation`` task under ``training`` at ``epoch`` (the epoch it took effect in):
    used the old ``learning_rate`` and the ``technique``, generated the new one (d6). With
    ``several`` optimizers or parameter groups, which one changed is recorded too."""
    used = capture.hyperparameters(learning_rate=change.old, technique=technique)
    if several:
        used.update(optimizer=change.key[0], param_group=change.key[1])
    with wf.task("adaptation", kind="adaptation", parent=training, index=epoch, used=used) as task:
        task.generate(capture.hyperparameters(learning_rate=change.new))


def environment(framework: str, versions: Mapping[str, str | None], device: str | None,
                **more: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """(the run's tags, its ``environment.*`` values): the framework, the versions of its
    packages (``{"lightning": "2.6.6", "torch": "2.13.0"}``; None: not installed, left out)
    and the device training ran on, with ``more`` (accelerator, device count) as values."""
    tags = {"framework": framework}
    tags.update({name: version for name, version in versions.items() if version})
    if device:
        tags["device"] = device
    values = settings({"framework": framework, **{k: v for k, v in versions.items() if v},
                       "device": device, **more}, "environment.")
    return tags, {k: v for k, v in values.items() if v is not None}


def _file_location(dataset: Any) -> str | None:
    for attribute in FILE_ATTRIBUTES:
        value = getattr(dataset, attribute, None)
        if isinstance(value, (str, PurePath, os.PathLike)) and str(value):
            return os.fspath(value)
    return None


def _name_part(text: str) -> str:
    """``text`` as a part of a value name or id (letters, digits, ``_``, ``-``, ``.``)."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", text).strip("_") or "data"


def dataset_values(name: str, dataset: Any, *, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the values of role ``dataset``, those of role ``dataset_characteristic``) of a data
    set used under ``name`` (``train_set``): a reference, by its location when it (or the
    data set a subset is of) says where its file lives, else by an id of this run; and its
    ``name.size`` (``len``) and ``name.type`` (class name).

    A subset of a file-backed data set is told apart from the whole file (its own id,
    derived from the file), so a run's train and validation subsets stay two data sets."""
    base = getattr(dataset, "dataset", None) if hasattr(dataset, "indices") else None
    location = _file_location(dataset)
    if location is None and base is not None:
        whole = _file_location(base)
        ref = capture.ref(whole, id=f"{run_id}/data/{_name_part(name)}", derived_from=capture.ref(whole)) \
            if whole else capture.Ref(None, id=f"{run_id}/data/{_name_part(name)}")
    elif location is not None:
        ref = capture.ref(location)
    else:
        ref = capture.Ref(None, id=f"{run_id}/data/{_name_part(name)}")
    about: dict[str, Any] = {f"{name}.type": type(dataset).__name__}
    try:
        about[f"{name}.size"] = len(dataset)
    except Exception:  # an iterable data set has no length
        pass
    return {name: ref}, about




def loaders(loaders: Any) -> Iterator[tuple[str, Any]]:
    """(name suffix, loader) of what a trainer holds: a loader, a list or a dict of them
    (``""`` for a single loader, ``".0"`` / ``".name"`` for several)."""
    if loaders is None:
        return
    flattened = getattr(loaders, "flattened", None)  # a CombinedLoader
    if isinstance(flattened, list):
        loaders = flattened
    if isinstance(loaders, Mapping):
        for key, loader in loaders.items():
            yield f".{key}", loader
    elif isinstance(loaders, (list, tuple)):
        if len(loaders) == 1:
            yield "", loaders[0]
        else:
            for i, loader in enumerate(loaders):
                yield f".{i}", loader
    else:
        yield "", loaders


def loader_settings(loader: Any, prefix: str) -> dict[str, Any]:
    """A data loader's settings (batch size, workers, ..., the sampler's class) as
    ``prefix``-ed names."""
    found = {name: getattr(loader, name) for name in ("batch_size", "num_workers", "drop_last",
                                                      "pin_memory") if hasattr(loader, name)}
    sampler = getattr(loader, "sampler", None)
    if sampler is not None:
        found["sampler"] = type(sampler).__name__
    return settings(found, prefix)


def loader_datasets(held: Any, name: str, *, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ``dataset`` values, the ``dataset_characteristic`` values) of the data sets the
    loaders ``held`` hold (:func:`loaders`), each named ``name`` plus its loader's suffix
    (:func:`dataset_values`); a loader without a ``dataset`` is left out."""
    refs: dict[str, Any] = {}
    about: dict[str, Any] = {}
    for key, loader in loaders(held):
        dataset = getattr(loader, "dataset", None)
        if dataset is not None:
            ref, more = dataset_values(f"{name}{key}", dataset, run_id=run_id)
            refs.update(ref)
            about.update(more)
    return refs, about


#: what the callbacks' ``batches`` option takes: every batch, per-epoch summaries, none
BATCHES = ("full", "summary", "none")
#: capture.workflow's options a callback passes on (its name, sink and run id are the callback's)
WORKFLOW_OPTIONS = frozenset(inspect.signature(capture.workflow).parameters) - {"name", "sink", "run_id"}


def callback_options(batches: str, capture_options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A callback's ``batches`` (``full`` for an unknown one) and the ``capture.workflow``
    options among ``capture_options``; what is dropped is said once, never raised."""
    if batches not in BATCHES:
        report_once(("batches", str(batches)[:40]), f"ProvenanceCallback batches={batches!r}: "
                    f"expected one of {', '.join(BATCHES)}; 'full' is used")
        batches = "full"
    unknown = sorted(set(capture_options) - WORKFLOW_OPTIONS)
    if unknown:
        report_once(("options", tuple(unknown)), "ProvenanceCallback: capture.workflow takes "
                    f"no {', '.join(unknown)}; ignored")
    return batches, {k: v for k, v in capture_options.items() if k in WORKFLOW_OPTIONS}


#: batches a :class:`BatchLog` holds before it records them: bounds its memory and how late
#: a batch reaches the sink (an epoch's end records the rest at once)
FLUSH_EVERY = 64


class BatchLog:
    """The batches of an epoch, recorded as ``section`` tasks in bulk.

    A batch costs the training loop a clock read and an append: its values stay as logged
    (a tensor is read out when recorded, so there is no device sync per batch) and its
    section is recorded with the times it began and ended when :meth:`end` says the log is
    full (:data:`FLUSH_EVERY`), at the epoch's end (:meth:`flush`), or when the run stops
    (:meth:`stop`: the batch still running is recorded with the run's status)."""

    __slots__ = ("name", "granularity", "_began", "_done")

    def __init__(self, name: str = "batch", granularity: str = "full") -> None:
        # batches="full" keeps every batch and, as any innermost section by default, the
        # per-epoch rollups the queries read
        self.name, self.granularity = name, "both" if granularity == "full" else granularity
        self._began: tuple[int | None, float] | None = None
        self._done: list[tuple[int | None, float, float, Any]] = []

    def begin(self, index: int | None = None) -> None:
        """A batch begins now (a batch begun before and not ended is recorded as ended now)."""
        now = time.time()
        if self._began is not None:
            self._done.append((*self._began, now, None))
        self._began = (index, now)

    def end(self, values: Any = None, index: int | None = None) -> bool:
        """The batch begun last ends now, with ``values`` (measures: a mapping of name:
        number or tensor, read at the flush; or a list of role mappings to generate as they
        are); True when the log is full and should be flushed. A batch never begun is left
        out."""
        began, self._began = self._began, None
        if began is None:
            return False
        self._done.append((began[0] if index is None else index, began[1], time.time(), values))
        return len(self._done) >= FLUSH_EVERY

    def flush(self, wf: capture.Workflow | None, parent: capture.Task | None) -> None:
        """Record the ended batches as sections of ``parent`` (nothing without a run)."""
        done, self._done = self._done, []
        if wf is None or parent is None:
            return
        for index, began, ended, values in done:
            task = wf.task(self.name, kind="section", parent=parent, index=index,
                           granularity=self.granularity).begin(at=began)
            if isinstance(values, list):  # values with their roles, as generated
                for part in values:
                    task.generate(part)
            elif values:
                task.generate(capture.measures(numbers(values)))
            task.end(at=ended)

    def stop(self, wf: capture.Workflow | None, parent: capture.Task | None, status: str,
             message: str | None) -> None:
        """Record what is held; the batch still running ends now with ``status``."""
        running, self._began = self._began, None
        self.flush(wf, parent)
        if running is not None and wf is not None and parent is not None:
            task = wf.task(self.name, kind="section", parent=parent, index=running[0],
                           granularity=self.granularity).begin(at=running[1])
            task.end(status, message)
