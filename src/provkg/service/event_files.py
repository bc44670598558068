"""Reading captured events from disk: JSONL files (``.gz``, ``.zst``) and spool folders.

Streams in chunks so memory stays bounded by the chunk, not the file. A line may be
one event or a whole batch envelope (``{"format": "provkg.events/1", "events": [...]}``).
Lines are decoded by the rule every transport shares (:func:`provkg.events.load_json`:
strict JSON, no NaN / Infinity, exact integers); a UTF-8 BOM at the start of a file is
skipped.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from provkg.errors import BadEvent, NotFound
from provkg.events import FORMAT, NotJson, load_json_line, parse_event, strip_bom

__all__ = ["EVENT_SUFFIXES", "event_files", "read_events", "total_bytes", "zstd_truncation"]

EVENT_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson", ".ndjson.gz", ".ndjson.zst")


def _is_event_file(p: Path) -> bool:
    return p.name.lower().endswith(EVENT_SUFFIXES)  # part2.JSONL too


#: files a folder may hold besides event files without a word: a capture spool's own
_QUIET = (".tmp", ".lock", ".part")


def event_files(paths: list[str | Path], skipped: list[str] | None = None) -> list[Path]:
    """The event files named by ``paths``: files as given, folders searched at any depth
    (a capture spool's ``rejected/`` folder is skipped), each folder's files in name order.
    Other files found in folders are appended to ``skipped``, so the caller can say so: no
    file of a folder (a .json file, say) is left out unsaid.

    Raises:
        NotFound: a path does not exist, or a folder holds no event file.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            found = []
            for f in p.rglob("*"):
                if not f.is_file():
                    continue
                if "rejected" in f.relative_to(p).parts or f.name.endswith(_QUIET):
                    continue  # a spool's refused batches and work files: left out, as documented
                if _is_event_file(f):
                    found.append(f)
                elif skipped is not None:
                    skipped.append(str(f))
            found.sort(key=lambda f: (f.name, str(f)))
            if not found:
                raise NotFound(f"{p}: no event files ({', '.join('*' + s for s in EVENT_SUFFIXES)}) "
                               "in this folder")
            out.extend(found)
        elif p.exists():
            raise NotFound(f"{p}: not a regular file or folder (a pipe or device); write the "
                           "events to a file first")
        else:
            raise NotFound(f"{p}: no such file or folder")
    return out


def total_bytes(files: list[Path]) -> int:
    """Bytes on disk of ``files`` (for a progress bar)."""
    return sum(f.stat().st_size for f in files)


_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MAGIC = 0x184D2A50  # .. 0x184D2A5F


def zstd_truncation(data: BinaryIO) -> str | None:
    """Why the zstd data in ``data`` (a seekable binary file, read from its start) ends
    early, or None when its last frame is complete.

    zstd decoders stop quietly at the end of their input, so a file cut anywhere (even
    just its checksum) would read as a shorter one. This walks the frame structure of
    RFC 8878 (frame and block headers, skippable frames, the optional checksum), seeking
    over block contents: a few bytes read per 128 KiB block. Empty data has no frame and
    is complete; bytes that are not zstd are left to the decoder to refuse.
    """
    data.seek(0, io.SEEK_END)
    size = data.tell()
    pos = 0

    def read(at: int, n: int) -> bytes:
        data.seek(at)
        return data.read(n)

    while pos < size:
        head = read(pos, 4)
        if len(head) < 4:
            return "ends inside a frame header"
        magic = int.from_bytes(head, "little")
        if magic & 0xFFFFFFF0 == _SKIPPABLE_MAGIC:
            length = read(pos + 4, 4)
            if len(length) < 4:
                return "ends inside a skippable frame's header"
            pos += 8 + int.from_bytes(length, "little")
            if pos > size:
                return "ends inside a skippable frame"
            continue
        if magic != _ZSTD_MAGIC:
            return None  # not a frame: the decoder says what is wrong
        descriptor = read(pos + 4, 1)
        if not descriptor:
            return "ends inside a frame header"
        d = descriptor[0]
        single_segment = bool(d & 0x20)
        checksum = 4 if d & 0x04 else 0
        dictionary_id = (0, 1, 2, 4)[d & 0x03]
        content_size = (1 if single_segment else 0, 2, 4, 8)[d >> 6]
        pos += 5 + (0 if single_segment else 1) + dictionary_id + content_size
        while True:
            block = read(pos, 3)
            if len(block) < 3:
                return "ends inside a frame, before its last block"
            header = int.from_bytes(block, "little")
            last, kind, block_size = header & 1, (header >> 1) & 3, header >> 3
            pos += 3 + (1 if kind == 1 else block_size)  # an RLE block holds one byte
            if pos > size:
                return "ends inside a block"
            if last:
                break
        pos += checksum
        if pos > size:
            return "ends inside a frame's checksum"
    return None


def _open(path: Path, raw: BinaryIO) -> Iterator[bytes]:
    """The lines of ``raw``, decompressed as its name says (read_events only iterates them)."""
    name = path.name
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)
    if name.endswith(".zst"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
    return raw


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file raises: OSError (gzip's BadGzipFile too), EOFError (gzip
    data cut short), zlib's and zstd's own errors (corrupt compressed data)."""
    import zlib

    import zstandard

    return (OSError, EOFError, zlib.error, zstandard.ZstdError)


#: the bytes a blank line may start with (what ``bytes.strip`` removes)
_BLANK_START = frozenset(b" \t\n\r\x0b\x0c")

#: a batch of ``read_events`` is yielded once its lines reach this many bytes, whatever its
#: count: else events with 50 KB values make an ingest's memory grow with the file
CHUNK_BYTES = 8 * 1024 * 1024


def read_events(path: Path, *, validate: bool = True, chunk: int = 4096,
                on_bytes: Callable[[int], None] | None = None,
                on_torn: Callable[[str], None] | None = None,
                on_bad: Callable[[str], None] | None = None) -> Iterator[list[dict[str, Any]]]:
    """Yield lists of up to ``chunk`` events from one file, as plain dicts.

    ``validate`` checks each event against wire format v1 (errors name file and line);
    skip it only for files provkg wrote itself. ``on_bytes`` gets the compressed bytes
    read since the last call. A malformed last line *without* a newline at its end (a
    torn write: the writer stopped mid-line) is reported through ``on_torn`` and skipped;
    a complete line (newline-terminated) that is not valid is an error like any other.

    On an error, the events read before the bad line are yielded first (a last, shorter
    list), then the error is raised: a caller that ingests each list it gets has stored
    everything before the bad line, which the message says. With ``on_bad``, a bad line
    is instead reported to it (``FILE:LINE: field: problem``) and skipped, and reading goes
    on; only a file that cannot be read further (truncated, damaged) still raises.

    Raises:
        BadEvent: a line is not JSON or not a valid event (``FILE:LINE: field: problem``), or
            the file cannot be read: compressed data cut short (a ``.gz`` or ``.zst`` file
            truncated, even by its last bytes) or damaged.
    """
    with open(path, "rb") as raw:
        truncated = zstd_truncation(raw) if path.name.endswith(".zst") else None
        raw.seek(0)
        stream = _open(path, raw)
        last_pos = 0
        batch: list[dict[str, Any]] = []
        batch_bytes = 0  # of the lines in batch: big values fill memory long before ``chunk``
        handed = 0  # events yielded so far
        lines = 0  # lines read whole (and their events collected)
        error: BadEvent | None = None
        torn: int | None = None  # the last line, cut before its newline
        try:
            for n, line in enumerate(stream, 1):
                if n == 1:
                    unmarked = strip_bom(line)
                    assert isinstance(unmarked, bytes)  # bytes in, bytes out
                    line = unmarked
                if (not line or line[0] in _BLANK_START) and not line.strip():  # b"": a lone BOM
                    lines = n
                    continue
                try:
                    try:
                        def where(n: int = n) -> str:  # built only for an error message
                            return f"{path}:{n}: "

                        obj = load_json_line(line, where)
                    except NotJson as exc:
                        if line.endswith(b"\n"):  # complete, so not torn: a real error
                            # one line: its column says where (load_json's reason starts "line 1, ")
                            reason = exc.reason.removeprefix("line 1, ")
                            raise BadEvent(f"{path}:{n}: not JSON ({reason})") from None
                        if truncated is not None:  # cut mid-line by the truncation: said below
                            break
                        torn = n  # only the last line lacks its newline: said once read to the end
                        continue
                    if not validate and type(obj) is dict and "format" not in obj:
                        batch.append(obj)  # the common case, without a call per line
                    else:
                        _collect(obj, batch, path, n, validate)
                except BadEvent as exc:
                    if on_bad is None:
                        raise
                    on_bad(str(exc))  # the line is skipped whole; the file goes on
                lines = n
                batch_bytes += len(line)
                if len(batch) >= chunk or batch_bytes >= CHUNK_BYTES:
                    handed += len(batch)
                    yield batch
                    batch, batch_bytes = [], 0
                    if on_bytes is not None:
                        pos = raw.tell()
                        on_bytes(pos - last_pos)
                        last_pos = pos
        except BadEvent as exc:  # on line lines + 1 (a bad line is never partly collected)
            error = _stored_before(str(exc), lines + 1, handed + len(batch))
        except _read_errors() as exc:
            reason = (f"the file is truncated ({exc})" if isinstance(exc, EOFError)
                      else f"cannot read ({exc})")
            error = _stored_before(f"{path}: {reason}", lines + 1, handed + len(batch),
                                   damaged=True)
        if error is None and truncated is not None:
            error = _stored_before(f"{path}: the file is truncated (the zstd data {truncated}: "
                                   "an interrupted copy, or a writer that stopped?)",
                                   lines + 1, handed + len(batch), damaged=True)
        if error is None and torn is not None:
            if path.name.lower().endswith((".gz", ".zst")):
                # a compressed file read to its proper end is no file still being written:
                # its cut last line is a lost event, an error (exit 0 would let a script's
                # `ingest && rm` delete it)
                message = (f"{path}:{torn}: last line is incomplete (no newline) although the "
                           "compressed file is complete: the event was cut before it was compressed")
                if on_bad is None:
                    error = BadEvent(message)
                else:
                    on_bad(message)
            elif on_torn is not None:
                on_torn(f"{path}:{torn}: last line is incomplete (no newline at the end of "
                        "the file: a torn write?); skipped")
        if batch:
            yield batch
        if on_bytes is not None:
            on_bytes(raw.tell() - last_pos)
        if error is not None:
            raise error


def _stored_before(message: str, n: int, events: int, *, damaged: bool = False) -> BadEvent:
    """The error ``message``, saying what of the file was stored: the events before line
    ``n`` (the caller ingests every list :func:`read_events` yields before it raises)."""
    if damaged:
        kept = (f"the events of its first {n - 1} lines were stored" if events
                else "no event of it was stored")
        return BadEvent(f"{message}; {kept}; restore the whole file and run again "
                        "(re-ingesting adds no triple), or move it aside")
    if not events:
        return BadEvent(f"{message}; no event of this file was stored; fix line {n} and run again")
    return BadEvent(f"{message}; events before line {n} were stored; fix line {n} and run "
                    "again: re-ingesting adds no triple")


def _collect(obj: Any, out: list[dict[str, Any]], path: Path, n: int, validate: bool) -> None:
    if isinstance(obj, dict) and "format" in obj and "events" in obj:
        if obj["format"] != FORMAT:
            raise BadEvent(f"{path}:{n}: format must be {FORMAT!r}")
        items = obj["events"] if isinstance(obj["events"], list) else [obj["events"]]
    else:
        items = [obj]
    for i, ev in enumerate(items):  # the whole line is checked before any of it is kept
        if not isinstance(ev, dict):
            raise BadEvent(f"{path}:{n}: an event is a JSON object")
        if validate:
            where = f"{path}:{n}: " if len(items) == 1 else f"{path}:{n}: events[{i}]."
            try:
                parse_event(ev, where=where)  # strict: the dict itself is then a valid event
            except BadEvent as exc:
                if len(items) == 1:
                    raise
                # a batch line is kept or skipped whole: say how much goes with it ("that line
                # was skipped" reads as one event lost, not 300)
                raise BadEvent(f"{exc} (a batch of {len(items)} events on that line, all "
                               "skipped with it)") from None
    out.extend(items)
