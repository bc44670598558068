"""The MQTT listener: capture batches from Mosquitto into the ingest queue, for ``provkg listen
mqtt://HOST:PORT/PREFIX/#`` (:mod:`provkg.cli.serve`) and ``provkg serve`` with ``PROVKG_MQTT_URL``.

At least once, end to end:

- the capture client publishes with QoS 1 and retries until the broker's PUBACK;
- the broker keeps the message (``persistence true`` in mosquitto.conf makes that
  survive a broker restart) and, because this listener connects with a stable client
  id and ``clean_session=False``, keeps queueing for it while it is away;
- the listener acknowledges (PUBACK) a message only after the batch is fsync'd in
  the ingest queue (paho-mqtt's manual acks), so a crash before that point makes the
  broker deliver it again; duplicates are harmless because ingest is idempotent.

An invalid batch (by the same rule as ``POST /v1/events``: strict JSON, no NaN) is set
aside in the queue's dead-letter folder ``rejected/`` (its reason in ``rejected.log``) and
then acknowledged (redelivering it would fail the same way forever).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

import paho.mqtt.client as mqtt

from provkg.api.body import decompress
from provkg.errors import BadEvent, BadParameter, ProvkgError
from provkg.events import parse_batch, strip_bom
from provkg.service.queue import IngestQueue

__all__ = ["MqttListener", "parse_mqtt_url", "mqtt_credentials"]

log = logging.getLogger("provkg.listener")

_GZIP, _ZSTD = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"
#: retries of messages the queue refused: from this many seconds, doubled up to the last
_FIRST_RETRY_S, _LAST_RETRY_S = 0.5, 5.0


def parse_mqtt_url(url: str) -> tuple[str, int, str]:
    """``mqtt://host:port/topic/filter`` -> (host, port, topic filter); port defaults to 1883.

    A topic without a wildcard is the capture sink's prefix (the sink publishes each run to
    ``PREFIX/<run id>``): the filter is then ``PREFIX/#``, which also matches ``PREFIX``
    itself, so the listener takes the very URL the capture sink was given.

    >>> parse_mqtt_url("mqtt://127.0.0.1:1884/provkg/#")
    ('127.0.0.1', 1884, 'provkg/#')
    >>> parse_mqtt_url("mqtt://127.0.0.1/provkg")
    ('127.0.0.1', 1883, 'provkg/#')

    The topic is read as the sink reads its prefix: percent-decoded, and a ``?query`` (the
    sink's ``compression`` option: messages say their own compression) is not part of it.

    >>> parse_mqtt_url("mqtt://127.0.0.1/fl%20x/gz?compression=gzip")
    ('127.0.0.1', 1883, 'fl x/gz/#')

    Slashes around it go, and no topic is ``provkg``, as for the sink:

    >>> parse_mqtt_url("MQTT://127.0.0.1:1884//pk/"), parse_mqtt_url("mqtt://127.0.0.1:1884?compression=gzip")
    (('127.0.0.1', 1884, 'pk/#'), ('127.0.0.1', 1884, 'provkg/#'))
    """
    scheme, parts, topic = _split(url)
    # the sink's own URL, read as the sink reads it: a filter "fl/gz?compression=gzip/#",
    # "fl%20x/#" or "/pk/#" matches nothing the sink publishes (the broker drops every
    # message), and `mqtt://H:P` alone is a URL the sink takes
    wildcard = re.search(r"(^|/)#(?=$|\?)", topic)
    cut = topic.find("#")
    if cut >= 0 and (wildcard is None or cut < wildcard.end() - 1):
        topic = topic[:cut]  # a fragment, as the sink reads "pk#frag" (not a whole level: no wildcard)
    topic, _, query = topic.partition("?")
    unknown = sorted(set(parse_qs(query, keep_blank_values=True)) - {"compression"})
    if unknown:
        raise BadParameter(f"the MQTT URL has unknown options {', '.join(unknown)} (known: "
                           "compression, which the listener takes from each message itself)")
    topic = unquote(topic.strip("/")) or "provkg"  # MqttSink.from_url's reading
    if scheme.lower() != "mqtt" or not parts.hostname:
        raise BadParameter("expected mqtt://HOST:PORT/TOPIC (e.g. mqtt://127.0.0.1:1883/provkg/#)")
    try:
        port = parts.port or 1883
    except ValueError:
        raise BadParameter("the MQTT URL has an invalid port") from None
    if "#" not in topic and "+" not in topic:
        topic = topic.rstrip("/") + "/#"
    levels = topic.split("/")
    if any(("+" in level and level != "+") or ("#" in level and (level != "#" or i < len(levels) - 1))
           for i, level in enumerate(levels)):
        # paho's thread died on it, and the listener ran on subscribed to nothing
        raise BadParameter(f"the MQTT topic filter {topic!r} is not valid: + stands for one whole "
                           "level (a/+/c) and # for the last ones (a/#)")
    return parts.hostname, port, topic


def _split(url: str) -> tuple[str, SplitResult, str]:
    """(scheme, the host part as urlsplit reads it, topic): not urlsplit alone, which would
    take the "#" wildcard for a fragment."""
    scheme, _, rest = url.partition("://")
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    try:
        return scheme, urlsplit(f"mqtt://{rest[:end]}"), rest[end:]
    except ValueError as exc:  # "Invalid IPv6 URL": a bad parameter, not a traceback
        raise BadParameter(f"the MQTT URL's host is not valid ({exc}); expected "
                           "mqtt://HOST:PORT/TOPIC") from None


def mqtt_credentials(url: str) -> tuple[str | None, str | None]:
    """The user and password of ``mqtt://USER:PASSWORD@HOST:PORT/TOPIC`` (percent-decoded, as
    the capture sink reads them), or Nones.

    >>> mqtt_credentials("mqtt://alice:s%40cret@127.0.0.1:1884/provkg/#")
    ('alice', 's@cret')
    """
    parts = _split(url)[1]
    return (unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None)


#: MQTT 5 CONNACK reason codes of a refused account (paho maps MQTT 3.1.1's 4 and 5 to them):
#: bad user name or password, not authorized
_ACCOUNT_REFUSED = (134, 135)


class MqttListener:
    """Subscribes with QoS 1 in a persistent session; acknowledges once a batch is queued.

    Args:
        url: ``mqtt://HOST:PORT/TOPIC-FILTER``.
        queue: the ingest queue batches go to.
        client_id: stable across restarts, so the broker keeps the session.
        max_bytes: larger (decompressed) messages are rejected.
    """

    def __init__(self, url: str, queue: IngestQueue, *, client_id: str = "provkg-listener",
                 max_bytes: int = 64 * 1024 * 1024):
        self.host, self.port, self.topic = parse_mqtt_url(url)
        self._queue = queue
        self._max_bytes = max_bytes
        self.subscribed = threading.Event()  # set once the broker confirmed the subscription
        self._closing = False
        #: messages the queue refused (its disk full), in arrival order, not acknowledged:
        #: submitted again by _retry_held until taken (the broker sends no more than its
        #: in-flight window meanwhile, and would resend them only on a reconnect)
        self._held: list[tuple[bytes, int, int, int]] = []
        self._held_lock = threading.Lock()
        self._retrying = False
        #: seconds before the next retry: doubled at each, back to the start once one is taken
        #: (a refusal that comes from the writer, after the queue took the message, is not a
        #: success: restarting the retries at 0.5 s would log 4 errors a second)
        self._retry_delay = _FIRST_RETRY_S
        self._refusing = False  # said once per episode of refusals
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  clean_session=False, protocol=mqtt.MQTTv311)
        user, password = mqtt_credentials(url)
        if user:  # the same account the capture sink's URL gives
            self.client.username_pw_set(user, password)
        self.client.manual_ack_set(True)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def start(self) -> MqttListener:
        """Connect (retrying in the background if the broker is down) and start consuming."""
        self.client.connect_async(self.host, self.port, keepalive=30)
        self.client.loop_start()
        return self

    def close(self) -> None:
        self._closing = True  # the disconnect that follows is ours: not "connection lost"
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            hint = (" (give the account in the URL: mqtt://USER:PASSWORD@HOST:PORT/TOPIC)"
                    if reason_code.value in _ACCOUNT_REFUSED else "")
            log.error("MQTT broker %s:%s refused the connection: %s%s", self.host, self.port,
                      reason_code, hint)
            return
        client.subscribe(self.topic, qos=1)
        log.info("listening to mqtt://%s:%s/%s (session present: %s)", self.host, self.port,
                 self.topic, flags.session_present)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if all(not rc.is_failure for rc in reason_codes):
            self.subscribed.set()
        else:
            log.error("the MQTT broker refused the subscription to %s", self.topic)

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.subscribed.clear()
        if self._closing:
            log.info("disconnected from the MQTT broker %s:%s", self.host, self.port)
        else:
            log.warning("MQTT broker connection lost (%s); paho reconnects", reason_code)

    def _on_message(self, client, userdata, message) -> None:
        mid, qos = message.mid, message.qos
        try:
            payload = strip_bom(self._decoded(bytes(message.payload)))
            assert isinstance(payload, bytes)  # strip_bom keeps the type it is given
            batch = parse_batch(payload)
        except ProvkgError as exc:
            raw = bytes(message.payload)
            # a retained message comes again on every (re)subscribe: set aside once, not one
            # more dead letter per reconnect
            once = None
            if message.retain:
                digest = hashlib.sha256(message.topic.encode() + b"\0" + raw).hexdigest()
                once = f"retained-{digest[:24]}"
            kept = self._queue.reject(raw, reason=f"MQTT {message.topic}: {exc}", once=once)
            if kept is not None:
                log.error("rejected an MQTT batch on %s (kept as %s): %s", message.topic, kept, exc)
            client.ack(mid, qos)
            return
        if not batch.events:
            client.ack(mid, qos)
            return
        item = (payload, len(batch.events), mid, qos)
        with self._held_lock:
            if self._held:  # behind messages held already: in their order
                self._held.append(item)
                return
        self._submit(item)

    def _submit(self, item: tuple[bytes, int, int, int], *, again: bool = False) -> bool:
        """Queue one message; acknowledged once durable, held for a retry if the queue (its
        disk) refuses it. Whether the queue took it for writing."""
        payload, events, mid, qos = item
        try:
            future = self._queue.submit(payload, events=events)
        except ProvkgError as exc:  # queue closed or failing: not acknowledged, held
            self._hold(item, exc, first=again)
            return False

        def done(f: Any) -> None:  # by the queue's writer after fsync, in submission order
            if f.exception() is None:
                self.client.ack(mid, qos)
                with self._held_lock:
                    if self._refusing and not self._held:
                        log.info("the ingest queue takes MQTT batches again")
                    self._retry_delay, self._refusing = _FIRST_RETRY_S, bool(self._held)
            else:  # its disk refused the write (full): held, submitted again later
                self._hold(item, f.exception())

        future.add_done_callback(done)
        return True

    def _hold(self, item: tuple[bytes, int, int, int], problem: object, *, first: bool = False) -> None:
        """Keep a message the queue refused and retry it: a message refused (a full disk)
        is neither acknowledged nor sent again by the broker, and once the broker's in-flight
        window is full of them the listener would take nothing more."""
        with self._held_lock:
            self._held.insert(0 if first else len(self._held), item)
            said, self._refusing = self._refusing, True
            if self._retrying or self._closing:
                return
            self._retrying = True
        if not said:
            log.error("could not queue an MQTT batch (%s); held unacknowledged and queued again "
                      "once the queue takes batches", problem)
        threading.Thread(target=self._retry_held, name="provkg-mqtt-retry", daemon=True).start()

    def _retry_held(self) -> None:
        while not self._closing:
            with self._held_lock:
                delay = self._retry_delay
                self._retry_delay = min(delay * 2, _LAST_RETRY_S)
            time.sleep(delay)
            while not self._closing:
                with self._held_lock:
                    if not self._held:
                        self._retrying = False
                        return
                    item = self._held.pop(0)
                if not self._submit(item, again=True):  # refused again (held first): wait
                    break
        with self._held_lock:
            self._retrying = False

    def _decoded(self, payload: bytes) -> bytes:
        if payload.startswith(_GZIP):
            return decompress(payload, "gzip", limit=self._max_bytes)
        if payload.startswith(_ZSTD):
            return decompress(payload, "zstd", limit=self._max_bytes)
        if len(payload) > self._max_bytes:
            raise BadEvent(f"message larger than {self._max_bytes} bytes")
        return payload
