"""``provkg spec validate | list | show | infer | register``: spec files, and the specs a store
holds."""

from __future__ import annotations

import argparse
import json
import sys

from provkg.cli.output import format_rows, snapshot_note
from provkg.spec import ValidatedFiles, ok_line, validate_files
from provkg.spec.infer import spec_yaml
from provkg.store import Store, display_url, open_store

__all__ = ["cmd_spec_infer", "cmd_spec_list", "cmd_spec_register", "cmd_spec_show", "cmd_spec_validate",
           "cmd_validate"]


def _open(url: str) -> Store:
    store = open_store(url, existing=True, read_only=True)
    snapshot_note(store, "reading")
    return store


def _checked(files: list[str]) -> ValidatedFiles:
    """Validate ``files``, printing each problem (``error: ...``) and note on stderr."""
    checked = validate_files(files)
    for level, text in checked.messages:
        print(f"{level}: {text}", file=sys.stderr)
    return checked


def cmd_spec_validate(args: argparse.Namespace) -> int:
    """``provkg spec validate FILE... [--store URL]``: without a store, no store is read."""
    if getattr(args, "store", None) is None:
        return cmd_validate(args)
    from provkg.service.specs import compare_with_stored, specs_in_store

    checked = _checked(args.files)
    if checked.valid:
        with _open(args.store) as store:
            stored = specs_in_store(store)
        for f, spec in checked.valid:
            print(f"{ok_line(f, spec)}; {compare_with_stored(spec, stored.get(spec.workflow))}")
    return 1 if checked.failed else 0


def cmd_validate(args: argparse.Namespace) -> int:
    """``provkg spec validate FILE...``: print every problem of every file; exit 1 if any."""
    checked = _checked(args.files)
    for f, spec in checked.valid:
        print(ok_line(f, spec))
    return 1 if checked.failed else 0


def cmd_spec_list(args: argparse.Namespace) -> int:
    """``provkg spec list``: one row per workflow whose spec the store holds."""
    from provkg.service.specs import spec_rows, specs_in_store

    with _open(args.store) as store:
        rows = spec_rows(specs_in_store(store))
    if not rows.rows and args.format == "table":
        print(f"no spec in {display_url(store.url)}: register one with `provkg ingest --spec FILE` "
              "or POST /v1/specs", file=sys.stderr)
        return 0
    print(format_rows(rows, args.format))
    return 0


def cmd_spec_show(args: argparse.Namespace) -> int:
    """``provkg spec show WORKFLOW``: the stored spec as JSON (which is also YAML), every
    default spelled out: what the mapper uses for that workflow's events."""
    from provkg.service.specs import stored_spec

    with _open(args.store) as store:
        spec = stored_spec(store, args.workflow)
    print(json.dumps(spec.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False))
    return 0


def cmd_spec_infer(args: argparse.Namespace) -> int:
    """``provkg spec infer EVENTS...``: one YAML document per workflow on stdout."""
    from provkg.errors import NotFound
    from provkg.service.specs import infer_from_files

    drafts = infer_from_files(args.paths)
    if args.workflow is not None:
        if args.workflow not in drafts:
            known = ", ".join(sorted(drafts)) or "none"
            raise NotFound(f"no events of workflow {args.workflow!r} (workflows: {known})")
        drafts = {args.workflow: drafts[args.workflow]}
    if not drafts:
        print("error: no workflow with tasks in these events", file=sys.stderr)
        return 1
    print("---\n".join(spec_yaml(found) for found in drafts.values()), end="")
    for name, found in drafts.items():
        if found.guessed:
            print(f"note: {name}: {len(found.guessed)} kinds / roles guessed from names, "
                  "marked `# guessed`: check them", file=sys.stderr)
    return 0


def cmd_spec_register(args: argparse.Namespace) -> int:
    """``provkg spec register SPEC...``: every file valid, or nothing registered."""
    from provkg.service.specs import register_specs

    checked = _checked(args.files)
    if checked.failed:
        return 1
    with open_store(args.store) as store:
        for (path, spec), triples in zip(checked.valid, register_specs(store, [s for _, s in checked.valid])):
            said = "unchanged" if triples == 0 else f"{triples} triples"
            print(f"{path}: workflow {spec.workflow!r} registered in {display_url(store.url)} ({said})")
    return 0
