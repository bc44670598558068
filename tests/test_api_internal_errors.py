"""Unexpected errors and concurrent SPARQL parsing in the API (in-process, no network)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from api_support import free_port

from provkg.api.app import create_app
from provkg.config import get_settings


@pytest.fixture
def client(tmp_path) -> Iterator[httpx.Client]:
    """The app on a real uvicorn server in this process (so a test can patch the app's
    code), one keep-alive client."""
    app = create_app(get_settings(store="memory:", queue_dir=str(tmp_path / "queue")))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.05)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
        yield c
    server.should_exit = True
    thread.join(60)


def test_an_unexpected_error_is_a_500_answer_and_the_server_goes_on(client, monkeypatch) -> None:
    """Found by black-box testing: Starlette re-raised after the 500 handler, so the server
    dropped the connection and a keep-alive client's next request was reset."""
    import logging

    logging.getLogger("provkg.api.errors").disabled = True  # the traceback is expected
    from provkg.api.routes import queries

    def broken(query):  # a programming error, not a provkg error
        raise RuntimeError("boom")

    monkeypatch.setattr(queries, "_describe", broken)
    answer = client.get("/v1/queries")
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal", "detail": "internal server error (logged on the server)"}
    assert "boom" not in answer.text
    assert client.get("/health/live").status_code == 200  # the same connection
    logging.getLogger("provkg.api.errors").disabled = False


def test_sparql_from_many_threads_at_once_parses(client) -> None:
    """Found by black-box testing: pyparsing is not thread-safe; new queries sent at once to
    a fresh server broke rdflib's parser, and every new query text then got a 500."""
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def ask(i: int) -> None:
        start.wait()
        for k in range(15):  # each text is new: the guard's cache does not help
            text = f"SELECT ?s WHERE {{ ?s <http://example.org/p{i}-{k}> ?o FILTER(?o > {k}) }} LIMIT {k + 1}"
            status = client.get("/v1/sparql", params={"query": text}).status_code
            with lock:
                statuses.append(status)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 120
