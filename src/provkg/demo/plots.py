"""The report's pictures, drawn from the knowledge graph (matplotlib, Agg backend).

Loss curves read each training's batch and epoch losses back from the store; the lineage
picture walks the graph from the best model back to the SEG-Y file and on into the domain KG.
What is drawn is what the graph holds, not what the training code remembers.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from provkg.demo.summary import RunSummary, TrainingSummary
from provkg.store import Store
from provkg.term import iri, mint_iri

__all__ = ["plot_losses", "plot_lineage", "lineage_edges"]

_PREFIXES = """\
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX provkg: <https://w3id.org/provkg/ns#>
PREFIX provlake: <https://w3id.org/provkg/provlake#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX seis: <https://w3id.org/provkg/seismic#>
"""

_LOSSES = _PREFIXES + """\
SELECT ?epoch ?batch ?loss WHERE {
  VALUES ?training { TRAINING }
  ?e prov:wasInformedBy ?training ; provkg:index ?epoch .
  ?b prov:wasInformedBy ?e ; provkg:index ?batch .
  ?v prov:wasGeneratedBy ?b ; prov:wasDerivedFrom ?attr ; prov:value ?loss .
  ?attr rdfs:label "loss" .
} ORDER BY ?epoch ?batch"""

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


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def plot_losses(store: Store, training: TrainingSummary, path: Path) -> Path:
    """Batch and epoch training loss of one configuration, as the store holds them."""
    rows = store.select(_LOSSES.replace("TRAINING", iri(mint_iri("task", training.training_id)))).rows
    per_epoch: dict[int, list[float]] = defaultdict(list)
    for epoch, _batch, loss in rows:
        per_epoch[int(epoch)].append(float(loss))  # type: ignore[arg-type]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    xs, ys, ex, ey = [], [], [], []
    for epoch in sorted(per_epoch):
        losses = per_epoch[epoch]
        for i, loss in enumerate(losses):
            xs.append(epoch - 1 + (i + 1) / len(losses))
            ys.append(loss)
        ex.append(epoch)
        ey.append(sum(losses) / len(losses))
    ax.plot(xs, ys, color="#9bb7d4", linewidth=0.8, label="batch loss")
    ax.plot(ex, ey, "o-", color="#1f4e79", linewidth=1.8, label="epoch mean")
    for epoch, old, new in training.adaptations:
        ax.axvline(epoch - 1, color="#c0504d", linestyle="--", linewidth=1)
        ax.annotate(f"learning rate {old:g} -> {new:g}", (epoch - 1, max(ys or [1])),
                    xytext=(4, -12), textcoords="offset points", color="#c0504d", fontsize=8)
    ax.set_title(f"{training.config}: training loss from the provenance graph "
                 f"(filter {training.filter})", fontsize=10)
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
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
    """The best model's lineage from the SEG-Y file (and its survey, field, basin) to checkpoint."""
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
    pos = {n: ((i + 0.5) * width / len(layer), -d) for d, layer in layers.items()
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
    ax.set_title(f"Lineage of the best model ({summary.best.config}) in the provenance graph",
                 fontsize=10)
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
