"""``pip install provkg`` is the capture library alone: a fresh venv holding the core (at the
lock's versions) records a workflow to a file sink, and the commands that need an extra say
which one in a line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: what the core must not pull in (the server, reasoning and demo extras hold them)
HEAVY = {"fastapi", "uvicorn", "pyoxigraph", "rdflib", "owlready2", "scikit-learn", "matplotlib",
         "segyio", "h5py", "pydantic", "sparqlwrapper", "pyyaml", "numpy", "paho-mqtt"}

RECORD = """
from provkg import capture
with capture.workflow("core-only", sink="file:{events}", spool="{spool}", run_id="r1") as wf:
    with wf.task("training", used={{"learning_rate": 0.01}}) as training:
        for e in range(3):
            with wf.task("epoch", parent=training, index=e) as epoch:
                epoch.generate(loss=1.0 / (e + 1))
        training.generate(loss=0.3)
with capture.workflow("core-mqtt", sink="mqtt://127.0.0.1:9/t", spool="{spool}"):
    pass
print("recorded")
"""


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", "-c", str(ROOT / "requirements" / "lock.txt"),
                    str(ROOT)], check=True, timeout=900)
    return venv


def test_the_core_install_pulls_no_server_demo_or_reasoning_package(core_venv: Path) -> None:
    listed = subprocess.run([str(core_venv / "bin" / "python"), "-m", "pip", "list",
                             "--format=json", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "provkg" in names and {"orjson", "zstandard"} <= names
    assert names & HEAVY == set()


def test_the_core_install_records_a_workflow_to_a_file_sink(core_venv: Path, tmp_path: Path) -> None:
    events, spool = tmp_path / "events", tmp_path / "spool"
    ran = subprocess.run([str(core_venv / "bin" / "python"), "-c",
                          RECORD.format(events=events, spool=spool)],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout.strip() == "recorded", ran.stderr
    lines = [json.loads(line) for f in sorted(events.iterdir()) for line in f.read_text().splitlines()]
    kinds = [(e["type"], e["event"]) for e in lines]
    assert kinds.count(("task", "end")) == 4 and ("workflow", "end") in kinds
    # the MQTT sink without its extra: the run goes on, its events are spooled, the extra named
    assert 'pip install "provkg[mqtt]"' in ran.stderr
    assert any(spool.rglob("*.jsonl*"))


def test_a_command_that_needs_an_extra_names_it_in_one_line(core_venv: Path, tmp_path: Path) -> None:
    ran = subprocess.run([str(core_venv / "bin" / "provkg"), "ingest", str(tmp_path),
                          "--store", f"oxigraph:{tmp_path / 'db'}"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1
    assert re.fullmatch(r'error: this needs provkg\'s "server" extra \(\w+ is not installed\): '
                        r'pip install "provkg\[server\]"\n', ran.stderr), ran.stderr
    version = subprocess.run([str(core_venv / "bin" / "provkg"), "--version"],
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("provkg ")
