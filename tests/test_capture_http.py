"""The HTTP sink against a real loopback server: wire format, compression, spool, replay, 4xx."""

from __future__ import annotations

import logging

import pytest
from capture_receivers import Callers, HttpReceiver, Recorder, expected_keys, wait_until

from provkg import capture
from provkg.capture.http_sink import HttpSink
from provkg.capture.replay import replay
from provkg.capture.spool import spool_segments
from provkg.cli import main


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.kill()


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_http_sink_delivers_valid_compressed_batches(receiver, tmp_path, compression):
    with capture.workflow("http", sink=f"{receiver.url}?compression={compression}",
                          spool=tmp_path / "spool", flush_timeout=60) as wf:
        ids = []
        for i in range(300):
            with wf.task("step", index=i, used={"i": i}) as t:
                t.generate(square=i * i)
                ids.append(t.id)
    assert receiver.recorder.unique == expected_keys(wf.id, ids)
    assert receiver.encodings == {"identity" if compression == "none" else compression}
    assert not receiver.invalid
    assert 1 <= receiver.recorder.batches <= 602 // 10  # grouped, not one request per event
    assert not (tmp_path / "spool").exists()
    squares = {v["value"] for (key, kind), e in receiver.recorder.events.items()
               if kind == "end" and key != wf.id for v in e["generated"]}
    assert squares == {i * i for i in range(300)}


@pytest.mark.parametrize("accepted", [{"gzip", "identity"}, {"identity"}])
def test_a_receiver_without_zstd_gets_a_plainer_body_and_nothing_is_rejected(receiver, tmp_path,
                                                                              accepted):
    """Found by black-box testing: an older server or a proxy answering 415 to zstd bodies sent
    every batch to rejected/ (which a plain replay skips). The sink steps down instead."""
    receiver.accepted_encodings = accepted
    with capture.workflow("http", sink=receiver.url, spool=tmp_path / "spool",
                          flush_timeout=60) as wf:
        ids = []
        for i in range(200):
            with wf.task("step", index=i) as t:
                ids.append(t.id)
    assert receiver.recorder.unique == expected_keys(wf.id, ids)
    assert receiver.encodings == ({"zstd", "gzip"} if "gzip" in accepted
                                  else {"zstd", "gzip", "identity"})
    assert not (tmp_path / "spool").exists()  # nothing spooled, nothing rejected


def test_receiver_killed_mid_run_the_workflow_never_waits_and_replay_restores_every_event(tmp_path):
    """The kill test: 20,000 tasks, receiver dies after 5,000; nothing blocks, nothing is lost.

    (The capture overhead itself is measured side by side in benchmarks/capture.py.)"""
    recorder = Recorder()
    server = HttpReceiver(recorder).start()
    sink = HttpSink(server.url)
    sends = Callers(sink, "send_lines")
    spool = tmp_path / "spool"
    wf = capture.workflow("kill-test", sink=sink, spool=spool, linger=0.05, flush_timeout=2.0)
    ids = []
    with wf:
        for i in range(20_000):
            with wf.task("step", index=i, used={"i": i, "lr": 0.01}) as task:
                task.generate(loss=1.0 / (i + 1))
            ids.append(task.id)
            if i == 5_000:  # the receiver dies mid-run, once it has taken something
                assert recorder.wait_for(1)
                server.kill()
    # close() may have given up on the delivery thread: it stops after its current send
    wf.emitter._thread.join(60)
    assert not wf.emitter._thread.is_alive()
    expected = expected_keys(wf.id, ids)
    delivered_before = recorder.unique
    # the sink met the dead receiver (refused connects, retries, backoff) in the delivery
    # thread only: the user's thread never entered it, so it never waited on the network
    assert sends.failures > 0
    assert sends.threads == {wf.emitter._thread.ident}
    assert 0 < len(delivered_before) < len(expected)
    assert spool_segments(spool), "undelivered events must be on disk"

    back = HttpReceiver(recorder, port=server.port).start()  # the receiver returns
    try:
        # small batches: the receiver parses each in this process, within the request timeout
        report = replay(spool, back.url, batch_size=100)
        assert report.events >= len(expected) - len(delivered_before)
        assert recorder.unique == expected  # every event, exactly once by id after dedup
        assert not back.invalid
        assert spool_segments(spool) == []
        again = replay(spool, back.url)  # idempotent: nothing left, nothing re-sent
        assert again.events == 0 and recorder.unique == expected
    finally:
        back.kill()


def test_spool_is_resent_in_order_when_the_receiver_comes_back_during_the_run(tmp_path):
    recorder = Recorder()
    server = HttpReceiver(recorder).start()
    spool = tmp_path / "spool"
    with capture.workflow("flap", sink=server.url, spool=spool, linger=0.02, flush_timeout=60) as wf:
        ids = []
        for i in range(3000):
            with wf.task("step", index=i) as t:
                ids.append(t.id)
            if i == 1000:
                server.kill()
            if i == 2000:
                assert wait_until(lambda: wf.emitter.spool.pending)  # the sink noticed: spooled
                taken = recorder.batches
                server = HttpReceiver(recorder, port=server.port).start()
                # past its backoff the emitter itself re-sends the spool, while newer events come
                assert wait_until(lambda taken=taken: recorder.batches > taken)
    server.kill()
    assert recorder.unique == expected_keys(wf.id, ids)
    assert spool_segments(spool) == []
    first_seen: dict[tuple[str, str], int] = {}
    for pos, key in enumerate(recorder.arrivals):
        first_seen.setdefault(key, pos)
    order = [first_seen[(t, "begin")] for t in ids]
    assert order == sorted(order), "spooled batches must be re-sent before newer ones"


def test_refused_batches_are_kept_in_rejected_with_the_servers_message(receiver, tmp_path, caplog):
    receiver.reject = "workflow 'refused' is not accepted by this deployment"
    spool = tmp_path / "spool"
    with caplog.at_level(logging.ERROR, logger="provkg.capture"):
        # every event is refused on its own: some 250 requests before the run can end
        with capture.workflow("refused", sink=receiver.url, spool=spool, flush_timeout=60) as wf:
            for i in range(60):
                wf.task("step", index=i).end()
    assert "HTTP 422" in caplog.text and "not accepted by this deployment" in caplog.text
    rejected = spool / "rejected"
    kept = sorted(rejected.glob("*.jsonl"))
    lines = [line for path in kept for line in path.read_text().splitlines()]
    assert len(lines) == 2 + 2 * 60  # nothing silently dropped
    assert all("not accepted" in p.read_text() for p in rejected.glob("*.txt"))
    assert spool_segments(spool) == []  # rejected batches are not retried
    assert receiver.recorder.unique == set()
    assert wf.id


def test_unreachable_server_at_start_spools_everything_then_cli_replays(tmp_path, capsys):
    recorder = Recorder()
    port_holder = HttpReceiver(recorder)  # port chosen, server not started yet
    spool = tmp_path / "spool"
    with capture.workflow("offline", sink=port_holder.url, spool=spool, flush_timeout=1) as wf:
        ids = [wf.task("step", index=i).begin().id for i in range(100)]
    assert spool_segments(spool)
    server = port_holder.start()
    try:
        assert main(["replay", str(spool), "--to", server.url]) == 0
    finally:
        server.kill()
    # tasks begun and never ended are ended (failed) with the workflow
    assert recorder.unique == {(wf.id, "begin"), (wf.id, "end")} | \
        {(t, kind) for t in ids for kind in ("begin", "end")}
    assert {e["status"] for (t, kind), e in recorder.events.items() if t in ids and kind == "end"} \
        == {"failed"}
    assert "re-sent" in capsys.readouterr().err


def test_replay_reports_an_unreachable_target(tmp_path, capsys):
    spool = tmp_path / "spool"
    with capture.workflow("x", sink=HttpReceiver().url, spool=spool, flush_timeout=0.5):
        pass
    assert main(["replay", str(spool), "--to", HttpReceiver().url]) == 1
    assert "did not take a batch" in capsys.readouterr().err
    assert spool_segments(spool)  # still there for the next attempt
    assert main(["replay", str(tmp_path / "missing"), "--to", "file:x"]) == 1
