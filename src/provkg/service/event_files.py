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
from provkg.events import FORMAT, NotJson, load_json, parse_event, strip_bom

__all__ = ["EVENT_SUFFIXES", "event_files", "read_events", "total_bytes"]

EVENT_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson", ".ndjson.gz", ".ndjson.zst")


def _is_event_file(p: Path) -> bool:
    return p.is_file() and p.name.endswith(EVENT_SUFFIXES)


def event_files(paths: list[str | Path]) -> list[Path]:
    """The event files named by ``paths``: files as given, folders searched at any depth
    (a capture spool's ``rejected/`` folder is skipped), each folder's files in name order.

    Raises:
        NotFound: a path does not exist, or a folder holds no event file.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            found = sorted((f for f in p.rglob("*") if _is_event_file(f)
                            and "rejected" not in f.relative_to(p).parts), key=lambda f: (f.name, str(f)))
            if not found:
                raise NotFound(f"{p}: no event files (*.jsonl, *.jsonl.gz, *.jsonl.zst) in this folder")
            out.extend(found)
        else:
            raise NotFound(f"{p}: no such file or folder")
    return out


def total_bytes(files: list[Path]) -> int:
    """Bytes on disk of ``files`` (for a progress bar)."""
    return sum(f.stat().st_size for f in files)


def _open(path: Path, raw: BinaryIO) -> BinaryIO:
    name = path.name
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if name.endswith(".zst"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))  # type: ignore[arg-type]
    return raw


def read_events(path: Path, *, validate: bool = True, chunk: int = 4096,
                on_bytes: Callable[[int], None] | None = None,
                on_torn: Callable[[str], None] | None = None) -> Iterator[list[dict[str, Any]]]:
    """Yield lists of up to ``chunk`` events from one file, as plain dicts.

    ``validate`` checks each event against wire format v1 (errors name file and line);
    skip it only for files provkg wrote itself. ``on_bytes`` gets the compressed bytes
    read since the last call. A malformed last line *without* a newline at its end (a
    torn write: the writer stopped mid-line) is reported through ``on_torn`` and skipped;
    a complete line (newline-terminated) that is not valid is an error like any other.

    Raises:
        BadEvent: a line is not JSON or not a valid event (``FILE:LINE: field: problem``).
    """
    with open(path, "rb") as raw:
        stream = _open(path, raw)
        last_pos = 0
        batch: list[dict[str, Any]] = []
        try:
            for n, line in enumerate(stream, 1):
                if n == 1:
                    line = strip_bom(line)
                if not line.strip():
                    continue
                try:
                    obj = load_json(line, where=f"{path}:{n}: ")
                except NotJson as exc:
                    if line.endswith(b"\n"):  # complete, so not torn: a real error
                        # the parser's reason without its "line 1 column ..." (one line here)
                        raise BadEvent(f"{path}:{n}: not JSON ({exc.reason.split(':')[0]})") from None
                    if on_torn is not None:  # only the last line lacks its newline
                        on_torn(f"{path}:{n}: last line is incomplete (no newline at the end of "
                                "the file: a torn write?); skipped")
                    continue
                _collect(obj, batch, path, n, validate)
                if len(batch) >= chunk:
                    yield batch
                    batch = []
                    if on_bytes is not None:
                        pos = raw.tell()
                        on_bytes(pos - last_pos)
                        last_pos = pos
        except (OSError, EOFError) as exc:
            raise BadEvent(f"{path}: cannot read ({exc})") from exc
        if batch:
            yield batch
        if on_bytes is not None:
            on_bytes(raw.tell() - last_pos)


def _collect(obj: Any, out: list[dict[str, Any]], path: Path, n: int, validate: bool) -> None:
    if isinstance(obj, dict) and "format" in obj and "events" in obj:
        if obj["format"] != FORMAT:
            raise BadEvent(f"{path}:{n}: format must be {FORMAT!r}")
        items = obj["events"] if isinstance(obj["events"], list) else [obj["events"]]
    else:
        items = [obj]
    for i, ev in enumerate(items):
        if not isinstance(ev, dict):
            raise BadEvent(f"{path}:{n}: an event is a JSON object")
        if validate:
            where = f"{path}:{n}: " if len(items) == 1 else f"{path}:{n}: events[{i}]."
            parse_event(ev, where=where)  # strict: the dict itself is then a valid event
        out.append(ev)
