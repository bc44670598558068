"""A durable local ingest queue: accepted batches reach the disk before the client hears 202.

Shared by ``provkg serve`` (``POST /v1/events``) and the MQTT listener; the folder's files
(segments of records, the cursor, the dead-letter folder) are :mod:`provkg.service.queue_files`.

Producers call :meth:`IngestQueue.submit`; one writer thread appends everything
pending in one ``write`` and one ``fsync`` (group commit), then resolves the
producers' futures, so concurrent clients share the cost of a disk flush. One
applier thread reads the records back in order and hands them to ``apply`` (the
store write) in chunks, then moves the cursor (while it is busy, at most every half
second; at once when it is idle or stopping). A crash loses nothing acknowledged:
on start every record after the cursor is applied again. A record applied twice
is harmless because ingest is idempotent (deterministic IRIs, insert-only), which
is what makes "at least once" here mean "exactly once" in the store.

Each start writes to a fresh segment, so a torn record (a crash mid-write, never
acknowledged) can only sit at the end of an older segment, where reading stops.

Content versus outage: a batch the worker cannot apply because of what it holds (the mapper
refuses it, or it does not decode or validate by the rule of ``POST /v1/events``) goes to the
dead-letter folder, logged and counted, and the queue moves on; a store error (or an
unexpected failure on a valid batch) is retried with backoff, never dropped, and reported
by :meth:`IngestQueue.stalled` while it lasts.
"""

from __future__ import annotations

import io
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from provkg.capture.spool import write_all
from provkg.errors import ProvkgError, StoreError
from provkg.service.queue_apply import RETRY_MAX_S, StopApplying, apply_with_retry
from provkg.service.queue_files import (
    RECORD_HEADER,
    SegmentReader,
    count_events,
    disk_takes_writes,
    fsync_dir,
    lock_folder,
    pack_record,
    read_cursor,
    segment_indexes,
    segment_path,
    write_cursor,
    write_dead_letter,
)

__all__ = ["IngestQueue", "QueueStats", "QueueUnavailable"]

log = logging.getLogger("provkg.queue")

_SEGMENT_BYTES = 64 * 1024 * 1024
#: while the disk refuses batches, how often the writer sees whether it has room again
_PROBE_EVERY_S = 5.0
_CURSOR_EVERY_S = 0.5


class QueueUnavailable(ProvkgError):
    """The queue takes no batch now: closed, its disk refused the write, or its folder is
    another process's (the API answers 503)."""

    code = "queue_unavailable"


@dataclass(frozen=True)
class QueueStats:
    """Counters since this process started; ``replayed_events``: found on disk at start."""

    accepted_batches: int
    accepted_events: int
    applied_batches: int
    applied_events: int
    rejected_batches: int
    replayed_events: int
    #: files in the dead-letter folder ``rejected/`` now (earlier runs' included)
    dead_letters: int = 0

    @property
    def backlog_events(self) -> int:
        """Events on disk not yet applied to the store."""
        return self.accepted_events + self.replayed_events - self.applied_events


class IngestQueue:
    """Durable FIFO between the API (or the MQTT listener) and the store.

    Args:
        directory: the queue folder (created if missing); one process owns it.
        apply: writes a list of payloads (decompressed wire-format batches) to the
            store; ``StoreError`` means "retry later", any other ``ProvkgError``
            means "this chunk is bad": the payloads it cannot apply go to the dead-letter
            folder ``rejected/`` one by one. Any other exception is looked into: payloads
            that fail :func:`provkg.events.parse_batch` are dead letters too, the rest is
            retried.
        fsync: flush to disk before acknowledging (turn off only for throwaway runs).
        apply_events: how many events the applier hands to ``apply`` at most at once.
        gather_events, gather_s: a backlog of fewer than ``gather_events`` waits until it has
            that many, or its oldest event has waited ``gather_s`` (not while someone waits
            in :meth:`wait_idle`): fewer, larger writes.
        settle: called before the cursor moves, so that ``apply`` may keep work in memory
            between chunks (a long ingest session): once it returns, everything applied so
            far is in the store. It raises like ``apply`` (then the cursor stays, and it
            is called again later).

    Use as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(self, directory: str | os.PathLike[str],
                 apply: Callable[[list[bytes]], None], *, fsync: bool = True,
                 apply_events: int = 20_000, segment_bytes: int = _SEGMENT_BYTES,
                 settle: Callable[[], None] | None = None, gather_events: int = 0,
                 gather_s: float = 0.0):
        self.directory = Path(directory)
        self._gather_events, self._gather_s = gather_events, gather_s
        self._unapplied_since = 0.0  # when the oldest event not yet applied became durable
        self._apply = apply
        self._settle = settle
        self._settled_pos = (0, 0)  # where the cursor points: the applier's work is in the store
        self._idle_waiters = 0  # wait_idle callers: the applier settles at once for them
        self._writing = 0  # batches the writer took and has not made durable yet
        self._fsync = fsync
        self._apply_events = max(1, apply_events)
        self._segment_bytes = segment_bytes
        self._cond = threading.Condition()
        self._pending: list[tuple[bytes, int, Future[int]]] = []
        self._closing = False
        self._closed = threading.Event()
        self._active_index = 0
        self._durable = (0, 0)  # (segment, offset) known to be on disk
        self._applied_pos = (0, 0)
        self._counts = {"accepted_batches": 0, "accepted_events": 0, "applied_batches": 0,
                        "applied_events": 0, "rejected_batches": 0, "replayed_events": 0,
                        "dead_letters": 0}
        self._failing: tuple[float, str] | None = None  # (since, problem) while retrying
        self._threads: list[threading.Thread] = []
        self._file: io.FileIO | None = None  # the active segment, open while started
        self._lock_file: io.TextIOWrapper | None = None  # holds the folder's flock while started
        self._error: BaseException | None = None
        #: (since, problem, bytes refused) while the queue's disk refuses batches (503 each)
        self._write_failed: tuple[float, str, int] | None = None

    # -- life cycle -----------------------------------------------------------

    def start(self) -> IngestQueue:
        """Open the folder, schedule replay of everything after the cursor, start the threads."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_file = lock_folder(self.directory)
        if self._lock_file is None:
            raise QueueUnavailable(
                f"the queue folder {self.directory} is used by another process (one owner per "
                "folder: run the MQTT listener inside the server with PROVKG_MQTT_URL, or give "
                "each process its own PROVKG_QUEUE_DIR)")
        self._counts["dead_letters"] = sum(
            1 for p in self.rejected_dir.glob("*") if p.is_file() and not p.name.startswith("."))
        cursor = read_cursor(self.directory)
        segments = segment_indexes(self.directory)
        for index in segments:
            if index < cursor[0]:
                segment_path(self.directory, index).unlink(missing_ok=True)  # applied earlier
        old = [i for i in segments if i >= cursor[0]]
        self._counts["replayed_events"] = replayed = count_events(self.directory, old, cursor)
        if replayed:
            log.info("replaying %d queued events from %s", replayed, self.directory)
        self._active_index = (max(segments) + 1) if segments else max(cursor[0], 1)
        self._open_segment(self._active_index)
        self._durable = (self._active_index, 0)
        self._applied_pos = cursor if old else (self._active_index, 0)
        self._settled_pos = self._applied_pos
        for target, name in ((self._write_loop, "provkg-queue-writer"),
                             (self._apply_loop, "provkg-queue-applier")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def close(self, *, timeout: float = 10.0) -> None:
        """Stop accepting, write what is pending, stop the applier after its current chunk
        (the rest stays on disk for the next start)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock
            self._lock_file = None
        self._closed.set()

    def __enter__(self) -> IngestQueue:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- producers ------------------------------------------------------------

    def submit(self, payload: bytes, *, events: int) -> Future[int]:
        """Queue one batch; the future resolves (to ``events``) once it is on disk.

        Raises:
            QueueUnavailable: the queue is closed or its disk failed.
        """
        future: Future[int] = Future()
        with self._cond:
            if self._closing or self._error is not None:
                raise QueueUnavailable("the ingest queue is not accepting batches "
                                       f"({'closed' if self._closing else self._error})")
            self._pending.append((payload, events, future))
            self._cond.notify_all()
        return future

    def put(self, payload: bytes, *, events: int, timeout: float | None = 30.0) -> int:
        """Blocking :meth:`submit`: returns once the batch is durable."""
        return self.submit(payload, events=events).result(timeout)

    # -- observation ----------------------------------------------------------

    def stats(self) -> QueueStats:
        with self._cond:
            return QueueStats(**self._counts)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until everything accepted (and replayed) has been applied and settled."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._idle_waiters += 1
            self._cond.notify_all()
            try:
                while (self._applied_pos < self._durable or self._pending or self._writing
                       or self._settle is not None and self._settled_pos != self._applied_pos):
                    left = deadline - time.monotonic()
                    if left <= 0 or self._error is not None:
                        return False
                    self._cond.wait(min(left, 0.05))
            finally:
                self._idle_waiters -= 1
        return True

    @property
    def healthy(self) -> bool:
        return self._error is None and all(t.is_alive() for t in self._threads)

    @property
    def rejected_dir(self) -> Path:
        """The dead-letter folder: one file per batch that could not be applied."""
        return self.directory / "rejected"

    def stalled(self) -> tuple[float, str] | None:
        """``(seconds, problem)`` while the applier has been retrying the same chunk (a store
        outage, say), else None."""
        with self._cond:
            failing = self._failing
        return None if failing is None else (time.monotonic() - failing[0], failing[1])

    def refusing(self) -> tuple[float, str] | None:
        """``(seconds, problem)`` since the queue's disk refused the last batch written (each
        such batch was refused, 503), until one is written again; else None."""
        with self._cond:
            failed = self._write_failed
        return None if failed is None else (time.monotonic() - failed[0], failed[1])

    # -- the writer -------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    if self._write_failed is None:
                        self._cond.wait()
                        continue
                    # the disk refused the last batch: see now and then whether it has room
                    # again, so health says ready without waiting for a batch (a readiness
                    # probe that says not ready keeps traffic away, so none would come)
                    self._cond.wait(_PROBE_EVERY_S)
                    if not self._pending and not self._closing and self._write_failed \
                            and disk_takes_writes(self.directory, self._write_failed[2]):
                        self._write_failed = None
                pending, self._pending = self._pending, []
                self._writing = len(pending)  # taken, not yet durable: not idle
                if not pending and self._closing:
                    return
            try:
                self._append([pack_record(p, n) for p, n, _ in pending])
            except (OSError, ValueError) as exc:  # ValueError: a file closed under us
                # disk full, I/O error: these batches are refused (503), not acknowledged, and
                # the next ones are tried again, so the queue takes batches once the disk is
                # fine; the writer thread goes on (had it ended, every later POST would get
                # 503 until a restart)
                log.error("ingest queue cannot write to %s: %s", self.directory, exc)
                with self._cond:
                    size = sum(len(p) + RECORD_HEADER.size for p, _, _ in pending)
                    self._write_failed = (time.monotonic(), str(exc), size)
                    self._writing = 0
                for _, _, future in pending:
                    future.set_exception(QueueUnavailable(f"the ingest queue cannot write: {exc}"))
                continue
            with self._cond:
                self._write_failed = None
                self._writing = 0
                self._counts["accepted_batches"] += len(pending)
                self._counts["accepted_events"] += sum(n for _, n, _ in pending)
                self._cond.notify_all()
            for _, n, future in pending:
                future.set_result(n)

    def _append(self, records: list[bytes]) -> None:
        data = b"".join(records)
        index, offset = self._durable
        if offset and offset + len(data) > self._segment_bytes:
            self._open_segment(index + 1)
            index, offset = index + 1, 0
            with self._cond:  # the previous segment is complete: an empty new one is durable
                self._active_index, self._durable = index, (index, 0)
        assert self._file is not None
        try:
            write_all(self._file, data)  # an unbuffered write may take part of it (disk filling)
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError:
            # nothing of these records may stay: a part would be read as a torn record, and
            # the records after it (once the disk is fine again) never be applied: a batch
            # partly written on a full disk would be acknowledged and lost
            try:
                os.ftruncate(self._file.fileno(), offset)
            except OSError as exc:
                log.error("could not cut the ingest queue's segment back to %d bytes: %s", offset, exc)
            raise
        with self._cond:
            if self._applied_pos >= self._durable:
                self._unapplied_since = time.monotonic()
            self._active_index = index
            self._durable = (index, offset + len(data))

    def _open_segment(self, index: int) -> None:
        # the new file first: if it cannot be made (no inode, too many open files) the current
        # one stays open and takes the next batches (closed first, the writer thread would
        # have no file for its next write)
        opened = open(segment_path(self.directory, index), "ab", buffering=0)
        if self._file is not None:
            self._file.close()
        self._file = opened
        if self._fsync:  # the new file's name must survive a crash too
            fsync_dir(self.directory)

    # -- the applier ------------------------------------------------------------

    def _apply_loop(self) -> None:
        reader = SegmentReader(self.directory, lambda: segment_indexes(self.directory))
        saved = self._applied_pos  # where the cursor on disk points
        saved_at = time.monotonic()

        cursor_delay = 0.1

        def save(pos: tuple[int, int]) -> None:
            nonlocal saved, saved_at, cursor_delay
            if self._settle is not None:
                try:
                    self._settle()
                except Exception as exc:  # as an apply's error: the cursor waits, nothing is lost
                    log.warning("could not settle the applied batches (%s); retrying in %.1f s",
                                exc, cursor_delay)
                    time.sleep(cursor_delay)
                    cursor_delay = min(cursor_delay * 2, RETRY_MAX_S)
                    return
                with self._cond:
                    self._settled_pos = pos
                    self._cond.notify_all()
            try:
                self._write_cursor(pos)
            except OSError as exc:
                # the cursor only says how far the store has got: one that lags means some
                # chunks applied again after a restart (harmless), so the applier goes on
                # and tries later: one failed write on a full disk must not stop it for
                # good while POST /v1/events still says 202
                log.warning("could not move the ingest queue's cursor (%s); retrying in %.1f s",
                            exc, cursor_delay)
                time.sleep(cursor_delay)
                cursor_delay = min(cursor_delay * 2, RETRY_MAX_S)
                return
            cursor_delay = 0.1
            if pos[0] != saved[0]:
                reader.drop_segments_before(pos[0])
            saved, saved_at = pos, time.monotonic()

        while True:
            with self._cond:
                while (self._applied_pos >= self._durable and not self._closing
                       and self._applied_pos == saved):
                    self._cond.wait()
                # idle with work not settled: more may come within the cursor's interval
                # (settling costs per parent still running, not per event), unless someone waits
                while (self._applied_pos >= self._durable and not self._closing
                       and self._settle is not None and not self._idle_waiters
                       and time.monotonic() - saved_at < _CURSOR_EVERY_S):
                    self._cond.wait(_CURSOR_EVERY_S - (time.monotonic() - saved_at))
                # a small backlog waits a moment for more: one large write costs the store
                # far less per triple than many small ones
                while (self._applied_pos < self._durable and not self._closing
                       and not self._idle_waiters and self._backlog() < self._gather_events
                       and (left := self._gather_s - (time.monotonic() - self._unapplied_since)) > 0):
                    self._cond.wait(left)
                closing = self._closing
                pos, durable = self._applied_pos, self._durable
            if closing or pos >= durable:  # idle or stopping: the cursor catches up
                if pos != saved:
                    save(pos)
                if closing:
                    return  # what is left stays on disk and is replayed on the next start
                continue
            read_at = time.monotonic()
            chunk, events, end = reader.read_chunk(pos, durable, max_events=self._apply_events)
            if chunk:
                try:
                    self._apply_with_retry(chunk)
                except StopApplying:
                    if pos != saved:
                        save(pos)
                    return
            with self._cond:
                self._counts["applied_batches"] += len(chunk)
                self._counts["applied_events"] += events
                self._applied_pos = end
                self._unapplied_since = read_at  # what is left became durable after the read
                self._cond.notify_all()
            # while busy, the cursor (an fsync) moves at most every _CURSOR_EVERY_S: after
            # a crash a lagging cursor only means re-applying a few chunks, which is harmless
            if end[0] != saved[0] or time.monotonic() - saved_at >= _CURSOR_EVERY_S:
                save(end)

    def _apply_with_retry(self, chunk: list[bytes]) -> None:
        apply_with_retry(chunk, apply=self._apply, dead_letter=self.dead_letter,
                         closing=lambda: self._closing, failing=self._set_failing,
                         outages=(StoreError, QueueUnavailable))

    def _set_failing(self, problem: str | None) -> None:
        with self._cond:
            if problem is None:
                self._failing = None
            else:
                self._failing = (self._failing[0] if self._failing else time.monotonic(), problem)

    def dead_letter(self, payload: bytes, reason: str) -> None:
        """Set aside a batch the applier cannot apply because of its content, and say so."""
        kept = self.reject(payload, reason=reason)
        log.error("ingest queue: a queued batch cannot be applied because of its content; moved "
                  "to %s (not retried; later batches go on): %s", kept, reason)

    def reject(self, payload: bytes, *, reason: str = "", once: str | None = None) -> Path | None:
        """Set aside a payload that cannot be ingested: a file in the dead-letter folder
        ``rejected/`` (fsync'd) and a line in ``rejected.log`` naming it and ``reason``.
        ``once``: a name for a payload that may come again (an MQTT retained message, sent
        on every subscribe): set aside under it the first time only.

        Returns:
            the file the payload was written to; None when ``once`` was set aside before.
        """
        with self._cond:  # the applier rejects too
            path = write_dead_letter(self.directory, payload, reason=reason,
                                     now=datetime.now(UTC), once=once, fsync=self._fsync)
            if path is None:
                return None
            self._counts["rejected_batches"] += 1
            self._counts["dead_letters"] += 1
        return path

    def _backlog(self) -> int:  # under self._cond
        return QueueStats(**self._counts).backlog_events

    def _write_cursor(self, pos: tuple[int, int]) -> None:  # a method: the disk-failure tests wrap it
        write_cursor(self.directory, pos, fsync=self._fsync)
