"""The disk spool: batches that could not be delivered yet, kept in order as JSONL segments.

Layout under the spool root (``PROVKG_SPOOL``, default ``./provkg-spool``)::

    <root>/<run id>/<time ns>-<seq>.jsonl     pending events, one per line, oldest first
    <root>/rejected/<run id>-<time ns>.jsonl  batches a receiver refused (4xx), for inspection
    <root>/rejected/<run id>-<time ns>.txt    ... and the receiver's message

Segments are plain JSONL, so ``provkg ingest DIR`` and ``provkg replay DIR --to URL`` read them
directly. The emitter spools events as the lines it already serialized and re-sends them as
read (``read_lines``): a spooled event is serialized once, whatever the detour. The spool is bounded (``max_bytes``); a full or unwritable spool drops the batch and
logs it once: it never raises into user code.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from provkg.capture.report import report_once

__all__ = ["Spool", "spool_segments", "read_segment", "read_segment_lines", "DEFAULT_SPOOL",
           "DEFAULT_SPOOL_BYTES"]

DEFAULT_SPOOL = "provkg-spool"
DEFAULT_SPOOL_BYTES = 2 * 1024**3
#: a segment is sealed (no more appends) past this size, so it can be replayed and deleted
_SEGMENT_BYTES = 4 * 1024 * 1024
_seq = itertools.count(1)


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
            events.append(orjson.loads(line))
        except orjson.JSONDecodeError:
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


def _write_all(f: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[f.write(view):]


class Spool:
    """The pending batches of one workflow run (thread-safe: caller overflow + background thread)."""

    def __init__(self, root: str | os.PathLike[str], run_id: str, *,
                 max_bytes: int = DEFAULT_SPOOL_BYTES) -> None:
        self.root = Path(root)
        self.directory = self.root / run_id
        self.run_id = run_id
        self.max_bytes = max_bytes
        self.spooled_events = 0
        self.dropped_events = 0
        self.rejected_events = 0
        self._lock = threading.Lock()
        self._current: Path | None = None
        self._current_size = 0
        self._sealed: list[Path] = []
        self._bytes = 0

    @property
    def pending(self) -> bool:
        """Whether undelivered events are waiting on disk."""
        return bool(self._sealed) or self._current is not None

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
                self.dropped_events += len(lines)
                report_once(("spool-full", str(self.root)), f"spool {self.root} is full "
                            f"({self.max_bytes} bytes): events are being dropped")
                return False
            try:
                if self._current is None or self._current_size >= _SEGMENT_BYTES:
                    self._seal()
                    self.directory.mkdir(parents=True, exist_ok=True)
                    self._current = self.directory / f"{time.time_ns():020d}-{next(_seq):08d}.jsonl"
                    self._current_size = 0
                with open(self._current, "ab", buffering=0) as f:
                    try:
                        _write_all(f, data)
                    except OSError:
                        f.truncate(self._current_size)  # no torn line in the middle of a segment
                        raise
            except OSError as exc:
                self.dropped_events += len(lines)
                report_once(("spool-io", str(self.root), exc.errno), f"cannot write the spool "
                            f"{self.directory}: {exc}; events are being dropped")
                return False
            self._current_size += len(data)
            self._bytes += len(data)
            self.spooled_events += len(lines)
            return True

    def read_lines(self, segment: Path) -> list[bytes]:
        """The encoded events of one of this spool's segments (see ``read_segment_lines``)."""
        try:
            return read_segment_lines(segment)
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
                    return
                segment.unlink()
                self._bytes -= size
            except OSError as exc:
                report_once(("spool-done", exc.errno), f"cannot update the spool segment {segment}: {exc}")
            if segment in self._sealed:
                self._sealed.remove(segment)

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

    def _seal(self) -> None:
        if self._current is not None:
            self._sealed.append(self._current)
            self._current = None
