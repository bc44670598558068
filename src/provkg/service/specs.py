"""The specs a store holds, for ``provkg spec list | show | validate --store | register``, and
specs drafted from captured events (``provkg spec infer``).

A store keeps each workflow's spec as it was registered (``provkg:specDocument``, see
:func:`provkg.service.registration.stored_specs`); these use cases let a user see them and
compare a spec file with them before ``provkg ingest --spec`` replaces one (the comparison is
registration's: :func:`provkg.service.registration.replacement_changes`).
"""

from __future__ import annotations

from collections.abc import Mapping

from provkg.errors import NotFound
from provkg.service.registration import finish_registrations, register_spec, replacement_changes, stored_specs
from provkg.spec import Spec
from provkg.spec.infer import InferredSpec, infer_specs
from provkg.store import Rows, Store, display_url
from provkg.vocab import DEFAULT_BASE

__all__ = ["compare_with_stored", "infer_from_files", "register_specs", "spec_rows", "specs_in_store",
           "stored_spec"]


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
         ", ".join(t.name for t in s.transformations if s.granularity(t.name) == "summary") or None]
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


def register_specs(store: Store, specs: list[Spec], *, base: str = DEFAULT_BASE) -> list[int]:
    """Register each spec as ``provkg ingest --spec`` does with no events (the stored runs of
    its workflow are typed with it); the triples each wrote (0: the same spec was held). The
    schema is the one the store's data is in (typed when it holds none, or several)."""
    from provkg.service.ingest import schemas_in_store

    finish_registrations(store)
    held = schemas_in_store(store)
    schema = next(iter(held)) if len(held) == 1 else "typed"
    return [register_spec(store, spec, schema=schema, base=base) for spec in specs]


def infer_from_files(paths: list[str]) -> dict[str, InferredSpec]:
    """Draft specs (:func:`provkg.spec.infer.infer_specs`, guesses marked) from event files.

    Raises:
        BadEvent: an event that is not wire format v1 (file and line named).
        NotFound: a path that does not exist."""
    from provkg.service.event_files import event_files, read_events

    events = [e for path in event_files(list(paths)) for chunk in read_events(path) for e in chunk]
    return infer_specs(events, guess=True)
