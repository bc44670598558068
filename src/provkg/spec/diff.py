"""What changes when one spec of a workflow replaces another, said in words.

Registering a changed spec re-maps the workflow's stored runs, so the CLI and the API say
what differs (:func:`spec_changes`); whether two specs differ at all is
:func:`provkg.service.registration.spec_replacement`'s question.
"""

from __future__ import annotations

from provkg.spec.model import Spec, Transformation

__all__ = ["spec_changes"]


def spec_changes(old: Spec, new: Spec) -> list[str]:
    """What registering ``new`` changes for a workflow that had ``old``, one item per kind of
    change: ``transformations added: eval``, ``transformations changed: training (used -lr
    +learning_rate)``, ``phase learning -> preparation``; empty when nothing that maps differs."""
    mine = _resolved(new)
    theirs = _resolved(old)
    parts = []
    for what, names in (("added", sorted(mine.keys() - theirs.keys())),
                        ("removed", sorted(theirs.keys() - mine.keys()))):
        if names:
            parts.append(f"transformations {what}: {', '.join(names)}")
    changed = [f"{n} ({_transformation_changes(theirs[n], mine[n])})"
               for n in sorted(mine.keys() & theirs.keys()) if mine[n] != theirs[n]]
    if changed:
        parts.append(f"transformations changed: {', '.join(changed)}")
    if new.phase != old.phase:
        parts.append(f"phase {old.phase} -> {new.phase}")
    if new.data_stores != old.data_stores:
        parts.append("data stores changed")
    if new.description != old.description:
        parts.append("description changed")
    return parts


def _resolved(spec: Spec) -> dict[str, Transformation]:
    """The spec's transformations by name, each granularity as the spec resolves it (an unset
    one and the same one spelled out map alike)."""
    return {t.name: t.model_copy(update={"granularity": spec.granularity(t.name)})
            for t in spec.transformations}


def _transformation_changes(old: Transformation, new: Transformation) -> str:
    """``kind training -> evaluation; used -lr +learning_rate ~batch_size`` (~: role or concept)."""
    out = [f"{field} {getattr(old, field)} -> {getattr(new, field)}"
           for field in ("kind", "of", "granularity") if getattr(old, field) != getattr(new, field)]
    for side in ("used", "generated"):
        was = {a.name: a for a in getattr(old, side)}
        now = {a.name: a for a in getattr(new, side)}
        diff = [f"-{n}" for n in sorted(was.keys() - now.keys())]
        diff += [f"+{n}" for n in sorted(now.keys() - was.keys())]
        diff += [f"~{n}" for n in sorted(was.keys() & now.keys()) if was[n] != now[n]]
        if diff:
            out.append(f"{side} {' '.join(diff)}")
    return "; ".join(out) or "description"
