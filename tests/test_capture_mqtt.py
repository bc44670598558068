"""The MQTT sink against a real Mosquitto (Debian ``mosquitto``) started on a free loopback port."""

from __future__ import annotations

import time

import pytest
from capture_receivers import MqttSubscriber, Recorder, Stalls, expected_keys

from provkg import capture
from provkg.capture.broker import MosquittoBroker
from provkg.capture.mqtt_sink import run_topic
from provkg.capture.replay import replay
from provkg.capture.spool import spool_segments


@pytest.fixture
def broker(tmp_path):
    with MosquittoBroker(tmp_path / "broker") as running:
        yield running


def test_mqtt_sink_publishes_one_topic_per_run_with_qos1(broker, tmp_path):
    subscriber = MqttSubscriber(broker.host, broker.port, "lab/prov")
    try:
        runs = []
        for name in ("first", "second"):
            with capture.workflow(name, sink=f"{broker.url}/lab/prov?compression=zstd",
                                  spool=tmp_path / "spool") as wf:
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
        wf = capture.workflow("mqtt-kill", sink=f"{broker.url}/prov", spool=spool, linger=0.05,
                              flush_timeout=2.0)
        ids = []
        stalls = Stalls()
        with wf:
            for i in range(5_000):
                t0 = time.perf_counter()
                with wf.task("step", index=i, used={"i": i}) as task:
                    task.generate(loss=1.0 / (i + 1))
                ids.append(task.id)
                if i == 1_000:
                    recorder.wait_for(1, timeout=5)  # some batches made it before the crash
                    broker.kill() if crash else broker.stop()
                elif i > 1_000:
                    stalls.time(time.perf_counter() - t0)
        stalls.assert_never_waited()
        assert spool_segments(spool)
        subscribed_before = subscriber.subscriptions
        broker.start()
        # replay only once the subscriber is back: a SIGKILLed broker may have lost its session
        assert subscriber.wait_resubscribed(subscribed_before)
        report = replay(spool, f"{broker.url}/prov")
        assert report.events > 0 and spool_segments(spool) == []
        expected = expected_keys(wf.id, ids)
        if not crash:
            assert recorder.wait_for(len(expected), timeout=30)
            assert recorder.unique == expected
        else:
            after_crash = {key for key in expected if key[0] in set(ids[1_002:])} | {(wf.id, "end")}
            deadline = time.monotonic() + 30
            while not after_crash <= recorder.unique and time.monotonic() < deadline:
                time.sleep(0.05)
            assert after_crash <= recorder.unique
            missing = expected - recorder.unique
            assert all(key[0] in set(ids[:1_002]) or key[0] == wf.id for key in missing)
            assert recorder.unique <= expected
    finally:
        subscriber.close()


def test_unreachable_broker_spools_without_blocking(tmp_path):
    from provkg.capture.broker import free_port

    spool = tmp_path / "spool"
    started = time.perf_counter()
    with capture.workflow("nobroker", sink=f"mqtt://127.0.0.1:{free_port()}/prov", spool=spool,
                          flush_timeout=1.0) as wf:
        for i in range(1000):
            wf.task("step", index=i).end()
        loop = time.perf_counter() - started
    assert loop < 2.0
    lines = sum(len(p.read_text().splitlines()) for p in spool_segments(spool))
    assert lines == 2 + 2 * 1000
    assert wf.status == "finished"


def test_a_port_nobody_listens_on_fails_the_send_at_once_not_after_the_timeout(tmp_path):
    # found by black-box testing: every run with the broker down waited its whole flush_timeout
    # at exit, because a refused TCP connect never reached on_connect
    from provkg.capture.broker import free_port
    from provkg.capture.mqtt_sink import MqttSink

    sink = MqttSink.from_url(f"mqtt://127.0.0.1:{free_port()}/prov")
    sink.timeout = 60.0
    try:
        started = time.perf_counter()
        with pytest.raises(ConnectionError, match="not reachable"):
            sink.send([{"type": "task", "event": "begin", "id": "t", "workflow_id": "r"}])
        assert time.perf_counter() - started < 30  # far below the 60 s timeout it waited before
    finally:
        sink.close()


def test_a_broker_that_refuses_the_client_is_named_and_the_password_is_not(tmp_path, caplog):
    # found by black-box testing: "Not authorized" was reported as "not reachable", and the
    # sink URL's password was printed in clear in the warnings
    import logging

    with MosquittoBroker(tmp_path / "broker", anonymous=False) as secured:
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
