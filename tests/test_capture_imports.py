"""provkg.capture stays light: no RDF, store or web-server package, not even indirectly."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ["pyoxigraph", "rdflib", "SPARQLWrapper", "fastapi", "owlready2", "uvicorn",
             "provkg.store", "provkg.mapper", "provkg.api", "provkg.service"]


def test_capture_and_all_its_sinks_import_no_heavy_package():
    code = (
        "import sys, json\n"
        "import provkg.capture, provkg.capture.file_sink, provkg.capture.http_sink\n"
        "import provkg.capture.mqtt_sink, provkg.capture.replay, provkg.capture.broker\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                           text=True, check=True).stdout))
    bad = [name for name in FORBIDDEN if name in loaded or any(m.startswith(name + ".") for m in loaded)]
    assert bad == []
    assert "provkg.capture" in loaded  # the check looked at the right process


def test_import_linter_contracts_of_pyproject_hold():
    """Every import-linter contract of pyproject.toml: the light capture library and the layers."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(linter), "--no-cache"], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    assert "2 kept" in result.stdout
