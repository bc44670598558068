"""The asynchronous delivery core: a bounded queue, one background thread, batches, the spool.

The caller's thread appends a plain event dict to a deque (no lock, no serialization, no I/O).
The background thread groups events (``batch_size`` events, or whatever is older than
``linger`` seconds; up to ``max_batch`` per batch while a backlog is being caught up), expands
captured values into wire-format value dicts, serializes each event once (``encoding``), and
hands the batch to the sink: the encoded lines to the built-in sinks (``send_lines``), the event
dicts to any other sink. A batch the sink cannot take goes to the disk spool as those same bytes
and is re-sent, in order, when the sink answers again (exponential backoff). A full queue spills
its older half to the spool from the caller's thread: the caller never waits for the network and
memory never grows without limit.

In a process that does not own the run (a forked child, a worker that received the workflow) the
process may leave through ``os._exit`` (multiprocessing does) or be killed (``Pool.terminate``)
right after a task, so there the emitter is *durable*: ``emit`` puts each event in the OS before
it returns -- one unbuffered append to the file sink's segment (a few microseconds), or, for a
network or custom sink, one append to the spool, which the background thread (started on first
use) re-sends. Nothing waits for the network there either.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from typing import Any

import orjson

from provkg.capture.encoding import encode_event, encode_events, expand_events
from provkg.capture.report import logger, report_once
from provkg.capture.sink import Sink, SinkRejected
from provkg.capture.spool import Spool

__all__ = ["Emitter"]

_MAX_BACKOFF = 30.0
_open: weakref.WeakSet[Emitter] = weakref.WeakSet()


class Emitter:
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
        self._overflow_lock = threading.RLock()
        self._wake = threading.Event()
        self._closing = False
        self._closed = False
        self._final_attempt = False
        self._abandoned = False  # close() gave up waiting: the caller's thread spooled the rest
        self._flushing = 0
        self._inflight: list[Any] | None = None  # the batch being sent (lines or event dicts)
        self._replaying = False  # ... and it comes from a spool segment
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
        """The queue is full (the sink or the delivery thread is behind): write its older half
        to the spool, serialized once, and keep the newest events in memory."""
        try:
            with self._overflow_lock:
                queue = self._queue
                if len(queue) >= self.max_queue:
                    chunk = [queue.popleft() for _ in range(max(1, min(len(queue), self.max_queue // 2)))]
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
            self._abandoned = True
            # a chunk re-sent from a spool segment is still in that segment: not spooled twice
            inflight = [] if self._replaying else (self._inflight or [])
            leftover = _drain(self._queue)
            lines = _as_lines(inflight) + encode_events(leftover)
            if lines:
                self.spool.append_lines(lines)
            report_once(("close-timeout", self.spool.directory), f"the sink did not finish within "
                        f"{timeout} s; {len(lines)} events spooled in {self.spool.directory}")
        leftover = _drain(self._queue)  # emitted while the thread was leaving
        if leftover:
            self.spool.append_lines(encode_events(leftover))
        self.spool.release()
        if self.spool.pending:
            logger.warning("provkg.capture: %d events wait in %s; re-send them with "
                           "`provkg replay %s --to URL`", self.spool.spooled_events,
                           self.spool.directory, self.spool.root)

    # -- background thread -------------------------------------------------------------

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
        if n < self.batch_size and not (self._closing or self._flushing) and \
                time.time() - queue[0]["time"] < self.linger:
            return False
        if self.spool.pending or time.monotonic() < self._retry_at:
            size = 10_000  # the sink is away: move the backlog to disk in big, cheap appends
        elif n < 4 * self.batch_size:
            size = self.batch_size
        else:
            size = self.max_batch  # a backlog (fast producer, slow sink): bigger requests catch up
        popleft = queue.popleft
        batch = [popleft() for _ in range(min(n, size))]
        self._deliver(batch)
        return True

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        if self.spool.pending or time.monotonic() < self._retry_at:
            self.spool.append_lines(encode_events(batch))  # keep order: older spooled events go first
        elif self._send_lines is not None:
            lines = encode_events(batch)
            if not self._send(lines, lines) and not self._abandoned:
                self.spool.append_lines(lines)
        else:
            expand_events(batch)
            if not self._send(batch, None) and not self._abandoned:
                self.spool.append_lines(encode_events(batch))

    def _send(self, batch: list[Any], lines: list[bytes] | None) -> bool:
        """Hand one batch (encoded ``lines``, or event dicts when ``lines`` is None) to the
        sink; spool it if the sink cannot take it. True when delivered."""
        self._inflight = batch
        split = False
        try:
            if lines is not None and self._send_lines is not None:
                self._send_lines(lines, run_id=self.run_id)
            else:
                self.sink.send(batch)
        except SinkRejected as exc:
            if exc.too_large and len(batch) > 1:
                split = True  # the batch is too big, not its events: send it in halves
            else:
                self._rejected(lines if lines is not None else _as_lines(batch), exc)
        except BaseException as exc:  # a custom sink's CancelledError is a failure like any other
            self._failed(exc)
            return False
        else:
            self._delivered(len(batch))
        finally:
            self._inflight = None
        if split:
            mid = len(batch) // 2
            if not self._send(batch[:mid], None if lines is None else lines[:mid]):
                return False  # the caller keeps the whole batch: re-sent events are harmless
            return self._send(batch[mid:], None if lines is None else lines[mid:])
        return True

    def _replay_oldest(self) -> None:
        segment = self.spool.oldest()
        if segment is None:
            return
        lines = self.spool.read_lines(segment)
        self._replaying = True
        try:
            self._replay_lines(segment, lines)
        finally:
            self._replaying = False

    def _replay_lines(self, segment: Any, lines: list[bytes]) -> None:
        for start in range(0, len(lines), self.max_batch):
            chunk = lines[start:start + self.max_batch]
            if self._send_lines is not None:
                delivered = self._send(chunk, chunk)
            else:
                delivered = self._send([orjson.loads(line) for line in chunk], None)
            if self._abandoned:
                # close() gave up on this thread and spooled what it held: the spool is now
                # the caller's (a `provkg replay` may be reading it); leave it as it is
                return
            if not delivered:
                if start:  # keep only what was not delivered
                    self.spool.done(segment, remaining_lines=lines[start:])
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
        report_once(("sink-down", type(self.sink), type(exc)), f"the sink {type(self.sink).__name__} "
                    f"did not take a batch ({exc!r}); spooling to {self.spool.directory} and retrying")

    def _rejected(self, lines: list[bytes], exc: Exception) -> None:
        path = self.spool.reject_lines(lines, str(exc))
        logger.error("provkg.capture: the receiver refused a batch of %d events: %s (kept in %s)",
                     len(lines), exc, path)


def _drain(queue: deque[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    while True:
        try:
            out.append(queue.popleft())
        except IndexError:
            return out


def _as_lines(batch: list[Any]) -> list[bytes]:
    """Encoded lines of a batch that may hold lines already or event dicts (copied first: a
    stuck sink's thread may still be reading them)."""
    if batch and type(batch[0]) is bytes:
        return list(batch)
    return encode_events([dict(event) for event in batch])


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
