"""The specs a store holds, for ``provkg spec list | show | validate --store``.

A store keeps each workflow's spec as it was registered (``provkg:specDocument``, see
:func:`provkg.service.registration.stored_specs`); these use cases let a user see them and
compare a spec file with them before ``provkg ingest --spec`` replaces one (the comparison is
registration's: :func:`provkg.service.registration.replacement_changes`).
"""

from __future__ import annotations

from collections.abc import Mapping

from provkg.errors import NotFound
from provkg.service.registration import replacement_changes, stored_specs
from provkg.spec import Spec
from provkg.store import Rows, Store, display_url

__all__ = ["compare_with_stored", "spec_rows", "specs_in_store", "stored_spec"]


def specs_in_store(store: Store) -> dict[str, Spec]:
    """Workflow name -> the spec the store holds for it."""
    return {spec.workflow: spec for spec in stored_specs(store)}


def spec_rows(specs: Mapping[str, Spec]) -> Rows:
    """One row per workflow, by name: phase, number of transformations, stages and sections,
    and which sections are kept as summaries (None: none)."""
    return Rows(["workflow", "phase", "transformations", "stages", "sections", "summarised"], [
        [s.workflow, s.phase, len(s.transformations),
         sum(t.kind not in ("section", "transformation") for t in s.transformations),
         sum(t.kind == "section" for t in s.transformations),
         ", ".join(t.name for t in s.transformations if t.granularity == "summary") or None]
        for _, s in sorted(specs.items())])


def stored_spec(store: Store, workflow: str) -> Spec:
    """The spec ``store`` holds for ``workflow``.

    Raises:
        NotFound: none (naming the workflows it holds specs for)."""
    specs = specs_in_store(store)
    spec = specs.get(workflow)
    if spec is None:
        known = ", ".join(sorted(specs)) or "none"
        raise NotFound(f"no spec for workflow {workflow!r} in {display_url(store.url)} "
                       f"(the store holds specs for: {known})")
    return spec


def compare_with_stored(spec: Spec, stored: Spec | None) -> str:
    """How ``spec`` relates to the one a store holds for its workflow, in one sentence."""
    if stored is None:
        return "the store holds no spec for this workflow: `ingest --spec` would register it"
    changes = replacement_changes(stored, spec)
    if changes is None:
        return "the same as the spec the store holds"
    return ("differs from the spec the store holds (`ingest --spec` would replace it and "
            "re-type its runs): " + "; ".join(changes))
