"""The code checks CI runs with the suite: ruff's rules (pyproject [tool.ruff.lint]) and mypy
on src/provkg (pyproject [tool.mypy]), strict on the public API modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

#: the modules ``import provkg`` exposes, and what they stand on: checked with --strict
PUBLIC_API = ["src/provkg/__init__.py", "src/provkg/errors.py", "src/provkg/schemas.py",
              "src/provkg/wire.py", "src/provkg/defaults.py", "src/provkg/extras.py",
              "src/provkg/problems.py"]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    done = _run(str(BIN / "ruff"), "check", "--no-cache", "src", "tests", "benchmarks", "scripts")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_passes_on_src() -> None:
    done = _run(str(BIN / "mypy"), "--no-incremental", "--cache-dir", "/dev/null")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_passes_on_the_public_api_modules() -> None:
    done = _run(str(BIN / "mypy"), "--strict", "--no-incremental", "--cache-dir", "/dev/null",
                *PUBLIC_API)
    assert done.returncode == 0, done.stdout + done.stderr
