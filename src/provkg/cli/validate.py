"""``provkg validate [--store URL] [--schema S ...] [--no-prov-base] [--format text|json]``."""

from __future__ import annotations

import argparse
import json

from provkg.cli.output import shown, snapshot_note
from provkg.service.validate import ValidationReport, validate_store
from provkg.store import display_url, open_store
from provkg.vocab import PREFIXES

__all__ = ["cmd_validate", "report_text"]

#: the exit status when the graph violates a shape (errors are 1 too: a script tests for 0)
VIOLATIONS = 1


def _short(iri: str | None) -> str:
    """An IRI as prefix:name when a provkg prefix covers it (SHACL's own too)."""
    if iri is None:
        return "(the node)"
    inverse = iri.startswith("^")
    bare = iri.removeprefix("^")
    for prefix, namespace in [*PREFIXES.items(), ("sh", "http://www.w3.org/ns/shacl#"),
                              ("pkgsh", "https://w3id.org/provkg/shapes#")]:
        if bare.startswith(namespace) and "/" not in bare[len(namespace):]:
            return ("^" if inverse else "") + f"{prefix}:{bare[len(namespace):]}"
    return iri


def report_text(report: ValidationReport, where: str) -> str:
    """Violations grouped by focus node (node, then path: message [shape]), and a summary."""
    lines = []
    for focus, found in report.by_focus().items():
        lines.append(shown(focus))
        for v in found:
            value = f" (value {shown(v.value)})" if v.value is not None and v.value != focus else ""
            lines.append(f"  {_short(v.path)}: {shown(v.message)}{value}  [{_short(v.shape)}]")
    shapes = ", ".join(report.shape_files)
    if report.conforms:
        lines.append(f"{where} conforms to the graph contract ({report.triples:,} triples; shapes {shapes})")
    else:
        nodes = len(report.by_focus())
        lines.append(f"{where}: {len(report.violations):,} violations on {nodes:,} nodes "
                     f"({report.triples:,} triples; shapes {shapes})")
    return "\n".join(lines)


def cmd_validate(args: argparse.Namespace) -> int:
    """Check the store's graph against the SHACL shapes of its schema(s)."""
    with open_store(args.store, existing=True, read_only=True) as store:
        snapshot_note(store, "validating")
        report = validate_store(store, args.schema, prov_base=args.prov_base)
    if args.format == "json":
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(report_text(report, display_url(args.store)))
    return 0 if report.conforms else VIOLATIONS
