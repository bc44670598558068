"""The README's quickstart runs as written: its capture code, its spec, its commands and its
Python block, in a fresh folder, answer d3 with the epochs the capture code recorded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROVKG = [sys.executable, "-m", "provkg.cli"]


def _blocks(kind: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    quickstart = text[text.index("## Quickstart"):]
    quickstart = quickstart[:quickstart.index("\n## ", 3)]
    return re.findall(rf"```{kind}\n(.*?)```", quickstart, re.S)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    capture_code, python_api = _blocks("python")
    (spec,) = _blocks("yaml")
    (commands,) = _blocks("sh")[-1:]
    _run([sys.executable, "-c", capture_code], tmp_path)
    (tmp_path / "training.yaml").write_text(spec)
    for line in commands.splitlines():
        command = line.split("#", 1)[0].split()
        if not command or command[:2] == ["provkg", "serve"]:  # serve runs until stopped
            continue
        assert command[0] == "provkg", line
        _run(PROVKG + command[1:], tmp_path)
    asked = _run(PROVKG + ["query", "d3", "--param", "training=flowers-1.1", "--format", "json"],
                 tmp_path)
    answer = json.loads(asked.stdout)
    assert answer["columns"] == ["epoch", "seconds", "loss"]
    assert [(r[0], r[2]) for r in answer["rows"]] == [(0, 0.9), (1, 0.5), (2, 0.3)]
    # the Python block, on the store the commands filled (re-ingesting adds no triple)
    shown = _run([sys.executable, "-c", python_api], tmp_path).stdout
    assert shown.startswith("['epoch', 'seconds', 'loss'] [[0, ")
