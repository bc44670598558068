"""The demo's report: ``report.md`` and ``report.html`` with the answers, checks, plots and commands."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from provkg.demo.answers import Answer, short
from provkg.demo.summary import RunSummary

__all__ = ["Report", "write_report"]


@dataclass
class Report:
    summary: RunSummary
    answers: list[Answer]
    store_url: str
    lineage_png: Path
    loss_pngs: dict[str, Path]      # config -> plot
    intro: list[str]                # sentences about the run


def _md_cell(value: object) -> str:
    return short(value).replace("|", "\\|").replace("\n", " ")


def _mark(a: Answer) -> str:
    return "" if a.ok is None else ("✓ " if a.ok else "✗ ")


def _markdown(r: Report, out: Path) -> str:
    lines = ["# provkg demo: the lifecycle of a seismic facies classifier", ""]
    lines += [" ".join(r.intro), "",
              f"![lineage of the best model]({r.lineage_png.relative_to(out)})", ""]
    for config, png in r.loss_pngs.items():
        lines += [f"![loss of {config}]({png.relative_to(out)})", ""]
    for a in r.answers:
        lines += [f"## {a.name.upper()} — {a.question}", ""]
        if a.rows:
            lines += ["| " + " | ".join(a.columns) + " |", "|" + "---|" * len(a.columns)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in a.rows]
        else:
            lines += ["_(no rows)_"]
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
.ok{color:#2e7d32}.bad{color:#c62828;font-weight:bold}img{max-width:100%}
"""


def _html(r: Report, out: Path) -> str:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>provkg demo report</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>provkg demo: the lifecycle of a seismic facies classifier</h1>",
             f"<p>{e(' '.join(r.intro))}</p>",
             f"<img src='{e(str(r.lineage_png.relative_to(out)))}' alt='lineage of the best model'>"]
    for config, png in r.loss_pngs.items():
        parts.append(f"<img src='{e(str(png.relative_to(out)))}' alt='loss of {e(config)}'>")
    for a in r.answers:
        parts.append(f"<h2>{e(a.name.upper())} — {e(a.question)}</h2>")
        if a.rows:
            parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in a.columns) + "</tr>")
            for row in a.rows:
                parts.append("<tr>" + "".join(f"<td title='{e(str(v))}'>{e(short(v))}</td>"
                                              for v in row) + "</tr>")
            parts.append("</table>")
        else:
            parts.append("<p><em>(no rows)</em></p>")
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
