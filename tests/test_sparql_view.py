"""User SPARQL on the embedded store runs in a worker process on a read-only view: the view is
kept while nothing was written (no open, no log replay) and opened again after any write, so a
query sees every write that ended before it; a long write-ahead log is flushed before a worker
opens the store (provkg.api.sparql, provkg.api.sparql_worker)."""

from __future__ import annotations

from pathlib import Path

from provkg.api import sparql_worker
from provkg.api.sparql import LOG_FLUSH_BYTES, SparqlRunner
from provkg.store import open_store

COUNT = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"


def _triples(first: int, n: int, pad: str = "") -> list[tuple[str, str, str]]:
    return [(f"<https://example.org/s{i}>", "<https://example.org/p>", f'"{pad}{i}"')
            for i in range(first, first + n)]


def _count(reply: dict) -> int:
    return int(reply["rows"][0][0]["value"])


def test_the_worker_keeps_its_view_while_the_version_holds_and_opens_anew_after(tmp_path: Path) -> None:
    store = open_store(f"oxigraph:{tmp_path / 'store'}")
    store.add(_triples(0, 10))
    ask = {"path": str(tmp_path / "store"), "query": COUNT, "max_rows": 10}
    first = sparql_worker.answer({**ask, "version": store.write_version})
    held = sparql_worker._held
    assert _count(first) == 10 and held is not None
    assert _count(sparql_worker.answer({**ask, "version": store.write_version})) == 10
    assert sparql_worker._held is held  # the same view: nothing was written
    store.add(_triples(10, 5))
    assert _count(sparql_worker.answer({**ask, "version": store.write_version})) == 15
    assert sparql_worker._held is not held
    store.add(_triples(15, 5))
    assert _count(sparql_worker.answer(ask)) == 20  # no version: opened for the request
    store.close()


def test_a_query_through_the_runner_sees_every_write_before_it(tmp_path: Path) -> None:
    url = f"oxigraph:{tmp_path / 'store'}"
    store = open_store(url)
    runner = SparqlRunner(store, url, timeout=30, max_rows=10, workers=1)
    try:
        for k in range(5):
            assert int(runner.run(COUNT, "select").rows.rows[0][0]["value"]) == 3 * k
            store.add(_triples(3 * k, 3))
    finally:
        runner.close()
        store.close()


def test_a_long_log_is_flushed_before_a_worker_opens_the_store(tmp_path: Path) -> None:
    url = f"oxigraph:{tmp_path / 'store'}"
    store = open_store(url)
    runner = SparqlRunner(store, url, timeout=30, max_rows=10, workers=1)
    try:
        pad = "x" * 200
        while store.log_bytes() <= LOG_FLUSH_BYTES:
            store.add(_triples(store.count(), 500, pad))  # small transactions: all in the log
        written = store.count()
        assert int(runner.run(COUNT, "select").rows.rows[0][0]["value"]) == written
        assert store.log_bytes() < LOG_FLUSH_BYTES
    finally:
        runner.close()
        store.close()
