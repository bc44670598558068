"""``provkg export FILE [--format F] [--run RUN_ID | --lineage VALUE_ID] [--with-data]``."""

from __future__ import annotations

import argparse
import sys

from provkg.cli.output import snapshot_note
from provkg.store import open_store

__all__ = ["cmd_export"]


def cmd_export(args: argparse.Namespace) -> int:
    """Write the store, a run or a value's lineage in ``--format`` (else the one FILE's name
    says); ``--graph IRI`` is the one-graph N-Triples backup of ``provkg.cli.store``."""
    if args.graph is not None:
        from provkg.cli.store import cmd_export as export_graph
        from provkg.errors import BadParameter

        if args.run or args.lineage or args.with_data or args.format not in (None, "nq"):
            raise BadParameter("--graph exports one named graph as N-Triples: it takes no --format, "
                               "--run, --lineage or --with-data")
        return export_graph(args)
    from provkg.service.export import export

    with open_store(args.store, existing=True, read_only=True) as store:
        snapshot_note(store, "exporting")
        report = export(store, sys.stdout.buffer if args.file == "-" else args.file, args.format,
                        run=args.run, lineage=args.lineage, with_data=args.with_data)
    print(report.line().replace(" to -:", " to standard output:"),
          file=sys.stderr if args.file == "-" else sys.stdout)
    return 0
