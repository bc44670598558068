"""``file:DIR`` — events as JSONL segments on local disk (the "diskful" mode of ProvLake).

One event per line; segments rotate by size, are optionally gzip- or zstd-compressed, and are
fsync'd when rotated and on close. ``provkg ingest DIR`` reads them back.

A failed write (a full disk) raises, so the emitter spools the batch and sends it again later;
an uncompressed segment is first cut back to its last complete line (no torn line, no event
glued to one), a compressed one is ended where it is and the next batches go to a new segment.
A segment or folder deleted during the run is noticed at the next write (one ``fstat``): the
folder is created again and a new segment started, with a warning.

Every process writes its own segments (the pid is in the name): a forked child or a process that
received the workflow (``pickle``) gets a fresh ``FileSink`` on the same directory (``forked`` /
pickling), never the parent's open file.
"""

from __future__ import annotations

import gzip
import itertools
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from provkg.capture.report import report_once
from provkg.capture.sink import url_options
from provkg.capture.spool import write_all

__all__ = ["FileSink", "COMPRESSIONS"]

#: compression name -> segment suffix
COMPRESSIONS = {None: ".jsonl", "gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
_instances = itertools.count(1)
#: file objects of a parent process that a forked child must keep (and never close)
_inherited: list[Any] = []


class _WholeWrites:
    """An unbuffered file that writes all it is given (a compressor's output goes through it)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def write(self, data: Any) -> int:
        write_all(self.raw, data)
        return len(data)

    def flush(self) -> None:
        pass


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
        self.target = f"file:{self.directory}"  # where it sends, in messages
        self.compression = compression
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.bytes_written = 0  # uncompressed, all segments
        self.paths: list[Path] = []
        self._prefix = f"events-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{next(_instances)}"
        self._raw: Any = None
        self._out: Any = None
        self._segment_size = 0
        self._raw_size = 0  # bytes of complete lines in an uncompressed segment

    @classmethod
    def from_url(cls, url: str) -> FileSink:
        """``file:DIR``, ``file:///abs/dir`` or ``file:DIR?compression=zstd``."""
        parts = urlsplit(url)
        path = unquote(parts.netloc + parts.path) if parts.netloc else unquote(parts.path)
        if not path:
            raise ValueError(f"file sink URL {url!r} names no directory (expected file:DIR)")
        compression = url_options(parts.query, ("compression",), "file sink").get("compression") or None
        # `file:~/events` is the home folder, as capture.ref("~/x") is, not a folder named
        # "~" in the working directory
        return cls(os.path.expanduser(path), compression=None if compression == "none" else compression)

    # -- other processes ------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its settings: the receiving process writes segments of its own."""
        return {"directory": str(self.directory), "compression": self.compression,
                "segment_bytes": self.segment_bytes, "fsync": self.fsync}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], compression=state["compression"],  # type: ignore[misc]
                      segment_bytes=state["segment_bytes"], fsync=state["fsync"])

    def forked(self) -> FileSink:
        """In a forked child: let go of the parent's open segment without writing to it (its file
        descriptor is pointed at ``/dev/null`` in this process only, so that no buffer or
        compression trailer of the parent's can reach the file), and return the child's sink,
        which writes segments of its own (uncompressed: see ``write_through``)."""
        raw = self._raw
        if raw is not None:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(devnull, raw.fileno())
                finally:
                    os.close(devnull)
            except (OSError, ValueError):
                pass
            _inherited.append((self._out, raw))  # never closed here: the parent owns the file
        self._out = self._raw = None
        return FileSink(self.directory, segment_bytes=self.segment_bytes, fsync=self.fsync)

    def write_through(self) -> FileSink:
        """A sink whose ``send_lines`` has handed the bytes to the OS when it returns (they
        survive ``os._exit`` or a kill of the process): this one when uncompressed, else an
        uncompressed sink on the same directory (a compressor holds data until it is closed)."""
        if self.compression is None:
            return self
        return FileSink(self.directory, segment_bytes=self.segment_bytes, fsync=self.fsync)

    # -- delivery -----------------------------------------------------------------------

    def send(self, events: list[dict[str, Any]]) -> None:
        self._write(b"".join([orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in events]))

    def send_lines(self, lines: list[bytes], *, run_id: str | None = None) -> None:
        """Append events already encoded as newline-terminated JSON lines (the emitter's path)."""
        self._write(b"".join(lines))

    def _write(self, data: bytes) -> None:
        if self._out is not None and self._deleted():
            report_once(("file-sink-deleted", str(self.directory)), f"the file sink's segment "
                        f"{self.paths[-1]} was deleted (or its folder) while events were being "
                        f"written to it; writing to a new segment in {self.directory}")
            self._abandon_segment()
        if self._out is None or self._segment_size >= self.segment_bytes:
            self._rotate()
        if self.compression is None:  # unbuffered: the batch is in the OS when this returns
            start = self._raw_size
            try:
                write_all(self._out, data)
            except BaseException:
                # a full disk took part of the batch: cut the segment back to its last complete
                # line, else the next batch would be glued to a torn line (the emitter spools
                # this one and sends it again)
                self._cut_back(start)
                raise
            self._raw_size = start + len(data)
        else:
            try:
                self._out.write(data)
            except BaseException:
                # the compressed stream is broken past repair: end the segment where it is and
                # write the next batches to a new one
                self._abandon_segment()
                raise
        self._segment_size += len(data)
        self.bytes_written += len(data)

    def _deleted(self) -> bool:
        """Whether the open segment was deleted (one fstat: a few hundred nanoseconds)."""
        try:
            return os.fstat(self._raw.fileno()).st_nlink == 0
        except (OSError, ValueError):
            return True

    def _cut_back(self, size: int) -> None:
        """After a failed write: the segment without the partial batch, else a new segment."""
        try:
            self._raw.truncate(size)
            self._raw.seek(size)
        except (OSError, ValueError):
            report_once(("file-sink-cut", str(self.directory)), f"cannot cut the segment "
                        f"{self.paths[-1]} back after a failed write; its last line may be torn "
                        "(ingest skips it): the next events go to a new segment")
            self._abandon_segment()

    def _abandon_segment(self) -> None:
        """Close the open segment as it is (best effort); the next write starts a new one."""
        out, raw = self._out, self._raw
        self._out = self._raw = None
        for f in ((out, raw) if out is not raw else (raw,)):
            try:
                if f is not None:
                    f.close()
            except Exception:  # noqa: BLE001 - a full disk again, a broken compressor
                pass
        if raw is not None and not raw.closed:
            try:
                raw.close()
            except OSError:
                pass

    def close(self) -> None:
        self._close_segment()

    def _rotate(self) -> None:
        self._close_segment()
        if self.paths and not self.directory.is_dir():
            report_once(("file-sink-folder", str(self.directory)), f"the file sink's folder "
                        f"{self.directory} was deleted during the run; it is created again")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self._prefix}-{len(self.paths) + 1:05d}{COMPRESSIONS[self.compression]}"
        # unbuffered (no lock, no buffer): nothing a forked child could inherit half-written
        raw = open(path, "xb", buffering=0)
        self._raw = raw
        if self.compression == "gzip":
            self._out = gzip.GzipFile(fileobj=_WholeWrites(raw), mode="wb", compresslevel=1)
        elif self.compression == "zstd":
            import zstandard

            compressor = zstandard.ZstdCompressor(level=3)
            # zstandard's stub asks for IO[bytes]; its stream_writer only calls write and flush
            self._out = compressor.stream_writer(_WholeWrites(raw), closefd=False)  # type: ignore[arg-type]
        else:
            self._out = raw
        self._segment_size = self._raw_size = 0
        self.paths.append(path)

    def _close_segment(self) -> None:
        out, raw = self._out, self._raw
        self._out = self._raw = None
        if out is None or raw is None:
            return
        try:
            if out is not raw:
                out.close()  # writes the compression trailer
            if self.fsync:
                os.fsync(raw.fileno())
        finally:
            raw.close()
