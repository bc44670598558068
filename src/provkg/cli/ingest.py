"""``provkg ingest FILE|DIR... --spec S --schema typed|tagged|sprov``."""

from __future__ import annotations

import argparse
import sys

from provkg.cli.output import compact, note, stderr_progress, warning
from provkg.errors import BadEvent
from provkg.service.ingest import IngestReport, given_specs, ingest_paths, plan_ingest
from provkg.store import open_store

__all__ = ["cmd_ingest", "print_report"]


def _now(text: str) -> None:
    print(text, file=sys.stderr)


def cmd_ingest(args: argparse.Namespace) -> int:
    """Map the events of the files and folders given into ``--store``, then say what was
    stored (also when bad lines were skipped: then the error follows, exit status 1)."""
    given = given_specs(args.spec)
    with open_store(args.store) as store:
        plan = plan_ingest(store, given, schema=args.schema)
        for said in plan.notes:
            note(said)
        for said in plan.warnings:  # said first: the ingest may take a while
            warning(said)
        try:
            report = ingest_paths(store, args.paths, specs=plan.specs, schema=args.schema,
                                  progress=stderr_progress(), notify=_now)
        except BadEvent as exc:  # what was stored is reported too, then the error
            stored = getattr(exc, "report", None)
            if stored is not None:
                compact(store)
                print_report(stored)
            raise
        compact(store)
    print_report(report)
    return 0


def print_report(report: IngestReport) -> None:
    """The report's warnings on stderr, then ``ingested N files: ...`` on stdout."""
    for w in report.warnings:
        warning(w)
    print(f"ingested {report.files_read()}: {report}")
