"""``provkg import mlflow --tracking-uri URI [--experiment NAME]``: history from other tools."""

from __future__ import annotations

import argparse

from provkg.cli.output import compact, note, warning
from provkg.errors import ProvkgError
from provkg.store import open_store

__all__ = ["cmd_import_mlflow"]


def cmd_import_mlflow(args: argparse.Namespace) -> int:
    """Import MLflow runs into ``--store``, then say what was imported."""
    try:
        import mlflow  # noqa: F401  (said before a store is opened)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".", 1)[0] != "mlflow":
            raise
        from provkg.service.importing import MLFLOW_EXTRA

        raise ProvkgError(MLFLOW_EXTRA) from None
    from provkg.service.importing import import_mlflow

    with open_store(args.store) as store:
        report = import_mlflow(store, args.tracking_uri, experiment=args.experiment)
        compact(store)
    for said in report.notes:
        note(said)
    for said in report.warnings:
        warning(said)
    if not report.runs:
        which = f"experiment {args.experiment!r}" if args.experiment else "any experiment"
        note(f"no MLflow run in {which}: nothing imported")
    unfinished = f" ({report.unfinished} still running, imported as far as they went)" if report.unfinished else ""
    names = ", ".join(report.experiments)
    print(f"imported {report.runs} run{'s' if report.runs != 1 else ''}{unfinished} of "
          f"{len(report.experiments)} experiment{'s' if len(report.experiments) != 1 else ''}"
          f"{f' ({names})' if names else ''}: {report.ingest}")
    return 0
