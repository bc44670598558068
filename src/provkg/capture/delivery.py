"""The emitter's background thread: batches off the queue, to the sink, else to the spool.

:class:`Delivery` is the half of :class:`provkg.capture.emitter.Emitter` that runs on its
delivery thread (the module docstring of ``emitter`` tells the whole design); the attributes
below are set by ``Emitter.__init__``. The caller's thread touches none of this but
``_failed`` (a durable emitter's direct write) and reads ``_inflight`` at ``close``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from provkg.capture.encoding import encode_event, encode_events, expand_events, loads_exact
from provkg.capture.report import logger, report_once
from provkg.capture.sink import Sink, send_in_halves
from provkg.capture.spool import Spool

__all__ = ["Delivery", "as_lines"]

_MAX_BACKOFF = 30.0


class Delivery:
    """Delivers the queue of one run to its sink, on a background thread."""

    sink: Sink
    spool: Spool
    run_id: str
    batch_size: int
    linger: float
    max_batch: int
    durable: bool
    sent_events: int
    sent_batches: int
    _send_lines: Any  # the built-in sinks' send_lines(lines, run_id=...), else None
    _queue: deque[dict[str, Any]]
    _oldest_at: float
    _wake: threading.Event
    _closing: bool
    _flushing: int
    _final_attempt: bool
    _abandoned: bool
    _inflight: list[list[Any]] | None
    _replaying: bool
    _handoff: threading.RLock
    _retry_at: float
    _backoff: float

    def _run(self) -> None:
        poll = min(0.05, max(self.linger / 4, 0.001))
        while True:
            try:
                if self._step():
                    continue
                if self._closing:
                    break
                self._wake.wait(poll)
                self._wake.clear()
            except BaseException as exc:  # the delivery thread must never die (a sink may
                # raise CancelledError or SystemExit: it is the sink's failure, not the caller's)
                report_once(("loop", type(exc)), f"capture delivery error: {exc!r}")
                time.sleep(poll)
        try:
            self.sink.close()
        except BaseException as exc:
            report_once(("sink-close", type(exc)), f"closing the sink raised {exc!r}")

    def _step(self) -> bool:
        """Do one unit of work; False when there is nothing to do now."""
        if self._abandoned:
            return False
        queue = self._queue
        n = len(queue)
        sink_away = self._backoff > 0
        # spooled events are older than queued ones: they go first, except when closing while
        # the sink is away (then the queue goes to disk first, safe before the process exits)
        if self.spool.pending and not (self._closing and n and sink_away):
            if self.durable and not (self._closing or self._flushing) and \
                    not self.spool.ready(self.max_batch, self.linger):
                # a durable emitter's spool is its queue, safe on disk: send it in big batches
                # (at most ``linger`` s late), which keeps this thread off the caller's GIL
                return False
            if time.monotonic() >= self._retry_at:
                self._replay_oldest()
                return True
            if self._closing and not self._final_attempt:
                self._final_attempt = True  # everything is safe on disk: one last try before exit
                self._replay_oldest()
                return True
        if n == 0:
            return False
        # the age by the monotonic clock since the queue was last empty, not by the event's
        # own time: a wall clock stepped back (NTP on an edge device) would hold events for as
        # long as the step, unsent and unspooled
        if n < self.batch_size and not (self._closing or self._flushing) and \
                time.monotonic() - self._oldest_at < self.linger:
            return False
        if self.spool.pending or time.monotonic() < self._retry_at:
            size = 10_000  # the sink is away: move the backlog to disk in big, cheap appends
        elif n < 4 * self.batch_size:
            size = self.batch_size
        else:
            size = self.max_batch  # a backlog (fast producer, slow sink): bigger requests catch up
        popleft = queue.popleft
        with self._handoff:
            if self._abandoned:
                return False
            batch = [popleft() for _ in range(min(n, size))]
            self._inflight = [batch]
        try:
            self._deliver(batch)
        finally:
            self._inflight = None
        return True

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        """Send a batch taken off the queue (``_inflight`` holds it); spool what the sink did
        not take, unless close() gave up on this thread and spooled it itself."""
        if self.spool.pending or time.monotonic() < self._retry_at:
            lines = encode_events(batch)  # keep order: older spooled events go first
        elif self._send_lines is not None:
            lines = self._send(encode_events(batch))
        else:
            expand_events(batch)
            lines = as_lines(self._send(batch))
        if lines:
            with self._handoff:
                if not self._abandoned:
                    self.spool.append_lines(lines)

    def _send(self, batch: list[Any]) -> list[Any]:
        """Hand one batch (encoded lines for a built-in sink, event dicts for another) to the
        sink. A part the receiver refuses as too large, or for what some of its events hold, is
        sent in halves, down to single events: only an event refused on its own is set aside
        (``rejected/``). Returns what was not delivered (the sink is away), in order: the caller
        spools it."""
        def before(parts: list[list[Any]]) -> bool:
            self._inflight = parts.copy()  # what close() spools if it gives up on this thread
            return self._abandoned  # ... it did: what this thread holds is spooled already

        def deliver(part: list[Any]) -> None:
            if self._send_lines is not None:
                self._send_lines(part, run_id=self.run_id)
            else:
                self.sink.send(part)

        # a custom sink's CancelledError is a failure like any other
        unsent, failure = send_in_halves(
            batch, deliver, refused=self._refused_part,
            delivered=lambda part: self._delivered(len(part)), before=before,
            failures=BaseException, size=_size)
        if failure is not None:
            self._failed(failure)  # ``unsent`` stays in ``_inflight`` until the caller spooled it
        return unsent

    def _replay_oldest(self) -> None:
        segment = self.spool.oldest()
        if segment is None:
            return
        lines = self.spool.read_lines(segment)
        self._replaying = True
        try:
            self._replay_lines(segment, lines)
        finally:
            self._inflight = None
            self._replaying = False

    def _replay_lines(self, segment: Any, lines: list[bytes]) -> None:
        for start in range(0, len(lines), self.max_batch):
            chunk = lines[start:start + self.max_batch]
            if self._send_lines is not None:
                unsent = self._send(chunk)
            else:
                unsent = as_lines(self._send(_decoded(chunk, segment)))
            if self._abandoned:
                # close() gave up on this thread and spooled what it held: the spool is now
                # the caller's (a `provkg replay` may be reading it); leave it as it is
                return
            if unsent:  # keep only what was not delivered
                if start or len(unsent) < len(chunk):
                    self.spool.done(segment, remaining_lines=unsent + lines[start + len(chunk):])
                return
        self.spool.done(segment)

    def _delivered(self, n: int) -> None:
        self.sent_events += n
        self.sent_batches += 1
        if self._backoff:
            logger.info("provkg.capture: the sink answers again; re-sending the spool")
        self._backoff = 0.0
        self._retry_at = 0.0

    def _failed(self, exc: BaseException) -> None:
        self._backoff = min(_MAX_BACKOFF, max(0.5, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff
        # once per run and kind of failure: a notebook running many workflows hears of each
        # where it sends: an error such as a full disk (EFBIG) does not always name the file
        target = getattr(self.sink, "target", None)
        report_once(("sink-down", self.spool.directory, type(exc)), f"the sink {type(self.sink).__name__} "
                    f"{f'({target}) ' if target else ''}did not take a batch ({exc!r}); spooling to "
                    f"{self.spool.directory} and retrying")

    def _refused_part(self, part: list[Any], exc: Exception) -> None:
        """A part the receiver refused on its own: set aside, unless close() gave up on this
        thread and spooled it already (an event in both rejected/ and the spool would be
        replayed and refused again, and the counts said would not match the files)."""
        with self._handoff:
            if self._abandoned:
                return
            if self._inflight is not None:  # no longer this thread's to hand over at close
                self._inflight = [p for p in self._inflight if p is not part]
            self._rejected(as_lines(part), exc)

    def _rejected(self, lines: list[bytes], exc: Exception) -> None:
        path = self.spool.reject_lines(lines, str(exc))
        what = "an event" if len(lines) == 1 else f"a batch of {len(lines)} events"
        # once per reason: a receiver that refuses every event must not flood the log (the
        # total is in the warning at close)
        report_once(("rejected", str(exc)[:300]), f"the receiver refused {what}: {exc} (kept in "
                    f"{path if path is not None else 'no file: the spool is not writable'})",
                    level=logging.ERROR)


def _size(event: bytes | dict[str, Any]) -> int:
    if isinstance(event, (bytes, bytearray)):
        return len(event)
    line = encode_event(event)
    return len(line) if line is not None else 0


def _decoded(lines: list[bytes], segment: Any) -> list[dict[str, Any]]:
    """Spooled lines as event dicts for a sink that takes dicts; a line that is not JSON (a
    torn write) is skipped and logged."""
    events = []
    for line in lines:
        try:
            events.append(loads_exact(line))
        except ValueError:
            report_once(("spool-line", str(segment)), f"spool {segment}: a line is not JSON "
                        "(torn write?); skipped")
    return events


def as_lines(batch: list[Any]) -> list[bytes]:
    """Encoded lines of a batch that may hold lines already or event dicts (copied first: a
    stuck sink's thread may still be reading them)."""
    if batch and type(batch[0]) is bytes:
        return list(batch)
    return encode_events([dict(event) for event in batch])
