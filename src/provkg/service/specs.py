"""The specs a store holds, for ``provkg spec list | show | validate --store``.

A store keeps each workflow's spec as it was registered (``provkg:specDocument``, see
:func:`provkg.service.ingest.stored_specs`); these commands let a user see them and compare
a spec file with them before ``provkg ingest --spec`` replaces one.
"""

from __future__ import annotations

import argparse
import json
import sys

from provkg.errors import NotFound
from provkg.service.ingest import spec_document, stored_specs
from provkg.service.querying import format_rows
from provkg.spec import Spec, ok_line, spec_changes, validate_files
from provkg.store import Rows, Store, display_url, open_store

__all__ = ["cmd_spec_list", "cmd_spec_show", "cmd_spec_validate", "compare_with_stored",
           "specs_in_store"]


def specs_in_store(store: Store) -> dict[str, Spec]:
    """Workflow name -> the spec the store holds for it."""
    return {spec.workflow: spec for spec in stored_specs(store)}


def _open(url: str) -> Store:
    store = open_store(url, existing=True, read_only=True)
    if store.snapshot:
        print(f"note: {display_url(store.url)} is in use by another process (an ingest or a server): "
              "reading what it had written when this command started", file=sys.stderr)
    return store


def cmd_spec_list(args: argparse.Namespace) -> int:
    """``provkg spec list``: one row per workflow whose spec the store holds."""
    with _open(args.store) as store:
        specs = specs_in_store(store)
    rows = Rows(["workflow", "phase", "transformations", "stages", "sections", "summarised"], [
        [s.workflow, s.phase, len(s.transformations),
         sum(t.kind not in ("section", "transformation") for t in s.transformations),
         sum(t.kind == "section" for t in s.transformations),
         ", ".join(t.name for t in s.transformations if t.granularity == "summary") or None]
        for _, s in sorted(specs.items())])
    if not rows.rows and args.format == "table":
        print(f"no spec in {display_url(store.url)}: register one with `provkg ingest --spec FILE` "
              "or POST /v1/specs", file=sys.stderr)
        return 0
    print(format_rows(rows, args.format))
    return 0


def cmd_spec_show(args: argparse.Namespace) -> int:
    """``provkg spec show WORKFLOW``: the stored spec as JSON (which is also YAML), every
    default spelled out: what the mapper uses for that workflow's events."""
    with _open(args.store) as store:
        specs = specs_in_store(store)
    spec = specs.get(args.workflow)
    if spec is None:
        known = ", ".join(sorted(specs)) or "none"
        raise NotFound(f"no spec for workflow {args.workflow!r} in {display_url(store.url)} "
                       f"(the store holds specs for: {known})")
    print(json.dumps(spec.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False))
    return 0


def compare_with_stored(spec: Spec, stored: Spec | None) -> str:
    """How ``spec`` relates to the one a store holds for its workflow, in one sentence."""
    if stored is None:
        return "the store holds no spec for this workflow: `ingest --spec` would register it"
    if spec_document(spec) == spec_document(stored):
        return "the same as the spec the store holds"
    return ("differs from the spec the store holds (`ingest --spec` would replace it and "
            "re-type its runs): " + "; ".join(spec_changes(stored, spec)))


def cmd_spec_validate(args: argparse.Namespace) -> int:
    """``provkg spec validate FILE... --store URL``: validate, then compare each valid spec
    with the one the store holds for its workflow (nothing is written)."""
    specs, failed = validate_files(args.files)
    if specs:
        with _open(args.store) as store:
            stored = specs_in_store(store)
        for f, spec in specs:
            print(f"{ok_line(f, spec)}; {compare_with_stored(spec, stored.get(spec.workflow))}")
    return 1 if failed else 0
