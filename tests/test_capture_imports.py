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


def test_import_linter_contract_for_capture_passes(tmp_path):
    """Run the capture contract of pyproject.toml alone (the other contracts are other owners')."""
    import importlib.util
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if "provkg.capture" in c.get("source_modules", []))
    # import-linter refuses contracts naming modules that do not exist (yet): check the rest
    forbidden = [m for m in contract["forbidden_modules"] if _is_regular_module(m)]
    lines = ["[importlinter]", "root_package = provkg",
             f"include_external_packages = {config.get('include_external_packages', False)}", "",
             "[importlinter:contract:capture]", f"name = {contract['name']}",
             f"type = {contract['type']}",
             "source_modules =\n    " + "\n    ".join(contract["source_modules"]),
             "forbidden_modules =\n    " + "\n    ".join(forbidden),
             f"allow_indirect_imports = {str(contract.get('allow_indirect_imports', False)).lower()}"]
    ini = tmp_path / "importlinter.ini"
    ini.write_text("\n".join(lines) + "\n")
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(linter), "--config", str(ini), "--no-cache"], cwd=root,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def _is_regular_module(name: str) -> bool:
    import importlib.util

    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin is not None  # a folder without __init__.py: not yet
