"""``provkg replay SPOOL_DIR --to URL``: re-send spooled events, oldest first.

Each segment is deleted once every batch of it was delivered; a failure stops the replay with the
undelivered rest still on disk, so running it again is safe (receivers accept duplicates).
Batches the receiver refuses (4xx: e.g. not valid wire format v1) are moved to ``rejected/``
with its message; lines that are not JSON at all (a torn write) are skipped and logged.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from provkg.capture.sink import SinkRejected, open_sink
from provkg.capture.spool import read_segment, spool_segments
from provkg.errors import BadParameter, NotFound, StoreUnavailable

__all__ = ["replay", "ReplayReport", "cmd_replay"]


@dataclass
class ReplayReport:
    """What a replay did."""

    segments: int = 0
    events: int = 0
    rejected: int = 0


def replay(spool: str | Path, to: str, *, batch_size: int = 1000) -> ReplayReport:
    """Send every pending segment under ``spool`` to the sink at URL ``to``.

    Raises:
        NotFound: ``spool`` does not exist.
        StoreUnavailable: the receiver did not take a batch (the rest stays spooled).
    """
    root = Path(spool)
    if not root.exists():
        raise NotFound(f"spool {root} does not exist")
    sink = open_sink(to)
    report = ReplayReport()
    try:
        for segment in spool_segments(root):
            try:
                events = read_segment(segment)
            except FileNotFoundError:  # delivered meanwhile by the run that wrote it
                continue
            for start in range(0, len(events), batch_size):
                chunk = events[start:start + batch_size]
                try:
                    sink.send(chunk)
                except SinkRejected as exc:
                    _keep_rejected(root, segment, [(e, str(exc)) for e in chunk])
                    report.rejected += len(chunk)
                    continue
                except Exception as exc:
                    _rewrite(segment, events[start:])
                    raise StoreUnavailable(f"{to} did not take a batch from {segment}: {exc} "
                                           f"({report.events} events re-sent so far; run again "
                                           "when it is back)") from exc
                report.events += len(chunk)
            segment.unlink(missing_ok=True)
            report.segments += 1
    finally:
        sink.close()
    return report


def _rewrite(segment: Path, remaining: list[dict]) -> None:
    import orjson

    tmp = segment.with_suffix(".tmp")
    tmp.write_bytes(b"".join(orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e in remaining))
    tmp.replace(segment)


def _keep_rejected(root: Path, segment: Path, bad: list[tuple[dict, str]]) -> None:
    import orjson

    folder = (root if root.is_dir() else root.parent) / "rejected"
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"replay-{segment.stem}"
    with open(stem.with_suffix(".jsonl"), "ab") as f:
        f.write(b"".join(orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE) for e, _ in bad))
    with open(stem.with_suffix(".txt"), "a", encoding="utf-8") as f:
        f.write("".join(f"{reason}\n" for _, reason in bad))


def cmd_replay(args: argparse.Namespace) -> int:
    """CLI: ``provkg replay SPOOL_DIR --to URL``."""
    try:
        report = replay(args.spool, args.to)
    except ValueError as exc:  # a malformed --to URL
        raise BadParameter(f"--to: {exc}") from exc
    print(f"re-sent {report.events} events from {report.segments} segments to {args.to}"
          + (f"; {report.rejected} rejected (see {Path(args.spool) / 'rejected'})" if report.rejected else ""),
          file=sys.stderr)
    return 0
