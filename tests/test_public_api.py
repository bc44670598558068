"""provkg's public Python API is closed and stable: ``__all__`` and every signature in it are
held against a snapshot (tests/snapshots/public_api.txt). A change to the API changes the
snapshot in the same commit: ``PROVKG_UPDATE_SNAPSHOT=1 ./scripts/test tests/test_public_api.py``."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys
from pathlib import Path

import provkg

SNAPSHOT = Path(__file__).parent / "snapshots" / "public_api.txt"


def _members(cls: type) -> list[str]:
    lines = []
    if dataclasses.is_dataclass(cls):
        lines += [f"    field {f.name}: {f.type}" for f in dataclasses.fields(cls)]
    fields = getattr(cls, "model_fields", None)  # a pydantic model: its fields' names (the
    if isinstance(fields, dict):  # annotations' repr is pydantic's and changes between releases)
        lines += [f"    field {name}" for name in fields]
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_") or name.startswith("model_"):
            continue
        if isinstance(member, property):
            lines.append(f"    property {name}")
        elif isinstance(member, (staticmethod, classmethod)) or inspect.isfunction(member):
            func = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            lines.append(f"    def {name}{inspect.signature(func)}")
    return lines


def describe_api() -> str:
    lines = []
    for name in provkg.__all__:
        value = getattr(provkg, name)
        if name == "__version__":
            continue
        if inspect.ismodule(value):
            lines.append(f"module {name}: {', '.join(value.__all__)}")
        elif inspect.isclass(value):
            bases = ", ".join(b.__name__ for b in value.__bases__)
            lines.append(f"class {name}({bases})")
            if not issubclass(value, BaseException):
                lines += _members(value)
        else:
            lines.append(f"def {name}{inspect.signature(value)}")
    return "\n".join(lines) + "\n"


def test_the_public_api_matches_its_snapshot() -> None:
    now = describe_api()
    if os.environ.get("PROVKG_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(now)
    assert now == SNAPSHOT.read_text(), (
        "provkg's public API changed: if on purpose, update tests/snapshots/public_api.txt "
        "(PROVKG_UPDATE_SNAPSHOT=1) and say so in the commit")


def test_every_public_name_is_provkgs_own_and_listed() -> None:
    for name in provkg.__all__:
        value = getattr(provkg, name)
        if name != "__version__":
            assert getattr(value, "__module__", getattr(value, "__name__", "")).startswith("provkg"), name
    assert set(provkg.__all__) <= set(dir(provkg))
    assert sorted(set(provkg.__all__)) == sorted(provkg.__all__)  # no name twice


def test_importing_provkg_and_capture_loads_no_store_mapper_or_server_package() -> None:
    code = ("import sys, provkg; from provkg import capture; "
            "print(' '.join(m for m in ('pyoxigraph', 'rdflib', 'fastapi', 'uvicorn', 'yaml', "
            "'pydantic', 'SPARQLWrapper', 'owlready2', 'provkg.store', 'provkg.mapper') "
            "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == ""


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        provkg.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("provkg.no_such_thing did not raise")
