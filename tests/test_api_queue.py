"""The durable ingest queue: acknowledged means on disk; a crash loses nothing acknowledged."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from provkg.errors import BadEvent, StoreError
from provkg.service.queue import IngestQueue, QueueUnavailable


def collect() -> tuple[list[bytes], object]:
    got: list[bytes] = []
    return got, got.extend


def test_batches_are_applied_in_order_and_counted(tmp_path: Path) -> None:
    got, apply = collect()
    with IngestQueue(tmp_path, apply, apply_events=7) as queue:
        futures = [queue.submit(b"batch-%d" % i, events=2) for i in range(500)]
        assert [f.result(60) for f in futures] == [2] * 500
        assert queue.wait_idle(60)
        stats = queue.stats()
    assert got == [b"batch-%d" % i for i in range(500)]
    assert (stats.accepted_events, stats.applied_events, stats.backlog_events) == (1000, 1000, 0)


def test_a_small_backlog_is_gathered_into_one_apply_until_it_is_large_enough(tmp_path: Path) -> None:
    calls: list[list[bytes]] = []
    applied = threading.Event()

    def apply(payloads: list[bytes]) -> None:
        calls.append(list(payloads))
        if len(calls[-1]) == 3:
            applied.set()

    # gather_s far beyond the wait below: only the count can release the three batches
    with IngestQueue(tmp_path, apply, gather_events=30, gather_s=600) as queue:
        for i in range(2):
            queue.put(b"small-%d" % i, events=10)
        assert not applied.wait(0.3) and calls == []  # 20 events: still gathering
        queue.put(b"small-2", events=10)  # 30: applied at once, as one chunk
        assert applied.wait(60), calls
        assert calls == [[b"small-0", b"small-1", b"small-2"]]
        queue.put(b"alone", events=1)
        assert queue.wait_idle(60)  # a waiter is not kept waiting by the gathering
    assert calls[-1] == [b"alone"]


def test_a_gathered_backlog_is_applied_once_its_oldest_event_waited_long_enough(tmp_path: Path) -> None:
    got, apply = collect()
    with IngestQueue(tmp_path, apply, gather_events=10**9, gather_s=0.2) as queue:
        queue.put(b"lonely", events=1)
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    assert got == [b"lonely"]


def test_concurrent_producers_share_fsyncs_and_lose_nothing(tmp_path: Path) -> None:
    got, apply = collect()
    with IngestQueue(tmp_path, apply) as queue:
        def produce(worker: int) -> None:
            for i in range(200):
                queue.put(b"%d-%d" % (worker, i), events=1)

        threads = [threading.Thread(target=produce, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert queue.wait_idle(60)
    assert sorted(got) == sorted(b"%d-%d" % (w, i) for w in range(8) for i in range(200))


_CRASHER = textwrap.dedent("""
    import os, signal, sys, time
    from provkg.service.queue import IngestQueue
    # the store never accepts: everything stays in the queue, then the process dies hard
    queue = IngestQueue(sys.argv[1], lambda payloads: time.sleep(60)).start()
    for i in range(int(sys.argv[2])):
        queue.put(b"event-%d" % i, events=1)
    print("acknowledged", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_kill_9_after_acknowledgement_then_replay(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _CRASHER, str(tmp_path), "300"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -9 and "acknowledged" in done.stdout
    got, apply = collect()
    with IngestQueue(tmp_path, apply) as queue:
        assert queue.wait_idle(60)
        assert queue.stats().replayed_events == 300
    assert got == [b"event-%d" % i for i in range(300)]
    # applied: a second start replays nothing and the old segment is gone
    again, apply = collect()
    with IngestQueue(tmp_path, apply) as queue:
        assert queue.wait_idle(60)
    assert again == []
    assert len(list(tmp_path.glob("*.seg"))) == 1


def test_torn_tail_is_skipped_and_later_segments_still_replay(tmp_path: Path) -> None:
    got, apply = collect()
    blocked = threading.Event()
    with IngestQueue(tmp_path, lambda p: blocked.wait(60)) as queue:
        for i in range(10):
            queue.put(b"a%d" % i, events=1)
        segment = sorted(tmp_path.glob("*.seg"))[-1]
        blocked.set()
    # a crash in the middle of an (unacknowledged) append leaves half a record
    (tmp_path / "cursor").unlink(missing_ok=True)  # replay everything, torn tail included
    with open(segment, "ab") as f:
        f.write(b"PKQ1\xff\xff\x00\x00garbage")
    with IngestQueue(tmp_path, apply) as queue:
        queue.put(b"b0", events=1)
        assert queue.wait_idle(60)
    assert got == [b"a%d" % i for i in range(10)] + [b"b0"]


def test_store_errors_are_retried_not_dropped(tmp_path: Path) -> None:
    got: list[bytes] = []
    failures = iter(range(3))

    def flaky(payloads: list[bytes]) -> None:
        if next(failures, None) is not None:
            raise StoreError("store is down")
        got.extend(payloads)

    with IngestQueue(tmp_path, flaky) as queue:
        queue.put(b"x", events=1)
        assert queue.wait_idle(60)
    assert got == [b"x"]


def test_a_cursor_that_cannot_be_written_does_not_stop_the_applier(tmp_path: Path, monkeypatch) -> None:
    """Found by black-box testing: one failed cursor write (a full or read-only disk) ended the
    applier thread; POST /v1/events still answered 202 and nothing more reached the store
    until a restart. The disk itself is what fails here; the queue is real."""
    got, apply = collect()
    failures = iter(range(3))
    write_cursor = IngestQueue._write_cursor

    def failing(self, pos):
        if next(failures, None) is not None:
            raise OSError(28, "No space left on device")
        write_cursor(self, pos)

    monkeypatch.setattr(IngestQueue, "_write_cursor", failing)
    with IngestQueue(tmp_path, apply) as queue:
        queue.put(b"first", events=1)
        assert queue.wait_idle(60)
        queue.put(b"second", events=1)  # after the failures: the applier is still there
        assert queue.wait_idle(60)
        assert queue.stats().applied_events == 2
        deadline = time.monotonic() + 60  # the cursor is tried again until it is written
        while not (tmp_path / "cursor").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "cursor").exists()
    assert got == [b"first", b"second"]


class _FillingDisk:
    """The queue's segment file on a disk that fills up: while ``full``, a write takes a few
    bytes and the next one fails, as the kernel does on ENOSPC."""

    def __init__(self, file) -> None:
        self.file, self.full = file, False

    def write(self, data) -> int:
        if self.full:
            if len(data) > 7:
                return self.file.write(bytes(data[:7]))
            raise OSError(28, "No space left on device")
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_a_full_queue_disk_refuses_batches_until_it_has_room_and_loses_nothing(tmp_path: Path, monkeypatch) -> None:
    """Found by black-box testing: a batch partly written on a full disk got 202 and was lost
    (its torn bytes hid every later record), and the writer thread ended, so every later
    batch got 503 until a restart."""
    got, apply = collect()
    with IngestQueue(tmp_path, apply) as queue:
        queue.put(b"first", events=1)
        disk = queue._file = _FillingDisk(queue._file)
        disk.full = True
        with pytest.raises(QueueUnavailable, match="No space left"):
            queue.put(b"second" * 100, events=1)
        assert queue.refusing() is not None
        disk.full = False  # space freed: the queue takes batches again, no restart
        # and says so without a batch first (a readiness probe keeps traffic away meanwhile)
        monkeypatch.setattr("provkg.service.queue._PROBE_EVERY_S", 0.05)
        with queue._cond:
            queue._cond.notify_all()
        deadline = time.monotonic() + 60
        while queue.refusing() is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert queue.refusing() is None
        queue.put(b"third", events=1)
        assert queue.wait_idle(60)
    assert got == [b"first", b"third"]
    replayed, apply = collect()
    with IngestQueue(tmp_path, apply) as queue:  # nothing torn, nothing lost on disk either
        assert queue.wait_idle(60)
        assert queue.stats().replayed_events == 0


def test_a_batch_the_mapper_refuses_goes_to_rejected_log_and_the_rest_applies(tmp_path: Path) -> None:
    got: list[bytes] = []

    def picky(payloads: list[bytes]) -> None:
        if b"bad" in payloads:
            raise BadEvent("events[0].id: bad")
        got.extend(payloads)

    with IngestQueue(tmp_path, picky) as queue:
        for payload in (b"good-1", b"bad", b"good-2"):
            queue.submit(payload, events=1)
        assert queue.wait_idle(60)
        assert queue.stats().rejected_batches == 1
    assert got == [b"good-1", b"good-2"]
    assert b"bad" in (tmp_path / "rejected.log").read_bytes()


def test_one_owner_per_folder(tmp_path: Path) -> None:
    with IngestQueue(tmp_path, lambda p: None):
        with pytest.raises(QueueUnavailable, match="used by another process"):
            IngestQueue(tmp_path, lambda p: None).start()


def test_closed_queue_refuses(tmp_path: Path) -> None:
    queue = IngestQueue(tmp_path, lambda p: None).start()
    queue.close()
    with pytest.raises(QueueUnavailable):
        queue.submit(b"late", events=1)
    assert os.path.exists(tmp_path / "cursor") or list(tmp_path.glob("*.seg"))


def test_a_segment_that_cannot_be_made_refuses_that_batch_only(tmp_path: Path) -> None:
    """Found by black-box testing: when the next segment could not be created (no inode
    left), the current one had been closed first, the writer thread died on the next write,
    and every later POST hung until a restart."""
    got, apply = collect()
    with IngestQueue(tmp_path, apply, segment_bytes=1000) as queue:
        queue.put(b"a" * 600, events=1)
        (tmp_path / "000000000002.seg").mkdir()  # the next segment's name is taken: open fails
        with pytest.raises(QueueUnavailable):
            queue.put(b"b" * 600, events=1)  # needs the next segment
        queue.put(b"c" * 10, events=1)  # fits the current one, still open
        (tmp_path / "000000000002.seg").rmdir()
        queue.put(b"d" * 600, events=1)  # the next segment can be made now
        assert queue.wait_idle(60)
    assert got == [b"a" * 600, b"c" * 10, b"d" * 600]


def test_a_spec_registry_on_a_full_disk_says_the_queue_is_unavailable(tmp_path: Path, monkeypatch) -> None:
    # found by black-box testing: POST /v1/specs on a full queue disk answered 500 "internal"
    from provkg.api.specs import SpecRegistry
    from provkg.spec import parse_spec

    spec = parse_spec("workflow: w\nphase: learning\ntransformations: [{name: t, kind: training}]\n")
    registry = SpecRegistry(tmp_path)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("provkg.api.specs.os.replace", full)
    with pytest.raises(QueueUnavailable, match="spec registry .* cannot be written: No space left"):
        registry.put(spec, "{}")
    assert registry.specs() == {}  # nothing half saved
