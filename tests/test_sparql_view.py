"""User SPARQL on the embedded store runs in a worker process on a read-only view: the view is
kept while nothing was written (no open, no log replay) and opened again after any write, so a
query sees every write that ended before it; a long write-ahead log is flushed before a worker
opens the store (provkg.api.sparql, provkg.api.sparql_worker). The ingest queue's writes
(``Store.queued_writes``) are the exception: a background refresher gives the workers fresh views
off the queries' path, and a query may see them up to four refresh intervals late, until
``require_current``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from provkg.api import sparql, sparql_worker
from provkg.api.sparql import LOG_FLUSH_BYTES, SparqlRunner
from provkg.store import open_store
from provkg.store.base import Store

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


def test_a_long_log_is_flushed_before_a_worker_opens_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparql, "FLUSH_EVERY_S", 0.0)  # a flush whenever the log is long
    url = f"oxigraph:{tmp_path / 'store'}"
    store = open_store(url)
    runner = SparqlRunner(store, url, timeout=30, max_rows=10, workers=1)
    try:
        pad = "x" * 200
        for cycle in range(4):  # every time, not only the first (bulk loads in between)
            for _ in range(200):
                if store.log_bytes() > LOG_FLUSH_BYTES:
                    break
                store.add(_triples(store.count(), 500, pad))  # small transactions: in the log
            else:
                raise AssertionError(f"cycle {cycle}: log_bytes stays {store.log_bytes()}")
            store.add(_triples(store.count(), 6000, pad))  # a bulk load: table files, no log
            written = store.count()
            assert int(runner.run(COUNT, "select").rows.rows[0][0]["value"]) == written
            assert store.log_bytes() < LOG_FLUSH_BYTES
    finally:
        runner.close()
        store.close()


def _n(runner: SparqlRunner) -> int:
    return int(runner.run(COUNT, "select").rows.rows[0][0]["value"])


@contextmanager
def _runner(tmp_path: Path, **options: Any) -> Iterator[tuple[Store, SparqlRunner]]:
    url = f"oxigraph:{tmp_path / 'store'}"
    store = open_store(url)
    runner = SparqlRunner(store, url, timeout=30, max_rows=10, **options)
    try:
        yield store, runner
    finally:
        runner.close()
        store.close()


def test_the_queues_writes_may_lag_until_required_and_other_writes_never_do(tmp_path: Path) -> None:
    # no background refresh within this test, and views kept for four hours
    with _runner(tmp_path, workers=1, refresh_s=3600) as (store, runner):
        store.add(_triples(0, 3))
        assert _n(runner) == 3
        with store.queued_writes():
            store.add(_triples(3, 3))
        assert store.must_see_version < store.write_version
        assert _n(runner) == 3  # the worker's view, kept: the queue's write lags
        runner.require_current()
        assert _n(runner) == 6
        with store.queued_writes():
            store.add(_triples(6, 3))
        store.add(_triples(9, 3))  # a write of another request: seen by the next query
        assert _n(runner) == 12
        with store.queued_writes():
            with store.queued_writes():  # nested (a settle inside an apply)
                store.add(_triples(12, 1))
            store.add(_triples(13, 1))  # still the queue's
        assert _n(runner) == 12


def test_the_refresher_brings_the_queues_writes_to_the_idle_workers(tmp_path: Path) -> None:
    with _runner(tmp_path, workers=2, refresh_s=0.05) as (store, runner):
        assert _n(runner) == 0
        with store.queued_writes():
            store.add(_triples(0, 4))
        version = store.write_version
        deadline = time.monotonic() + 60
        while {w.version for w in runner._all} != {version}:  # both refreshed, no query asked
            assert time.monotonic() < deadline, [w.version for w in runner._all]
            time.sleep(0.05)
        assert _n(runner) == 4


def test_without_refresh_a_query_sees_the_queues_writes_at_once(tmp_path: Path) -> None:
    with _runner(tmp_path, workers=1, refresh_s=0) as (store, runner):
        for k in range(3):
            assert _n(runner) == 2 * k
            with store.queued_writes():
                store.add(_triples(2 * k, 2))
