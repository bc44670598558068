"""The server launchers: private, loopback-only, stopped cleanly; Virtuoso's limits raised."""

from __future__ import annotations

from pathlib import Path

import httpx
import psutil
import pytest

from provkg.errors import StoreError
from provkg.store import open_store
from provkg.term import iri, literal
from provkg.testing import OxigraphServer, VirtuosoServer


def test_oxigraph_server_starts_on_loopback_and_stops(tmp_path: Path) -> None:
    server = OxigraphServer(tmp_path / "db").start()
    pid = server.pid
    try:
        assert httpx.get(f"{server.url}/query", params={"query": "ASK{}"}).status_code == 200
        conn = [c for c in psutil.Process(pid).net_connections() if c.status == psutil.CONN_LISTEN]
        assert {c.laddr.ip for c in conn} == {"127.0.0.1"}
    finally:
        server.stop()
    assert pid is not None and not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}/query", params={"query": "ASK{}"}, timeout=2)


def test_virtuoso_ini_is_private_and_raised(virtuoso_server: VirtuosoServer) -> None:
    ini = (virtuoso_server.directory / "virtuoso.ini").read_text()
    assert f"ServerPort = 127.0.0.1:{virtuoso_server.sql_port}" in ini
    assert f"ServerPort = 127.0.0.1:{virtuoso_server.port}" in ini
    assert "ResultSetMaxRows = 10000000" in ini
    assert str(virtuoso_server.bulk_dirs[0]) in ini
    assert "MaxOptimizeLayouts = 10\n" in ini  # the fixture's setting reaches the ini
    assert "/var/lib/virtuoso-opensource-7/db" not in ini
    assert not [line for line in ini.splitlines() if line.startswith("Load") and line[4:5].isdigit()]  # plugins off


def test_virtuoso_does_not_cut_large_results(virtuoso_server: VirtuosoServer) -> None:
    # Debian's default ResultSetMaxRows (10000) silently truncates answers
    p = iri("http://example.org/test/p")
    with open_store(virtuoso_server.store_url) as store:
        try:
            store.add([(iri(f"http://example.org/test/n/{i}"), p, literal(i)) for i in range(12_000)])
            rows = store.select(f"SELECT ?s ?v WHERE {{ ?s {p} ?v }}")
            assert len(rows) == 12_000
            assert sorted(rows.column("v")) == list(range(12_000))
        finally:
            store.clear()


def test_virtuoso_bulk_load(virtuoso_server: VirtuosoServer, tmp_path: Path) -> None:
    data = virtuoso_server.bulk_dirs[0] / "bulk.nt"
    data.write_text("".join(f"<http://example.org/test/b/{i}> <http://example.org/test/p> "
                            f"{literal(i * 0.5)} .\n" for i in range(500)), encoding="utf-8")
    graph = "http://example.org/test/bulk"
    try:
        virtuoso_server.bulk_load(data, graph=graph)
        with open_store(virtuoso_server.store_url) as store:
            assert store.count(graph=graph) == 500
    finally:
        with open_store(virtuoso_server.store_url) as store:
            store.clear()
    outside = tmp_path / "elsewhere.nt"
    outside.write_text("")
    with pytest.raises(StoreError, match="bulk_dirs"):
        virtuoso_server.bulk_load(outside, graph=graph)


def test_virtuoso_reopens_its_database_with_the_data(tmp_path: Path) -> None:
    # a second start on the same folder (the benchmark's stores, a user's restart) must work
    # and keep what the first one stored
    p = iri("http://example.org/test/p")
    with VirtuosoServer(tmp_path / "db") as server, open_store(server.store_url) as store:
        store.add([(iri("http://example.org/test/kept"), p, literal(1))])
    with VirtuosoServer(tmp_path / "db") as server, open_store(server.store_url) as store:
        assert store.count() >= 1
        assert store.ask(f"ASK {{ <http://example.org/test/kept> {p} 1 }}")
        store.add([(iri("http://example.org/test/more"), p, literal(2))])  # still writable


def test_a_server_that_fails_to_start_leaves_no_process(tmp_path: Path) -> None:
    with VirtuosoServer(tmp_path / "db") as first:
        second = VirtuosoServer(tmp_path / "db")  # the folder's lock is held: it cannot start
        with pytest.raises(StoreError, match="lock|running"):
            second.start()
        assert second.pid is None
        assert httpx.get(f"{first.url}/sparql", params={"query": "ASK{}"}).status_code == 200


def test_virtuoso_system_graphs_are_hidden_unless_a_canned_query_asks(
        virtuoso_server: VirtuosoServer) -> None:
    # user SPARQL sees only data; canned queries (provkg vocabularies only) skip the hiding,
    # which costs Virtuoso its good plans on large joins
    quad_maps = "SELECT (COUNT(*) AS ?n) WHERE { ?m a <http://www.openlinksw.com/schemas/virtrdf#QuadMap> }"
    with open_store(virtuoso_server.store_url) as store:
        assert store.select(quad_maps).rows == [[0]]
        assert store.select(quad_maps, hide_system_graphs=False).rows[0][0] > 0
