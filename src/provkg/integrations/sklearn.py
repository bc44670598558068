"""scikit-learn provenance: hyperparameter searches and ``partial_fit`` loops as PROV-ML.

scikit-learn has no callback API, so :class:`ProvenanceCallback` records what an estimator
already holds (``cv_results_``, ``get_params()``) and wraps the two calls worth timing
(``search.fit``, ``estimator.partial_fit``). Every value carries its role and every task its
kind, so the events ingest as PROV-ML without a written spec:

- a search (``GridSearchCV``, ``RandomizedSearchCV``, any ``BaseSearchCV``) is one run; each
  candidate is a ``training`` task (index = the candidate's position in ``cv_results_``) that
  used its hyperparameters and the data set, and generated its scores; each CV split is a
  ``validation`` task whose parent is the candidate's training; the refit best estimator is a
  ``model`` the best candidate's training generated;
- a ``partial_fit`` loop (``callback.training(...)``) is one run with one ``training``: its
  epochs are sections (parent = the training, index = the epoch), each ``partial_fit`` call a
  batch section of its epoch (``batches``), a learning-rate change an ``adaptation``.

Invariant: nothing here raises into user code. Every recording step is guarded
(:func:`_common.guarded`: a failure is logged once per cause); exceptions of the user's own
calls (``fit``, ``partial_fit``, the ``with`` body) propagate unchanged, after the run is
ended ``failed``. Estimators are duck-typed: importing this module imports no scikit-learn.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any

from provkg import capture
from provkg.integrations._common import (
    BatchLog,
    LearningRates,
    LrChange,
    guarded,
    plain,
    record_adaptation,
    report_once,
)
from provkg.integrations._datasets import array_dataset_values, shape

__all__ = ["ProvenanceCallback", "TrainingRecorder"]

#: what ``batches=`` takes: every batch a section, per-epoch summaries, or no batch at all
BATCH_MODES = ("full", "summary", "none")
#: estimator parameters that hold the step size, in the order they are looked for (SGD*,
#: Perceptron and PassiveAggressive: ``eta0``; MLP*: ``learning_rate_init``)
_RATE_PARAMS = ("eta0", "learning_rate_init", "learning_rate")
#: longest text kept for a parameter value that is an object (an estimator, a callable)
_MAX_TEXT = 200
#: an estimator has one step size: its key as an (optimizer, parameter group) of LrChange
_ONE = (0, 0)


class ProvenanceCallback:
    """Record scikit-learn searches and ``partial_fit`` loops into provkg.

    Args:
        sink: where events go (``file:DIR``, ``http(s)://...``, ``mqtt://...``, a ``Sink``).
        workflow: the prospective workflow name every run of this callback belongs to.
        run_id: the id of the first run recorded (default: random); later runs of the same
            callback get ``{run_id}-2``, ``{run_id}-3``... (each recording is a run of its own).
        batches: ``"full"`` (each ``partial_fit`` call a batch section), ``"summary"`` (the
            same sections kept as per-epoch summaries) or ``"none"``.
        capture_options: passed to :func:`provkg.capture.workflow` (``agent``,
            ``flush_timeout``, ``spool``, ``label``, ``tags``...).
    """

    def __init__(self, *, sink: Any, workflow: str, run_id: str | None = None,
                 batches: str = "full", **capture_options: Any) -> None:
        self.sink = sink
        self.workflow = workflow
        self.run_id = run_id
        if batches not in BATCH_MODES:
            report_once(("sklearn", "batches", str(batches)[:40]), f"ProvenanceCallback: "
                        f"batches={batches!r} is not one of {BATCH_MODES}; 'full' is used")
            batches = "full"
        self.batches = batches
        self._label = capture_options.pop("label", None)
        self._tags = dict(capture_options.pop("tags", None) or {})
        self._options = capture_options
        self._runs = 0

    # -- searches -------------------------------------------------------------------

    def fit(self, search: Any, X: Any, y: Any = None, *, dataset: Any = None,
            model_path: str | PurePath | None = None, **fit_params: Any) -> Any:
        """``search.fit(X, y, **fit_params)`` inside a run, then :meth:`record_search`.

        The run begins before the fit (its start and duration are the search's); an
        exception of the fit ends it ``failed`` and propagates. Returns the fitted search."""
        run = self._open(search, search=True)
        try:
            search.fit(X, y, **fit_params)
        except BaseException as exc:
            _end(run, exc)
            raise
        self._record_search(run, search, X, y, dataset, model_path)
        _end(run, None)
        return search

    def record_search(self, search: Any, X: Any = None, y: Any = None, *, dataset: Any = None,
                      model_path: str | PurePath | None = None) -> None:
        """Record a search already fitted (``GridSearchCV`` / ``RandomizedSearchCV``).

        ``X`` / ``y`` give the data set's shape and, without ``dataset=``, its content id;
        ``dataset`` is where the data lives (a path, a URI, a ``capture.ref``); ``model_path``
        where the refit best estimator is (or will be) saved."""
        if not isinstance(getattr(search, "cv_results_", None), Mapping):
            report_once(("sklearn", "unfitted", type(search)), "ProvenanceCallback.record_search: "
                        f"{type(search).__name__} has no cv_results_ (call it after fit); "
                        "nothing recorded")
            return
        run = self._open(search, search=True)
        self._record_search(run, search, X, y, dataset, model_path)
        _end(run, None)

    @guarded
    def _record_search(self, run: Any, search: Any, X: Any, y: Any, dataset: Any,
                       model_path: str | PurePath | None) -> None:
        if run is None:
            return
        results = search.cv_results_
        estimator = getattr(search, "estimator", None)
        base = _params(estimator)
        metrics = _metrics(search, results)
        best = getattr(search, "best_index_", None)
        refitted = getattr(search, "best_estimator_", None)
        data = array_dataset_values(X, y, dataset, run_id=run.id)
        n_splits = getattr(search, "n_splits_", 0)
        name = _class_name(estimator)
        for i, candidate in enumerate(results["params"]):
            hyperparameters = {**base, **_params_of(candidate)}
            training = run.task("training", kind="training", index=i)
            training.use(capture.hyperparameters(hyperparameters))
            for values in data:
                training.use(values)
            training.use(capture.with_role("plain", candidate=f"{name}#{i}"))
            training.begin()
            for split in range(n_splits):
                _record_split(run, training, results, metrics, i, split)
            training.generate(capture.measures(_candidate_measures(results, metrics, i)))
            if refitted is not None and best == i:
                training.generate(capture.models(model=_model_ref(run, model_path, "best_estimator")))
                refit_time = getattr(search, "refit_time_", None)
                if refit_time is not None:
                    training.generate(capture.measures(refit_time=refit_time))
            training.end()

    # -- partial_fit loops ----------------------------------------------------------

    @contextmanager
    def training(self, estimator: Any, X: Any = None, y: Any = None, *, dataset: Any = None,
                 model_path: str | PurePath | None = None,
                 hyperparameters: Mapping[str, Any] | None = None) -> Iterator[TrainingRecorder]:
        """A run with one training of ``estimator``, for a loop of ``partial_fit`` calls::

            with callback.training(clf, X, y, dataset="data/train.csv") as t:
                for epoch in range(3):
                    for Xb, yb in chunks:
                        t.partial_fit(Xb, yb, classes=classes)   # a batch of this epoch
                    t.epoch(loss=..., accuracy=...)              # ends the epoch

        ``hyperparameters`` are recorded besides ``estimator.get_params()``. An exception of
        the ``with`` body ends the training and the run ``failed`` and propagates."""
        recorder = TrainingRecorder(self, estimator, X, y, dataset, model_path, hyperparameters)
        try:
            yield recorder
        except BaseException as exc:
            recorder._close(exc)
            raise
        recorder._close(None)

    # -- runs -----------------------------------------------------------------------

    @guarded
    def _open(self, estimator: Any, *, search: bool) -> Any:
        """A begun run for one recording, labelled after the estimator (None if that failed)."""
        self._runs += 1
        run_id = self.run_id
        if run_id is not None and self._runs > 1:
            run_id = f"{run_id}-{self._runs}"
        inner = getattr(estimator, "estimator", None) if search else None
        label = self._label or (f"{type(estimator).__name__}({_class_name(inner)})" if search
                                else _class_name(estimator))
        tags = {"framework": "scikit-learn", "estimator": _class_name(inner if search else estimator)}
        if search:
            tags["search"] = type(estimator).__name__
        version = getattr(sys.modules.get("sklearn"), "__version__", None)
        if isinstance(version, str):
            tags["sklearn"] = version
        tags.update({str(k): str(v) for k, v in self._tags.items()})
        run = capture.workflow(self.workflow, sink=self.sink, run_id=run_id, label=label,
                               tags=tags, phase="learning", **self._options)
        return run.begin()


class TrainingRecorder:
    """The training of one ``callback.training(...)`` block: epochs, batches, adaptations.

    Every method records and never raises; :meth:`partial_fit` also calls the estimator
    (its exceptions propagate)."""

    def __init__(self, callback: ProvenanceCallback, estimator: Any, X: Any, y: Any,
                 dataset: Any, model_path: str | PurePath | None,
                 hyperparameters: Mapping[str, Any] | None) -> None:
        self.estimator = estimator
        self.epochs = 0  #: epochs ended so far (the index of the next one)
        self._batches = callback.batches
        self._batch_log = BatchLog(granularity=self._batches)
        self._model_path = model_path
        self._run: Any = None
        self._training: Any = None
        self._epoch: Any = None
        self._batch_index = 0
        self._last: dict[str, Any] = {}  # the last epoch's metrics: the training's final ones
        self._own: dict[str, Any] = {}  # measures given to measures(): they win over _last
        current = _learning_rates(estimator)
        self._rate = current.get(_ONE)  #: the learning rate as last recorded
        self._lrs = LearningRates()  # the estimator's own, as read at each epoch start
        self._lrs.changes(current)
        self._used_names: set[str] = set()
        self._begin(callback, X, y, dataset, hyperparameters)

    @guarded
    def _begin(self, callback: ProvenanceCallback, X: Any, y: Any, dataset: Any,
               hyperparameters: Mapping[str, Any] | None) -> None:
        self._run = run = callback._open(self.estimator, search=False)
        if run is None:
            return
        training = run.task("training", kind="training")
        params = _params(self.estimator)
        training.use(capture.hyperparameters(params))
        if hyperparameters:
            training.use(capture.hyperparameters(hyperparameters))
        self._used_names = set(params) | set(capture.hyperparameters(hyperparameters or {}))
        for values in array_dataset_values(X, y, dataset, run_id=run.id):
            training.use(values)
        self._training = training.begin()

    @property
    def id(self) -> str | None:
        """The training task's id (what ``d3 -p training=...`` takes), None if not recorded."""
        return getattr(self._training, "id", None)

    def partial_fit(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """``estimator.partial_fit(X, y, **fit_params)``, recorded as a batch of the current
        epoch (per ``batches``); returns what it returns."""
        epoch = self._current_epoch()
        self._begin_batch(epoch)
        try:
            result = self.estimator.partial_fit(X, y, **fit_params)
        except BaseException as exc:
            self._stop_batches(exc)
            raise
        self._end_batch(X)
        return result

    @guarded
    def epoch(self, **metrics: Any) -> int | None:
        """End the current epoch (begun at its first ``partial_fit``, or now) with the
        metrics it reached (``loss=``, ``accuracy=``...: evaluation measures). Returns its
        index."""
        epoch = self._current_epoch()
        if epoch is None:
            return None
        if metrics:
            epoch.generate(capture.measures(metrics))
            self._last.update(metrics)
        self._batch_log.stop(self._run, epoch, "finished", None)
        epoch.end()
        self._epoch = None
        self.epochs += 1
        return self.epochs - 1

    @guarded
    def measures(self, **metrics: Any) -> None:
        """Measures of the training itself (a held-out score after the loop)."""
        self._own.update(metrics)

    @guarded
    def adapt(self, learning_rate: float, *, technique: str = "manual") -> None:
        """Record a change of the learning rate, effective from the next epoch (a change made
        with ``estimator.set_params(eta0=...)`` is detected on its own, as ``set_params``)."""
        self._adaptation(self._rate, learning_rate, technique)
        self._rate = learning_rate

    def _adaptation(self, old: Any, new: Any, technique: str) -> None:
        if self._run is None or self._training is None:
            return
        record_adaptation(self._run, self._training, self.epochs, LrChange(_ONE, old, new),
                          technique, several=False)

    def _current_epoch(self) -> Any:
        """The open epoch section, begun now if none is (a learning-rate change since the
        last epoch is recorded first, as an adaptation at this epoch)."""
        if self._epoch is None and self._run is not None and self._training is not None:
            self._begin_epoch()
        return self._epoch

    @guarded
    def _begin_epoch(self) -> None:
        for change in self._lrs.changes(_learning_rates(self.estimator)):
            if change.new != self._rate:  # not already told by adapt()
                self._adaptation(self._rate, change.new, "set_params")
                self._rate = change.new
        self._epoch = self._run.task("epoch", parent=self._training, index=self.epochs).begin()
        self._batch_index = 0

    @guarded
    def _begin_batch(self, epoch: Any) -> None:
        if epoch is None or self._batches == "none":
            return
        self._batch_log.begin(self._batch_index)
        self._batch_index += 1

    @guarded
    def _end_batch(self, X: Any) -> None:
        samples = shape(X)
        values = [capture.with_role("plain", samples=samples[0])] if samples else None
        if self._batch_log.end(values):
            self._batch_log.flush(self._run, self._epoch)

    @guarded
    def _stop_batches(self, exc: BaseException) -> None:
        """The batch that raised ends ``failed`` (those before it as they ended)."""
        self._batch_log.stop(self._run, self._epoch, "failed", f"{type(exc).__name__}: {exc}")

    def _close(self, exc: BaseException | None) -> None:
        """End the open epoch, the training and the run (the run whatever else failed)."""
        self._end_training(exc)
        _end(self._run, exc)

    @guarded
    def _end_training(self, exc: BaseException | None) -> None:
        if self._run is None:
            return
        if self._epoch is not None:  # an epoch left open: partial_fit calls without epoch()
            if exc is None:
                self.epoch()
            else:
                self._stop_batches(exc)
                _end(self._epoch, exc)
        training = self._training
        if training is not None:
            # a measure named like a hyperparameter (SGD's ``loss``) is ``final_<name>`` here:
            # one name has one role in a transformation (its epochs keep the plain name)
            final = {f"final_{k}" if k in self._used_names else k: v
                     for k, v in {**self._last, **self._own}.items()}
            if final:
                training.generate(capture.measures(final))
            training.generate(capture.models(model=_model_ref(self._run, self._model_path, "model")))
            _end(training, exc)


# -- what a search holds ----------------------------------------------------------------


def _metrics(search: Any, results: Mapping[str, Any]) -> dict[str, str]:
    """public measure name -> the scorer key of ``cv_results_`` (``mean_test_<key>``).

    One metric is ``score`` in ``cv_results_``; it is named after the scorer (``scoring=
    "f1"`` -> ``f1``), else after what ``estimator.score`` computes (accuracy for a
    classifier, r2 for a regressor): the names the canned queries rank by."""
    keys = [k[len("mean_test_"):] for k in results if k.startswith("mean_test_")]
    if keys != ["score"]:
        return {k: k for k in keys}
    scoring = getattr(search, "scoring", None)
    if isinstance(scoring, str):
        return {scoring: "score"}
    if scoring is None:
        kind = _estimator_type(getattr(search, "estimator", None))
        return {{"classifier": "accuracy", "regressor": "r2"}.get(kind or "", "score"): "score"}
    return {"score": "score"}


def _candidate_measures(results: Mapping[str, Any], metrics: Mapping[str, str],
                        i: int) -> dict[str, Any]:
    """Candidate ``i``'s mean test score(s) by measure name, and sklearn's other columns
    of it by their own names (``std_test_<name>``, ``rank_test_<name>``, ``mean_fit_time``)."""
    measures = {name: results[f"mean_test_{key}"][i] for name, key in metrics.items()}
    for name, key in metrics.items():
        for stat in ("std_test", "rank_test", "mean_train", "std_train"):
            if f"{stat}_{key}" in results:
                measures[f"{stat}_{name}"] = results[f"{stat}_{key}"][i]
    for field in ("mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time"):
        if field in results:
            measures[field] = results[field][i]
    return measures


def _record_split(run: Any, training: Any, results: Mapping[str, Any],
                  metrics: Mapping[str, str], i: int, split: int) -> None:
    """One CV split of candidate ``i``: a validation whose parent is its training."""
    scores: dict[str, Any] = {}
    for name, key in metrics.items():
        for prefix, field in (("", f"split{split}_test_{key}"), ("train_", f"split{split}_train_{key}")):
            if field in results:
                scores[f"{prefix}{name}"] = results[field][i]
    with run.task("validation", kind="validation", parent=training, index=split) as validation:
        validation.generate(capture.measures(scores))


# -- estimators, parameters, data -------------------------------------------------------


def _class_name(estimator: Any) -> str:
    return type(estimator).__name__ if estimator is not None else "estimator"


def _estimator_type(estimator: Any) -> str | None:
    """``classifier`` / ``regressor`` / ..., by scikit-learn's own test when it imports."""
    try:
        from sklearn.base import is_classifier, is_regressor

        return "classifier" if is_classifier(estimator) else \
            "regressor" if is_regressor(estimator) else None
    except Exception:
        return None


def _params(estimator: Any) -> dict[str, Any]:
    """``estimator.get_params()`` as capturable values (sklearn's own ``a__b`` names)."""
    try:
        return _params_of(estimator.get_params(deep=True))
    except Exception:
        return {}


def _params_of(params: Mapping[str, Any]) -> dict[str, Any]:
    return {str(name): _param_value(value) for name, value in params.items()}


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _param_value(value: Any) -> Any:
    """A parameter as a JSON-able value: a scalar or numpy scalar as :func:`_common.plain`
    reads it; a nested estimator its class name (its own parameters are listed as
    ``name__...``); a callable its qualified name; a list of scalars as it is; a list holding
    more, or another object (a ``class_weight`` dict, a ``RandomState``), a short text, which
    says more of a setting than :func:`_common.plain`'s class name would."""
    if _is_scalar(value) or (hasattr(value, "item") and getattr(value, "shape", None) == ()):
        return plain(value)
    if isinstance(value, (list, tuple)):
        items = [_param_value(v) for v in value]
        return items if all(_is_scalar(v) for v in items) else repr(items)[:_MAX_TEXT]
    if hasattr(value, "get_params"):
        return type(value).__name__
    if callable(value):
        return getattr(value, "__qualname__", None) or type(value).__name__
    return repr(value)[:_MAX_TEXT]


def _learning_rates(estimator: Any) -> dict[tuple[int, int], float]:
    """``{_ONE: the estimator's step size}`` (``eta0``, ``learning_rate_init``, a numeric
    ``learning_rate``), or ``{}`` when it has none."""
    try:
        params = estimator.get_params(deep=False)
    except Exception:
        return {}
    for name in _RATE_PARAMS:
        value = params.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {_ONE: value}
    return {}


def _model_ref(run: Any, model_path: str | PurePath | None, name: str) -> Any:
    """The model: at ``model_path`` when given, else a ref by id alone (``<run>/<name>``)."""
    if model_path is not None:
        return capture.ref(str(model_path))
    return capture.Ref(None, f"{run.id}/{name}")


@guarded
def _end(task: Any, exc: BaseException | None) -> None:
    """End a task or run (None: nothing), ``failed`` with the exception's message if any."""
    if task is not None:
        task.end() if exc is None else task.end("failed", f"{type(exc).__name__}: {exc}")
