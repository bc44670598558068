"""Delivery under trouble: no event lost, and the warnings at exit tell the truth.

* ``flush_timeout`` expiring while a refused batch is being sent in halves: what is unsent is
  in the spool (README: "what is still unsent by then is in the spool");
* a full disk under the file sink: no torn line, no event glued to one (``provkg ingest`` reads
  every line), nothing lost once space is back;
* the file sink's folder deleted during a run: created again, with a warning;
* the counts in the exit warnings: events waiting in the spool (those of exited children
  included), events lost because the spool could not take them.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from capture_receivers import expected_keys, wait_until

from provkg import capture
from provkg.capture.sink import SinkRejected
from provkg.capture.spool import read_segment, spool_segments
from provkg.events import parse_events_jsonl


def _spooled(spool: Path) -> list[tuple[str, str]]:
    return [(e["id"], e["event"]) for seg in spool_segments(spool) for e in read_segment(seg)]


def _waiting(text: str) -> int:
    (count,) = re.findall(r"(\d+) events wait in", text)
    return int(count)


class SplittingSlowSink:
    """Refuses batches of more than 8 events as too large (like HTTP 413); takes smaller ones
    slowly (a busy server)."""

    def __init__(self) -> None:
        self.received: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def send(self, events):
        if len(events) > 8:
            raise SinkRejected("HTTP 413: body too large", too_large=True)
        time.sleep(0.02)
        with self.lock:
            self.received.update((e["id"], e["event"]) for e in events)

    def close(self):
        pass


def test_flush_timeout_during_a_split_leaves_every_unsent_event_in_the_spool(tmp_path):
    sink = SplittingSlowSink()
    spool = tmp_path / "spool"
    with capture.workflow("split-late", sink=sink, spool=spool, flush_timeout=0.3, batch_size=200,
                          linger=0.01) as wf:
        ids = [wf.task("step", index=i).begin().id for i in range(300)]
    # the process may exit now (the delivery thread is a daemon): what the receiver has and
    # what the spool holds must be everything
    with sink.lock:
        delivered = set(sink.received)
    at_exit = set(_spooled(spool))
    expected = expected_keys(wf.id, ids)
    assert delivered < expected, "the test needs close() to give up while the batch is split"
    assert delivered | at_exit == expected
    wf.emitter._thread.join(60)  # the abandoned thread stops after the part it was sending
    assert not wf.emitter._thread.is_alive()
    assert set(_spooled(spool)) == at_exit  # ... and leaves the spool to the caller


class FlakySink:
    """Delivers while ``up`` is set, else fails as an unreachable receiver."""

    def __init__(self) -> None:
        self.up = threading.Event()

    def send(self, events):
        if not self.up.is_set():
            raise ConnectionError("receiver away")

    def close(self):
        pass


def test_the_exit_warning_counts_the_events_that_wait_in_the_spool(tmp_path, caplog):
    sink = FlakySink()
    spool = tmp_path / "spool"
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("flaky", sink=sink, spool=spool, flush_timeout=0.5,
                              linger=0.01) as wf:
            for i in range(1000):  # the receiver is away: spooled
                wf.task("step", index=i).end()
            assert wait_until(lambda: wf.emitter.spool.pending)
            sink.up.set()  # it comes back: the spool is re-sent and emptied
            assert wait_until(lambda: not wf.emitter.spool.pending)
            sink.up.clear()  # away again for the rest of the run
            for i in range(300):
                wf.task("late", index=i).end()
    waiting = len(_spooled(spool))
    assert waiting >= 2 * 300
    assert _waiting(caplog.text) == waiting


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_exit_warning_counts_the_events_exited_children_left_in_the_spool(tmp_path, caplog):
    spool = tmp_path / "spool"
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("forked", sink=FlakySink(), spool=spool, flush_timeout=0.5) as wf:
            for i in range(10):
                wf.task("parent-step", index=i).end()
            pid = os.fork()
            if pid == 0:  # the child: its events go to the spool (the sink cannot be shared)
                try:
                    for i in range(40):
                        wf.task("child-step", index=i).end()
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
    spooled = _spooled(spool)
    assert len(spooled) == 2 + 2 * 10 + 2 * 40
    assert _waiting(caplog.text) == len(spooled)


class StuckSink:
    def __init__(self) -> None:
        self.release = threading.Event()

    def send(self, events):
        self.release.wait(10)

    def close(self):
        pass


def test_an_unwritable_spool_is_not_reported_as_holding_the_events(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("where the spool folder should be")
    sink = StuckSink()
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("nowhere", sink=sink, spool=blocker / "spool",
                              flush_timeout=0.3) as wf:
            for i in range(100):
                wf.task("step", index=i).end()
    sink.release.set()
    assert "spooled in" not in caplog.text  # nothing was written: no claim that it was
    assert "could not be spooled" in caplog.text
    (lost,) = re.findall(r"(\d+) events were lost", caplog.text)
    assert int(lost) == wf.emitter.spool.dropped_events > 0


_FULL_DISK = r"""
import resource, signal, sys, time
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
from provkg import capture
out, spool = sys.argv[1], sys.argv[2]
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, hard))  # the disk is full at 40 kB
with capture.workflow("full-disk", sink="file:" + out, spool=spool, linger=0.005,
                      flush_timeout=60) as wf:
    for i in range(400):
        with wf.task("step", index=i) as t:
            t.generate(note="n" * 100)
        time.sleep(0.001)
        if i == 90:  # ~48 kB of events: wait until the sink met the full disk and spooled
            deadline = time.monotonic() + 60
            while wf.emitter._backoff == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space is back
print(wf.id)
"""


def test_a_full_disk_under_the_file_sink_leaves_no_torn_line_and_loses_nothing(tmp_path):
    out, spool = tmp_path / "out", tmp_path / "spool"
    run = subprocess.run([sys.executable, "-c", _FULL_DISK, str(out), str(spool)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "File too large" in run.stderr  # the sink did meet the limit
    assert f"(file:{out})" in run.stderr  # and the warning says where (EFBIG names no file)
    events = [e for path in sorted(out.glob("*.jsonl"))  # each line read as ingest reads it
              for e in parse_events_jsonl(path.read_text().splitlines(), source=str(path))]
    keys = {(e.id, e.event) for e in events}
    assert len(keys) == 2 + 2 * 400
    assert spool_segments(spool) == []


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_the_file_sinks_folder_deleted_during_a_run_is_created_again(tmp_path, caplog,
                                                                     compression):
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("deleted", sink=f"file:{out}?compression={compression}",
                              spool=tmp_path / "spool") as wf:
            for i in range(100):
                wf.task("before", index=i).end()
            assert wf.flush(60)
            shutil.rmtree(out)
            after = [wf.task("after", index=i).begin() for i in range(100)]
            for task in after:
                task.end()
    assert "deleted" in caplog.text
    events = []
    for path in sorted(out.glob("*.jsonl*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        events += parse_events_jsonl(data.decode().splitlines(), source=str(path))
    keys = {(e.id, e.event) for e in events}
    assert keys == {(t.id, kind) for t in after for kind in ("begin", "end")} | {(wf.id, "end")}


def test_provkg_replay_run_beside_a_live_spooling_run_loses_no_event(tmp_path):
    """Found by black-box testing: a cron job running `provkg replay` on the spool while the
    run still spooled (receiver down) lost whole blocks of events: replay deleted a segment
    the run had appended to after replay read it. Now a segment open for appends is locked
    and replay leaves it alone; every event is re-sent or still spooled."""
    spool, out = tmp_path / "spool", tmp_path / "out"
    provkg = Path(sys.executable).with_name("provkg")
    stop = threading.Event()
    codes: list[int] = []

    def cron() -> None:
        k = 0
        while not stop.is_set():
            if spool.exists():
                codes.append(subprocess.run([str(provkg), "replay", str(spool), "--to",
                                             f"file:{out / str(k)}"], capture_output=True).returncode)
                k += 1
            time.sleep(0.02)

    replayer = threading.Thread(target=cron)
    replayer.start()
    n, t0 = 0, time.monotonic()
    try:
        with capture.workflow("race", sink="http://127.0.0.1:9", run_id="RACE", spool=spool,
                              flush_timeout=1, batch_size=20, linger=0.02) as wf:
            while time.monotonic() - t0 < 4 or len(codes) < 5:
                with wf.task("step", index=n) as t:
                    t.generate(i=n)
                n += 1
                time.sleep(0.0003)
    finally:
        stop.set()
        replayer.join()
    assert len(codes) >= 5 and set(codes) == {0}
    found = {(e["id"], e["event"]) for f in [*out.rglob("*.jsonl"), *spool_segments(spool)]
             for e in read_segment(f)}
    expected = {("RACE", "begin"), ("RACE", "end")} | {
        (f"RACE.{i + 1}", ev) for i in range(n) for ev in ("begin", "end")}
    assert not expected - found, f"{len(expected - found)} of {len(expected)} events lost"


def test_a_wall_clock_stepped_back_does_not_hold_events(tmp_path, monkeypatch):
    """Found by black-box testing: after an NTP step back on an edge device, events waited
    for as long as the step (unsent and unspooled: a power loss then lost them), since the
    linger compared the wall clock with each event's own time."""
    sink = capture.MemorySink()
    real = time.time
    step = {"back": 0.0}
    monkeypatch.setattr(time, "time", lambda: real() - step["back"])
    with capture.workflow("clock-step", sink=sink, spool=tmp_path / "spool", linger=0.05,
                          batch_size=50) as wf:
        task = wf.task("step").begin()  # stamped before the step
        step["back"] = 86_400.0  # a day: held by the step, the event would outlast any wait
        # sent by the linger while the run goes on, not by the flush at its end
        sent = wait_until(lambda: any(e["id"] == task.id for e in sink.events))
        task.end()
    assert sent, "held back by the clock step"


class RefusingSlowSink:
    """Refuses every event for what it holds (HTTP 422), slowly; or, ``too_large``, as a
    proxy whose body limit is set too low (413 for anything)."""

    def __init__(self, *, too_large: bool = False) -> None:
        self.too_large = too_large

    def send(self, events):
        time.sleep(0.005)
        if self.too_large:
            raise SinkRejected("HTTP 413: body too large", too_large=True)
        raise SinkRejected("HTTP 422: not valid", by_event=True)

    def close(self):
        pass


def test_an_event_close_spooled_is_not_also_set_aside_as_refused(tmp_path):
    """Found by black-box testing: when flush_timeout ran out while a refused batch was being
    split, an event ended both in rejected/ and in the spool (replayed and refused again), and
    the counts the warning gave did not match the files."""
    spool = tmp_path / "spool"
    with capture.workflow("refused-late", sink=RefusingSlowSink(), spool=spool, flush_timeout=0.3,
                          batch_size=400, linger=0.01) as wf:
        ids = [wf.task("step", index=i).begin().id for i in range(400)]
    wf.emitter._thread.join(60)  # the abandoned thread stops after the part it was sending
    assert not wf.emitter._thread.is_alive()
    rejected = [(e["id"], e["event"]) for path in sorted((spool / "rejected").glob("*.jsonl"))
                for e in map(json.loads, path.read_text().splitlines())]
    spooled = _spooled(spool)
    assert spooled, "the test needs close() to give up while the batch is being split"
    assert not set(rejected) & set(spooled)
    assert set(rejected) | set(spooled) == expected_keys(wf.id, ids)
    assert wf.emitter.spool.rejected_events == len(rejected)


def test_a_receiver_refusing_even_small_events_as_too_large_keeps_them_in_the_spool(tmp_path, caplog):
    """Found by black-box testing: a receiver answering 413 to everything got one request per
    event and left two files per event in rejected/ (a million for a 500k-event run)."""
    spool = tmp_path / "spool"
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        # (flush_timeout: the run's end waits for the sink to give up, however slow the host)
        with capture.workflow("proxy-413", sink=RefusingSlowSink(too_large=True), spool=spool,
                              flush_timeout=60, linger=0.01) as wf:
            ids = [wf.task("step", index=i).begin().id for i in range(60)]
    assert not (spool / "rejected").exists() or not list((spool / "rejected").iterdir())
    assert set(_spooled(spool)) == expected_keys(wf.id, ids)
    assert "refuses even a single small event as too large" in caplog.text


def test_replay_leaves_files_that_are_no_spool_segments_alone(tmp_path, capsys):
    """Found by black-box testing: `provkg replay --to URL photo.png` (or a folder holding a
    data.jsonl of one's own) re-sent nothing, exited 0 and deleted the file."""
    from provkg.cli import main

    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00image bytes\n")
    mine = tmp_path / "thesis" / "data.jsonl"
    mine.parent.mkdir()
    mine.write_text('{"text": "a dataset line of my own"}\n')
    sink = tmp_path / "out"
    assert main(["replay", "--to", f"file:{sink}", str(photo)]) == 1
    assert main(["replay", "--to", f"file:{sink}", str(mine.parent)]) == 1
    err = capsys.readouterr().err
    assert "photo.png: line 1 is not JSON, so this is no spool segment" in err
    assert "data.jsonl: line 1 is not a provkg event" in err
    assert photo.exists() and mine.exists()
    empty, pdf = tmp_path / "important.db", tmp_path / "report.pdf"  # no event at all
    empty.write_bytes(b"")
    pdf.write_bytes(b"\n\n%PDF-1.4 tail without newline")
    for given in (empty, pdf):
        assert main(["replay", "--to", f"file:{sink}", str(given)]) == 1
        assert given.exists()
    assert "important.db: it holds no provkg event" in capsys.readouterr().err
    # a regression round: one whole event without its newline was "no provkg event"; it is
    # one, as with the newline: delivered like any segment's
    copied = tmp_path / "copied" / "copied.jsonl"
    copied.parent.mkdir()
    copied.write_bytes(b'{"type":"workflow","event":"begin","id":"r1","time":1.0,"workflow":"w"}')
    assert main(["replay", "--to", f"file:{sink}", str(copied.parent)]) == 0
    assert "no provkg event" not in capsys.readouterr().err
    assert any(b'"id":"r1"' in f.read_bytes() or b'"id": "r1"' in f.read_bytes()
               for f in sink.rglob("*.jsonl"))
    # a real segment with a torn last line is still replayed (and then deleted)
    segment = tmp_path / "spool" / "r" / "00000000000000000001-1-00000001.jsonl"
    segment.parent.mkdir(parents=True)
    event = {"type": "workflow", "event": "begin", "id": "r", "time": 1.0, "workflow": "w"}
    segment.write_bytes(json.dumps(event).encode() + b"\n" + b'{"type": "ta')
    assert main(["replay", "--to", f"file:{sink}", str(tmp_path / "spool")]) == 0
    assert not segment.exists()
