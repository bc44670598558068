"""The ingest queue's folder on disk: segment records, the cursor, the dead-letter folder.

Layout of the queue folder::

    000000000007.seg   appended records: magic, length, event count, crc32, payload
    cursor             "<segment> <offset>": how far the applier has applied (fsync'd)
    rejected/          the dead-letter folder: batches that cannot be applied because of
                       their content, one file each (kept, never silently dropped)
    rejected.log       one line per dead letter: UTC time, file name, reason
    lock               flock'd by the one process that owns the folder (:func:`lock_folder`)

No threads here, and no locking but the folder's: :class:`provkg.service.queue.IngestQueue` owns the folder
and calls these under its own lock where two of its threads could meet.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from provkg.capture.spool import write_all
from provkg.errors import ProvkgError
from provkg.wire import UTF8_BOM

__all__ = ["RECORD_HEADER", "pack_record", "read_records", "SegmentReader", "segment_path",
           "segment_indexes", "count_events", "disk_takes_writes", "read_cursor", "write_cursor",
           "fsync_dir", "write_dead_letter", "invalid_payloads"]

log = logging.getLogger("provkg.queue")

_MAGIC = b"PKQ1"
#: magic, payload length, events, crc32(payload)
RECORD_HEADER = struct.Struct("<4sIII")


def pack_record(payload: bytes, events: int) -> bytes:
    """One record as appended to a segment: the header, then the payload."""
    return RECORD_HEADER.pack(_MAGIC, len(payload), events, zlib.crc32(payload)) + payload


def read_records(path: Path, start: int, stop: int | None) -> Iterator[tuple[bytes, int, int]]:
    """Yield ``(payload, events, end_offset)`` from ``start`` until ``stop`` (or a torn tail)."""
    try:
        data = path.read_bytes() if stop is None else _read_range(path, start, stop)
    except FileNotFoundError:
        return
    pos = start if stop is None else 0
    base = 0 if stop is None else start
    while pos + RECORD_HEADER.size <= len(data):
        magic, length, events, crc = RECORD_HEADER.unpack_from(data, pos)
        body_start = pos + RECORD_HEADER.size
        payload = data[body_start: body_start + length]
        if magic != _MAGIC or len(payload) != length or zlib.crc32(payload) != crc:
            log.warning("%s: unreadable record at offset %d (a torn tail from a crash is "
                        "normal: it was never acknowledged)", path.name, base + pos)
            return
        pos = body_start + length
        yield payload, events, base + pos


def _read_range(path: Path, start: int, stop: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(stop - start)


def segment_path(directory: Path, index: int) -> Path:
    return directory / f"{index:012d}.seg"


def segment_indexes(directory: Path) -> list[int]:
    """The segments in ``directory``, oldest first."""
    return sorted(int(p.stem) for p in directory.glob("*.seg") if p.stem.isdigit())


class SegmentReader:
    """Reads records for the applier, segment after segment.

    ``segments`` lists the folder's segment indexes (the queue's own listing, so that the
    reader and the queue agree on what is there)."""

    def __init__(self, directory: Path, segments: Callable[[], list[int]]):
        self._directory = directory
        self._segments = segments

    def read_chunk(self, pos: tuple[int, int], durable: tuple[int, int], *,
                   max_events: int) -> tuple[list[bytes], int, tuple[int, int]]:
        """Payloads from ``pos`` on, up to ``max_events``: ``(payloads, events, new_pos)``."""
        index, offset = pos
        chunk: list[bytes] = []
        events = 0
        while True:
            active = index >= durable[0]
            end = offset
            stop = durable[1] if active else None
            for payload, n, end in read_records(segment_path(self._directory, index), offset, stop):
                chunk.append(payload)
                events += n
                if events >= max_events:
                    return chunk, events, (index, end)
            if active:
                return chunk, events, (index, end)
            # an older segment is done (end of file or a torn tail): on to the next one
            later = [i for i in self._segments() if i > index]
            index, offset = (later[0] if later else durable[0]), 0
            if chunk:
                return chunk, events, (index, 0)

    def drop_segments_before(self, index: int) -> None:
        for old in self._segments():
            if old < index:
                segment_path(self._directory, old).unlink(missing_ok=True)


def count_events(directory: Path, segments: list[int], cursor: tuple[int, int]) -> int:
    """The events recorded in ``segments`` after ``cursor`` (what a start applies again)."""
    total = 0
    for index in segments:
        start = cursor[1] if index == cursor[0] else 0
        for _, events, _ in read_records(segment_path(directory, index), start, None):
            total += events
    return total


def disk_takes_writes(directory: Path, size: int) -> bool:
    """Whether as many bytes as the last refused batch (at least a page, at most 64 MiB)
    can be written and synced in the queue's folder now: a page alone fits on a disk with
    a few KiB free, where health would say ready and every batch would still be refused."""
    probe = directory / "probe.tmp"
    size = min(max(size, 4096), 64 * 1024 * 1024)
    try:
        with open(probe, "wb", buffering=0) as out:
            write_all(out, bytes(size))
            os.fsync(out.fileno())
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def read_cursor(directory: Path) -> tuple[int, int]:
    """``(segment, offset)`` the cursor file names; ``(0, 0)`` when there is none (yet)."""
    try:
        seg, off = (directory / "cursor").read_text().split()
        return int(seg), int(off)
    except (FileNotFoundError, ValueError):
        return (0, 0)


def write_cursor(directory: Path, pos: tuple[int, int], *, fsync: bool) -> None:
    """Replace the cursor atomically (a crash leaves the old one or the new one)."""
    tmp = directory / "cursor.tmp"
    with open(tmp, "w") as out:
        out.write(f"{pos[0]} {pos[1]}\n")
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    os.replace(tmp, directory / "cursor")


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- dead letters -------------------------------------------------------------------


def write_dead_letter(directory: Path, payload: bytes, *, reason: str, now: datetime,
                      once: str | None, fsync: bool) -> Path | None:
    """Write ``payload`` to ``directory/rejected/`` and a line naming it and ``reason`` to
    ``directory/rejected.log`` (both fsync'd when ``fsync``); see
    :meth:`provkg.service.queue.IngestQueue.reject`. None when ``once`` was written before."""
    rejected = directory / "rejected"
    suffix = (".json.gz" if payload.startswith(b"\x1f\x8b") else
              ".json.zst" if payload.startswith(b"\x28\xb5\x2f\xfd") else ".json")
    if not rejected.is_dir():
        rejected.mkdir()
        if fsync:
            fsync_dir(directory)
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    names = [f"{once}{suffix}"] if once else [f"{stamp}-{n:03d}{suffix}" for n in range(1000)]
    for name in names:
        path = rejected / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            continue
    else:
        if once:
            return None
        raise OSError(f"cannot name a dead letter in {rejected}")  # pragma: no cover
    with open(fd, "wb") as out:
        out.write(payload)
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    flat = " ".join(reason.split())  # one line per dead letter
    line = f"{now.isoformat(timespec='seconds')}\t{path.name}\t{flat}\n"
    with open(directory / "rejected.log", "ab") as out:
        out.write(line.encode("utf-8", "replace"))
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    if fsync:
        fsync_dir(rejected)
    return path


def invalid_payloads(chunk: list[bytes], *, decode_only: bool = False) -> dict[int, str]:
    """``{index: reason}`` of the payloads that fail the accept rule (``POST /v1/events``);
    with ``decode_only`` of those that are not even JSON by that rule (what the applier's
    decoder fails on), so that a valid-but-old batch next to them is still applied."""
    from provkg.events import load_json, parse_batch  # pydantic: only once something went wrong

    out: dict[int, str] = {}
    for i, payload in enumerate(chunk):
        if payload.startswith(UTF8_BOM):  # the applier reads the bytes as queued
            out[i] = "starts with a UTF-8 byte order mark"
            continue
        try:
            load_json(payload) if decode_only else parse_batch(payload)
        except ProvkgError as exc:
            out[i] = str(exc)
        except Exception as exc:  # noqa: BLE001 - not even bytes the parser takes: a dead letter
            out[i] = f"{type(exc).__name__}: {exc}"
    return out


def lock_folder(directory: Path) -> io.TextIOWrapper | None:
    """Take the queue folder's lock (``directory/lock``, an flock) for this process: the open
    file, which holds it until closed; None when another process holds it."""
    lock_file = open(directory / "lock", "w")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        return None
    return lock_file
