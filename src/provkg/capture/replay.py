"""Re-send spooled events, oldest first (``provkg replay SPOOL_DIR --to URL``).

Each segment is deleted once every event of it was delivered; a failure stops the replay with the
undelivered rest still on disk, so running it again is safe (receivers accept duplicates).
A batch the receiver refuses as too large (HTTP 413) or for what some of its events hold (HTTP
422 / 400) is sent in halves, down to single events, as the live sender does: only an event
refused on its own is moved to ``rejected/``, with the receiver's message. Lines that are not
JSON at all (a torn write) are skipped and logged. Replaying a ``rejected/`` folder (after the
cause was fixed) re-sends its events and keeps what is refused again in that same folder.

Events go to built-in sinks as the spooled bytes (never parsed and written again: integers
beyond 64 bits stay exact).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provkg.capture.encoding import loads_exact
from provkg.capture.report import report_once
from provkg.capture.sink import SinkRejected, send_in_halves
from provkg.capture.sink_urls import open_sink
from provkg.capture.spool import SEGMENT_NAME, claim_segment, spool_segments
from provkg.errors import NotFound, StoreUnavailable

__all__ = ["ReplayReport", "rejected_folder", "replay"]

_REJECTED = "rejected"


@dataclass
class ReplayReport:
    """What a replay did."""

    segments: int = 0
    events: int = 0
    rejected: int = 0
    #: segments a live run was still appending to: left to it (or to a later replay)
    skipped: int = 0
    #: files that are no spool segments (a line that is no provkg event): left as they are
    foreign: list[str] = field(default_factory=list)


#: one spooled event: its line (newline-terminated JSON), the decoded event, its run
_Item = tuple[bytes, dict[str, Any], str]


def replay(spool: str | Path, to: str, *, batch_size: int = 1000) -> ReplayReport:
    """Send every pending segment under ``spool`` to the sink at URL ``to``.

    Raises:
        NotFound: ``spool`` does not exist.
        StoreUnavailable: the receiver did not take a batch (the rest stays spooled).
        ValueError: ``to`` is no sink URL.
    """
    root = Path(spool)
    if not root.exists():
        raise NotFound(f"spool {root} does not exist")
    rejected_to = rejected_folder(root)
    sink = open_sink(to)
    send_lines = getattr(sink, "send_lines", None)
    report = ReplayReport()
    try:
        for segment in spool_segments(root):
            # locked: a live run appending to it (it re-sends it itself); gone: delivered meanwhile
            held = claim_segment(segment)
            if held is None:
                report.skipped += segment.exists()
                continue
            try:
                _replay_segment(segment, held, sink, send_lines, rejected_to, report,
                                batch_size=batch_size, to=to)
            finally:
                held.close()  # (after the unlink or rewrite: no writer appends in between)
    finally:
        sink.close()
    return report


def _replay_segment(segment: Path, held: Any, sink: Any, send_lines: Any, rejected_to: Path,
                    report: ReplayReport, *, batch_size: int, to: str) -> None:
    """Send one claimed segment; delete it, or keep in it what was not delivered."""
    try:
        items = _read(held.read(), segment)
    except _Foreign as why:  # never deleted: not ours (a PNG given by mistake, say)
        report.foreign.append(f"{segment}: {why}")
        return
    # a file of rejected/ keeps what is refused again (no rejected/rejected)
    in_place = segment.parent == rejected_to
    refused: list[tuple[bytes, str]] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start:start + batch_size]
        unsent, failure = _send(sink, send_lines, chunk, refused, report)
        if failure is not None:
            rest = [line for line, _, _ in unsent + items[start + len(chunk):]]
            if in_place:
                _rewrite(segment, [line for line, _ in refused] + rest, refused)
            else:
                _keep_rejected(rejected_to, segment, refused)
                _rewrite(segment, rest)
            raise StoreUnavailable(f"{to} did not take a batch from {segment}: {failure} "
                                   f"({report.events} events re-sent so far; run again "
                                   "when it is back)") from failure
    if in_place and refused:
        _rewrite(segment, [line for line, _ in refused], refused)
    else:
        _keep_rejected(rejected_to, segment, refused)
        segment.unlink(missing_ok=True)
        if in_place:  # the receiver's message about events that are gone now
            segment.with_suffix(".txt").unlink(missing_ok=True)
    report.segments += 1


def _send(sink: Any, send_lines: Any, batch: list[_Item], refused: list[tuple[bytes, str]],
          report: ReplayReport) -> tuple[list[_Item], Exception | None]:
    """Deliver ``batch``, in halves where the receiver refuses a part as too large or for its
    events (down to single events, which are set aside in ``refused``). Returns what was not
    delivered, in order, and why (None: everything was delivered or set aside)."""
    def set_aside(part: list[_Item], exc: SinkRejected) -> None:
        refused.extend((line, str(exc)) for line, _, _ in part)
        report.rejected += len(part)

    def delivered(part: list[_Item]) -> None:
        report.events += len(part)

    unsent, failure = send_in_halves(batch, lambda part: _deliver(sink, send_lines, part),
                                     refused=set_aside, delivered=delivered,
                                     size=lambda item: len(item[0]))
    return unsent, failure  # type: ignore[return-value]


def _deliver(sink: Any, send_lines: Any, part: list[_Item]) -> None:
    if not callable(send_lines):
        sink.send([event for _, event, _ in part])
        return
    # a built-in sink takes the spooled bytes as they are; events of one run at a time (an
    # MQTT sink publishes each run to a topic of its own)
    start = 0
    for end in range(1, len(part) + 1):
        if end == len(part) or part[end][2] != part[start][2]:
            send_lines([line for line, _, _ in part[start:end]], run_id=part[start][2])
            start = end


class _Foreign(Exception):
    """A file that is no spool segment (why): left as it is."""


def _event(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """The provkg event a line holds (a JSON object with ``type`` and ``event``), or None and
    what the line is instead."""
    try:
        event = loads_exact(line)
    except ValueError:
        return None, "is not JSON"
    ok = isinstance(event, dict) and event.get("type") in ("workflow", "task") and "event" in event
    return (event, "") if ok else (None, "is not a provkg event")


def _read(data: bytes, segment: Path) -> list[_Item]:
    """The events of a segment. Every complete line of a segment is a provkg event; only a
    last line without its newline (a write torn by a crash) may be anything: it is skipped
    and logged. A file without one event is a segment only by its name (one a crash left
    empty): an empty file of one's own, named otherwise, is left as it is.

    Raises:
        _Foreign: the file is no spool segment."""
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: a torn write, if anything
    items: list[_Item] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        event, what = _event(line)
        if event is None:
            raise _Foreign(f"line {n} {what}, so this is no spool segment; it is left as it is")
        items.append(_item(line, event))
    last, _ = _event(torn) if torn.strip() else (None, "")
    if last is not None:  # whole, only its newline missing
        items.append(_item(torn, last))
    if not items and not SEGMENT_NAME.match(segment.name):
        raise _Foreign("it holds no provkg event, so this is no spool segment; it is left as it is")
    if torn.strip() and last is None:
        report_once(("torn", str(segment), len(lines) + 1), f"spool {segment}: line "
                    f"{len(lines) + 1} is not a JSON event (torn write?); skipped")
    return items


def _item(line: bytes, event: dict[str, Any]) -> _Item:
    run = event.get("workflow_id") or event.get("id")
    return line + b"\n", event, run if isinstance(run, str) else ""


def _rewrite(segment: Path, remaining: list[bytes],
             reasons: list[tuple[bytes, str]] | None = None) -> None:
    """Keep only ``remaining`` in ``segment``; ``reasons``: also replace the receiver's
    messages next to a file of ``rejected/``."""
    tmp = segment.with_suffix(".tmp")
    tmp.write_bytes(b"".join(remaining))
    tmp.replace(segment)
    if reasons is not None:
        segment.with_suffix(".txt").write_text("".join(f"{r}\n" for _, r in reasons),
                                               encoding="utf-8")


def rejected_folder(spool: str | Path) -> Path:
    """Where a replay of ``spool`` puts refused events: ``<spool>/rejected``; for a replay of
    a ``rejected`` folder (or of a file in one), that folder itself, never a
    ``rejected/rejected``."""
    root = Path(spool)
    folder = root if root.is_dir() else root.parent
    return folder if folder.name == _REJECTED else folder / _REJECTED


def _keep_rejected(folder: Path, segment: Path, refused: list[tuple[bytes, str]]) -> None:
    if not refused:
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"replay-{segment.stem}.jsonl"
    with open(path, "ab") as f:
        f.write(b"".join(line for line, _ in refused))
    with open(path.with_suffix(".txt"), "a", encoding="utf-8") as f:
        f.write("".join(f"{reason}\n" for _, reason in refused))
