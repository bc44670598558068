"""The MQTT sink against a real Mosquitto (Debian ``mosquitto``) started on a free loopback port."""

from __future__ import annotations

import threading

import pytest
from capture_receivers import Callers, MqttSubscriber, Recorder, expected_keys, wait_until

from provkg import capture
from provkg.capture.broker import MosquittoBroker, free_port
from provkg.capture.mqtt_sink import MqttSink, run_topic
from provkg.capture.replay import replay
from provkg.capture.spool import spool_segments


@pytest.fixture
def broker(tmp_path):
    running = MosquittoBroker(tmp_path / "broker").start(timeout=60)
    try:
        yield running
    finally:
        running.stop(timeout=60)


def test_mqtt_sink_publishes_one_topic_per_run_with_qos1(broker, tmp_path):
    subscriber = MqttSubscriber(broker.host, broker.port, "lab/prov")
    try:
        runs = []
        for name in ("first", "second"):
            with capture.workflow(name, sink=f"{broker.url}/lab/prov?compression=zstd",
                                  spool=tmp_path / "spool", flush_timeout=60) as wf:
                ids = [wf.task("step", index=i, used={"i": i}).begin().id for i in range(200)]
            runs.append((wf, ids))
        expected = set()
        for wf, ids in runs:
            # tasks never ended are ended (failed) with the workflow
            expected |= {(wf.id, "begin"), (wf.id, "end")} | \
                {(t, kind) for t in ids for kind in ("begin", "end")}
        assert subscriber.recorder.wait_for(len(expected))
        assert subscriber.recorder.unique == expected
        assert subscriber.topics == {run_topic("lab/prov", wf.id) for wf, _ in runs}
        assert not subscriber.invalid
        assert not (tmp_path / "spool").exists()
    finally:
        subscriber.close()


@pytest.mark.parametrize("crash", [False, True], ids=["broker-stopped", "broker-sigkilled"])
def test_broker_lost_mid_run_then_replay_delivers_every_event(broker, tmp_path, crash):
    """Broker goes away after 1,000 of 5,000 tasks; the loop keeps its speed; replay fills the gap.

    Stopped (SIGTERM): mosquitto persists its queues, so every event arrives exactly once by id.
    SIGKILLed: messages the broker had acknowledged (PUBACK) but not yet forwarded die with it --
    MQTT's guarantee to the publisher ends at PUBACK -- so the only events allowed to be missing
    are ones sent before the crash; everything the capture library still held arrives.
    """
    recorder = Recorder()
    subscriber = MqttSubscriber(broker.host, broker.port, "prov", recorder)
    spool = tmp_path / "spool"
    try:
        sink = MqttSink.from_url(f"{broker.url}/prov")
        sends = Callers(sink, "send_lines")
        wf = capture.workflow("mqtt-kill", sink=sink, spool=spool, linger=0.05, flush_timeout=2.0)
        ids = []
        with wf:
            for i in range(5_000):
                with wf.task("step", index=i, used={"i": i}) as task:
                    task.generate(loss=1.0 / (i + 1))
                ids.append(task.id)
                if i == 1_000:
                    assert recorder.wait_for(1)  # some batches made it before the crash
                    broker.kill() if crash else broker.stop(timeout=60)
        # close() may have given up on the delivery thread: it stops after its current send
        wf.emitter._thread.join(60)
        assert not wf.emitter._thread.is_alive()
        # the sink met the lost broker (no PUBACK, reconnects) in the delivery thread only:
        # the user's thread never entered it, so it never waited on the network
        assert sends.failures > 0
        assert sends.threads == {wf.emitter._thread.ident}
        assert spool_segments(spool)
        subscribed_before = subscriber.subscriptions
        broker.start(timeout=60)
        # replay only once the subscriber is back: a SIGKILLed broker may have lost its session
        assert subscriber.wait_resubscribed(subscribed_before)
        report = replay(spool, f"{broker.url}/prov")
        assert report.events > 0 and spool_segments(spool) == []
        expected = expected_keys(wf.id, ids)
        if not crash:
            assert recorder.wait_for(len(expected))
            assert recorder.unique == expected
        else:
            after_crash = {key for key in expected if key[0] in set(ids[1_002:])} | {(wf.id, "end")}
            assert wait_until(lambda: after_crash <= recorder.unique)
            missing = expected - recorder.unique
            assert all(key[0] in set(ids[:1_002]) or key[0] == wf.id for key in missing)
            assert recorder.unique <= expected
    finally:
        subscriber.close()


def test_unreachable_broker_spools_without_blocking(tmp_path):
    spool = tmp_path / "spool"
    sink = MqttSink.from_url(f"mqtt://127.0.0.1:{free_port()}/prov")
    sends = Callers(sink, "send_lines")
    with capture.workflow("nobroker", sink=sink, spool=spool, flush_timeout=1.0) as wf:
        for i in range(1000):
            wf.task("step", index=i).end()
    wf.emitter._thread.join(60)  # (close() may have given up on it: it stops after its send)
    # sends failed (nobody listens) in the delivery thread only: the loop never waited on them
    assert sends.failures > 0
    assert sends.threads == {wf.emitter._thread.ident}
    lines = sum(len(p.read_text().splitlines()) for p in spool_segments(spool))
    assert lines == 2 + 2 * 1000
    assert wf.status == "finished"


def test_a_port_nobody_listens_on_fails_the_send_at_once_not_after_the_timeout(tmp_path):
    # found by black-box testing: every run with the broker down waited its whole flush_timeout
    # at exit, because a refused TCP connect never reached on_connect
    class Answer(threading.Event):
        """The sink's "the broker answered" event, recording how each wait for it ended."""

        def __init__(self) -> None:
            super().__init__()
            self.waits: list[bool] = []

        def wait(self, timeout: float | None = None) -> bool:
            answered = super().wait(timeout)
            self.waits.append(answered)
            return answered

    sink = MqttSink("127.0.0.1", free_port(), "prov", timeout=60.0, _connect=False)
    sink._answered = Answer()  # before send() connects
    try:
        with pytest.raises(ConnectionError, match="not reachable"):
            sink.send([{"type": "task", "event": "begin", "id": "t", "workflow_id": "r"}])
        # the refused connect answered the wait: it did not run out the 60 s timeout
        assert sink._answered.waits == [True]
    finally:
        sink.close()


def test_a_broker_that_refuses_the_client_is_named_and_the_password_is_not(tmp_path, caplog):
    # found by black-box testing: "Not authorized" was reported as "not reachable", and the
    # sink URL's password was printed in clear in the warnings
    import logging

    with MosquittoBroker(tmp_path / "broker", anonymous=False).start(timeout=60) as secured:
        url = f"mqtt://alice:s3cr3t@127.0.0.1:{secured.port}/prov"
        with caplog.at_level(logging.WARNING, logger="provkg.capture"):
            with capture.workflow("refused", sink=url, spool=tmp_path / "spool",
                                  flush_timeout=2.0) as wf:
                wf.task("step").end()
    assert "refused the connection" in caplog.text and "not reachable" not in caplog.text
    assert "s3cr3t" not in caplog.text
    assert sum(len(p.read_text().splitlines()) for p in spool_segments(tmp_path / "spool")) == 4
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("bad-url", sink="http://bob:hunter2@127.0.0.1:notaport",
                              spool=tmp_path / "spool2", flush_timeout=1.0) as wf:
            wf.task("step").end()
    assert "hunter2" not in caplog.text and "bob:***@" in caplog.text
