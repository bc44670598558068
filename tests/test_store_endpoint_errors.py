"""SPARQL endpoint stores facing broken or hostile servers, found by black-box testing:

- a store URL's credentials (``?password=``, ``user:password@``) never appear in error
  messages, API answers, logs, ``provkg init`` / ``provkg serve`` output;
- an endpoint that accepts connections but never answers is an ``error:`` after a short,
  configurable time (``timeout=`` / ``connect_timeout=`` in the store URL), not a hang;
- a server that is not a SPARQL endpoint (HTML pages, cut-off JSON, 501) is one clear
  ``error:`` line, no traceback, no warning;
- a store folder that cannot be looked at is an ``error:``, not a PermissionError traceback.

The servers here are tiny stand-ins for broken third-party servers, on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from provkg.cli import main
from provkg.errors import BadParameter, QueryTimeout, StoreError
from provkg.store import open_store

SECRET = "s3cret-Pw"
#: an answer: (HTTP status, content type, body)
Answer = tuple[int, str, bytes]

_JSON = "application/sparql-results+json"
_COUNT = json.dumps({"head": {"vars": ["n"]}, "results": {"bindings": [
    {"n": {"type": "literal", "datatype": "http://www.w3.org/2001/XMLSchema#integer",
           "value": "0"}}]}}).encode()
_EMPTY = json.dumps({"head": {"vars": []}, "results": {"bindings": []}}).encode()
_EMPTY_TURTLE = (b"@prefix res: <http://www.w3.org/2005/sparql-results#> .\n"
                 b"[] a res:ResultSet ; res:resultVariable \"x\" .\n")
_TRUE = json.dumps({"head": {}, "boolean": True}).encode()
_FAILED: Answer = (500, "text/plain", b"Virtuoso 42000 Error SR999: the store broke down")


@contextmanager
def http_server(answer: Callable[[str, dict[str, list[str]]], Answer]) -> Iterator[int]:
    """An HTTP server on a free port answering every GET and POST with ``answer(Accept
    header, form fields)``; yields the port."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(size).decode("utf-8", "replace") if size else ""
            form = parse_qs(body) if "form-urlencoded" in self.headers.get("content-type", "") else {}
            status, media, data = answer(self.headers.get("accept", ""), form)
            self.send_response(status)
            self.send_header("content-type", media)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        do_GET = do_POST = do_PUT = _reply

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that gave up waiting (a time limit test) hangs up: no noise

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class FakeEndpoint:
    """Answers like a SPARQL endpoint (``ASK`` true, ``COUNT`` 0, other SELECTs empty,
    updates and uploads taken) until ``failing`` is set: then every request but ``ASK {}``
    gets a Virtuoso-style error 500."""

    def __init__(self) -> None:
        self.failing = False

    def __call__(self, accept: str, form: dict[str, list[str]]) -> Answer:
        query = (form.get("query") or [""])[0]
        if query.strip().startswith("ASK"):
            return 200, _JSON, _TRUE
        if self.failing:
            return _FAILED
        if "update" in form or not query:
            return 200, "text/plain", b""
        if "turtle" in accept:  # what Virtuoso stores ask for
            return 200, "text/turtle", _EMPTY_TURTLE
        return 200, _JSON, _COUNT if "COUNT(" in query.upper() else _EMPTY


@pytest.fixture
def endpoint() -> Iterator[tuple[FakeEndpoint, int]]:
    fake = FakeEndpoint()
    with http_server(fake) as port:
        yield fake, port


@contextmanager
def silent_socket(*, backlog: int = 16) -> Iterator[socket.socket]:
    """A listening socket that takes connections (the kernel does) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(backlog)
        yield sock


@contextmanager
def silent_server(*, backlog: int = 16) -> Iterator[int]:
    """A port that takes connections (the kernel does) and never answers."""
    with silent_socket(backlog=backlog) as sock:
        yield sock.getsockname()[1]


def first_request(sock: socket.socket) -> bytes:
    """What the first connection queued on ``sock`` sent before its client hung up: the
    kernel keeps both for a connection nobody accepted yet."""
    sock.settimeout(60)
    conn, _ = sock.accept()
    with conn:
        conn.settimeout(60)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``provkg ARGS`` in a subprocess: a hang fails the test instead of the run (a deadline
    for a hang only, far above any limit the test sets)."""
    return subprocess.run([sys.executable, "-m", "provkg.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def one_error_line(err: str, *words: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and SECRET not in err, err
    for word in words:
        assert word in err, err


# -- credentials ------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "shown"), [
    ("virtuoso+http://127.0.0.1:8890?user=dba&password=dba", "virtuoso+http://127.0.0.1:8890?user=dba&password=***"),
    ("sparql+https://me:p%40ss@db.example.org/sparql", "sparql+https://me:***@db.example.org/sparql"),
    ("sparql+http://h/q?update=/u&token=abc&api_key=k#x", "sparql+http://h/q?update=/u&token=***&api_key=***#x"),
    ("sparql+http://[::1", "sparql+http://[::1"),  # malformed: shown as given
    ("oxigraph:data", "oxigraph:data"),
    ("memory:", "memory:"),
])
def test_display_url_hides_secrets(url: str, shown: str) -> None:
    from provkg.store import display_url

    assert display_url(url) == shown


@pytest.mark.parametrize("template", [
    "virtuoso+http://127.0.0.1:{port}?user=dba&password=" + SECRET,
    "sparql+http://dba:" + SECRET + "@127.0.0.1:{port}/sparql",
])
def test_cli_errors_hide_the_password(endpoint: tuple[FakeEndpoint, int], template: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    fake, port = endpoint
    fake.failing = True
    url = template.format(port=port)
    assert main(["query", "d3", "-p", "training=x", "--store", url]) == 1
    one_error_line(capsys.readouterr().err, "the store broke down", f"127.0.0.1:{port}")
    assert "***" in repr(open_store(url))  # a store's repr too
    with pytest.raises(BadParameter) as bad:
        open_store(url + "&default_graph=not-an-iri" if "?" in url else url + "?default_graph=x")
    assert SECRET not in str(bad.value)


def test_init_names_the_store_without_its_password(endpoint: tuple[FakeEndpoint, int],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _, port = endpoint
    url = f"sparql+http://127.0.0.1:{port}/sparql?user=dba&password={SECRET}"
    assert main(["init", "--store", url]) == 0
    out = capsys.readouterr().out
    assert f"into sparql+http://127.0.0.1:{port}/sparql?user=dba&password=***:" in out
    assert SECRET not in out


def test_serve_output_api_answers_and_log_hide_the_password(endpoint: tuple[FakeEndpoint, int],
                                                           tmp_path: Path) -> None:
    """``provkg serve``'s startup line, its anonymous 502 answers and its warning log."""
    import httpx
    from api_support import free_port

    fake, port = endpoint
    api = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVKG_")}
    env["PROVKG_QUEUE_DIR"] = str(tmp_path / "queue")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "provkg.cli", "serve", "--port", str(api), "--store",
             f"virtuoso+http://127.0.0.1:{port}?user=dba&password={SECRET}"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                httpx.get(f"http://127.0.0.1:{api}/health/live", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        fake.failing = True
        answer = httpx.get(f"http://127.0.0.1:{api}/v1/queries/d3", params={"training": "x"},
                           timeout=30)  # anonymous
        assert answer.status_code == 502, answer.text
        assert "the store broke down" in answer.json()["detail"]
        assert "password=***" in answer.text and SECRET not in answer.text
    finally:
        server.terminate()
        server.wait(30)
    text = log.read_text()
    assert f"provkg serving virtuoso+http://127.0.0.1:{port}?user=dba&password=*** on" in text
    assert "-> 502: " in text and "the store broke down" in text  # the warning log
    assert SECRET not in text


# -- an endpoint that does not answer ----------------------------------------------------------

@pytest.mark.parametrize("command", ["query", "load"])
def test_an_endpoint_that_never_answers_is_an_error_not_a_hang(command: str, tmp_path: Path) -> None:
    data = tmp_path / "d.nt"
    data.write_text('<http://example.org/a> <http://example.org/p> "x" .\n')
    args = ["query", "d3", "-p", "training=x"] if command == "query" else ["load", str(data)]
    with silent_socket() as sock:
        port = sock.getsockname()[1]
        result = cli(*args, "--store", f"oxigraph+http://127.0.0.1:{port}?timeout=1&password={SECRET}")
        sent = first_request(sock)
    assert result.returncode == 1, result
    # the limit given in the URL is the one that ended the wait (not the 10 s of the first
    # check, nor the 900 s of a query), for a request the server had and never answered
    one_error_line(result.stderr, f"http://127.0.0.1:{port}/query", "did not answer", "within 1 s")
    assert sent.startswith(b"POST /query ") and b"query=ASK" in sent, sent


def test_the_first_check_is_short_even_without_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``timeout=``: queries may run long (900 s), but the first contact is ``ASK {}``
    with a short limit, so a silent server is reported at once."""
    from provkg.store import sparql_store

    monkeypatch.setattr(sparql_store, "CHECK_TIMEOUT_S", 0.5, raising=False)
    outcome: list[BaseException | None] = []

    def count() -> None:
        try:
            with open_store(f"sparql+http://127.0.0.1:{port}/sparql") as store:
                store.count()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            outcome.append(exc)

    with silent_socket() as sock:
        port = sock.getsockname()[1]
        worker = threading.Thread(target=count, daemon=True)
        worker.start()
        worker.join(60)  # a hang only: the limit under test is 0.5 s
        sent = first_request(sock) if outcome else b""
    assert outcome and isinstance(outcome[0], StoreError), outcome
    assert "did not answer `ASK {}` within 0.5 s" in str(outcome[0])
    assert b"query=ASK" in sent, sent  # the check was sent, and not answered


def test_a_connection_that_is_not_taken_times_out_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    connect = socket.create_connection
    limits: list[object] = []  # the timeout of each connection attempt to the port

    def spy(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, *args, **kwargs):  # type: ignore
        if address[1] == port:
            limits.append(timeout)
        return connect(address, timeout, *args, **kwargs)

    with silent_server(backlog=0) as port, \
            connect(("127.0.0.1", port)):  # fills the accept queue: no more
        monkeypatch.setattr(socket, "create_connection", spy)
        with pytest.raises(StoreError, match=r"no connection within 0.5 s"), \
                open_store(f"sparql+http://127.0.0.1:{port}/q?connect_timeout=0.5") as store:
            store.count()
    # the connect itself was given the URL's limit (not the default 5 s, nor the read limit)
    assert limits and set(limits) == {0.5}, limits


def test_a_query_time_limit_is_kept() -> None:
    asked, release = threading.Event(), threading.Event()

    def slow(accept: str, form: dict[str, list[str]]) -> Answer:
        if (form.get("query") or [""])[0].startswith("ASK"):
            return 200, _JSON, _TRUE
        asked.set()
        release.wait(120)  # no answer while the test runs: only the client's limit can end it
        return 200, _JSON, _EMPTY

    with http_server(slow) as port, open_store(f"sparql+http://127.0.0.1:{port}/q") as store:
        try:
            with pytest.raises(QueryTimeout, match="did not answer within 0.5 s"):
                store.select("SELECT * WHERE { ?s ?p ?o }", timeout=0.5)
            assert asked.wait(60)  # the server had the query: the client gave up waiting
        finally:
            release.set()


@pytest.mark.parametrize("option", ["timeout=0", "timeout=abc", "connect_timeout=-1", "timeout=inf"])
def test_timeouts_in_the_store_url_are_checked(option: str) -> None:
    with pytest.raises(BadParameter, match="must be a number of seconds"):
        open_store(f"sparql+http://127.0.0.1:1/q?{option}&password={SECRET}")


# -- a server that is not a SPARQL endpoint ----------------------------------------------------

_PAGE = (b"<!DOCTYPE html><html><head><title>Welcome</title><style>p {color: red}</style></head>"
         b"<body><h1>It works!</h1><p>This is a web server.</p></body></html>")


@pytest.mark.parametrize(("answer", "says"), [
    ((200, "text/html; charset=utf-8", _PAGE), "is not a SPARQL endpoint (HTTP 200, text/html): Welcome It works!"),
    ((501, "text/html", b"<html><body><h1>Error 501</h1><p>Unsupported method ('POST')</p></body></html>"),
     "is not a SPARQL endpoint (HTTP 501, text/html): Error 501 Unsupported method ('POST')"),
    ((200, _JSON, _COUNT[:40]), "answered JSON that does not parse"),
    ((200, "application/json", b'{"status": "ok"}'), "is not a SPARQL endpoint (HTTP 200, application/json)"),
])
@pytest.mark.parametrize("flavour", ["sparql", "virtuoso"])
@pytest.mark.parametrize("command", ["query", "load"])
def test_a_server_that_is_not_a_sparql_endpoint_is_one_error_line(
        answer: Answer, says: str, flavour: str, command: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], recwarn: pytest.WarningsRecorder) -> None:
    data = tmp_path / "d.nt"
    data.write_text('<http://example.org/a> <http://example.org/p> "x" .\n')
    with http_server(lambda accept, form: answer) as port:
        url = f"{flavour}+http://127.0.0.1:{port}/sparql?password={SECRET}"
        args = ["query", "d3", "-p", "training=x"] if command == "query" else ["load", str(data)]
        assert main([*args, "--store", url]) == 1
    err = capsys.readouterr().err
    if flavour == "virtuoso" and command == "query" and "JSON" in says:
        says = "is not a SPARQL endpoint"  # it asks for Turtle: JSON is not what it asked for
    one_error_line(err, f"http://127.0.0.1:{port}/sparql", says)
    assert "b'" not in err and "select() needs" not in err
    assert not [w for w in recwarn.list if issubclass(w.category, RuntimeWarning)], recwarn.list


# -- a store folder that cannot be looked at ---------------------------------------------------

def test_an_unreadable_store_folder_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """As ``oxigraph:/proc/1/root`` for a user other than root (the tests may run as root,
    to whom every folder is readable: the refusal is simulated)."""
    locked = tmp_path / "locked"
    real_is_dir = Path.is_dir

    def is_dir(self: Path) -> bool:
        if str(self).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    assert main(["query", "d3", "-p", "training=x", "--store", f"oxigraph:{locked}/db"]) == 1
    one_error_line(capsys.readouterr().err, "Permission denied", f"{locked}/db")


def test_the_api_s_canned_queries_keep_the_query_time_limit(tmp_path: Path) -> None:
    """GET /v1/queries/{name} used to wait for the store's own limit (900 s on an endpoint)
    instead of PROVKG_QUERY_TIMEOUT_S, and so could hold a worker thread for minutes."""
    from api_support import ApiServer

    holding, asked, release = threading.Event(), threading.Event(), threading.Event()

    def slow(accept: str, form: dict[str, list[str]]) -> Answer:
        if (form.get("query") or [""])[0].strip().startswith("ASK"):
            return 200, _JSON, _TRUE
        if holding.is_set():
            asked.set()
            release.wait(120)  # no answer while the test runs: only the server's limit ends it
        return 200, _JSON, _EMPTY

    with http_server(slow) as port:
        server = ApiServer(tmp_path / "api", store=f"sparql+http://127.0.0.1:{port}/q",
                           env={"PROVKG_QUERY_TIMEOUT_S": "0.5"}).start()
        try:
            holding.set()  # started: from now on the store holds its answers
            answer = server.http.get("/v1/queries/d3", params={"training": "t"})
            assert answer.status_code == 504, answer.text
            assert "within 0.5 s" in answer.json()["detail"], answer.text  # PROVKG_QUERY_TIMEOUT_S
            assert asked.wait(60)  # the store had the query
        finally:
            release.set()
            server.stop()


def test_listen_names_the_store_without_its_password(endpoint: tuple[FakeEndpoint, int],
                                                     tmp_path: Path) -> None:
    from api_support import free_port

    _, port = endpoint
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVKG_")}
    env["PROVKG_QUEUE_DIR"] = str(tmp_path / "queue")
    log = tmp_path / "listen.log"
    with log.open("wb") as out:  # no broker: the banner comes first, then retries
        proc = subprocess.Popen(
            [sys.executable, "-m", "provkg.cli", "listen", f"mqtt://127.0.0.1:{free_port()}/p",
             "--store", f"virtuoso+http://127.0.0.1:{port}?user=dba&password={SECRET}"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b"listening to" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(30)
    assert "password=***" in log.read_text() and SECRET not in log.read_text()


@pytest.mark.parametrize("url, said", [
    ("virtuoso+http://127.0.0.1:1?timout=2", "unknown option 'timout'; did you mean 'timeout'?"),
    ("virtuoso+http://127.0.0.1:1?user=t&pasword=s3cret", "unknown option 'pasword'; did you mean 'password'?"),
    ("oxigraph+http://127.0.0.1:1?colour=red", "unknown option 'colour' (known: "),
    ("sparql+http://127.0.0.1:1/q?passwrd=s3cret", "did you mean 'password'?"),
])
def test_a_mistyped_store_url_option_is_refused_without_its_value(url: str, said: str) -> None:
    # black-box testing: ?timout=2 waited the default 900 s, and ?pasword=... went to the
    # server and into a message in clear
    with pytest.raises(BadParameter, match=re.escape(said)) as err:
        open_store(url)
    assert "s3cret" not in str(err.value)


def test_a_plain_sparql_endpoint_keeps_its_own_parameters() -> None:
    with open_store("sparql+http://127.0.0.1:1/q?format=json") as store:
        assert store.endpoint.extra_params == {"format": "json"}


def test_an_embedded_store_url_naming_a_server_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    # black-box testing: oxigraph:http://HOST:PORT made a folder "http:/HOST:PORT" and ingested
    monkeypatch.chdir(tmp_path)
    events = tmp_path / "e.jsonl"
    events.write_text("")
    assert main(["ingest", str(events), "--store", "oxigraph:http://127.0.0.1:1"]) == 1
    assert "write oxigraph+http://HOST:PORT" in capsys.readouterr().err
    assert not (tmp_path / "http:").exists()
