"""`provkg listen URL --spec S`: a real Mosquitto, a real listener process, then typed answers
from the store (found by black-box testing: `listen` had no way to get a spec, so its events
were stored as plain PROVLake and every canned query answered nothing)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provkg.capture.broker import MosquittoBroker
from provkg.capture.mqtt_sink import MqttSink
from provkg.config import get_settings
from provkg.service.querying import run_query
from provkg.store import open_store

GOLDEN = Path(__file__).parent / "golden"
SPEC = GOLDEN / "lifecycle.spec.yaml"


def _events() -> list[dict]:
    import orjson

    return [orjson.loads(line) for line in (GOLDEN / "lifecycle.events.jsonl").read_bytes().splitlines()]


def _holds_all(store_dir: Path, events: list[dict]) -> bool:
    """Every task and run has its end time in the store (read-only: the listener owns it)."""
    import pyoxigraph as ox

    from provkg.term import mint_iri

    ends = {(e["type"], e["id"]) for e in events if e["event"] == "end"}
    try:
        store = ox.Store.read_only(str(store_dir))
    except OSError:
        return False
    rows = " ".join(f"<{mint_iri('task' if kind == 'task' else 'run', i)}>" for kind, i in ends)
    query = ("SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { VALUES ?x { " + rows + " } "
             "?x <http://www.w3.org/ns/prov#endedAtTime> ?t }")
    return int(next(iter(store.query(query)))["n"].value) == len(ends)


@pytest.mark.parametrize(("topic", "account", "sink_topic"), [
    ("provkg/#", "", "provkg"), ("provkg", "", "provkg"), ("provkg", "alice:s%40cret@", "provkg"),
    # the sink's own URL with its compression option and an encoded space (black-box testing:
    # the listener subscribed to "fl/gz?compression=gzip/#" and "fl%20x/#" literally)
    ("fl%20x/gz?compression=gzip", "", "fl%20x/gz?compression=gzip"),
    ("/pk/", "", "/pk/")])  # slashes around the prefix: the sink drops them (the listener did not)
def test_listen_maps_with_the_spec_it_was_given(tmp_path: Path, topic: str, account: str,
                                                sink_topic: str) -> None:
    # "provkg": the very URL the capture sink was given (found by black-box testing: it
    # subscribed to the topic "provkg" alone, and the sink's runs, published under it, were lost)
    # an account in the URL: the listener dropped it, and a broker with passwords refused it
    events = _events()
    store_dir = tmp_path / "store"
    env = {**os.environ, "PROVKG_QUEUE_DIR": str(tmp_path / "queue")}
    env.pop("PROVKG_STORE", None)
    users = {"alice": "s@cret"} if account else None
    with MosquittoBroker(tmp_path / "mqtt", anonymous=not account, users=users) as broker:
        url = broker.url.replace("mqtt://", "mqtt://" + account)
        log = open(tmp_path / "listen.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "provkg.cli", "listen", f"{url}/{topic}", "--spec", str(SPEC),
             "--store", f"oxigraph:{store_dir}"], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while b"listening to" not in (tmp_path / "listen.log").read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "listen.log").read_text()
                time.sleep(0.1)
            time.sleep(1.0)  # the subscription is made after the banner
            sink = MqttSink.from_url(f"{url}/{sink_topic}")
            try:
                sink.send(events)
            finally:
                sink.close()
            deadline = time.monotonic() + 60
            while not _holds_all(store_dir, events) and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()
    text = (tmp_path / "listen.log").read_text()
    assert "Traceback" not in text and "has no spec" not in text, text
    assert "connection lost" not in text, text  # stopped by us, not lost
    training = next(e["id"] for e in events if e.get("transformation") == "training")
    with open_store(f"oxigraph:{store_dir}") as store:
        rows = run_query(store, "d3", {"training": training}).rows
    assert rows and all(r[1] is not None for r in rows), rows


def test_two_consumers_get_distinct_mqtt_sessions(tmp_path: Path) -> None:
    a = get_settings(queue_dir=str(tmp_path / "serve-queue"))
    b = get_settings(queue_dir=str(tmp_path / "listen-queue"))
    assert a.mqtt_client != b.mqtt_client
    assert a.mqtt_client == get_settings(queue_dir=str(tmp_path / "serve-queue")).mqtt_client
    assert get_settings(mqtt_client_id="mine").mqtt_client == "mine"


def test_listen_says_when_it_cannot_reach_the_broker(tmp_path: Path) -> None:
    # found by black-box testing: pointed at a dead broker it printed its banner and nothing else
    from api_support import free_port

    env = {**os.environ, "PROVKG_QUEUE_DIR": str(tmp_path / "queue")}
    env.pop("PROVKG_STORE", None)
    log = tmp_path / "listen.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "provkg.cli", "listen", f"mqtt://127.0.0.1:{free_port()}/provkg",
             "--store", f"oxigraph:{tmp_path / 'store'}"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 40
            while b"not subscribed after 10 s" not in log.read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    assert "is the MQTT broker at 127.0.0.1:" in log.read_text()


def test_a_retained_bad_message_is_set_aside_once_across_resubscribes(tmp_path: Path) -> None:
    """Found by black-box testing: a retained status message under the prefix came again on
    every (re)subscribe, and each time became one more dead letter."""
    import paho.mqtt.client as mqtt

    from provkg.api.listener import MqttListener
    from provkg.api.queue import IngestQueue

    with MosquittoBroker(tmp_path / "mqtt") as broker:
        publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="device-status")
        publisher.connect(broker.host, broker.port)
        publisher.loop_start()
        publisher.publish("fl/status/junk", b"retained garbage", qos=1, retain=True).wait_for_publish(10)
        publisher.loop_stop()
        publisher.disconnect()
        with IngestQueue(tmp_path / "queue", lambda payloads: None) as queue:
            for round_ in range(3):  # a restart of the listener, each with a fresh session
                listener = MqttListener(f"{broker.url}/fl", queue, client_id=f"listener-{round_}").start()
                try:
                    deadline = time.monotonic() + 30
                    while not list((tmp_path / "queue" / "rejected").glob("*")) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    time.sleep(0.5)  # the retained message has come by now
                finally:
                    listener.close()
            dead = list((tmp_path / "queue" / "rejected").glob("*"))
            assert len(dead) == 1 and dead[0].name.startswith("retained-"), dead
            assert dead[0].read_bytes() == b"retained garbage"


def test_listener_urls_read_as_the_sink_reads_them_or_refused() -> None:
    """Found by black-box testing: "pk6#frag" subscribed to an invalid filter (paho's thread
    died; the listener ran on, subscribed to nothing) while the sink published to pk6/<run>."""
    from provkg.api.listener import parse_mqtt_url
    from provkg.errors import BadParameter

    assert parse_mqtt_url("mqtt://h:1/pk6#frag")[2] == "pk6/#"
    assert parse_mqtt_url("mqtt://h:1/provkg#")[2] == "provkg/#"
    assert parse_mqtt_url("mqtt://h:1/pk?compression=gzip#x")[2] == "pk/#"
    assert parse_mqtt_url("mqtt://h:1/a/+/c")[2] == "a/+/c"
    assert parse_mqtt_url("mqtt://h:1/#")[2] == "#"
    for bad in ("mqtt://h:1/a+/c", "mqtt://h:1/a/b+"):
        with pytest.raises(BadParameter, match="is not valid"):
            parse_mqtt_url(bad)


class _FullDisk:
    """The queue's segment file on a full disk while ``full``: every write fails."""

    def __init__(self, file) -> None:
        self.file, self.full = file, True

    def write(self, data) -> int:
        if self.full:
            raise OSError(28, "No space left on device")
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_messages_refused_on_a_full_queue_disk_are_taken_once_it_has_room(tmp_path: Path) -> None:
    """Found by black-box testing: messages the queue refused (disk full) were neither
    acknowledged nor sent again, and once they filled the broker's in-flight window the
    listener took nothing more, even after the disk was freed, until it was restarted."""
    import paho.mqtt.client as mqtt

    from provkg.api.listener import MqttListener
    from provkg.api.queue import IngestQueue

    got: list[bytes] = []
    events = _events()[:2]
    with MosquittoBroker(tmp_path / "mqtt") as broker, \
            IngestQueue(tmp_path / "queue", got.extend) as queue:
        disk = queue._file = _FullDisk(queue._file)
        listener = MqttListener(f"{broker.url}/fl/#", queue, client_id="full-disk").start()
        try:
            deadline = time.monotonic() + 30
            while not listener.subscribed.is_set() and time.monotonic() < deadline:
                time.sleep(0.05)
            publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="device")
            publisher.connect(broker.host, broker.port)
            publisher.loop_start()
            for i in range(30):  # more than mosquitto's in-flight window (20)
                body = json.dumps({"format": "provkg.events/1", "events": [
                    {**events[0], "id": f"run-{i}"}]}).encode()
                publisher.publish(f"fl/run-{i}", body, qos=1).wait_for_publish(10)
            time.sleep(1.5)
            assert got == []  # nothing could be written
            disk.full = False  # space freed: no restart
            deadline = time.monotonic() + 60
            while len(got) < 30 and time.monotonic() < deadline:
                time.sleep(0.1)
            publisher.loop_stop()
            publisher.disconnect()
        finally:
            listener.close()
    ids = {json.loads(p)["events"][0]["id"] for p in got}
    assert ids == {f"run-{i}" for i in range(30)}
