"""The disk spool: batches that could not be delivered yet, kept in order as JSONL segments.

Layout under the spool root (``PROVKG_SPOOL``, default ``./provkg-spool``)::

    <root>/<run id>/<time ns>-<pid>-<seq>.jsonl   pending events, one per line, oldest first
    <root>/rejected/<run id>-<time ns>.jsonl  events a receiver refused (4xx), for inspection
    <root>/rejected/<run id>-<time ns>.txt    ... and the receiver's message

Segments are plain JSONL, so ``provkg ingest DIR`` and ``provkg replay DIR --to URL`` read them
directly. The emitter spools events as the lines it already serialized and re-sends them as
read (``read_lines``): a spooled event is serialized once, whatever the detour. The spool is
bounded (``max_bytes``): a full spool keeps the oldest events of a batch that fit and drops the
rest, an unwritable one drops the batch; either is logged once (and the total dropped is in the
warning at the run's end): it never raises into user code.

Several processes may spool events of one run (a forked child, a worker that received the
workflow): each writes segments of its own (its pid is in their names) and re-sends only those.
When a run's owner closes, it also re-sends the segments left by processes that have exited
(``adopt_orphans``): a worker killed before its background thread caught up loses nothing.

A segment open for appends is held under an exclusive ``flock``; ``provkg replay`` takes a
segment only when it gets that lock without waiting (``claim_segment``) and skips it otherwise,
so a replay run while the workflow still spools never deletes lines appended after it read the
file. The writer never waits for the lock either: a segment a replay holds is left to it, and
the events go to a new segment.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # not POSIX: no locks (a replay must not run beside a live run there)
    fcntl = None  # type: ignore[assignment]

from provkg.capture.encoding import loads_exact
from provkg.capture.report import report_once

__all__ = ["Spool", "claim_segment", "spool_segments", "read_segment", "read_segment_lines",
           "DEFAULT_SPOOL", "DEFAULT_SPOOL_BYTES"]

DEFAULT_SPOOL = "provkg-spool"
DEFAULT_SPOOL_BYTES = 2 * 1024**3
#: a segment is sealed (no more appends) past this size, so it can be replayed and deleted
_SEGMENT_BYTES = 4 * 1024 * 1024
_seq = itertools.count(1)
#: how a segment is named: time (ns), pid, sequence (replay tells segments by it too)
SEGMENT_NAME = re.compile(r"^\d{20}-(\d+)-\d{8}\.jsonl$")


def spool_segments(root: str | os.PathLike[str]) -> list[Path]:
    """Pending segments under ``root`` (any depth, ``rejected/`` excluded), oldest first."""
    root = Path(root)
    if root.is_file():
        return [root]
    found = [p for p in root.rglob("*.jsonl") if "rejected" not in p.relative_to(root).parts]
    return sorted(found, key=lambda p: (p.name, str(p)))


def read_segment(path: Path) -> list[dict[str, Any]]:
    """The events of one segment; a torn last line (a crash mid-write) is skipped and logged."""
    events = []
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(loads_exact(line))  # integers beyond 64 bits stay exact
        except ValueError:
            report_once(("torn", str(path), n), f"spool {path}: line {n} is not JSON (torn write?); skipped")
    return events


def read_segment_lines(path: Path) -> list[bytes]:
    """The encoded events of a segment this process wrote, as newline-terminated lines.

    Appends are whole lines and a failed append is cut back, so only the last line can be torn
    (a crash mid-write): it is the one without a final newline, and it is skipped and logged.
    """
    lines = path.read_bytes().splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        report_once(("torn", str(path)), f"spool {path}: the last line is incomplete (torn write?); skipped")
        lines.pop()
    return lines


def _lock(f: Any) -> bool:
    """Take the exclusive lock on an open segment without waiting; False: another holds it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def claim_segment(path: Path) -> Any:
    """``path`` opened for reading under its exclusive lock (close it to let go), or None when a
    live process is appending to it (it re-sends that segment itself) or it is gone."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    if not _lock(f):
        f.close()
        return None
    if os.fstat(f.fileno()).st_nlink == 0:  # deleted while we waited: delivered meanwhile
        f.close()
        return None
    return f


def _count_lines(path: Path) -> int:
    """The complete lines (events) of a segment, read in blocks."""
    count = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            count += block.count(b"\n")
    return count


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    # an exited child its parent has not waited for yet (a zombie) passes kill(pid, 0), but
    # writes nothing more: its segments are done and may be sent
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc (macOS): alive, as before
        return True


def write_all(f: Any, data: bytes) -> None:
    """Write all of ``data`` to an unbuffered file (``write`` may take part of it).

    Raises:
        OSError: the file took nothing more (a full disk), or the write failed."""
    view = memoryview(data)
    while view:
        written = f.write(view)
        if not written:  # else this would loop for ever
            raise OSError(errno.ENOSPC, "the disk took no more bytes")
        view = view[written:]


class Spool:
    """The pending batches of one workflow run (thread-safe: caller overflow + background thread)."""

    def __init__(self, root: str | os.PathLike[str], run_id: str, *,
                 max_bytes: int = DEFAULT_SPOOL_BYTES) -> None:
        self.root = Path(root)
        self.directory = self.root / run_id
        self.run_id = run_id
        self.max_bytes = max_bytes
        #: events appended, ever (re-spooled ones count again); ``pending_events``: waiting now
        self.spooled_events = 0
        #: events that could not be kept (the spool was full or not writable) and why
        self.dropped_events = 0
        self.drop_reason = ""
        self.rejected_events = 0
        self._lines: dict[Path, int] = {}  # events in each pending segment of this spool
        # reentrant: a SIGTERM handler may flush while the main thread is in here
        self._lock = threading.RLock()
        self._current: Path | None = None
        self._current_size = 0
        self._current_lines = 0
        self._current_since = 0.0  # time.monotonic() of the current segment's first append
        self._file: Any = None  # the current segment, open for appends
        self._file_pid = 0
        self._sealed: list[Path] = []
        self._bytes = 0

    @property
    def pending(self) -> bool:
        """Whether undelivered events are waiting on disk."""
        return bool(self._sealed) or self._current is not None

    @property
    def pending_events(self) -> int:
        """How many events wait in this spool's segments (those of exited processes it adopted
        included)."""
        with self._lock:
            return sum(self._lines.get(p, 0) for p in [*self._sealed, self._current] if p)

    def append(self, events: list[dict[str, Any]]) -> bool:
        """Write event dicts at the end of the spool; False (and logged once) when it could not."""
        return self.append_lines([orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in events])

    def append_lines(self, lines: list[bytes]) -> bool:
        """Write encoded events (newline-terminated JSON lines) at the end of the spool; False
        (and logged once) when it could not."""
        if not lines:
            return True
        data = b"".join(lines)
        with self._lock:
            if self._bytes + len(data) > self.max_bytes:
                # keep the oldest events that fit, drop the rest
                room, fit = self.max_bytes - self._bytes, 0
                for line in lines:
                    room -= len(line)
                    if room < 0:
                        break
                    fit += 1
                self.dropped_events += len(lines) - fit
                self.drop_reason = f"this run's part of it is full: {self.max_bytes} bytes"
                # the limit is per run (its folder), not of the root several runs share
                report_once(("spool-full", str(self.directory)), f"this run's spool {self.directory} "
                            f"is full (max_spool_bytes={self.max_bytes}, per run): events are being dropped")
                if fit:
                    self.append_lines(lines[:fit])
                return False
            try:
                f = self._segment_for_appends()
                try:
                    write_all(f, data)
                except OSError:
                    f.truncate(self._current_size)  # no torn line in the middle of a segment
                    raise
            except OSError as exc:
                self.dropped_events += len(lines)
                self.drop_reason = f"{exc.strerror or exc}"
                report_once(("spool-io", str(self.root), exc.errno), f"cannot write the spool "
                            f"{self.directory}: {exc}; events are being dropped")
                return False
            current = self._current
            assert current is not None  # _segment_for_appends always leaves one
            self._current_size += len(data)
            self._current_lines += len(lines)
            self._lines[current] = self._lines.get(current, 0) + len(lines)
            self._bytes += len(data)
            self.spooled_events += len(lines)
            return True

    def _segment_for_appends(self) -> Any:
        """The current segment, open and locked for appends; a new one when there is none, it
        is full, or a `provkg replay` holds it (sealed) or took it (its events are that
        replay's now)."""
        while True:
            if self._current is None or self._current_size >= _SEGMENT_BYTES:
                self._seal()
                self.directory.mkdir(parents=True, exist_ok=True)
                self._current = self.directory / \
                    f"{time.time_ns():020d}-{os.getpid()}-{next(_seq):08d}.jsonl"
                self._current_size = self._current_lines = 0
                self._current_since = time.monotonic()
            f = self._file
            if f is None or self._file_pid != os.getpid():  # (a forked child never reuses it)
                try:
                    f = open(self._current, "ab", buffering=0)
                except FileNotFoundError:  # the run's owner removed the emptied folder just now
                    self.directory.mkdir(parents=True, exist_ok=True)
                    f = open(self._current, "ab", buffering=0)
                if not _lock(f):  # a replay has it (or a forked child kept our descriptor)
                    f.close()
                    self._seal()  # no more appends; re-sent by us later unless delivered first
                    continue
                if os.fstat(f.fileno()).st_nlink == 0:  # a replay took it while it was closed
                    f.close()
                    self._forget_current()
                    continue
                # held from here until sealed or released: no replay takes it meanwhile
                self._file, self._file_pid = f, os.getpid()
            return f

    def _forget_current(self) -> None:
        if self._current is not None:
            self._lines.pop(self._current, None)
        self._current = None

    def release(self) -> None:
        """Close the segment kept open for appends (a later append opens it again)."""
        with self._lock:
            file, self._file = self._file, None
            if file is not None and self._file_pid == os.getpid():
                try:
                    file.close()
                except OSError:
                    pass

    def remove_if_empty(self) -> None:
        """The run's owner, at its end: remove the run's folder when everything in it was
        delivered (the segments forked children spooled, say), so a job's folder keeps no
        empty spool folder per run; a folder with anything left stays."""
        with self._lock:
            if self._current is None or not self._current.exists():
                try:
                    self.directory.rmdir()  # only if empty
                except OSError:
                    pass

    def ready(self, lines: int, age: float) -> bool:
        """Whether a segment is worth re-sending now: a sealed one, or the current one once it
        holds ``lines`` events or is ``age`` seconds old."""
        return bool(self._sealed) or (self._current is not None and (
            self._current_lines >= lines or time.monotonic() - self._current_since >= age))

    def read_lines(self, segment: Path) -> list[bytes]:
        """The encoded events of one of this spool's segments (see ``read_segment_lines``)."""
        try:
            return read_segment_lines(segment)
        except FileNotFoundError:  # a `provkg replay` delivered it meanwhile
            return []
        except OSError as exc:
            report_once(("spool-read", exc.errno), f"cannot read the spool segment {segment}: {exc}")
            return []

    def oldest(self) -> Path | None:
        """The oldest segment, sealed so no append goes to it any more."""
        with self._lock:
            if not self._sealed:
                self._seal()
            return self._sealed[0] if self._sealed else None

    def done(self, segment: Path, *, remaining: list[dict[str, Any]] | None = None,
             remaining_lines: list[bytes] | None = None) -> None:
        """A segment was delivered (delete it) or partly delivered (keep only ``remaining``
        events, or ``remaining_lines`` already encoded)."""
        if remaining:
            remaining_lines = [orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in remaining]
        with self._lock:
            try:
                size = segment.stat().st_size
                if remaining_lines:
                    tmp = segment.with_suffix(".tmp")
                    tmp.write_bytes(b"".join(remaining_lines))
                    os.replace(tmp, segment)
                    self._bytes -= size - segment.stat().st_size
                    self._lines[segment] = len(remaining_lines)
                    return
                segment.unlink()
                self._bytes -= size
                self._lines.pop(segment, None)
            except FileNotFoundError:  # a `provkg replay` delivered it meanwhile
                self._lines.pop(segment, None)
            except OSError as exc:
                report_once(("spool-done", exc.errno), f"cannot update the spool segment {segment}: {exc}")
            if segment in self._sealed:
                self._sealed.remove(segment)
                self._lines.pop(segment, None)

    def reject(self, events: list[dict[str, Any]], reason: str) -> Path | None:
        """Keep a refused batch and the receiver's message in ``rejected/``."""
        return self.reject_lines([orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in events],
                                 reason)

    def reject_lines(self, lines: list[bytes], reason: str) -> Path | None:
        """``reject`` for a batch already encoded as JSON lines."""
        folder = self.root / "rejected"
        stem = f"{self.run_id}-{time.time_ns():020d}-{next(_seq):08d}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{stem}.jsonl").write_bytes(b"".join(lines))
            (folder / f"{stem}.txt").write_text(reason + "\n", encoding="utf-8")
        except OSError as exc:
            report_once(("reject-io", exc.errno), f"cannot keep a rejected batch in {folder}: {exc}")
            return None
        self.rejected_events += len(lines)
        return folder / f"{stem}.jsonl"

    def adopt_orphans(self) -> int:
        """Take over the segments of this run left by processes that no longer run (a forked
        child or a worker that exited before delivering them): they are re-sent with this
        spool's own. Returns how many segments were adopted."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return 0
        me = os.getpid()
        found = []
        for name in names:
            match = SEGMENT_NAME.match(name)
            if match is None or int(match.group(1)) == me or _alive(int(match.group(1))):
                continue
            path = self.directory / name
            if path in self._sealed or path == self._current:
                continue
            try:
                size = path.stat().st_size
                lines = _count_lines(path)
            except OSError:
                continue
            found.append((path, size, lines))
        if found:
            with self._lock:
                self._seal()
                self._sealed = sorted(self._sealed + [p for p, _, _ in found], key=lambda p: p.name)
                self._bytes += sum(size for _, size, _ in found)
                self._lines.update((p, lines) for p, _, lines in found)
        return len(found)

    def others_segments(self) -> int:
        """Segments of this run other processes wrote that this spool has not taken over:
        theirs while they run, and those of processes that died after :meth:`adopt_orphans`
        looked (workers dying of the same process-group SIGTERM as their owner)."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return 0
        me, taken = os.getpid(), {p.name for p in self._sealed}
        return sum(1 for name in names if (m := SEGMENT_NAME.match(name)) is not None
                   and int(m.group(1)) != me and name not in taken)

    def _seal(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            if self._file_pid == os.getpid():
                try:
                    file.close()
                except OSError:
                    pass
        if self._current is not None:
            self._sealed.append(self._current)
            self._current = None
