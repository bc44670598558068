"""The report's pictures, drawn from the knowledge graph (matplotlib, Agg backend).

A configuration's figure draws the numbers :mod:`provkg.demo.curves` read back from the
store (training per batch and epoch, then the final model's validation and test measures);
the lineage picture walks the graph from the model with the least final training loss back to
the SEG-Y file and on into the domain KG. What is drawn is what the graph holds, not what the
training code remembers.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from provkg.demo.curves import TrainingCurves
from provkg.demo.summary import RunSummary
from provkg.store import Store
from provkg.term import iri, mint_iri

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not with this module
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["draw_training", "plot_training", "plot_lineage", "lineage_edges", "ADAPTATION_GID"]

_PREFIXES = """\
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX provkg: <https://w3id.org/provkg/ns#>
PREFIX provlake: <https://w3id.org/provkg/provlake#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX seis: <https://w3id.org/provkg/seismic#>
"""

_LINEAGE = _PREFIXES + """\
SELECT DISTINCT ?child ?child_location ?parent ?parent_location ?how WHERE {
  VALUES ?model { MODEL }
  ?model (prov:wasDerivedFrom|^prov:wasGeneratedBy/prov:used)* ?child .
  ?child provlake:location ?child_location .
  { ?child prov:wasGeneratedBy ?task . ?task prov:used ?parent ; prov:wasInfluencedBy ?tr .
    ?tr rdfs:label ?how }
  UNION
  { ?child prov:wasDerivedFrom ?parent . BIND("derived from" AS ?how) }
  ?parent provlake:location ?parent_location .
}"""

_DOMAIN = _PREFIXES + """\
SELECT ?node ?file_label ?survey ?field ?basin WHERE {
  VALUES ?node { NODES }
  ?node provlake:denotes ?kg . ?kg a seis:SegyFile ; rdfs:label ?file_label ; seis:survey ?s .
  ?s rdfs:label ?survey ; seis:field/rdfs:label ?field ; seis:basin/rdfs:label ?basin .
}"""


def _pyplot() -> ModuleType:
    """``matplotlib.pyplot``, drawing to files only (no display)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


#: colours of the three stages, the same in every figure
TRAINING_COLOUR, VALIDATION_COLOUR, TEST_COLOUR = "#1f4e79", "#d9822b", "#2e7d32"
ADAPTATION_COLOUR = "#c0504d"
#: the gid of an adaptation's mark line: a test finds the mark's x by it
ADAPTATION_GID = "adaptation"


def draw_training(curves: TrainingCurves, *, loss_range: tuple[float, float]) -> Figure:
    """One configuration's figure: loss (left) and accuracy (right) per epoch in training,
    with the final model's validation and test measures beside them.

    ``loss_range`` is the y-range every configuration's loss panel shares (see
    :func:`provkg.demo.curves.loss_limits`); accuracy is always 0-1.
    """
    plt = _pyplot()
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 3.9), dpi=110)
    last = curves.last_epoch
    # the final model's validation and test measures stand right of the training epochs
    validation_x, test_x = last + 1.0, last + 2.0
    loss_ax.plot(curves.batch_x, curves.batch_loss, color="#9bb7d4", linewidth=0.8,
                 label="training, per batch")
    loss_ax.plot(curves.epochs, curves.epoch_loss, "o-", color=TRAINING_COLOUR, linewidth=1.8,
                 label="training, epoch mean")
    acc_ax.plot(curves.epochs, curves.epoch_accuracy, "o-", color=TRAINING_COLOUR, linewidth=1.8,
                label="training, per epoch")
    for ax, measure in ((loss_ax, "loss"), (acc_ax, "accuracy")):
        _final(ax, validation_x, curves.validation.get(measure), "D", VALIDATION_COLOUR,
               "validation (final model)")
        _final(ax, test_x, curves.test.get(measure), "s", TEST_COLOUR, "test (final model)")
    for ax in (loss_ax, acc_ax):
        ax.axvline(last + 0.5, color="#999999", linewidth=0.8)  # training | after training
        for a in curves.adaptations:
            ax.axvspan(a.x - 0.5, last + 0.5, color=ADAPTATION_COLOUR, alpha=0.06, linewidth=0)
            ax.axvline(a.x, color=ADAPTATION_COLOUR, linestyle="--", linewidth=1,
                       gid=ADAPTATION_GID)
        ax.set_xlim(0.4, test_x + 0.7)
        ax.set_xticks([*curves.epochs, validation_x, test_x],
                      [*(str(e) for e in curves.epochs), "valid.", "test"])
        ax.set_xlabel("training epoch | the final model on validation and test")
        ax.grid(alpha=0.3)
    for a in curves.adaptations:
        loss_ax.annotate(a.label, (a.x, loss_range[1]), xytext=(4, -12),
                         textcoords="offset points", color=ADAPTATION_COLOUR, fontsize=8)
    loss_ax.set_yscale("log")
    loss_ax.set_ylim(*loss_range)
    loss_ax.set_ylabel("loss (log scale, same range for every configuration)", fontsize=8)
    loss_ax.set_title("loss", fontsize=10)
    acc_ax.set_ylim(0.0, 1.05)
    acc_ax.set_ylabel("accuracy")
    acc_ax.set_title("accuracy", fontsize=10)
    loss_ax.legend(fontsize=7, loc="lower left")
    acc_ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"{curves.config} (filter {curves.filter}): training per epoch, then the final "
                 "model on the validation and test sets — from the provenance graph", fontsize=10)
    fig.tight_layout()
    return fig


def _final(ax: Axes, x: float, value: float | None, marker: str, colour: str, label: str) -> None:
    """A measure of the final model, with its value written beside it (3 digits)."""
    if value is None:
        return
    ax.plot([x], [value], marker, color=colour, markersize=7, label=label)
    ax.annotate(f"{value:.3g}", (x, value), xytext=(7, 0), textcoords="offset points",
                fontsize=7, color=colour, va="center")


def plot_training(curves: TrainingCurves, path: Path, *, loss_range: tuple[float, float]) -> Path:
    """:func:`draw_training` saved as a PNG at ``path``."""
    fig = draw_training(curves, loss_range=loss_range)
    fig.savefig(path)
    _pyplot().close(fig)
    return path


def lineage_edges(store: Store, model: str) -> list[tuple[str, str, str]]:
    """(parent location, child location, how) for the data lineage of ``model``."""
    rows = store.select(_LINEAGE.replace("MODEL", iri(mint_iri("value", model)))).as_dicts()
    edges = {(str(r["parent_location"]), str(r["child_location"]), str(r["how"])) for r in rows}
    # keep the step's name when an edge is both "derived from" and an input of the step
    named = {(p, c) for p, c, how in edges if how != "derived from"}
    kept = {e for e in edges if e[2] != "derived from" or (e[0], e[1]) not in named}
    # a "derived from" shortcut that another path already explains only clutters the picture
    return sorted(e for e in kept if e[2] != "derived from" or not _reachable(kept - {e}, e[0], e[1]))


def _reachable(edges: set[tuple[str, str, str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        for parent, child, _ in edges:
            if parent == node and child not in seen:
                if child == goal:
                    return True
                seen.add(child)
                todo.append(child)
    return False


def _name(location: str) -> str:
    if location.startswith("file:"):
        return PurePosixPath(unquote(urlparse(location).path)).name
    return location


def plot_lineage(store: Store, summary: RunSummary, path: Path) -> Path:
    """The lineage of :attr:`RunSummary.best` (least final training loss) from the SEG-Y file
    (and its survey, field, basin) to the model."""
    edges = lineage_edges(store, summary.best.model)
    nodes = sorted({n for e in edges for n in e[:2]} | {summary.best.model})
    depth = {n: 0 for n in nodes}
    for _ in nodes:  # longest path from a source: enough passes for any DAG of this size
        for parent, child, _how in edges:
            depth[child] = max(depth[child], depth[parent] + 1)
    node_values = " ".join(iri(mint_iri("value", n)) for n in nodes)
    domain = store.select(_DOMAIN.replace("NODES", node_values)).as_dicts() if nodes else []
    layers: dict[int, list[str]] = defaultdict(list)
    for n in sorted(nodes, key=lambda n: (depth[n], _name(n))):
        layers[depth[n]].append(n)
    width = max(len(v) for v in layers.values())
    pos = {n: ((i + 0.5) * width / len(layer), float(-d)) for d, layer in layers.items()
           for i, n in enumerate(layer)}

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7, 3.2 * width), 1.25 * (len(layers) + 1.5)), dpi=110)
    for parent, child, how in edges:
        (x0, y0), (x1, y1) = pos[parent], pos[child]
        long = y0 - y1 > 1  # skips a layer: bend it around the boxes in between
        ax.annotate("", xy=(x1, y1 + 0.22), xytext=(x0, y0 - 0.22),
                    arrowprops={"arrowstyle": "-|>", "color": "#555555", "lw": 1,
                                "connectionstyle": f"arc3,rad={0.45 if long else 0}"})
        # a bent edge leaves its box towards the left: name it there, next to its start
        lx, ly, align = (x0 - 0.08, y0 - 0.4, "right") if long else ((x0 + x1) / 2 + 0.05,
                                                                      (y0 + y1) / 2, "left")
        ax.text(lx, ly, how, fontsize=7, color="#555555", style="italic", ha=align, va="center")
    for n, (x, y) in pos.items():
        best = n == summary.best.model
        ax.text(x, y, _name(n), ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round,pad=0.35", "fc": "#fde9d9" if best else "#e8eef7",
                      "ec": "#c0504d" if best else "#1f4e79"})
    for r in domain:
        x, y = _domain_anchor(pos, r)
        ax.annotate("", xy=(x, y + 0.22), xytext=(x, y + 0.78),
                    arrowprops={"arrowstyle": "-", "color": "#2e7d32", "lw": 1, "ls": "--"})
        ax.text(x, y + 0.95, f"KG: {r['file_label']}\nsurvey {r['survey']} | field {r['field']} | "
                f"{r['basin']}", ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round,pad=0.35", "fc": "#e6f2e6", "ec": "#2e7d32"})
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-len(layers) + 0.4, 1.6)
    ax.axis("off")
    ax.set_title(f"Lineage of the model with the least final training loss "
                 f"({summary.best.config}) in the provenance graph", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _domain_anchor(pos: dict[str, tuple[float, float]], row: dict[str, object]) -> tuple[float, float]:
    node = str(row["node"])
    for location, xy in pos.items():
        if node == mint_iri("value", location):
            return xy
    return (0.0, 0.0)
