"""The asynchronous delivery core: a bounded queue, one background thread, batches, the spool.

The caller's thread appends a plain event dict to a deque (no lock, no serialization, no I/O).
The background thread groups events (``batch_size`` events, or whatever is older than
``linger`` seconds; up to ``max_batch`` per batch while a backlog is being caught up), expands
captured values into wire-format value dicts, serializes each event once (``encoding``), and
hands the batch to the sink: the encoded lines to the built-in sinks (``send_lines``), the event
dicts to any other sink. A batch the sink cannot take goes to the disk spool as those same bytes
and is re-sent, in order, when the sink answers again (exponential backoff). A batch the
receiver refuses as too large (HTTP 413) or for what some of its events hold (HTTP 422 / 400) is
sent in halves, down to single events: only an event refused on its own is kept in
``rejected/``. If ``close`` gives up waiting, whatever the thread still holds (the parts of a
batch being split included) is spooled from the caller's thread. A full queue spills
its oldest sixteenth to the spool from the caller's thread: the caller never waits for the network and
memory never grows without limit.

In a process that does not own the run (a forked child, a worker that received the workflow) the
process may leave through ``os._exit`` (multiprocessing does) or be killed (``Pool.terminate``)
right after a task, so there the emitter is *durable*: ``emit`` puts each event in the OS before
it returns -- one unbuffered append to the file sink's segment (a few microseconds), or, for a
network or custom sink, one append to the spool, which the background thread (started on first
use) re-sends. Nothing waits for the network there either.

This module is the caller's half (queue, spill, flush, close); the background thread's half is
:mod:`provkg.capture.delivery`.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from typing import Any

from provkg.capture.delivery import Delivery, as_lines
from provkg.capture.encoding import encode_event, encode_events
from provkg.capture.report import logger, report_once
from provkg.capture.sink import Sink
from provkg.capture.spool import Spool

__all__ = ["Emitter", "close_all", "forget_inherited"]

_open: weakref.WeakSet[Emitter] = weakref.WeakSet()


class Emitter(Delivery):
    """Delivers the events of one workflow run to one sink."""

    def __init__(self, sink: Sink, spool: Spool, *, batch_size: int = 50, linger: float = 1.0,
                 max_queue: int = 20_000, flush_timeout: float = 5.0,
                 max_batch: int = 1000, run_id: str | None = None, durable: bool = False) -> None:
        self.durable = durable
        if durable:  # a sink that can take each event at once, without buffering it
            write_through = getattr(sink, "write_through", None)
            if callable(write_through):
                try:
                    sink = write_through()
                except Exception as exc:
                    report_once(("write-through", type(exc)), f"cannot write through "
                                f"{type(sink).__name__}: {exc!r}; events are spooled")
        self.sink = sink
        self.spool = spool
        self.run_id = run_id if run_id is not None else spool.run_id
        self.batch_size = max(1, batch_size)
        self.linger = linger
        self.max_queue = max(1, max_queue)
        self.flush_timeout = flush_timeout
        self.max_batch = max(self.batch_size, max_batch)
        self.sent_events = 0
        self.sent_batches = 0
        # built-in sinks take the encoded lines: no second serialization, none for spooled bytes
        send_lines = getattr(sink, "send_lines", None)
        self._send_lines = send_lines if callable(send_lines) else None
        self._queue: deque[dict[str, Any]] = deque()
        #: monotonic time the queue last went from empty to not empty (``linger``'s clock)
        self._oldest_at = 0.0
        self._overflow_lock = threading.RLock()
        self._wake = threading.Event()
        self._closing = False
        self._closed = False
        self._final_attempt = False
        self._abandoned = False  # close() gave up waiting: the caller's thread spooled the rest
        self._flushing = 0
        # what the delivery thread holds, not in the queue and not delivered: the parts of the
        # batch being sent (lines or event dicts), the next one to send last; replaced, never
        # changed in place, so that close() always reads a whole list
        self._inflight: list[list[Any]] | None = None
        self._replaying = False  # ... and it comes from a spool segment (which still has it)
        # taking a batch off the queue and marking it in flight is one step for close()
        self._handoff = threading.RLock()
        self._retry_at = 0.0
        self._backoff = 0.0
        self._thread: threading.Thread | None = None
        self._direct = None
        if durable:
            self._durable_lock = threading.RLock()
            # file sinks take each event directly; others go through the spool
            writes_through = callable(getattr(sink, "write_through", None))
            self._direct = self._send_lines if writes_through else None
            self.emit = self._emit_durable  # type: ignore[method-assign]
        else:
            self._start_thread()
        _open.add(self)

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"provkg-capture-{self.spool.run_id[:12]}")
            self._thread.start()

    def child(self, sink: Sink) -> Emitter:
        """A durable emitter with the same settings for ``sink``, in another process (see
        the module docstring); this one's queue, thread and spool stay the parent's."""
        spool = Spool(self.spool.root, self.spool.directory.name, max_bytes=self.spool.max_bytes)
        return Emitter(sink, spool, batch_size=self.batch_size, linger=self.linger,
                       max_queue=self.max_queue, flush_timeout=self.flush_timeout,
                       max_batch=self.max_batch, run_id=self.run_id, durable=True)

    # -- caller's thread ----------------------------------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        """Queue one event; spill to the spool when the queue is full. Never blocks on I/O
        except that spill, never raises."""
        if self._closed:
            self._late(event)
            return
        queue = self._queue
        if len(queue) < self.max_queue:
            if not queue:  # a race with the sender only makes this older: sent sooner, not later
                self._oldest_at = time.monotonic()
            queue.append(event)
            return
        self._spill(event)

    def _late(self, event: dict[str, Any]) -> None:
        """An event recorded after ``close`` (a task begun after its workflow ended): no
        thread delivers it any more, so it goes to the spool for ``provkg replay``."""
        try:
            line = encode_event(event)
            if line is not None and self.spool.append_lines([line]):
                self.spool.release()
                report_once(("late", str(self.spool.directory)), f"an event ({event.get('type')} "
                            f"{event.get('event')} {event.get('id')!r}) was recorded after its "
                            f"workflow ended; it is kept in {self.spool.directory}: re-send it "
                            f"with `provkg replay {self.spool.root} --to URL`")
        except Exception as exc:
            report_once(("late", type(exc)), f"recording a late event failed: {exc!r}")

    def _emit_durable(self, event: dict[str, Any]) -> None:
        """``emit`` in a process that may leave without warning: the event is in the OS (the
        file sink's segment, else the spool) when this returns."""
        try:
            line = encode_event(event)
            if line is None:
                return
            with self._durable_lock:
                if self._direct is not None and not self.spool.pending and self._retry_at == 0.0:
                    try:
                        self._direct([line], run_id=self.run_id)
                    except Exception as exc:
                        self._failed(exc)
                    else:
                        self.sent_events += 1
                        return
                if self.spool.append_lines([line]) and not self._closed:
                    self._start_thread()  # re-sends the spool
                    self._wake.set()
        except Exception as exc:
            report_once(("emit-durable", type(exc)), f"recording an event failed: {exc!r}")

    def _spill(self, event: dict[str, Any]) -> None:
        """The queue is full (the sink or the delivery thread is behind): write its oldest
        sixteenth to the spool, serialized once, and keep the newest events in memory. A small
        part at a time: the caller pays for serializing it, and half the default queue (10,000
        events) stalled it for 100-400 ms; a sixteenth costs it a few ms, more often."""
        try:
            with self._overflow_lock:
                queue = self._queue
                if len(queue) >= self.max_queue:
                    chunk = [queue.popleft() for _ in range(max(1, min(len(queue), self.max_queue // 16)))]
                    self.spool.append_lines(encode_events(chunk))
                    report_once(("overflow", self.spool.root), f"the capture queue is full "
                                f"({self.max_queue} events): spilling to {self.spool.directory}")
                queue.append(event)
        except Exception as exc:
            report_once(("spill", type(exc)), f"spilling to the spool failed: {exc!r}")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` s, default ``flush_timeout``) until every queued event has
        been delivered or spooled; True when nothing is left in memory."""
        deadline = time.monotonic() + (self.flush_timeout if timeout is None else timeout)
        self._flushing += 1
        try:
            self._wake.set()
            while time.monotonic() < deadline:
                thread = self._thread
                if not self._queue and self._inflight is None and (
                        not self.spool.pending or time.monotonic() < self._retry_at
                        or thread is None or not thread.is_alive()):
                    return True
                time.sleep(0.002)
            return False
        finally:
            self._flushing -= 1

    def close(self, timeout: float | None = None, *, adopt: bool = False) -> None:
        """Deliver what is queued within ``timeout`` s, spool the rest, stop the thread.

        Safe to call again while a first call waits (a SIGTERM handler does): the second call
        waits too, and what is left is spooled once. ``adopt``: also re-send the segments of
        this run that exited processes left in the spool (the run's owner does)."""
        if self._closed:
            return
        timeout = self.flush_timeout if timeout is None else timeout
        if adopt and not self._closing:
            try:
                if self.spool.adopt_orphans():
                    self._start_thread()
            except Exception as exc:
                report_once(("adopt", type(exc)), f"looking for spooled events of exited "
                            f"processes failed: {exc!r}")
        self._closing = True
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        if self._closed:  # another call finished meanwhile
            return
        self._closed = True
        _open.discard(self)
        if thread is None:  # durable, nothing spooled: the sink was used from the caller's thread
            try:
                self.sink.close()
            except Exception as exc:
                report_once(("sink-close", type(exc)), f"closing the sink raised {exc!r}")
        elif thread.is_alive():  # the sink is stuck: keep what it holds and what is queued
            with self._handoff:  # the thread takes nothing more off the queue, spools nothing
                self._abandoned = True
                # a chunk re-sent from a spool segment is still in that segment: not spooled twice
                inflight = [] if self._replaying else _flat(self._inflight or [])
            leftover = _drain(self._queue)
            lines = as_lines(inflight) + encode_events(leftover)
            dropped = self.spool.dropped_events
            if lines:
                self.spool.append_lines(lines)
            lost = self.spool.dropped_events - dropped
            kept = f"{len(lines) - lost} events spooled in {self.spool.directory}"
            report_once(("close-timeout", self.spool.directory), f"the sink did not finish within "
                        f"{timeout} s; " + (f"{lost} events could not be spooled and are lost"
                                            if lost == len(lines) and lost else
                                            f"{kept}, {lost} could not be and are lost" if lost
                                            else kept))
        leftover = _drain(self._queue)  # emitted while the thread was leaving
        if leftover:
            self.spool.append_lines(encode_events(leftover))
        self.spool.release()
        self._report_at_close()
        if adopt:
            self._report_others()
            self.spool.remove_if_empty()

    def _report_others(self) -> None:
        """The owner ends the run while other processes of it hold spooled events it has not
        taken over (a worker still running, or dying of the same SIGTERM): they stay for
        ``provkg replay``, which is said."""
        try:
            held = self.spool.others_segments()
        except Exception:  # noqa: BLE001 - a report only
            return
        if held:
            logger.warning("provkg.capture: %d spool segment(s) of this run's other processes "
                           "(running or ending as the run ended) are in %s; what is left there "
                           "once they have exited, re-send with `provkg replay %s --to URL`", held,
                           self.spool.directory, self.spool.root)

    def _report_at_close(self) -> None:
        """What did not reach the receiver: waiting in the spool, refused, dropped."""
        spool = self.spool
        if spool.pending:
            logger.warning("provkg.capture: %d events wait in %s; re-send them with "
                           "`provkg replay %s --to URL`", spool.pending_events,
                           spool.directory, spool.root)
        if spool.rejected_events:
            logger.warning("provkg.capture: the receiver refused %d events; they are kept in %s",
                           spool.rejected_events, spool.root / "rejected")
        if spool.dropped_events:
            logger.warning("provkg.capture: %d events were lost: the spool %s could not take "
                           "them (%s)", spool.dropped_events, spool.directory,
                           spool.drop_reason or "full or not writable")


def _drain(queue: deque[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    while True:
        try:
            out.append(queue.popleft())
        except IndexError:
            return out


def _flat(parts: list[list[Any]]) -> list[Any]:
    """The items of a stack of parts (the next to send last), in their order."""
    return [item for part in reversed(parts) for item in part]


def close_all() -> None:
    """Give every open emitter a bounded time to deliver; what is left is spooled."""
    for emitter in list(_open):
        try:
            emitter.close()
        except Exception as exc:  # pragma: no cover - exit path
            report_once(("atexit", type(exc)), f"flushing at exit failed: {exc!r}")


atexit.register(close_all)


def forget_inherited() -> list[Emitter]:
    """In a forked child: the parent's emitters (their threads do not exist here), no longer
    flushed at this process's exit. The caller replaces those it needs (``Emitter.child``)."""
    global _open
    inherited = list(_open)
    _open = weakref.WeakSet()
    return inherited
