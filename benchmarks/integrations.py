"""What a framework callback costs a training: provkg's Lightning, Keras, transformers and
scikit-learn callbacks vs none, with batches="full" and "summary", and MLflow's autolog on
the same Lightning training, side by side in one run.

Each framework trains the same small real model (benchmarks/integration_trainings.py: an
MLP on synthetic data, CPU, one thread, 100 batches of 128 per epoch, 3 epochs); the modes
are interleaved round after round so a busy machine weighs on all alike. Two measurements:

- end to end: wall and process CPU time of each fit (the callback's delivery thread is in
  this process), median over the rounds, each mode's overhead against the baseline fit of
  the same round. On a shared 2-core machine the spread of these ratios is several percent,
  wider than the target;
- attributed: the CPU time spent inside provkg on the training thread (each hook of the
  callback timed by the thread's CPU clock; only the outermost call counts) and the CPU time of provkg's delivery
  thread (read as it exits), as a share of the baseline epoch. This resolves well below 1 %.

    .venv/bin/python benchmarks/integrations.py [--rounds 7] [--out benchmarks/results/integrations.md]

Target (issue "adoption"): <= 1 % overhead per epoch with batches="full", and cheaper than
MLflow autolog.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import integration_trainings as T  # noqa: E402
import torch  # noqa: E402

from provkg.capture import emitter  # noqa: E402
from provkg.integrations import sklearn as sk  # noqa: E402

FRAMEWORKS = ("lightning", "keras", "transformers", "sklearn")
MODES = ("none", "full", "summary")
#: the scikit-learn recorder's own steps (partial_fit itself also runs the estimator)
#: hooks a fit runs once (opening and closing the run, reading the configuration): their cost
#: is per training, not per epoch
ONCE_PER_FIT = frozenset({"on_fit_start", "on_fit_end", "on_train_start", "on_train_end", "teardown",
                          "setup", "set_model", "set_params", "on_train_begin", "on_init_end",
                          "on_sanity_check_start", "on_sanity_check_end", "_begin", "_close"})
_RECORDER_STEPS = ("_begin", "_current_epoch", "_begin_batch", "_end_batch", "_stop_batches",
                   "epoch", "_close")


class Clock:
    """CPU seconds spent in provkg on the calling thread by hook (outermost calls only: a
    thread's CPU clock, so other processes' load does not count), and the CPU seconds of
    each provkg delivery thread that ended."""

    def __init__(self) -> None:
        self.inside: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.delivery: list[float] = []
        self._depth = 0
        #: CPU seconds one timed call adds by reading the clock (calibrated, subtracted)
        self.overhead = 0.0

    def calibrate(self, calls: int = 100_000) -> float:
        """Time a no-op through :meth:`timed` and keep the median cost per call as the
        clock's own overhead (a warm loop: an upper bound on what is left after it)."""
        noop = self.timed(lambda: None)
        samples = []
        for _ in range(5):
            self.reset()
            for _ in range(calls):
                noop()
            samples.append(sum(self.inside.values()) / calls)
        self.reset()
        self.overhead = statistics.median(samples)
        return self.overhead

    def timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        name = method.__name__

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            began = time.thread_time() if self._depth == 1 else 0.0
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.inside[name] = self.inside.get(name, 0.0) + time.thread_time() - began
                    self.calls[name] = self.calls.get(name, 0) + 1
        return call

    def split(self) -> tuple[float, float]:
        """(seconds in the hooks a fit runs once, seconds in the per-epoch and per-batch ones)."""
        spent = {k: v - self.calls.get(k, 0) * self.overhead for k, v in self.inside.items()}
        once = sum(v for k, v in spent.items() if k in ONCE_PER_FIT)
        return once, sum(spent.values()) - once

    def reset(self) -> None:
        self.inside, self.calls, self.delivery = {}, {}, []


CLOCK = Clock()
_run = emitter.Emitter._run


def _counted_run(self: emitter.Emitter) -> None:
    try:
        _run(self)
    finally:
        CLOCK.delivery.append(time.thread_time())


emitter.Emitter._run = _counted_run  # type: ignore[method-assign]


def _hooked(callback: Any) -> Any:
    """``callback`` with each hook provkg defines timed by CLOCK (the framework base class's
    empty hooks are left as they are: timing them would cost more than they do)."""
    own = {name for kind in type(callback).__mro__ if kind.__module__.startswith("provkg.")
           for name in vars(kind)}
    for name in own:
        if name.startswith("on_") or name in ("teardown", "setup", "set_model", "set_params"):
            method = getattr(callback, name)
            if callable(method):
                setattr(callback, name, CLOCK.timed(method))
    return callback


def _provkg(framework: str, batches: str, work: Path, i: int) -> list[Any]:
    sink, run_id = f"file:{work / f'events-{framework}-{batches}-{i}'}", f"{framework}-{batches}-{i}"
    options = {"sink": sink, "workflow": "bench", "run_id": run_id, "batches": batches,
               "spool": str(work / "spool")}
    if framework == "lightning":
        from provkg.integrations.lightning import ProvenanceCallback as Lightning
        return [_hooked(Lightning(**options))]
    if framework == "keras":
        from provkg.integrations.keras import ProvenanceCallback as Keras
        return [_hooked(Keras(**options))]
    if framework == "transformers":
        from provkg.integrations.transformers import ProvenanceCallback as HF
        return [_hooked(HF(**options))]
    return [sk.ProvenanceCallback(**options)]


Fit = tuple[float, float, float, float, float]


def _fit(framework: str, mode: str, work: Path, i: int) -> Fit:
    """(wall s, CPU s, provkg's CPU s on the training thread once per fit, and in the epochs,
    delivery-thread CPU s)."""
    CLOCK.reset()

    def callbacks(_: str) -> list[Any]:
        return [] if mode in ("none", "mlflow") else _provkg(framework, mode, work, i)

    if mode == "mlflow":
        wall, cpu = _mlflow_fit(work)
    elif framework == "lightning":
        wall, cpu = T.train_lightning(callbacks)
    elif framework == "keras":
        wall, cpu = T.train_keras(callbacks)
    elif framework == "transformers":
        wall, cpu = T.train_transformers(callbacks, str(work / f"hf-{mode}-{i}"))
    else:
        wall, cpu = T.train_sklearn(callbacks)
    if mode not in ("none", "mlflow"):  # the run's delivery thread exits once the run ended
        deadline = time.monotonic() + 30
        while not CLOCK.delivery and time.monotonic() < deadline:
            time.sleep(0.01)
    return wall, cpu, *CLOCK.split(), sum(CLOCK.delivery)


def _mlflow_fit(work: Path) -> tuple[float, float]:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{work / 'mlflow.db'}")
    if mlflow.get_experiment_by_name("bench") is None:  # artifacts in the scratch folder
        mlflow.create_experiment("bench", artifact_location=(work / "artifacts").as_uri())
    mlflow.set_experiment("bench")
    # the hooks of the callback autolog adds, timed as provkg's are (a lower bound on MLflow's
    # cost: its patched fit and its own threads are not in it)
    from mlflow.pytorch import _lightning_autolog as autolog_module

    hooks = getattr(autolog_module, "__MlflowPLCallback")
    kept = {name: method for name, method in vars(hooks).items() if name.startswith("on_") and callable(method)}
    for name, method in kept.items():
        setattr(hooks, name, CLOCK.timed(method))
    try:
        return T.train_lightning(lambda _: [], before=lambda: mlflow.pytorch.autolog(log_models=False, silent=True))
    finally:
        for name, method in kept.items():
            setattr(hooks, name, method)
        mlflow.pytorch.autolog(disable=True)
        mlflow.end_run()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def _pct(values: list[float]) -> str:
    values = sorted(values)
    return f"{statistics.median(values):+.1f} % ({values[0]:+.0f} .. {values[-1]:+.0f})"


def _report(times: dict[tuple[str, str], list[Fit]],
            ratios: dict[tuple[str, str], list[tuple[float, float]]], rounds: int) -> str:
    lines = ["# Framework callbacks: what they cost a training", "",
             f"torch {torch.__version__}, lightning {_version('lightning')}, keras {_version('keras')}, "
             f"transformers {_version('transformers')}, scikit-learn {_version('scikit-learn')}, "
             f"mlflow {_version('mlflow')}; Python {platform.python_version()}, {os.cpu_count()} cores. "
             f"Each framework: MLP {T.FEATURES}-{T.HIDDEN}-2, {T.EPOCHS} epochs x {T.BATCHES} batches "
             f"of {T.BATCH_SIZE}, one thread; {rounds} rounds, modes interleaved; medians.", "",
             "End to end: each mode's fit against the no-callback fit of the same round (range over "
             "rounds). Attributed: provkg's own CPU time on the training thread in the epochs (its "
             "epoch and batch hooks) and once per fit (opening and closing the run, reading the "
             "configuration), and its delivery thread's CPU time, each as a share of the "
             "no-callback epoch's CPU time; for MLflow autolog, the hooks of the callback it adds, "
             "timed the same way (its patched fit and its threads are not in it: a lower bound), as "
             "a share of the "
             "no-callback epoch's CPU time (single-threaded: on a quiet machine its wall time).", "",
             "| framework | mode | wall s / epoch | CPU s / epoch | wall overhead | CPU overhead "
             "| callback per epoch (training thread) | callback once per fit | delivery thread CPU per epoch |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (framework, mode), got in times.items():
        wall = statistics.median(t[0] for t in got) / T.EPOCHS
        cpu = statistics.median(t[1] for t in got) / T.EPOCHS
        base = statistics.median(t[1] for t in times[(framework, "none")]) / T.EPOCHS
        if mode == "none":
            extra = "- | - | - | - | -"
        else:
            once = statistics.median(t[2] for t in got)
            epoch = statistics.median(t[3] for t in got) / T.EPOCHS
            delivery = statistics.median(t[4] for t in got) / T.EPOCHS
            shown = (f"{epoch * 1e3:.1f} ms = {epoch / base * 100:.2f} %", f"{once * 1e3:.1f} ms",
                     "-" if mode == "mlflow" else f"{delivery * 1e3:.1f} ms = {delivery / base * 100:.2f} %")
            extra = (f"{_pct([r[0] * 100 for r in ratios[(framework, mode)]])} | "
                     f"{_pct([r[1] * 100 for r in ratios[(framework, mode)]])} | " + " | ".join(shown))
        lines.append(f"| {framework} | {'mlflow autolog' if mode == 'mlflow' else mode} | "
                     f"{wall:.3f} | {cpu:.3f} | {extra} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    overhead = CLOCK.calibrate()
    for step in _RECORDER_STEPS:
        setattr(sk.TrainingRecorder, step, CLOCK.timed(getattr(sk.TrainingRecorder, step)))
    frameworks = [f for f in args.frameworks.split(",") if f]
    plan = [(f, m) for f in frameworks for m in (*MODES, *(("mlflow",) if f == "lightning" else ()))]
    times: dict[tuple[str, str], list[Fit]] = {p: [] for p in plan}
    ratios: dict[tuple[str, str], list[tuple[float, float]]] = {p: [] for p in plan if p[1] != "none"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for framework, mode in plan:  # warm-up: imports, first-call costs
            _fit(framework, mode, work, -1)
        for i in range(args.rounds):
            for framework in frameworks:
                base = _fit(framework, "none", work, i)
                times[(framework, "none")].append(base)
                for f, mode in plan:
                    if f == framework and mode != "none":
                        got = _fit(framework, mode, work, i)
                        times[(f, mode)].append(got)
                        ratios[(f, mode)].append((got[0] / base[0] - 1, got[1] / base[1] - 1))
            print(f"round {i + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    text = _report(times, ratios, args.rounds)
    text += (f"\nThe thread CPU clock costs {overhead * 1e6:.2f} us a timed call here (calibrated on a no-op "
             "in this run), subtracted from the attributed figures per call.\n")
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
