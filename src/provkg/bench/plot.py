"""A PNG in the style of the PROV-ML paper's Fig. 10: one panel per query (Q1, Q5, Q7), typed
and tagged bars per store, warm medians with their 95 % confidence intervals as error bars
(min–max when a query ran too few times for one); Q7 on a log scale, as in the paper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_fig10"]

_SHORT = {"oxigraph": "Oxigraph\ndisk", "memory": "Oxigraph\nmemory", "rdflib": "rdflib",
          "oxigraph-server": "Oxigraph\nserver", "virtuoso": "Virtuoso"}


def _bar(t: dict[str, Any]) -> tuple[float, float, float]:
    lo, hi = t["ci95_s"] if t.get("ci95_s") else (t["min_s"], t["max_s"])
    m = t["median_s"]
    return m, max(m - lo, 0.0), max(hi - m, 0.0)


def plot_fig10(doc: dict[str, Any], path: Path) -> Path:
    """Draw the figure for a results document; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = ("q1", "q5", "q7")
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, q in zip(axes, queries):
        names, typed, tagged = [], [], []
        for store, sec in doc["stores"].items():
            r = sec.get("results", {}).get(q)
            if not r or "typed" not in r:
                continue
            label = _SHORT.get(store, store)
            if sec.get("epochs") != doc["shape"]["epochs"]:
                label += f"\n({sec['epochs']} ep.)"
            names.append(label)
            typed.append(_bar(r["typed"]))
            tagged.append(_bar(r["tagged"]))
        x = range(len(names))
        w = 0.38
        unit, scale = ("ms", 1e3) if q == "q1" else ("s", 1.0)
        for offset, data, label, color in ((-w / 2, typed, "with PROV-ML (typed)", "#1f5fa8"),
                                           (w / 2, tagged, "without PROV-ML (tagged)", "#e08a1e")):
            ax.bar([i + offset for i in x], [d[0] * scale for d in data], w, label=label,
                   color=color, yerr=[[d[1] * scale for d in data], [d[2] * scale for d in data]],
                   capsize=3, error_kw={"elinewidth": 1})
        for i, (t, g) in enumerate(zip(typed, tagged)):
            top = max(t[0] + t[2], g[0] + g[2]) * scale
            ax.text(i, top * (1.15 if q == "q7" else 1.02), f"×{g[0] / t[0]:.2f}",
                    ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(q.upper() + (" (log scale)" if q == "q7" else ""))
        ax.set_ylabel(f"query time ({unit}), warm median")
        if q == "q7":
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo, hi * 3)  # room for the speedup labels
        else:
            ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Typed (PROV-ML) vs tag-based (PROVLake) queries, scale {doc['scale']:g} "
                 f"({next(iter(doc['datasets'].values()))['triples']:,} triples per dataset); "
                 "× = typed speedup", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
