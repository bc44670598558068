"""``file:DIR`` — events as JSONL segments on local disk (the "diskful" mode of ProvLake).

One event per line; segments rotate by size, are optionally gzip- or zstd-compressed, and are
fsync'd when rotated and on close. ``provkg ingest DIR`` reads them back.
"""

from __future__ import annotations

import gzip
import itertools
import os
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

__all__ = ["FileSink", "COMPRESSIONS"]

#: compression name -> segment suffix
COMPRESSIONS = {None: ".jsonl", "gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
_instances = itertools.count(1)


class FileSink:
    """Append events to ``directory/events-<start>-<pid>-<n>-<seq>.jsonl[.gz|.zst]``.

    Args:
        directory: created if missing.
        compression: ``None``, ``"gzip"`` or ``"zstd"``.
        segment_bytes: rotate after this many uncompressed bytes.
        fsync: fsync each segment when it is closed (rotation and ``close``).
    """

    def __init__(self, directory: str | os.PathLike[str], *, compression: str | None = None,
                 segment_bytes: int = 64 * 1024 * 1024, fsync: bool = True) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {sorted(c or 'none' for c in COMPRESSIONS)}, "
                             f"not {compression!r}")
        self.directory = Path(directory)
        self.compression = compression
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.bytes_written = 0  # uncompressed, all segments
        self.paths: list[Path] = []
        self._prefix = f"events-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{next(_instances)}"
        self._raw: IO[bytes] | None = None
        self._out: Any = None
        self._segment_size = 0

    @classmethod
    def from_url(cls, url: str) -> FileSink:
        """``file:DIR``, ``file:///abs/dir`` or ``file:DIR?compression=zstd``."""
        parts = urlsplit(url)
        path = unquote(parts.netloc + parts.path) if parts.netloc else unquote(parts.path)
        if not path:
            raise ValueError(f"file sink URL {url!r} names no directory (expected file:DIR)")
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        compression = options.get("compression") or None
        return cls(path, compression=None if compression == "none" else compression)

    def send(self, events: list[dict[str, Any]]) -> None:
        self._write(b"".join([orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in events]))

    def send_lines(self, lines: list[bytes], *, run_id: str | None = None) -> None:
        """Append events already encoded as newline-terminated JSON lines (the emitter's path)."""
        self._write(b"".join(lines))

    def _write(self, data: bytes) -> None:
        if self._out is None or self._segment_size >= self.segment_bytes:
            self._rotate()
        self._out.write(data)
        if self.compression is None:
            self._out.flush()  # hand the batch to the OS: a crash of this process loses nothing
        self._segment_size += len(data)
        self.bytes_written += len(data)

    def close(self) -> None:
        self._close_segment()

    def _rotate(self) -> None:
        self._close_segment()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self._prefix}-{len(self.paths) + 1:05d}{COMPRESSIONS[self.compression]}"
        raw = open(path, "xb")
        self._raw = raw
        if self.compression == "gzip":
            self._out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1)
        elif self.compression == "zstd":
            import zstandard

            self._out = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
        else:
            self._out = raw
        self._segment_size = 0
        self.paths.append(path)

    def _close_segment(self) -> None:
        out, raw = self._out, self._raw
        self._out = self._raw = None
        if out is None or raw is None:
            return
        try:
            if out is not raw:
                out.close()  # writes the compression trailer
            raw.flush()
            if self.fsync:
                os.fsync(raw.fileno())
        finally:
            raw.close()
