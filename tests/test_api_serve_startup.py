"""``provkg serve`` checks everything it needs before it says it is serving: settings, port,
store and queue folder. Each problem is one ``error: ...`` line and exit status 1 (docs/reference/cli.md),
never a traceback, a "serving" line, or a server that starts and then fails every batch."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from api_support import free_port


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
          store: str = "memory:") -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PROVKG_")}
    environment.update({"PROVKG_QUEUE_DIR": str(tmp_path / "queue"), **(env or {})})
    return subprocess.run([sys.executable, "-m", "provkg.cli", "serve", "--store", store, *args],
                          env=environment, capture_output=True, text=True, timeout=60)


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "serving" not in result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr


@pytest.mark.parametrize(("env", "args", "words"), [
    ({"PROVKG_INGEST_SCHEMA": "foo", "PROVKG_MAX_ROWS": "abc", "PROVKG_QUERY_TIMEOUT_S": "0"}, (),
     ("PROVKG_INGEST_SCHEMA: must be one of typed, tagged, sprov",
      "PROVKG_MAX_ROWS: must be a whole number", "PROVKG_QUERY_TIMEOUT_S: must be more than 0")),
    ({"PROVKG_MQTT_URL": "http://127.0.0.1:1883"}, (), ("PROVKG_MQTT_URL", "mqtt://")),
    ({}, ("--port", "99999"), ("--port: must be 65535 or less",)),
    ({}, ("--port=-5",), ("--port: must be 0 or more",)),
    # found by black-box testing: PROVKG_TOKEN=$SECRET with SECRET unset served open writes
    ({"PROVKG_TOKEN": ""}, (), ("PROVKG_TOKEN: set but empty",)),
    ({"PROVKG_TOKEN": "  "}, (), ("PROVKG_TOKEN: set but empty",)),
])
def test_bad_settings_are_refused_before_serving(tmp_path: Path, env: dict[str, str],
                                                 args: tuple[str, ...], words: tuple[str, ...]) -> None:
    refused(serve(tmp_path, *args, env=env), *words)


@pytest.mark.parametrize(("variable", "value", "words"), [
    ("PROVKG_PORT", "70000", "PROVKG_PORT: must be 65535 or less"),
    ("PROVKG_ALLOWED_SERVICE_ENDPOINTS", "http://x", "PROVKG_ALLOWED_SERVICE_ENDPOINTS: must be a JSON list"),
    ("PROVKG_ALLOWED_SERVICE_ENDPOINTS", "[1]", "PROVKG_ALLOWED_SERVICE_ENDPOINTS: must be a JSON list"),
    ("PROVKG_QUEUE_FSYNC", "maybe", "PROVKG_QUEUE_FSYNC: must be true or false"),
    ("PROVKG_SPARQL_WORKERS", "0", "PROVKG_SPARQL_WORKERS: must be more than 0"),
])
def test_settings_name_the_variable_and_what_it_takes(monkeypatch: pytest.MonkeyPatch, variable: str,
                                                      value: str, words: str) -> None:
    from provkg.config import BadSetting, get_settings

    monkeypatch.setenv(variable, value)
    with pytest.raises(BadSetting) as info:
        get_settings()
    assert str(info.value).startswith(words)
    assert repr(value) not in str(info.value)  # values are not repeated (a token could be one)


def test_a_port_in_use_is_refused_before_serving(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused(serve(tmp_path, "--port", str(port)), f"127.0.0.1:{port}", "in use")


def test_a_queue_folder_of_another_process_is_refused_before_serving(tmp_path: Path) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    with open(queue / "lock", "w") as lock:  # what a running server holds
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused(serve(tmp_path, "--port", str(free_port())), str(queue), "another process")
    (tmp_path / "file").write_text("")
    refused(serve(tmp_path, "--port", str(free_port()), env={"PROVKG_QUEUE_DIR": str(tmp_path / "file")}),
            "PROVKG_QUEUE_DIR", "not a folder")


def test_a_store_held_by_another_process_is_refused_before_serving(tmp_path: Path) -> None:
    import pyoxigraph as ox

    held = ox.Store(str(tmp_path / "store"))  # RocksDB's lock, as another server holds it
    try:
        refused(serve(tmp_path, "--port", str(free_port()), store=f"oxigraph:{tmp_path / 'store'}"),
                "cannot open the Oxigraph store")
    finally:
        del held


def test_a_remote_store_that_refuses_writes_is_refused_before_serving(tmp_path: Path,
                                                                      virtuoso_server) -> None:
    # black-box testing: with a wrong password the server said "ready" and acknowledged
    # batches its queue worker could then only retry (HTTP 401)
    result = serve(tmp_path, "--port", "0",
                   store=f"{virtuoso_server.store_url}?user=dba&password=wrong")
    refused(result, "does not take writes", "HTTP 401", "PROVKG_STORE")
    assert "wrong" not in result.stderr  # the password is masked


def test_a_remote_store_that_does_not_answer_yet_is_waited_for(tmp_path: Path) -> None:
    """A remote store down (or still starting: a compose file starts both at once) used to stop
    `provkg serve` from starting. It serves now: batches are accepted and kept in the queue,
    spec posts are refused (the store's own specs are not read yet), /health/ready says why;
    once the store answers, the queued batches land, mapped with the spec saved earlier."""
    import time

    import orjson
    from api_support import ApiServer
    from mapper_support import SPEC_YAML, lifecycle_events

    from provkg.events import FORMAT
    from provkg.testing import OxigraphServer

    oxigraph = OxigraphServer(tmp_path / "oxigraph")
    yaml = {"Content-Type": "application/yaml"}
    with oxigraph, ApiServer(tmp_path / "api", store=oxigraph.store_url) as server:
        assert server.http.post("/v1/specs", content=SPEC_YAML, headers=yaml).status_code == 201
    # the store is down now, and the server starts on the same queue folder
    server = ApiServer(tmp_path / "api", store=oxigraph.store_url)
    before = len(server.log())
    server.start()
    try:
        assert "the store does not answer yet" in _wait_for_line(server, "provkg serving", after=before)
        ready = server.http.get("/health/ready")
        assert ready.status_code == 503
        assert any("not usable since the server started (cannot reach" in p
                   for p in ready.json()["problems"])
        events = lifecycle_events(trainings=1, run="while-down")
        posted = server.http.post("/v1/events", content=orjson.dumps({"format": FORMAT, "events": events}),
                                  headers={"Content-Type": "application/json"})
        assert posted.status_code == 202, posted.text
        refused = server.http.post("/v1/specs", content=SPEC_YAML, headers=yaml)
        assert refused.status_code == 503 and "not been usable since" in refused.json()["detail"]
        # the queue is retrying the batch (it said so once); the store stays down 4 s more,
        # the outage under test: its retries (0.1, 0.2, 0.4 ... s) leave nothing to wait on,
        # and none may say it again
        server.wait_log("could not apply queued batches", after=before)
        time.sleep(4)
        oxigraph.start()  # the same port and folder
        deadline = time.monotonic() + 60
        while server.http.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, server.http.get("/health/ready").json()
            time.sleep(0.2)
        assert server.wait_applied()["backlog_events"] == 0
        asked = server.http.post("/v1/sparql", headers={"Content-Type": "application/sparql-query"},
                                 content="PREFIX provml: <https://w3id.org/provkg/provml#> "
                                         "SELECT (COUNT(?t) AS ?n) WHERE { ?t a provml:TrainingExecution }")
        assert asked.json()["results"]["bindings"][0]["n"]["value"] == "1"  # typed: the spec was used
        assert server.http.post("/v1/specs", content=SPEC_YAML, headers=yaml).status_code == 201
        # the queue said its wait once (per problem and minute), not every 5 s (a regression round)
        assert server.log()[before:].count("could not apply queued batches") <= 2
    finally:
        server.stop()
        oxigraph.stop()


def _wait_for_line(server, start: str, *, after: int = 0,  # type: ignore[no-untyped-def]
                   timeout: float = 60.0) -> str:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in server.log()[after:].splitlines():
            if line.startswith(start):
                return line
        time.sleep(0.1)
    raise AssertionError(f"no line starting {start!r} in the log:\n{server.log()}")
