"""The lock (requirements/lock.txt) agrees with pyproject.toml and with the venv under test.

pyproject.toml keeps ranges; the lock pins what the README's commands, scripts/test and CI
install. When a range changes without ``scripts/lock``, these tests say which package disagrees.
"""

from __future__ import annotations

import os
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
#: extras the lock leaves out: benchmark peers (MLflow, Flowcept); benchmarks record their versions
UNLOCKED_EXTRAS = {"bench"}


def _pins(text: str) -> dict[str, Version]:
    pins = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(;.*)?", line)
        assert m, f"requirements/lock.txt line {number}: expected NAME==VERSION[; MARKER], got {line!r}"
        pins[canonicalize_name(m[1])] = Version(m[2])
    return pins


def _applies(req: Requirement, extra: str = "") -> bool:
    return req.marker is None or req.marker.evaluate({**default_environment(), "extra": extra})


def _direct_requirements() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        if extra not in UNLOCKED_EXTRAS:
            found += [(f"[{extra}]", Requirement(r)) for r in reqs]
    # an extra naming provkg's own extras (provkg[server]) pins nothing itself
    return [(where, r) for where, r in found if _applies(r) and canonicalize_name(r.name) != "provkg"]


PINS = _pins(LOCK.read_text())


@pytest.mark.parametrize(("where", "req"), _direct_requirements(), ids=lambda v: str(v))
def test_every_requirement_of_pyproject_is_pinned_within_its_range(where: str, req: Requirement) -> None:
    name = canonicalize_name(req.name)
    assert name in PINS, f"pyproject.toml {where} asks for {req}, which the lock does not pin: run scripts/lock"
    assert req.specifier.contains(PINS[name], prereleases=True), (
        f"pyproject.toml {where} asks for {req}; the lock pins {name}=={PINS[name]}: run scripts/lock")


def test_the_lock_is_closed_every_pinned_package_finds_its_own_requirements_pinned() -> None:
    """A package missing from the lock would float to whatever the registry serves that day."""
    missing = []
    for name in PINS:
        if name == "provkg":
            continue
        # the installed metadata says what the *installed* release requires: under
        # ``scripts/test --latest`` a newer release's (transformers 5.25 added kernels) is no
        # statement about the locked one's (scripts/test installs exactly the lock: see below)
        if Version(metadata.version(name)) != PINS[name]:
            continue
        for raw in metadata.requires(name) or []:
            req = Requirement(raw)
            if not _applies(req):
                continue
            dep = canonicalize_name(req.name)
            if dep not in PINS or not req.specifier.contains(PINS[dep], prereleases=True):
                missing.append(f"{name} needs {req}; the lock has {PINS.get(dep, 'nothing')}")
    assert not missing, "\n".join(missing)


def test_the_venv_under_test_holds_the_locked_versions() -> None:
    """scripts/test installs exactly the lock; ``scripts/test --latest`` the newest releases, which
    are never older than the lock. A drift means something installed around the lock."""
    latest = os.environ.get("PROVKG_TEST_LATEST") == "1"
    drift = {name: (str(v), metadata.version(name)) for name, v in PINS.items()
             if (Version(metadata.version(name)) < v if latest else Version(metadata.version(name)) != v)}
    assert not drift, f"installed versions differ from requirements/lock.txt (locked, installed): {drift}"
