"""Every failure of a store comes out as a :mod:`provkg.errors` exception: each backend maps
the exceptions of what it runs on (httpx and sockets, pyoxigraph, rdflib) at one point, and
these tests drive each backend's failure modes -- server down, no answer in time, a
connection dropped, answers that are not SPARQL results, refusals of each kind, text that
does not parse -- through every store method, failing on any other exception that escapes.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from provkg.errors import ProvkgError, StoreUnavailable, StoreUnreachable
from provkg.store import Store, open_store

S, P = "<http://example.org/s>", "<http://example.org/p>"
G = "http://example.org/g"
_JSON = "application/sparql-results+json"
_TRUE = json.dumps({"head": {}, "boolean": True}).encode()

#: store method -> a call of it (the second argument: a folder for files)
OPERATIONS: dict[str, Callable[[Store, Path], object]] = {
    "count": lambda s, _: s.count(),
    "count graph": lambda s, _: s.count(graph=G),
    "graphs": lambda s, _: s.graphs(),
    "select": lambda s, _: s.select("SELECT * WHERE { ?s ?p ?o }", timeout=5),
    "select_terms": lambda s, _: s.select_terms("SELECT * WHERE { ?s ?p ?o }"),
    "ask": lambda s, _: s.ask("ASK { ?s ?p ?o }"),
    "construct": lambda s, _: s.construct("CONSTRUCT WHERE { ?s ?p ?o }"),
    "update": lambda s, _: s.update(f'INSERT DATA {{ {S} {P} "x" }}'),
    "add": lambda s, _: s.add([(S, P, '"x"')]),
    "add to graph": lambda s, _: s.add([(S, P, "_:b")], graph=G),
    "clear": lambda s, _: s.clear(),
    "load_file": lambda s, d: s.load_file(_file(d, "ok.nt", f'{S} {P} "x" .\n')),
}

#: text that does not parse, or that a method does not take, per method
BAD_INPUT: dict[str, Callable[[Store, Path], object]] = {
    "select syntax": lambda s, _: s.select("SELECT * WHERE { ?s ?p }"),
    "select undeclared prefix": lambda s, _: s.select("SELECT * WHERE { ?s ex:p ?o }"),
    "select an ASK": lambda s, _: s.select("ASK { ?s ?p ?o }"),
    "select_terms syntax": lambda s, _: s.select_terms("SELECT ?x WHERE {"),
    "ask a SELECT": lambda s, _: s.ask("SELECT * WHERE { ?s ?p ?o }"),
    "construct syntax": lambda s, _: s.construct("CONSTRUCT { ?s } WHERE { ?s ?p ?o }"),
    "construct a SELECT": lambda s, _: s.construct("SELECT * WHERE { ?s ?p ?o }"),
    "deep nesting": lambda s, _: s.select("SELECT * WHERE " + "{ " * 5000 + "}" * 5000),
    "update syntax": lambda s, _: s.update("INSERT DATA { <http://x> }"),
    "add a bad IRI": lambda s, _: s.add([("<not an iri>", P, '"x"')]),
    "add a bad literal": lambda s, _: s.add([(S, P, '"x')]),
    "add to a bad graph": lambda s, _: s.add([(S, P, '"x"')], graph="not an iri"),
    "count a bad graph": lambda s, _: s.count(graph="not an iri"),
    "clear a bad graph": lambda s, _: s.clear(graph="not an iri"),
    "load a file that does not parse": lambda s, d: s.load_file(_file(d, "bad.nt", f"{S} {P} oops .\n")),
    "load bad Turtle": lambda s, d: s.load_file(_file(d, "bad.ttl", "@prefix : <x> .\n:a :b")),
    "load bad RDF/XML": lambda s, d: s.load_file(_file(d, "bad.rdf", "<rdf:RDF><x")),
    "load a bad gzip": lambda s, d: s.load_file(_file(d, "bad.nt.gz", "not gzip")),
    "load a missing file": lambda s, d: s.load_file(d / "missing.nt"),
    "load an unknown format": lambda s, d: s.load_file(_file(d, "x.csv", "a,b\n")),
}


def _file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def only_provkg_errors(store: Store, folder: Path,
                       operations: dict[str, Callable[[Store, Path], object]]) -> list[str]:
    """Run each operation; fail on an exception outside provkg's tree. Returns the names of
    the operations that raised (a provkg error)."""
    raised = []
    for name, operation in operations.items():
        try:
            operation(store, folder)
        except ProvkgError:
            raised.append(name)
        except Exception as exc:  # noqa: BLE001 -- what this test is about
            pytest.fail(f"{name} on {store!r}: {type(exc).__module__}.{type(exc).__name__} "
                        f"escaped: {exc}")
    return raised


# -- embedded backends --------------------------------------------------------------------

def test_embedded_stores_map_bad_input(embedded_store: Store, tmp_path: Path) -> None:
    raised = only_provkg_errors(embedded_store, tmp_path, BAD_INPUT)
    # the text that does not parse is refused by every backend
    assert {"select syntax", "update syntax", "load a file that does not parse",
            "load a missing file", "load an unknown format", "deep nesting"} <= set(raised)


def test_embedded_stores_work_and_then_refuse_work_when_closed(embedded_store: Store,
                                                               tmp_path: Path) -> None:
    assert only_provkg_errors(embedded_store, tmp_path, OPERATIONS) == []
    embedded_store.close()
    raised = only_provkg_errors(embedded_store, tmp_path, OPERATIONS)
    assert set(raised) == set(OPERATIONS)


# -- servers ---------------------------------------------------------------------------------

Answer = tuple[int, str, bytes]
_HTML = b"<!DOCTYPE html><html><body><h1>It works!</h1></body></html>"
#: how a broken server answers every request but the first ``ASK {}`` (so the failure meets
#: each method, not only the first check)
BROKEN_ANSWERS: dict[str, Answer] = {
    "html page": (200, "text/html", _HTML),
    "cut-off JSON": (200, _JSON, b'{"head": {"vars": ["n"]}, "results": {"bind'),
    "JSON of another shape": (200, _JSON, b'{"head": {"vars": ["n"]}, "results": {"bindings": [{}]}}'),
    "bindings that are not objects": (200, _JSON, b'{"head": {"vars": ["n"]}, "results": {"bindings": [1, "x"]}}'),
    "bindings without a type": (200, _JSON, b'{"head": {"vars": ["s"]}, "results": {"bindings": [{"s": {}}]}}'),
    "bad Turtle": (200, "text/turtle", b"@prefix res: <http://www.w3.org/2005/sparql-results#> .\n[] a res:ResultSet ; res:"),
    "bad N-Triples": (200, "application/n-triples", b"<x> <y>"),
    "bad RDF/JSON": (200, "application/rdf+json", b'{"http://x": {"http://p": [{"value": 1}]}}'),
    "bad bytes": (200, _JSON, b"\xff\xfe\x00garbage"),
    "syntax error": (400, "text/plain", b"Parser error at line 1 column 5: syntax error"),
    "empty 400": (400, "text/plain", b""),
    "401": (401, "text/html", b"<html><body>Unauthorized</body></html>"),
    "403": (403, "text/plain", b"forbidden"),
    "404": (404, "text/html", b"<h1>Not Found</h1>"),
    "406": (406, "text/plain", b"not acceptable"),
    "414": (414, "text/plain", b""),
    "Virtuoso 500": (500, "text/plain", b"Virtuoso 42000 Error SR999: the store broke down"),
    "Virtuoso syntax 500": (500, "text/plain", b"Virtuoso 37000 Error SP030: SPARQL compiler, line 1: syntax error"),
    "501": (501, "text/html", b"<p>Unsupported method</p>"),
    "503": (503, "text/plain", b"try later"),
    "redirect loop": (302, "text/plain", b""),
}
FLAVOURS = ["sparql", "oxigraph", "virtuoso"]


@contextmanager
def http_server(answer: Callable[[str, dict[str, list[str]]], Answer]) -> Iterator[int]:
    """An HTTP server on a free port answering every request with ``answer(Accept, form)``."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(size).decode("utf-8", "replace") if size else ""
            form = parse_qs(body) if "form-urlencoded" in self.headers.get("content-type", "") else {}
            status, media, data = answer(self.headers.get("accept", ""), form)
            self.send_response(status)
            self.send_header("content-type", media)
            if status == 302:
                self.send_header("location", self.path)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _reply

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            pass

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def socket_server(behave: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on a free port handing each connection to ``behave`` (then closing it)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    behave(conn)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _url(flavour: str, port: int, options: str = "") -> str:
    path = "/sparql" if flavour != "oxigraph" else ""
    return f"{flavour}+http://127.0.0.1:{port}{path}{options}"


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("broken", sorted(BROKEN_ANSWERS))
def test_a_broken_server_s_answers_are_provkg_errors(flavour: str, broken: str,
                                                     tmp_path: Path) -> None:
    def answer(accept: str, form: dict[str, list[str]]) -> Answer:
        if (form.get("query") or [""])[0] == "ASK {}":
            return 200, _JSON, _TRUE  # the first check passes: each method meets the failure
        return BROKEN_ANSWERS[broken]

    with http_server(answer) as port, open_store(_url(flavour, port)) as store:
        raised = only_provkg_errors(store, tmp_path, OPERATIONS)
    assert raised, "a broken server made no method fail"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_server_that_is_down_is_unreachable(flavour: str, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        with open_store(_url(flavour, port)) as store:
            for name, operation in OPERATIONS.items():
                with pytest.raises(StoreUnreachable, match="cannot reach"):
                    operation(store, tmp_path)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("behaviour", ["hang up", "not HTTP", "silent"])
def test_a_server_that_breaks_the_connection_is_unreachable(flavour: str, behaviour: str,
                                                            tmp_path: Path) -> None:
    def behave(conn: socket.socket) -> None:
        conn.settimeout(5)
        conn.recv(65536)
        if behaviour == "not HTTP":
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01garbage\r\n\r\n")
        elif behaviour == "silent":
            threading.Event().wait(2)  # past the store's 0.5 s

    with socket_server(behave) as port, open_store(_url(flavour, port, "?timeout=0.5")) as store:
        for name, operation in OPERATIONS.items():
            with pytest.raises(StoreUnavailable):
                operation(store, tmp_path)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_bad_input_to_a_server_store_is_refused_with_provkg_errors(flavour: str,
                                                                   tmp_path: Path) -> None:
    def answer(accept: str, form: dict[str, list[str]]) -> Answer:
        if (form.get("query") or [""])[0] == "ASK {}":
            return 200, _JSON, _TRUE
        return 400, "text/plain", b"Parser error: syntax error"

    with http_server(answer) as port, open_store(_url(flavour, port)) as store:
        only_provkg_errors(store, tmp_path, BAD_INPUT)
