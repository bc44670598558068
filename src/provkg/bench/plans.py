"""Query plans of the paper's three queries, typed and tagged, as the stores explain them.

Embedded Oxigraph: ``oxigraph query --explain-file --stats`` over the on-disk store (after
the benchmark closed it: one process per RocksDB folder). Virtuoso: ``explain('sparql ...')``
through ``isql-vt``. pyoxigraph 0.5 itself has no explain call.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from provkg.bench.servers import _oxigraph_binary

__all__ = ["EXPLAINED", "explain_oxigraph", "explain_virtuoso"]

#: the queries whose plans are kept
EXPLAINED = ("q1", "q5", "q7")


def explain_oxigraph(datasets: dict[str, Any], plans: list[Any], out: Path, *,
                     timeout: float = 1800) -> dict[str, str]:
    """Plans (with evaluation statistics) of Q1 / Q5 / Q7 on the on-disk stores; returns
    ``"q5/typed" -> file path`` (or why a plan could not be made). ``--stats`` runs the
    query several times slower than a timed run: at the paper's scale Q7 would take many
    minutes, so a plan that is not done within ``timeout`` seconds is left out (the plan's
    shape is the same at scale 0.01, whose plans are committed)."""
    out.mkdir(parents=True, exist_ok=True)
    binary = _oxigraph_binary()
    done: dict[str, str] = {}
    for plan in plans:
        if plan.name not in EXPLAINED or plan.skip:
            continue
        for schema, text in plan.texts.items():
            directory = datasets[schema].store_dir
            if not directory:
                continue
            query = out / f"{plan.name}-{schema}.rq"
            query.write_text(text, encoding="utf-8")
            target = out / f"oxigraph-{plan.name}-{schema}.txt"
            raw = out / "last-plan.json"
            try:
                proc = subprocess.run(
                    [binary, "query", "--location", directory, "--query-file", str(query),
                     "--explain-file", str(raw), "--stats", "--results-format", "tsv",
                     "--results-file", str(out / "last-results.tsv")],
                    capture_output=True, text=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                done[f"{plan.name}/{schema}"] = f"left out: not done within {timeout:g} s with --stats"
                continue
            if proc.returncode != 0:
                done[f"{plan.name}/{schema}"] = f"failed: {proc.stderr[-500:]}"
                continue
            target.write_text(render_oxigraph_plan(json.loads(raw.read_text(encoding="utf-8"))),
                              encoding="utf-8")
            done[f"{plan.name}/{schema}"] = str(target)
    for leftover in ("last-results.tsv", "last-plan.json"):
        (out / leftover).unlink(missing_ok=True)
    return done


def render_oxigraph_plan(explanation: dict[str, Any], *, width: int = 150) -> str:
    """Oxigraph's JSON explanation as an indented tree: operator, rows out, seconds spent
    (inclusive of its children; ``--stats`` timing adds overhead of its own)."""
    lines = [f"planning: {explanation.get('planning duration in seconds', 0):.4f} s"]

    def walk(node: dict[str, Any], depth: int) -> None:
        name = node.get("name", "")
        if len(name) > width:
            name = name[:width] + "…"
        lines.append(f"{'  ' * depth}{name}  [{node.get('number of results')} rows, "
                     f"{node.get('duration in seconds', 0):.4f} s]")
        for child in node.get("children", []):
            walk(child, depth + 1)

    walk(explanation.get("plan", {}), 0)
    return "\n".join(lines) + "\n"


def explain_virtuoso(run: Any, plans: list[Any], out: Path) -> dict[str, str]:
    """Virtuoso's ``explain()`` of Q1 / Q5 / Q7 on each schema's server."""
    out.mkdir(parents=True, exist_ok=True)
    done: dict[str, str] = {}
    for plan in plans:
        if plan.name not in EXPLAINED or plan.skip:
            continue
        for schema, text in plan.texts_for("virtuoso").items():
            server = run.servers.get(schema)
            if server is None:
                continue
            one_line = " ".join(text.split("\n"))  # no continuation prompts in isql's output
            sql = "explain('sparql " + one_line.replace("'", "''") + "');\n"
            target = out / f"virtuoso-{plan.name}-{schema}.txt"
            try:
                answer = _isql(server, sql)
            except (OSError, subprocess.SubprocessError, AttributeError) as exc:
                done[f"{plan.name}/{schema}"] = f"failed: {exc}"
                continue
            target.write_text(answer, encoding="utf-8")
            done[f"{plan.name}/{schema}"] = str(target)
    return done


def _isql(server: Any, sql: str) -> str:
    """Run ``sql`` through isql-vt's standard input (its ``exec=`` argument mangles ``+``)."""
    proc = subprocess.run(["isql-vt", f"127.0.0.1:{server.sql_port}", "dba",
                           getattr(server, "password", "dba"), "VERBOSE=OFF", "BANNER=OFF",
                           "PROMPT=OFF"],
                          input=sql, capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=600, check=False)
    if proc.returncode != 0 or "*** Error" in proc.stdout + proc.stderr:
        raise subprocess.SubprocessError((proc.stdout + proc.stderr)[-1000:])
    return proc.stdout
