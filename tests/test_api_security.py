"""Bad input against a real server: every answer 4xx with a clear message, never 5xx, the store
byte-for-byte unchanged; writes need the token, reads do not."""

from __future__ import annotations

import gzip
import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
from api_support import ApiServer, free_port, store_fingerprint

from provkg.ontology import all_ontology_paths

TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def event(i: int, **extra: object) -> dict[str, object]:
    return {"type": "task", "event": "begin", "id": f"sec-run/t{i}", "time": 1.5 + i,
            "workflow_id": "sec-run", "transformation": "train", **extra}


def batch(*events: dict[str, object]) -> bytes:
    return orjson.dumps({"format": "provkg.events/1", "events": list(events)})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    import pyoxigraph as ox

    folder = tmp_path_factory.mktemp("api-security")
    seed = ox.Store(str(folder / "store"))  # some content to keep unchanged
    for path in all_ontology_paths():
        seed.bulk_load(path=str(path), format=ox.RdfFormat.TURTLE, to_graph=ox.NamedNode(path.as_uri()))
    seed.flush()
    del seed
    env = {"PROVKG_TOKEN": TOKEN, "PROVKG_QUERY_TIMEOUT_S": "5",
           "PROVKG_MAX_DECOMPRESSED_BYTES": str(8 * 2**20)}
    with ApiServer(folder, env=env) as srv:
        good = [{"type": "workflow", "event": "begin", "id": "sec-run", "time": 1.0, "workflow": "w"},
                event(0), event(1)]
        assert srv.http.post("/v1/events", content=batch(*good), headers=AUTH).status_code == 202
        assert srv.wait_applied()["backlog_events"] == 0
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


@pytest.fixture
def unchanged(server: ApiServer) -> Iterator[None]:
    """The store's content hash before and after the test must be the same."""
    before = store_fingerprint(server.store_dir)
    yield
    server.wait_applied()  # a 202 comes after queueing: anything wrongly accepted shows here
    assert store_fingerprint(server.store_dir) == before


def assert_clear_4xx(response: httpx.Response, *, status: int | None = None,
                     mentions: str | None = None) -> dict[str, str]:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    if status is not None:
        assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"} and body["detail"], body
    if mentions is not None:
        assert mentions in body["detail"], body
    return body


# -- auth ---------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": "Bearer"}, {"Authorization": f"Bearer {TOKEN}x"},
], ids=["none", "wrong", "basic", "empty", "longer"])
@pytest.mark.parametrize("path", ["/v1/events", "/v1/specs"])
def test_writes_need_the_token(server: ApiServer, unchanged: None, headers: dict[str, str],
                               path: str) -> None:
    response = server.http.post(path, content=batch(event(9)),
                          headers={"Content-Type": "application/json", **headers})
    body = assert_clear_4xx(response, status=401)
    assert TOKEN not in response.text and "wrong" not in body["detail"]
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("path", ["/v1/ontologies/prov-ml", "/v1/specs", "/health/ready",
                                  "/v1/sparql?query=ASK%7B%7D", "/openapi.json", "/docs"])
def test_reads_need_no_token(server: ApiServer, path: str) -> None:
    assert server.http.get(path).status_code == 200


# -- malformed batches ----------------------------------------------------------------


_DEEP = b"[" * 5000 + b"]" * 5000
BAD_BODIES = {
    "truncated": batch(event(1))[:-7],
    "empty": b"",
    "not-json": b"hello",
    "array": b"[]",
    "non-utf8": b'{"format": "provkg.events/1", "events": [{"id": "\xff\xfe"}]}',
    "wrong-format": orjson.dumps({"format": "provkg.events/2", "events": []}),
    "wrong-type-time": batch(event(1, time="yesterday")),
    "negative-time": batch(event(1, time=-5)),
    "unknown-field": batch(event(1, colour="blue")),
    "unknown-envelope-field": orjson.dumps({"format": "provkg.events/1", "events": [], "x": 1}),
    "bad-type-tag": batch({**event(1), "type": "job"}),
    "deeply-nested-json": b'{"format": "provkg.events/1", "events": [' + _DEEP + b"]}",
    "deeply-nested-value": batch(event(1, used=[{"name": "v", "value": orjson.loads(b"[" * 40 + b"]" * 40)}])),
    "object-value": batch(event(1, used=[{"name": "v", "value": {"a": 1}}])),
    "status-on-begin": batch(event(1, status="finished")),
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_batches_are_refused_whole(server: ApiServer, unchanged: None, body: bytes) -> None:
    # one good event in front: nothing of a rejected batch may be applied
    if body.startswith(b'{"format":"provkg.events/1","events":[{'):
        body = body.replace(b'"events":[', b'"events":[' + orjson.dumps(event(77)) + b",", 1)
    assert_clear_4xx(server.http.post("/v1/events", content=body, headers=AUTH))


def test_errors_name_the_field_and_never_echo_the_value(server: ApiServer, unchanged: None) -> None:
    secret = "TOPSECRET-abc123"
    body = batch(event(1), event(2, id={"token": secret}), event(3, time=secret))
    detail = assert_clear_4xx(server.http.post("/v1/events", content=body, headers=AUTH),
                              status=422)["detail"]
    assert "events[1].id" in detail and "events[2].time" in detail
    assert secret not in detail


def test_content_length_over_the_limit_is_refused_before_reading(server: ApiServer, unchanged: None) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as conn:
        conn.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {100 * 2**20}\r\n\r\n".encode())
        reply = _read_reply(conn)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"body_too_large" in reply


def test_100_mb_chunked_body_is_cut_off_at_the_limit(server: ApiServer, unchanged: None) -> None:
    """No Content-Length: the server counts what it reads and answers 413 early."""
    chunk = b"x" * (1 << 20)
    sent = 0
    reply = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as conn:
        conn.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        conn.settimeout(0.0)
        pending = b""
        try:
            while sent < 100 * 2**20 and not reply:
                # the server either takes more of the body or answers (60 s: a hang only)
                readable, writable, _ = select.select([conn], [conn], [], 60)
                assert readable or writable, f"no read nor answer after {sent} bytes"
                if readable:
                    more = conn.recv(65536)
                    if not more:
                        break
                    reply += more
                elif writable:
                    if not pending:
                        pending = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
                    n = conn.send(pending)  # partial sends keep the chunk framing intact
                    pending = pending[n:]
                    sent += n
        except (BrokenPipeError, ConnectionResetError):
            pass
        conn.settimeout(60)
        if b"\r\n\r\n" not in reply:
            reply += _read_reply(conn)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert sent < 40 * 2**20, f"the server read {sent} bytes before refusing"


def _read_reply(conn: socket.socket) -> bytes:
    data = b""
    try:
        while b"}" not in data:
            more = conn.recv(65536)
            if not more:
                break
            data += more
    except (ConnectionResetError, TimeoutError):
        pass
    return data


def test_zip_bomb_is_refused(server: ApiServer, unchanged: None) -> None:
    bomb = gzip.compress(b'{"format": "provkg.events/1", "events": [' + b" " * (20 * 2**20) + b"]}",
                         compresslevel=1)
    assert len(bomb) < 2**20 // 4
    response = server.http.post("/v1/events", content=bomb,
                          headers={**AUTH, "Content-Encoding": "gzip"}, timeout=60)
    assert_clear_4xx(response, status=413, mentions="decompressed")


@pytest.mark.parametrize(("headers", "status"), [
    ({"Content-Encoding": "gzip"}, 400),
    ({"Content-Encoding": "zstd"}, 400),
    ({"Content-Encoding": "br"}, 415),
    ({"Content-Type": "text/xml"}, 415),
])
def test_wrong_framing(server: ApiServer, unchanged: None, headers: dict[str, str], status: int) -> None:
    response = server.http.post("/v1/events", content=batch(event(5)), headers={**AUTH, **headers})
    assert_clear_4xx(response, status=status)


@pytest.mark.parametrize("spec", [
    b"workflow: [unclosed", b"\xff\xfe not utf-8", b"workflow: w\nphase: sleeping\ntransformations: []\n",
    # an alias bomb: 10**8 values from 440 bytes (plain aliases are accepted, as by the CLI)
    b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        b"a%d: &a%d [%s]\n" % (i, i, b", ".join([b"*a" + (b"%d" % (i - 1) if i > 1 else b"")] * 10))
        for i in range(1, 8)),
    # nested 40,000 deep: a RecursionError (500) at 1,000 levels, a segfault of the server here
    b"workflow: w\nx: " + b"[" * 40_000 + b"]" * 40_000 + b"\n",
    b'{"workflow": "w", "x": ' + b"[" * 40_000 + b"]" * 40_000 + b"}",
], ids=["yaml-syntax", "non-utf8", "invalid-fields", "alias-bomb", "deep-yaml", "deep-json"])
def test_bad_specs(server: ApiServer, unchanged: None, spec: bytes) -> None:
    response = server.http.post("/v1/specs", content=spec,
                          headers={**AUTH, "Content-Type": "application/yaml"})
    assert_clear_4xx(response)
    assert server.http.get("/v1/specs").json() == []


# -- SPARQL ----------------------------------------------------------------------


UPDATES = [
    "INSERT DATA { <http://x/a> <http://x/b> <http://x/c> }",
    "DELETE WHERE { ?s ?p ?o }",
    "CLEAR ALL", "DROP ALL", "LOAD <http://127.0.0.1:1/x.ttl>", "CREATE GRAPH <http://x/g>",
    "PREFIX x: <http://x/> DELETE { ?s ?p ?o } INSERT { ?s x:p 1 } WHERE { ?s ?p ?o }",
    "SELECT * { ?s ?p ?o } ; DROP ALL",
    "ASK {} \n# DROP ALL\n ; CLEAR DEFAULT",
]


def _sparql_requests(http: httpx.Client, text: str) -> list[httpx.Response]:
    return [
        http.get("/v1/sparql", params={"query": text}),
        http.post("/v1/sparql", data={"query": text}),
        http.post("/v1/sparql", content=text.encode(),
                  headers={"Content-Type": "application/sparql-query"}),
        http.post("/v1/sparql", data={"update": text}),
        http.post("/v1/sparql", content=text.encode(),
                  headers={"Content-Type": "application/sparql-update"}),
    ]


@pytest.mark.parametrize("text", UPDATES)
def test_sparql_updates_are_refused(server: ApiServer, unchanged: None, text: str) -> None:
    for response in _sparql_requests(server.http, text):
        assert_clear_4xx(response, status=400)
    # the Protocol's own update forms are told the endpoint is read-only (they were 415 and
    # "send exactly one 'query' parameter": black-box testing)
    for response in _sparql_requests(server.http, text)[3:]:
        assert response.json()["error"] == "read_only", response.text


@pytest.fixture
def honeypot() -> Iterator[tuple[int, list[int]]]:
    """A socket that records the address of every connection made to it, in the order they
    were made (the kernel's accept queue is first in, first out)."""
    hits: list[tuple[str, int]] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = sock.accept()
                hits.append(peer)
                conn.close()
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1], hits
    stop.set()
    thread.join()
    sock.close()


def test_service_is_refused_and_fetches_nothing(
        server: ApiServer, unchanged: None, honeypot: tuple[int, list[tuple[str, int]]]) -> None:
    port, hits = honeypot
    endpoint = f"http://127.0.0.1:{port}/sparql"
    for text in [f"SELECT * {{ SERVICE <{endpoint}> {{ ?s ?p ?o }} }}",
                 f"PREFIX e: <http://127.0.0.1:{port}/> SELECT * {{ SERVICE SILENT e:sparql {{ ?s ?p ?o }} }}",
                 f"SELECT * {{ BIND(<{endpoint}> AS ?e) SERVICE ?e {{ ?s ?p ?o }} }}",
                 f"ASK {{ OPTIONAL {{ SERVICE <{endpoint}> {{ ?s ?p ?o }} }} }}",
                 # a comment ends at CR for SPARQL and Oxigraph, at LF only for rdflib's
                 # grammar: the guard read a comment, the store a SERVICE (black-box testing)
                 f"SELECT * WHERE {{ BIND(1 AS ?a) # x\r SERVICE <{endpoint}> {{ ?s ?p ?o }}\n}}"]:
        for response in _sparql_requests(server.http, text)[:3]:
            assert_clear_4xx(response, status=400, mentions="SERVICE")
    # a connection of the test's own, made after every answer: once the honeypot has taken
    # it, it has taken any the server made before answering
    with socket.create_connection(("127.0.0.1", port), timeout=60) as marker:
        mine = marker.getsockname()
        deadline = time.monotonic() + 60
        while mine not in hits:
            assert time.monotonic() < deadline, hits
            time.sleep(0.01)
    assert hits == [mine]


@pytest.mark.parametrize("text", ["SELECT * WHERE { ?s ?p ", "", "SELECT * {" * 3000,
                                  "x" * 200_000, "SELECT ?x WHERE { ?x <not an iri> 1 }"],
                         ids=["truncated", "empty", "nested", "huge", "bad-iri"])
def test_sparql_syntax_errors_are_4xx(server: ApiServer, unchanged: None, text: str) -> None:
    if len(text) > 60_000:  # too long for a URL: the POST forms only
        responses = [server.http.post("/v1/sparql", data={"query": text}),
                     server.http.post("/v1/sparql", content=text.encode(),
                                headers={"Content-Type": "application/sparql-query"})]
    else:
        responses = _sparql_requests(server.http, text)[:3]
    for response in responses:
        assert_clear_4xx(response)


def test_writes_a_web_page_could_send_without_a_preflight_are_refused(server: ApiServer,
                                                                      unchanged: None) -> None:
    # found by black-box testing: on a server with no token, a spec as text/plain and events
    # with no Content-Type were accepted: what any web page may POST to 127.0.0.1 unasked
    spec = b"workflow: forged\nphase: learning\ntransformations: [{name: t}]\n"
    def post(path: str, body: bytes, content_type: str | None) -> httpx.Response:
        request = server.http.build_request("POST", path, content=body, headers=AUTH)
        request.headers.pop("Content-Type", None)  # none at all, not even the client's default
        if content_type:
            request.headers["Content-Type"] = content_type
        return server.http.send(request)

    for content_type in ("text/plain", None, "application/x-www-form-urlencoded", "multipart/form-data"):
        assert_clear_4xx(post("/v1/specs", spec, content_type), status=415)
        assert_clear_4xx(post("/v1/events", batch(event(5)), content_type), status=415)
    assert server.http.get("/v1/specs").json() == []


def test_a_loopback_server_answers_only_for_loopback_host_names(server: ApiServer) -> None:
    # found by black-box testing: any Host was served, so a DNS-rebinding page (its own name
    # re-pointed at 127.0.0.1) could read the store from a browser on this machine
    for host in ("attacker.example", f"attacker.example:{server.port}", "127.0.0.1.nip.io", "[::2]:1"):
        refused = server.http.get("/v1/specs", headers={"Host": host})
        assert_clear_4xx(refused, status=421, mentions="loopback")
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "[::1]", "LOCALHOST"):
        assert server.http.get("/v1/specs", headers={"Host": host}).status_code == 200, host


def test_spec_errors_never_echo_what_was_sent(server: ApiServer, unchanged: None) -> None:
    # found by black-box testing: a section's `of`, duplicate names and unknown keys came back
    # in the 422 (a pasted token would leak into the answer and the logs)
    secret = "ghp_LEAKME0123"
    spec = (f"workflow: w\nphase: learning\ntransformations:\n"
            f"  - {{name: a, kind: section, of: {secret}}}\n"
            f"  - {{name: a, {secret}x: 1}}\n").encode()
    response = server.http.post("/v1/specs", content=spec,
                                headers={**AUTH, "Content-Type": "application/yaml"})
    assert_clear_4xx(response, status=422)
    detail = response.json()["detail"]
    assert secret not in detail and "transformations[0].of" in detail and ":5:" in detail, detail


def test_sparql_protocol_misuse(server: ApiServer) -> None:
    assert_clear_4xx(server.http.get("/v1/sparql", params={"default-graph-uri": "http://x/g"}),
                     status=400, mentions="query")  # graphs but no query: not a service description
    assert_clear_4xx(server.http.get("/v1/sparql", params=[("query", "ASK{}"), ("query", "ASK{}")]))
    assert_clear_4xx(server.http.get("/v1/sparql",
                               params={"query": "ASK{}", "default-graph-uri": "not an iri"}))
    assert_clear_4xx(server.http.post("/v1/sparql", content=b"ASK{}",
                                headers={"Content-Type": "text/plain"}), status=415)
    assert_clear_4xx(server.http.post("/v1/sparql", content=b"query=%FF%FE",
                                headers={"Content-Type": "application/x-www-form-urlencoded"}))


# -- names and paths ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/ontologies/..%2F..%2Fetc%2Fpasswd", "/v1/ontologies/%2Fetc%2Fpasswd",
                                  "/v1/ontologies/prov-ml.ttl", "/v1/ontologies/..",
                                  "/v1/queries/..%2Fpyproject.toml", "/v1/nothing", "/etc/passwd"])
def test_no_path_reaches_a_file(server: ApiServer, path: str) -> None:
    response = server.http.get(path)
    assert_clear_4xx(response, status=404)
    assert "root:" not in response.text and "[project]" not in response.text


INJECTIONS = ['x> } ; DROP ALL ; #', '" } DELETE WHERE { ?s ?p ?o } #', "<http://x/a>",
              "') OR 1=1 --", "$(rm -rf /)", "\x00\x01", "ö" * 5000, "?s ?p ?o"]


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_strings_in_query_parameters(server: ApiServer, unchanged: None, value: str) -> None:
    for name, params in [("q3", {"dataset": value}), ("d5", {"workflow": "w", "k": value}),
                         ("s1", {"data": value, "depth": "2"}), ("q1", {"model": value, "extra": value})]:
        response = server.http.get(f"/v1/queries/{name}", params=params)
        assert response.status_code < 500, response.text
        if response.status_code == 200:
            assert response.json()["rows"] == []
        else:
            assert_clear_4xx(response)


def test_free_port_helper_is_free() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
