"""Real receivers for the capture tests: a loopback HTTP server that checks wire format v1, and an
MQTT subscriber. Both record (event id, begin/end) pairs so tests can check "exactly once by id".
``Callers`` records which threads entered a sink's method. Waits take 60 s at most: a bound
against a hung test, never a measure of speed."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import zstandard

from provkg.capture.broker import free_port
from provkg.errors import BadEvent
from provkg.events import parse_batch


def decode_body(body: bytes, encoding: str | None) -> bytes:
    if encoding == "gzip" or body[:2] == b"\x1f\x8b":
        return gzip.decompress(body)
    if encoding == "zstd" or body[:4] == b"\x28\xb5\x2f\xfd":
        return zstandard.ZstdDecompressor().stream_reader(body).read()
    return body


class Recorder:
    """Arrivals in order, with duplicates; ``unique`` dedups by (id, begin/end)."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[str, str]] = []
        self.events: dict[tuple[str, str], dict] = {}
        self.batches = 0
        self.lock = threading.Lock()

    def record(self, events: list[dict]) -> None:
        with self.lock:
            self.batches += 1
            for e in events:
                key = (e["id"], e["event"])
                self.arrivals.append(key)
                self.events.setdefault(key, e)

    @property
    def unique(self) -> set[tuple[str, str]]:
        with self.lock:
            return set(self.events)

    def wait_for(self, count: int, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.events) >= count:
                return True
            time.sleep(0.01)
        return False


class HttpReceiver:
    """``POST /v1/events`` on 127.0.0.1: validates each batch with provkg.events.parse_batch
    (400 with the error otherwise), answers 202; ``reject`` makes it answer 422."""

    def __init__(self, recorder: Recorder | None = None, *, port: int | None = None) -> None:
        self.recorder = recorder or Recorder()
        self.port = port or free_port()
        self.reject: str | None = None
        self.encodings: set[str] = set()
        #: Content-Encodings taken (None: every one); others get 415, as an older server's
        self.accepted_encodings: set[str] | None = None
        self.invalid: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real server
            disable_nagle_algorithm = True  # headers and body are two writes

            def setup(self) -> None:
                super().setup()
                # a connection accepted just before kill() whose handler starts after it is
                # cut here: none outlives the kill and goes on taking batches
                with receiver._lock:
                    cut = self.server.killed
                    if not cut:
                        receiver._connections.add(self.connection)
                if cut:
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/events":
                    return self._answer(404, {"error": "not_found", "detail": self.path})
                encoding = self.headers.get("Content-Encoding")
                receiver.encodings.add(encoding or "identity")
                if receiver.accepted_encodings is not None and \
                        (encoding or "identity") not in receiver.accepted_encodings:
                    return self._answer(415, {"error": "unsupported_media_type", "detail": encoding})
                try:
                    batch = parse_batch(decode_body(body, encoding))
                except BadEvent as exc:
                    receiver.invalid.append(str(exc))
                    return self._answer(400, {"error": "bad_event", "detail": str(exc)})
                if receiver.reject:
                    return self._answer(422, {"error": "bad_event", "detail": receiver.reject})
                receiver.recorder.record([e.model_dump(exclude_none=True) for e in batch.events])
                self._answer(202, {"accepted": len(batch.events)})

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            killed = False

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # connections cut by kill() are expected here

        self._server = Server(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def kill(self) -> None:
        """Stop listening and cut every open connection, as a crashed server would."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            server.killed = True
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


class MqttSubscriber:
    """Subscribes to ``prefix/#`` with QoS 1 and a persistent session (survives broker restarts)."""

    def __init__(self, host: str, port: int, prefix: str, recorder: Recorder | None = None) -> None:
        import paho.mqtt.client as mqtt

        self.recorder = recorder or Recorder()
        self.topics: set[str] = set()
        self.invalid: list[str] = []
        self._subscribed = threading.Event()
        self.subscriptions = 0  # completed SUBSCRIBEs: a reconnect after a broker restart adds one
        self._client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
                                   client_id=f"test-sub-{port}", clean_session=False,
                                   protocol=mqtt.MQTTv311)
        self._client.reconnect_delay_set(min_delay=1, max_delay=2)

        def on_connect(client, userdata, flags, reason, properties):
            client.subscribe(f"{prefix}/#", qos=1)

        def on_subscribe(client, userdata, mid, reasons, properties):
            self.subscriptions += 1
            self._subscribed.set()

        def on_disconnect(client, userdata, flags, reason, properties):
            self._subscribed.clear()

        def on_message(client, userdata, message):
            self.topics.add(message.topic)
            try:
                batch = parse_batch(decode_body(message.payload, None))
            except BadEvent as exc:
                self.invalid.append(str(exc))
                return
            self.recorder.record([e.model_dump(exclude_none=True) for e in batch.events])

        self._client.on_connect = on_connect
        self._client.on_subscribe = on_subscribe
        self._client.on_disconnect = on_disconnect
        self._client.on_message = on_message
        self._client.connect(host, port)
        self._client.loop_start()
        if not self._subscribed.wait(60):
            raise RuntimeError("subscriber did not subscribe")

    def wait_resubscribed(self, before: int, timeout: float = 60.0) -> bool:
        """Wait until a SUBSCRIBE newer than ``before`` completed (the broker restarted and,
        after a SIGKILL, may have lost this client's session and its queued messages)."""
        deadline = time.monotonic() + timeout
        while self.subscriptions <= before and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.subscriptions > before

    def wait_subscribed(self, timeout: float = 60.0) -> bool:
        """After a broker restart: wait until the subscription is back."""
        return self._subscribed.wait(timeout)

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


def wait_until(condition: Callable[[], object], timeout: float = 60.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` s passed (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def expected_keys(workflow_id: str, task_ids: list[str]) -> set[tuple[str, str]]:
    """What a run of these tasks must deliver, computed from the ids the test saw."""
    keys = {(workflow_id, "begin"), (workflow_id, "end")}
    keys.update((t, kind) for t in task_ids for kind in ("begin", "end"))
    return keys


class Callers:
    """Wraps ``obj.name`` on the object (set it up before the object is used: the emitter keeps
    a sink's bound ``send_lines``). ``threads``: the threads that called it; ``failures``: the
    calls that raised.

    A sink's send is where the network is waited on (connect, timeouts, retries with backoff):
    a caller that never entered it never waited on the network there."""

    def __init__(self, obj: object, name: str) -> None:
        self.threads: set[int] = set()
        self.failures = 0
        self._lock = threading.Lock()
        real = getattr(obj, name)

        def recording(*args: object, **kwargs: object) -> object:
            with self._lock:
                self.threads.add(threading.get_ident())
            try:
                return real(*args, **kwargs)
            except BaseException:
                with self._lock:
                    self.failures += 1
                raise

        setattr(obj, name, recording)
