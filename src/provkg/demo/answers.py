"""The lifecycle questions the demo asks the knowledge graph, and how it checks the answers.

Each answer comes from a canned query (``provkg.service.querying.run_query``) over the store
the captured events went to; each check compares it with what the lifecycle's own Python
code measured (:mod:`provkg.demo.summary`), so a wrong graph shows up as a red cross.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from provkg.demo.needs import require
from provkg.demo.readable import significant
from provkg.demo.summary import RunSummary
from provkg.store import Store

__all__ = ["Answer", "ask_all", "LEARNING_WORKFLOW", "RANKED_BY"]

LEARNING_WORKFLOW = "seismic-learning"


@dataclass
class Answer:
    name: str
    question: str
    params: dict[str, object]
    columns: list[str]
    rows: list[list[object]]
    command: str
    check: str = ""
    ok: bool | None = None   # None: nothing to check against
    ranked_by: str = ""      # what "best" / "least" / "most accurate" means in this answer


#: the measure each ranking query ranks by, as the report says it: the canned queries rank
#: by what the *training* task generated, which is not how the models do on unseen data
RANKED_BY = {
    "q3": "least final training loss (the loss the training task generated)",
    "q7": "least training batch loss first (validation's least batch loss beside it)",
    "d6": "greatest final training accuracy (not validation or test accuracy)",
    "d8": "final training accuracy: best = greatest, worst = least (not validation or test)",
}


def _questions(s: RunSummary) -> list[tuple[str, dict[str, object]]]:
    best, train = s.best, s.datasets["train"]
    return [
        ("q1", {"model": best.model}),
        ("q2", {"model": best.model}),
        ("q3", {"dataset": train, "measure": "loss"}),
        ("q4", {"dataset": train}),
        ("q5", {"slice_start": s.slice_start, "slice_end": s.slice_end}),
        ("q6", {"dataset": train}),
        ("q7", {"dataset": train, "measure": "loss"}),
        ("d6", {"workflow": LEARNING_WORKFLOW, "measure": "accuracy"}),
        ("d7", {"workflow": LEARNING_WORKFLOW, "hyperparameter": "learning_rate",
                "value": best.hyperparameters["learning_rate"]}),
        ("d8", {"workflow": LEARNING_WORKFLOW, "measure": "accuracy"}),
    ]


def command(name: str, params: dict[str, object], *, store_url: str) -> str:
    """The ``provkg query`` command line that re-runs a query."""
    parts = ["provkg", "query", name, "--store", store_url]
    for key, value in params.items():
        parts += ["--param", f"{key}={value}"]
    return " ".join(shlex.quote(p) for p in parts)


def ask_all(store: Store, summary: RunSummary, *, store_url: str) -> list[Answer]:
    """Run every question against ``store`` and check each answer against ``summary``."""
    querying = require("provkg.service.querying", "the canned queries")
    run_query = querying.run_query
    questions = {q.name: q.question for q in querying.query_catalog()}
    answers = []
    for name, params in _questions(summary):
        rows = run_query(store, name, dict(params))
        answer = Answer(name, questions.get(name, ""), params, list(rows.columns),
                        [list(r) for r in rows.rows], command(name, params, store_url=store_url),
                        ranked_by=RANKED_BY.get(name, ""))
        check = _CHECKS.get(name)
        if check is not None:
            answer.ok, answer.check = check(answer, summary)
        answers.append(answer)
    return answers


# -- checks: the graph's answer against the lifecycle's own numbers ---------------------------


def _col(a: Answer, name: str) -> list[object]:
    i = a.columns.index(name)
    return [r[i] for r in a.rows]


def _same(x: object, y: float, *, rel: float = 1e-6) -> bool:
    return isinstance(x, (int, float)) and math.isclose(float(x), y, rel_tol=rel, abs_tol=1e-9)


def _denotes(value: object, uri: str) -> bool:
    """A column holds a captured id or the IRI minted from it."""
    return isinstance(value, str) and (value == uri or value.endswith("/" + uri) or uri in unquote(value))


def _check_q1(a: Answer, s: RunSummary) -> tuple[bool, str]:
    if not a.rows:
        return False, "no answer"
    r = dict(zip(a.columns, a.rows[0]))
    ok = (_denotes(r["seismic_file"], s.raw_file) and r["slices"] == s.extracted["number_of_slices"]
          and str(r["coordinates"]) == s.extracted["coordinates"])
    return ok, (f"{s.file_name}, {s.extracted['number_of_slices']} slices and the footprint read "
                "from its trace headers by the curation code")


def _check_q6(a: Answer, s: RunSummary) -> tuple[bool, str]:
    if not a.rows:
        return False, "no answer"
    r = dict(zip(a.columns, a.rows[0]))
    ok = _denotes(r["seismic_file"], s.raw_file) and r["slices"] == s.extracted["number_of_slices"]
    return ok, f"{s.file_name} with {s.extracted['number_of_slices']} slices, as curation read it"


def _check_q2(a: Answer, s: RunSummary) -> tuple[bool, str]:
    if not a.rows:
        return False, "no answer"
    r = dict(zip(a.columns, a.rows[0]))
    ok = (r["tile_size"] == s.tile_size and r["slice_start"] == s.slice_start
          and r["slice_end"] == s.slice_end and _same(r["noise_threshold"], s.noise_threshold))
    return ok, (f"tile size {s.tile_size}, threshold {significant(s.noise_threshold)}, inlines "
                f"{s.slice_start}-{s.slice_end} as the preparation code used them")


def _check_q3(a: Answer, s: RunSummary) -> tuple[bool, str]:
    models = set(_col(a, "model"))
    ok = len(models) == 1 and _denotes(next(iter(models)), s.best.model)
    return ok, (f"least final training loss: {s.best.config} "
                f"({significant(s.best.final_loss)})")


def _check_q4(a: Answer, s: RunSummary) -> tuple[bool, str]:
    expected = sorted(n for t in s.trainings for n in t.batches_per_epoch)
    return sorted(_col(a, "batches")) == expected, "batches per epoch as the training loops ran them"  # type: ignore[type-var]


def _check_q5(a: Answer, s: RunSummary) -> tuple[bool, str]:
    found = set(_col(a, "model"))
    ok = all(any(_denotes(m, t.model) for m in found) for t in s.trainings) and len(found) == len(s.trainings)
    return ok, f"all {len(s.trainings)} models trained on inlines {s.slice_start}-{s.slice_end}"


def _check_q7(a: Answer, s: RunSummary) -> tuple[bool, str]:
    by_min = sorted(s.trainings, key=lambda t: t.min_batch_loss)
    models, losses = _col(a, "model"), _col(a, "training_min_batch_loss")
    validation = _col(a, "validation_min_batch_loss")
    ok = len(models) == len(by_min) and all(
        _denotes(m, t.model) and _same(v, t.min_batch_loss) and _same(w, t.validation_min_batch_loss)
        for m, v, w, t in zip(models, losses, validation, by_min))
    return ok, ("minimum training and validation batch losses, and their order, as the "
                "training and validation loops measured them")


def _check_d6(a: Answer, s: RunSummary) -> tuple[bool, str]:
    best = s.most_accurate
    expected = [(int(e), new) for e, _, new in best.adaptations]
    got = [(r[1], r[3]) for r in a.rows]
    ok = len(got) == len(expected) and all(g[0] == e[0] and _same(g[1], e[1]) for g, e in zip(got, expected))
    what = ", ".join(f"epoch {e}: {significant(n)}" for e, n in expected) or "none"
    return ok, (f"adaptations of the training most accurate by training accuracy "
                f"({best.config}, {significant(best.final_accuracy)}): {what}")


def _check_d7(a: Answer, s: RunSummary) -> tuple[bool, str]:
    rate = s.best.hyperparameters["learning_rate"]
    expected = {(t.training_id, t.filter) for t in s.trainings
                if t.hyperparameters["learning_rate"] == rate}
    got = [(r[0], r[1]) for r in a.rows]
    ok = len(got) == len(expected) and all(
        any(_denotes(g[0], tid) and g[1] == f for tid, f in expected) for g in got)
    filters = ", ".join(sorted(f for _, f in expected))
    return ok, (f"the filter of each training started with learning rate "
                f"{significant(rate)}: {filters}")


def _check_d8(a: Answer, s: RunSummary) -> tuple[bool, str]:
    worst = s.least_accurate
    expected = [("best", s.most_accurate), ("worst", worst)]
    got = {(r[1], r[0], r[2], r[3]) for r in a.rows}
    ok = len(got) == len(expected) and all(
        any(rank == want and _denotes(tid, t.training_id) and f == t.filter
            and n == len(t.epoch_losses) for rank, tid, f, n in got) for want, t in expected)
    best = s.most_accurate
    return ok, (f"by training accuracy, most accurate {best.config} ({best.filter}, "
                f"{significant(best.final_accuracy)}), least accurate {worst.config} "
                f"({worst.filter}, {significant(worst.final_accuracy)}), with their epochs")


_CHECKS: dict[str, Callable[[Answer, RunSummary], tuple[bool, str]]] = {
    "q1": _check_q1, "q2": _check_q2, "q3": _check_q3, "q4": _check_q4, "q5": _check_q5,
    "q6": _check_q6, "q7": _check_q7, "d6": _check_d6, "d7": _check_d7, "d8": _check_d8,
}

