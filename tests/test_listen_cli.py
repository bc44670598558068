"""`provkg listen URL --spec S`: a real Mosquitto, a real listener process, then typed answers
from the store (found by black-box testing: `listen` had no way to get a spec, so its events
were stored as plain PROVLake and every canned query answered nothing)."""

from __future__ import annotations

import json
import os
import re
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


def _wait_log(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait until the process's log holds ``text``; the deadline only stops a hang."""
    deadline = time.monotonic() + timeout
    while text.encode() not in log.read_bytes():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


def _publish(host: str, port: int, topic: str, payload: bytes, *, retain: bool = False,
             account: tuple[str, str] | None = None) -> None:
    """One QoS 1 message, acknowledged by the broker when this returns."""
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"test-{topic}")
    if account:
        client.username_pw_set(*account)
    client.connect(host, port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(60)
    finally:
        client.disconnect()
        client.loop_stop()


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
    from provkg.api.listener import parse_mqtt_url

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
            # the listener logs nothing once the broker confirms its subscription: a retained
            # message under its filter, which the broker hands it once subscribed, shows it is
            # (the listener sets it aside, and says so)
            probe = parse_mqtt_url(f"{url}/{topic}")[2].removesuffix("#") + "probe"
            _publish(broker.host, broker.port, probe, b"not a batch", retain=True,
                     account=("alice", "s@cret") if account else None)
            _wait_log(tmp_path / "listen.log", f"rejected an MQTT batch on {probe} ", proc)
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
            proc.wait(60)
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
            _wait_log(log, "not subscribed after 10 s", proc)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert "is the MQTT broker at 127.0.0.1:" in log.read_text()


def test_a_retained_bad_message_is_set_aside_once_across_resubscribes(tmp_path: Path) -> None:
    """Found by black-box testing: a retained status message under the prefix came again on
    every (re)subscribe, and each time became one more dead letter."""
    from provkg.api.listener import MqttListener
    from provkg.service.queue import IngestQueue

    applied: list[bytes] = []
    with MosquittoBroker(tmp_path / "mqtt") as broker:
        _publish(broker.host, broker.port, "fl/status/junk", b"retained garbage", retain=True)
        with IngestQueue(tmp_path / "queue", applied.extend) as queue:
            for round_ in range(3):  # a restart of the listener, each with a fresh session
                listener = MqttListener(f"{broker.url}/fl", queue, client_id=f"listener-{round_}").start()
                try:
                    assert listener.subscribed.wait(60)
                    # the broker queued the retained message for the listener when it took the
                    # subscription, so a message published now comes after it, and the listener
                    # handles messages in order: once this one is applied, the retained one was
                    # handled (set aside, or found set aside already)
                    marker = json.dumps({"format": "provkg.events/1", "events": [
                        {**_events()[0], "id": f"marker-{round_}"}]}).encode()
                    _publish(broker.host, broker.port, f"fl/marker-{round_}", marker)
                    deadline = time.monotonic() + 60
                    while marker not in applied:
                        assert time.monotonic() < deadline, applied
                        time.sleep(0.05)
                finally:
                    listener.close()
                dead = list((tmp_path / "queue" / "rejected").glob("*"))
                assert len(dead) == 1 and dead[0].name.startswith("retained-"), (round_, dead)
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
    """The queue's segment file on a full disk while ``full``: every write fails. ``refused``:
    the run ids of the batches whose writes failed."""

    def __init__(self, file) -> None:
        self.file, self.full = file, True
        self.refused: set[bytes] = set()

    def write(self, data) -> int:
        if self.full:
            self.refused.update(re.findall(rb'"id": "(run-\d+)"', bytes(data)))
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
    from provkg.service.queue import IngestQueue

    got: list[bytes] = []
    events = _events()[:2]
    window = 20  # mosquitto's in-flight window: unacknowledged messages it sends at most
    with MosquittoBroker(tmp_path / "mqtt") as broker, \
            IngestQueue(tmp_path / "queue", got.extend) as queue:
        disk = queue._file = _FullDisk(queue._file)
        listener = MqttListener(f"{broker.url}/fl/#", queue, client_id="full-disk").start()
        try:
            assert listener.subscribed.wait(60)
            publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="device")
            publisher.connect(broker.host, broker.port)
            publisher.loop_start()
            for i in range(30):  # more than the window
                body = json.dumps({"format": "provkg.events/1", "events": [
                    {**events[0], "id": f"run-{i}"}]}).encode()
                publisher.publish(f"fl/run-{i}", body, qos=1).wait_for_publish(60)
            # the whole window reached the queue and was refused: the state that used to stop
            # the listener for good
            deadline = time.monotonic() + 60
            while len(disk.refused) < window:
                assert time.monotonic() < deadline, disk.refused
                time.sleep(0.05)
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
