"""``provkg replay SPOOL_DIR --to URL``: re-send what a capture sink spooled."""

from __future__ import annotations

import argparse
import sys

from provkg.capture.replay import rejected_folder, replay
from provkg.cli.output import error
from provkg.errors import BadParameter

__all__ = ["cmd_replay"]


def cmd_replay(args: argparse.Namespace) -> int:
    """Say on stderr what was re-sent (and rejected, or left to a running workflow); exit 1
    when a file in the spool is no spool segment."""
    try:
        report = replay(args.spool, args.to)
    except ValueError as exc:  # a malformed --to URL
        raise BadParameter(f"--to: {exc}") from exc
    segments = f"{report.segments} segment{'s' if report.segments != 1 else ''}"
    print(f"re-sent {report.events} events from {segments} to {args.to}"
          + (f"; {report.rejected} rejected (see {rejected_folder(args.spool)})"
             if report.rejected else "")
          + (f"; {report.skipped} segments left alone: a running workflow is still writing "
             "them (it re-sends them itself)" if report.skipped else ""),
          file=sys.stderr)
    for line in report.foreign:
        error(line)
    return 1 if report.foreign else 0
