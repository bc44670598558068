"""The demo's report: ``report.md`` and ``report.html`` with the answers, checks, plots and commands.

Numbers are rounded for reading (:mod:`provkg.demo.readable`); ``run.json`` and the stored
triples keep every digit, and each HTML cell has the full value as its tooltip. Wherever the
report says "best" or "most accurate", it names the measure and the data it is measured on.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from provkg.demo.answers import Answer
from provkg.demo.curves import loss_limits, training_curves
from provkg.demo.plots import plot_lineage, plot_training
from provkg.demo.readable import SIGNIFICANT, cell, significant
from provkg.demo.summary import RunSummary, TrainingSummary
from provkg.store import Store

__all__ = ["Report", "Table", "configurations_table", "ranking_sentences", "intro_sentences",
           "write_report", "build_report"]

ROUNDING_NOTE = (f"Numbers are rounded for reading ({SIGNIFICANT} significant digits, durations "
                 "in ms or s); run.json beside this report and the commands under each table "
                 "(with --format csv or json) give every digit.")


@dataclass
class Table:
    """A table for people: every cell already formatted; ``full`` holds the unrounded values."""

    columns: list[str]
    rows: list[list[str]]
    full: list[list[str]] = field(default_factory=list)


@dataclass
class Report:
    summary: RunSummary
    answers: list[Answer]
    store_url: str
    lineage_png: Path
    training_pngs: dict[str, Path]      # config -> its figure
    intro: list[str]                    # sentences about the run
    configurations: Table | None = None
    ranking: list[str] = field(default_factory=list)   # what "most accurate" is, by each measure


def _learning_rate(t: TrainingSummary) -> str:
    rate = significant(t.hyperparameters["learning_rate"])
    steps = "".join(f" → {significant(new)} at epoch {int(epoch)}" for epoch, _old, new in t.adaptations)
    return rate + steps


def configurations_table(s: RunSummary) -> Table:
    """One row per configuration, ordered by test accuracy (best first): the final training
    measures next to the validation and test ones, so a model that only fits its training
    set shows."""
    columns = ["configuration", "filter", "learning rate", "training loss", "training accuracy",
               "validation loss", "validation accuracy", "test loss", "test accuracy",
               "test F1 (macro)"]
    order = sorted(s.trainings, key=lambda t: -t.evaluation.get("accuracy", float("-inf")))
    rows, full = [], []
    for t in order:
        numbers = [t.final_loss, t.final_accuracy, t.validation.get("loss"),
                   t.validation.get("accuracy"), t.evaluation.get("loss"),
                   t.evaluation.get("accuracy"), t.evaluation.get("f1_macro")]
        head = [t.config, t.filter, _learning_rate(t)]
        rows.append(head + ["" if n is None else significant(n) for n in numbers])
        full.append(head + ["" if n is None else repr(n) for n in numbers])
    return Table(columns, rows, full)


def _leaders(s: RunSummary, measure: Callable[[TrainingSummary], float | None]) -> str:
    """The configuration(s) with the greatest ``measure`` as shown: a tie at the shown
    precision names every tied one ("a and b (0.7119)")."""
    shown = {t.config: significant(v) for t in s.trainings if (v := measure(t)) is not None}
    if not shown:
        return "none measured"
    top = max((t for t in s.trainings if t.config in shown), key=lambda t: measure(t) or 0.0)
    tied = [c for c, v in shown.items() if v == shown[top.config]]
    return f"{' and '.join(tied)} ({shown[top.config]})"


def ranking_sentences(s: RunSummary) -> list[str]:
    """Which configuration is "most accurate" depends on the data it is measured on: say so."""
    train = s.most_accurate
    return [
        "Most accurate on the held-out test set: "
        f"{_leaders(s, lambda t: t.evaluation.get('accuracy'))}; on the validation set: "
        f"{_leaders(s, lambda t: t.validation.get('accuracy'))}; by training accuracy, on the "
        f"data it was trained on: {_leaders(s, lambda t: t.final_accuracy)}, which tests at "
        f"{significant(train.evaluation.get('accuracy', float('nan')))}.",
        "The canned queries rank by what the training task generated: d6 and d8 by training "
        "accuracy, q3 and q7 by training loss; q1, q2 and the lineage picture follow the model "
        f"with the least final training loss ({s.best.config}).",
    ]


def intro_sentences(s: RunSummary, store_url: str) -> list[str]:
    e = s.extracted
    return [
        f"The SEG-Y volume {s.file_name} ({e['number_of_slices']} inlines "
        f"{e['inline_start']}-{e['inline_end']} x crosslines {e['crossline_start']}-"
        f"{e['crossline_end']}, {e['sample_interval_ms']:g} ms) was curated, cut into "
        f"{s.tile_size}x{s.tile_size} tiles from inlines {s.slice_start}-"
        f"{s.slice_end} (noise threshold {significant(s.noise_threshold)}) and used to train "
        f"{len(s.trainings)} scikit-learn MLP configurations for "
        f"{s.settings['sizes']['epochs']} epochs, each validated and then evaluated on "
        "held-out test inlines.",
        f"Every step was captured with provkg.capture and mapped to typed PROV-ML triples in "
        f"{store_url}; the domain facts come from the geoscientists' knowledge graph "
        "(examples/seismic/kg/seismic-kg.ttl).",
        "Each table below is the graph's answer to a canned query, checked against the numbers "
        "the lifecycle's own Python code measured; the command under it re-runs the query.",
    ]


def build_report(store: Store, summary: RunSummary, answers: list[Answer], *, out: Path,
                 store_url: str) -> Report:
    """Draw the figures (from the store) into ``out/figures`` and assemble the report."""
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    lineage = plot_lineage(store, summary, figures / "lineage.png")
    curves = [training_curves(store, t) for t in summary.trainings]
    shared = loss_limits(curves)  # one loss range for every configuration's figure
    pngs = {c.config: plot_training(c, figures / f"training-{c.config}.png", loss_range=shared)
            for c in curves}
    return Report(summary, answers, store_url, lineage, pngs, intro_sentences(summary, store_url),
                  configurations_table(summary), ranking_sentences(summary))


def _answer_table(a: Answer) -> Table:
    return Table(list(a.columns), [[cell(c, v) for c, v in zip(a.columns, row)] for row in a.rows],
                 [["" if v is None else str(v) for v in row] for row in a.rows])


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(t: Table) -> list[str]:
    return (["| " + " | ".join(_md_cell(c) for c in t.columns) + " |", "|" + "---|" * len(t.columns)]
            + ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in t.rows])


def _mark(a: Answer) -> str:
    return "" if a.ok is None else ("✓ " if a.ok else "✗ ")


_FIGURES_SAY = ("Each configuration's figure: loss (left, the same log scale in every figure) "
                "and accuracy (right) per epoch in training, then the final model on the "
                "validation and test sets; a dashed red line marks the epoch a learning-rate "
                "change took effect in.")


def _markdown(r: Report, out: Path) -> str:
    lines = ["# provkg demo: the lifecycle of a seismic facies classifier", ""]
    lines += [" ".join(r.intro), "", ROUNDING_NOTE, ""]
    if r.configurations is not None:
        lines += ["## Configurations (ordered by test accuracy, best first)", "",
                  *_md_table(r.configurations), "", " ".join(r.ranking), ""]
    lines += [_FIGURES_SAY, ""]
    for config, png in r.training_pngs.items():
        lines += [f"![{config}: training, validation and test]({png.relative_to(out)})", ""]
    lines += [f"![lineage of the model with the least final training loss]"
              f"({r.lineage_png.relative_to(out)})", ""]
    for a in r.answers:
        lines += [f"## {a.name.upper()} — {a.question}", ""]
        if a.ranked_by:
            lines += [f"_Ranked by {a.ranked_by}._", ""]
        lines += _md_table(_answer_table(a)) if a.rows else ["_(no rows)_"]
        lines += [""]
        if a.check:
            lines += [f"{_mark(a)}checked against the lifecycle's own Python: {a.check}", ""]
        lines += ["```sh", a.command, "```", ""]
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#eef2f8}pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.8em}
.ok{color:#2e7d32}.bad{color:#c62828;font-weight:bold}img{max-width:100%}.note{color:#555}
"""


def _html_table(t: Table) -> str:
    e = html.escape
    parts = ["<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in t.columns) + "</tr>"]
    for i, row in enumerate(t.rows):
        full = t.full[i] if i < len(t.full) else row
        parts.append("<tr>" + "".join(f"<td title='{e(f)}'>{e(v)}</td>"
                                      for v, f in zip(row, full)) + "</tr>")
    return "\n".join([*parts, "</table>"])


def _html(r: Report, out: Path) -> str:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>provkg demo report</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>provkg demo: the lifecycle of a seismic facies classifier</h1>",
             f"<p>{e(' '.join(r.intro))}</p>", f"<p class='note'>{e(ROUNDING_NOTE)}</p>"]
    if r.configurations is not None:
        parts += ["<h2>Configurations (ordered by test accuracy, best first)</h2>",
                  _html_table(r.configurations), f"<p>{e(' '.join(r.ranking))}</p>"]
    parts.append(f"<p class='note'>{e(_FIGURES_SAY)}</p>")
    for config, png in r.training_pngs.items():
        parts.append(f"<img src='{e(str(png.relative_to(out)))}' "
                     f"alt='{e(config)}: training, validation and test'>")
    parts.append(f"<img src='{e(str(r.lineage_png.relative_to(out)))}' "
                 "alt='lineage of the model with the least final training loss'>")
    for a in r.answers:
        parts.append(f"<h2>{e(a.name.upper())} — {e(a.question)}</h2>")
        if a.ranked_by:
            parts.append(f"<p class='note'><em>Ranked by {e(a.ranked_by)}.</em></p>")
        parts.append(_html_table(_answer_table(a)) if a.rows else "<p><em>(no rows)</em></p>")
        if a.check:
            css = "ok" if a.ok else "bad"
            parts.append(f"<p class='{css}'>{e(_mark(a))}checked against the lifecycle's own "
                         f"Python: {e(a.check)}</p>")
        parts.append(f"<pre>{e(a.command)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(report: Report, out: Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into ``out``; returns their paths."""
    md, page = out / "report.md", out / "report.html"
    md.write_text(_markdown(report, out), encoding="utf-8")
    page.write_text(_html(report, out), encoding="utf-8")
    return md, page
