"""``provkg init | load | export | link | check-links``: what a store holds."""

from __future__ import annotations

import argparse
import sys

from provkg.cli.output import compact, snapshot_note, stderr_progress, warning
from provkg.errors import BadParameter, StoreError
from provkg.service.links import check_links, link_values, unlink_value
from provkg.service.loading import (
    export_store,
    init_store,
    load_files,
    replace_graph,
    shared_copies_warnings,
)
from provkg.store import display_url, open_store
from provkg.term import id_from_iri

__all__ = ["cmd_check_links", "cmd_export", "cmd_init", "cmd_link", "cmd_load"]


def cmd_init(args: argparse.Namespace) -> int:
    """``provkg init``: load the ontologies into ``--store`` and print what was loaded."""
    with open_store(args.store) as store:
        report = init_store(store)
    print(f"loaded provkg's ontologies into {display_url(args.store)}:")
    print("\n".join(report.lines()))
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    """``provkg load FILE... [--graph IRI [--replace]]``."""
    if args.replace and not args.graph:
        raise BadParameter("--replace needs --graph: the default graph holds the provenance, "
                           "which a replace would delete")
    with open_store(args.store) as store:
        try:
            if args.replace:
                report = replace_graph(store, args.files, args.graph,
                                       progress=stderr_progress(), format=args.format)
            else:
                report = load_files(store, args.files, graph=args.graph,
                                    progress=stderr_progress(), format=args.format)
        except StoreError as exc:  # what was loaded is reported too, then the error
            loaded = getattr(exc, "report", None)
            if loaded is not None and loaded.entries:
                print("\n".join(loaded.lines()))
            raise
        compact(store)
        for said in shared_copies_warnings(store, args.graph):
            warning(said)
    print("\n".join(report.lines()))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``provkg export FILE [--graph IRI]`` (``-``: standard output)."""
    with open_store(args.store, existing=True, read_only=True) as store:
        snapshot_note(store, "exporting")
        lines = export_store(store, sys.stdout.buffer if args.file == "-" else args.file,
                             graph=args.graph)
    what = f"triples of {args.graph}" if args.graph else "quads"
    print(f"exported {lines:,} {what} from {display_url(args.store)} to {args.file}",
          file=sys.stderr if args.file == "-" else sys.stdout)
    return 0


def _names(values: list[str]) -> list[str]:
    """Value terms as their ids (else their IRIs)."""
    return [id_from_iri(v[1:-1], "value") or v[1:-1] for v in values]


def cmd_link(args: argparse.Namespace) -> int:
    """``provkg link VALUE_ID IRI [--agent WHO] [--remove]``."""
    if getattr(args, "remove", False):
        with open_store(args.store, existing=True) as store:
            record, values = unlink_value(store, args.value_id, args.target, agent=args.agent)
        print(f"unlinked {', '.join(_names(values))} -> {args.target} (recorded as {record})")
        return 0
    with open_store(args.store) as store:
        assertion, values = link_values(store, args.value_id, args.target, agent=args.agent)
    names = _names(values)
    what = names[0] if len(names) == 1 else f"{len(names)} values captured at {args.value_id} ({', '.join(names)})"
    print(f"linked {what} -> {args.target} (recorded as {assertion})")
    return 0


def cmd_check_links(args: argparse.Namespace) -> int:
    """``provkg check-links``: print dangling links; exit 1 when there are any."""
    # read-only: a store a server or an ingest holds is read as a snapshot (as query does),
    # not an error whose exit status 1 would read as "dangling links" to a cron check
    with open_store(args.store, existing=True, read_only=True) as store:
        snapshot_note(store, "checking")
        dangling = check_links(store)
    if not dangling:
        print("no dangling links")
        return 0
    for value, target in dangling:
        print(f"{value}\t{target}")
    print(f"{len(dangling)} dangling link{'s' if len(dangling) != 1 else ''}: no loaded graph "
          "describes their target", file=sys.stderr)
    return 1
