"""Shared fixtures: ``store`` runs a test against every backend provkg supports.

``store`` is parametrized over embedded Oxigraph on disk and in memory, rdflib, a real
Oxigraph server and a real Virtuoso. The servers are started once per session on free
loopback ports (``oxigraph_server``, ``virtuoso_server``) and stopped at the end; every
test gets an empty store (server stores are cleared before and after each test).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from provkg.store import Store, open_store
from provkg.testing import OxigraphServer, VirtuosoServer

# The suite's property tests must not depend on the host's speed or on the day: no per-example
# deadline and no too-slow health check (a loaded CI machine breaks both), and derandomized so
# a failure in CI is the same failure on a laptop. HYPOTHESIS_PROFILE=dev explores new examples.
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: backend ids of the ``store`` fixture, in the order tests run
BACKENDS = ["oxigraph", "memory", "rdflib", "oxigraph-server", "virtuoso"]
#: the backends that run in-process (fast; no server needed)
EMBEDDED_BACKENDS = ["oxigraph", "memory", "rdflib"]


@pytest.fixture(scope="session")
def oxigraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    """A real ``oxigraph serve`` on 127.0.0.1, for the whole session."""
    with OxigraphServer(tmp_path_factory.mktemp("oxigraph-server") / "db") as server:
        yield server


@pytest.fixture(scope="session")
def virtuoso_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtuosoServer]:
    """A real private Virtuoso on 127.0.0.1, for the whole session.

    Its ``bulk_dirs`` folder (``virtuoso_server.bulk_dirs[0]``) may hold files for
    :meth:`VirtuosoServer.bulk_load`.
    """
    root = tmp_path_factory.mktemp("virtuoso")
    bulk = root / "bulk"
    bulk.mkdir()
    # few join orders per SELECT: the test stores are tiny, and on them Virtuoso's default
    # (1000) compiled each new text of a tagged last-epoch query for 7-24 s (1.2 s at 10)
    with VirtuosoServer(root / "db", bulk_dirs=(bulk,), max_optimize_layouts=10) as server:
        yield server


def _open(backend: str, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Store:
    if backend == "oxigraph":
        return open_store(f"oxigraph:{tmp_path_factory.mktemp('oxigraph') / 'db'}")
    if backend in ("memory", "rdflib"):
        return open_store(f"{backend}:")
    server_fixture = {"oxigraph-server": "oxigraph_server", "virtuoso": "virtuoso_server"}[backend]
    server = request.getfixturevalue(server_fixture)
    store = open_store(server.store_url)
    store.clear()
    return store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An empty store of each backend in turn (ids: ``BACKENDS``)."""
    s = _open(request.param, request, tmp_path_factory)
    try:
        yield s
    finally:
        s.close()
        if request.param in ("oxigraph-server", "virtuoso"):  # leave the server empty
            with open_store(s.url) as again:
                again.clear()


@pytest.fixture(params=EMBEDDED_BACKENDS)
def embedded_store(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An empty in-process store of each embedded backend (for tests that need no server)."""
    s = _open(request.param, request, tmp_path_factory)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _capture_warnings_said_afresh() -> Iterator[None]:
    """The capture library says each cause once per process: each test starts with none said,
    so a test's warnings do not depend on which tests ran before it in the same worker."""
    from provkg.capture import report

    report._seen.clear()
    yield
