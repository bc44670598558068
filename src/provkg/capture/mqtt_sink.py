"""``mqtt://HOST:PORT/PREFIX`` — batches published with QoS 1, one topic per workflow run.

Each batch envelope (the same JSON as the HTTP body, optionally gzip- or zstd-compressed: a
listener tells them apart by their magic bytes) is published to ``PREFIX/<workflow run id>``.
``send`` returns once the broker has acknowledged every message (PUBACK); otherwise it raises
and the emitter spools the batch. paho-mqtt reconnects in its own network thread.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any
from urllib.parse import unquote, urlsplit

from provkg.capture.encoding import envelope
from provkg.capture.http_sink import compress, encode_batch
from provkg.capture.report import shown_url
from provkg.capture.sink import url_options
from provkg.extras import missing_extra

__all__ = ["MqttSink", "run_topic"]

#: characters MQTT reserves in topic names
_RESERVED = str.maketrans({"+": "_", "#": "_", "/": "_", "\0": "_"})
#: paho clients of a parent process that a forked child keeps (and never disconnects)
_inherited: list[Any] = []


def _own_client_id(state: dict[str, Any]) -> dict[str, Any]:
    """Settings for a sink in this process: an explicit client id gets this process's pid."""
    if state.get("client_id"):
        state = {**state, "client_id": f"{state['client_id']}-{os.getpid()}"}
    return state


def run_topic(prefix: str, run_id: str) -> str:
    """The topic a workflow run's batches go to."""
    return f"{prefix.rstrip('/')}/{run_id.translate(_RESERVED)}"


class MqttSink:
    """Publish batches to an MQTT broker (paho-mqtt 2.x, MQTT 3.1.1, QoS 1).

    Args:
        host, port: the broker.
        prefix: topic prefix; each run publishes to ``prefix/<run id>``.
        compression: ``None`` (plain JSON, default), ``"gzip"`` or ``"zstd"``.
        timeout: seconds to wait for the connection and for acknowledgements.
    """

    def __init__(self, host: str, port: int = 1883, prefix: str = "provkg", *,
                 compression: str | None = None, timeout: float = 5.0,
                 client_id: str | None = None, username: str | None = None,
                 password: str | None = None, _connect: bool = True) -> None:
        if compression not in (None, "gzip", "zstd"):
            raise ValueError(f"compression must be gzip, zstd or none, not {compression!r}")
        if not prefix or any(c in prefix for c in "+#"):
            raise ValueError(f"MQTT topic prefix {prefix!r} must be non-empty, without + or #")
        self.host, self.port, self.prefix = host, port, prefix.strip("/")
        self.target = f"mqtt://{host}:{port}/{self.prefix}"  # where it sends, in messages
        self.compression = compression
        self.timeout = timeout
        self.bytes_sent = 0
        self._client_id, self._username, self._password = client_id, username, password
        self._connected = threading.Event()
        self._refused: str | None = None  # the broker's answer when it refused the connection
        self._answered = threading.Event()  # set on the broker's answer, yes or no
        self._client: Any = None
        self._start_lock = threading.Lock()
        if _connect:
            self._start()

    def _start(self) -> None:
        """Create the paho client and connect in its network thread (once)."""
        try:
            import paho.mqtt.client as mqtt
        except ModuleNotFoundError as exc:  # a capture-only install: say which extra
            raise ImportError(missing_extra(exc) or str(exc)) from None

        with self._start_lock:
            if self._client is not None:
                return
            client_id = self._client_id or f"provkg-capture-{uuid.uuid4().hex[:16]}"
            client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
                                 client_id=client_id, protocol=mqtt.MQTTv311)
            if self._username:
                client.username_pw_set(self._username, self._password)
            client.on_connect = self._on_connect
            client.on_disconnect = self._on_disconnect
            client.on_connect_fail = self._on_connect_fail
            client.reconnect_delay_set(min_delay=1, max_delay=5)
            client.max_queued_messages_set(1000)  # bounded memory while the broker is away
            client.connect_async(self.host, self.port, keepalive=30)
            client.loop_start()
            self._client = client

    # -- other processes ------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its settings; the receiving process connects with a client id of its own
        (one MQTT client id per connection: a shared one would take the parent's session)."""
        return {"host": self.host, "port": self.port, "prefix": self.prefix,
                "compression": self.compression, "timeout": self.timeout,
                "client_id": self._client_id, "username": self._username,
                "password": self._password}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**_own_client_id(state), _connect=False)  # type: ignore[misc]

    def forked(self) -> MqttSink:
        """In a forked child: a sink of its own (connected on first use, with its own client
        id); the parent's client, socket and network thread are left alone."""
        _inherited.append(self._client)  # never disconnected from here: the parent owns it
        return MqttSink(**_own_client_id(self.__getstate__()), _connect=False)

    @classmethod
    def from_url(cls, url: str) -> MqttSink:
        """``mqtt://[user:password@]HOST:PORT/PREFIX[?compression=gzip]``."""
        parts = urlsplit(url)
        if parts.scheme != "mqtt" or not parts.hostname:
            raise ValueError(f"MQTT sink URL {shown_url(url)!r} must look like mqtt://HOST:PORT/TOPIC")
        compression = url_options(parts.query, ("compression",), "MQTT sink").get("compression")
        return cls(parts.hostname, parts.port or 1883, unquote(parts.path.strip("/")) or "provkg",
                   compression=None if compression in (None, "none") else compression,
                   username=unquote(parts.username) if parts.username else None,
                   password=unquote(parts.password) if parts.password else None)

    def send(self, events: list[dict[str, Any]]) -> None:
        groups: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            run = event.get("workflow_id") or event["id"]
            groups.setdefault(run, []).append(event)
        self._publish([(run, encode_batch(group, self.compression)) for run, group in groups.items()])

    def send_lines(self, lines: list[bytes], *, run_id: str) -> None:
        """Publish events of run ``run_id`` already encoded as JSON lines (the emitter's path)."""
        self._publish([(run_id, compress(envelope(lines), self.compression))])

    def _publish(self, payloads: list[tuple[str, bytes]]) -> None:
        if self._client is None:
            self._start()
        if not self._connected.is_set():  # a refusal needs no waiting for the full timeout
            self._answered.wait(self.timeout)
        if not self._connected.is_set():
            if self._refused is not None:  # reachable, and it said no: say what it said
                raise ConnectionError(f"MQTT broker {self.host}:{self.port} refused the connection: "
                                      f"{self._refused} (check the user and password in the sink URL)")
            raise ConnectionError(f"MQTT broker {self.host}:{self.port} is not reachable")
        messages = []
        for run, payload in payloads:
            info = self._client.publish(run_topic(self.prefix, run), payload, qos=1)
            messages.append((info, len(payload)))
        for info, size in messages:
            try:
                info.wait_for_publish(self.timeout)
            except (RuntimeError, ValueError) as exc:  # not queued: disconnected or queue full
                raise ConnectionError(f"MQTT publish failed: {exc}") from exc
            if not info.is_published():
                raise ConnectionError(f"MQTT broker {self.host}:{self.port} did not acknowledge "
                                      f"within {self.timeout} s")
            self.bytes_sent += size

    def close(self) -> None:
        client = self._client
        if client is None:
            return
        try:
            client.disconnect()
        finally:
            client.loop_stop()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if not getattr(reason, "is_failure", False):
            self._refused = None
            self._connected.set()
        else:
            self._refused = str(reason)
        self._answered.set()

    def _on_connect_fail(self, client: Any, userdata: Any) -> None:
        # nobody listens (connection refused, no route): an answer too, so that a batch goes to
        # the spool at once instead of after the whole timeout, as with the HTTP sink; a broker
        # that accepts TCP but never answers still gets the timeout (else every run with the
        # broker down would wait flush_timeout at exit)
        self._refused = None
        self._answered.set()

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        self._connected.clear()
        self._answered.clear()  # a lost broker: wait for the reconnect's answer again
