"""The Lightning tutorial runs as written: its files and commands, in a fresh folder, give the
answers the page shows (runs, d5 by validation, d3, d6, lineage back to the data files)."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tutorial" / "lightning.md"
PROVKG = [sys.executable, "-m", "provkg.cli"]


def _files() -> dict[str, str]:
    return dict(re.findall(r'```python title="([^"]+)"\n(.*?)```', PAGE.read_text(), re.S))


def _commands() -> list[str]:
    """The page's shell commands, after the install step, in order."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.S)[1:]
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-4000:])
    return done.stdout


def _query(cwd: Path, *args: str) -> dict[str, Any]:
    return json.loads(_run(PROVKG + ["query", *args, "--format", "json"], cwd))


def test_the_lightning_tutorial_runs_as_written_and_answers_as_shown(tmp_path: Path) -> None:
    for name, text in _files().items():
        (tmp_path / name).write_text(text)
    commands = _commands()
    assert commands[:4] == ["python make_data.py", "python train.py reg-1 0.001",
                            "python train.py reg-2 0.02", "provkg ingest provkg-events"]
    for line in commands[:4]:
        words = shlex.split(line)
        _run(([sys.executable] if words[0] == "python" else PROVKG) + words[1:], tmp_path)
    # every query the page runs, as written, answering in JSON (the lineage line through a shell)
    answers: dict[str, dict[str, Any]] = {}
    for line in commands[4:]:
        if line.startswith("provkg query lineage"):
            out = subprocess.run(line.replace("provkg", shlex.join(PROVKG), 1), shell=True, cwd=tmp_path,
                                 capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            rows = list(csv.reader(io.StringIO(out.stdout)))
            assert rows[0] == ["data", "derived_from", "activity", "depth"]
            assert {r[1].rsplit("/", 1)[-1] for r in rows[1:]} == {"train.pt", "val.pt"}
        elif line.startswith("provkg query "):
            words = [w for w in shlex.split(line)[2:] if w not in ("--format", "csv")]
            answers[words[0]] = _query(tmp_path, *words)
        else:
            _run(PROVKG + shlex.split(line)[1:], tmp_path)
    assert set(answers) == {"runs", "d5", "d3", "d6"}

    runs = answers["runs"]
    by_label = {row[2]: dict(zip(runs["columns"], row)) for row in runs["rows"]}
    assert set(by_label) == {"adam lr=0.001", "adam lr=0.02"}
    assert all(r["status"] == "finished" for r in by_label.values())
    assert "learning_rate=0.02" in by_label["adam lr=0.02"]["hyperparameters"]
    assert "scheduler.class=StepLR" in by_label["adam lr=0.02"]["hyperparameters"]

    best = answers["d5"]
    ranked = [row[0].rsplit("/", 1)[-1] for row in best["rows"]]
    assert ranked == ["reg-2.1", "reg-1.1"]
    assert best["rows"][0][1] < best["rows"][1][1]

    epochs = answers["d3"]
    assert [row[0] for row in epochs["rows"]] == [0, 1, 2, 3]
    losses = [row[2] for row in epochs["rows"]]
    assert losses == sorted(losses, reverse=True)  # it learns: each epoch's mean loss lower

    changes = answers["d6"]
    assert [row[1:] for row in changes["rows"]] == [[2, "StepLR", 0.01]]
