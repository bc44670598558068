"""``provkg spec validate FILE...``: several spec files checked, every problem kept."""

from __future__ import annotations

from dataclasses import dataclass, field

from provkg.errors import BadSpec, NotFound
from provkg.spec.loader import load_spec
from provkg.spec.model import Spec

__all__ = ["ValidatedFiles", "ok_line", "validate_files"]


@dataclass
class ValidatedFiles:
    """What :func:`validate_files` found."""

    #: the files that are valid, with their specs, in the order given
    valid: list[tuple[str, Spec]] = field(default_factory=list)
    #: (``"note"`` or ``"error"``, text) in the order of the files: each problem of each file,
    #: and a note for two files that are specs of one workflow
    messages: list[tuple[str, str]] = field(default_factory=list)
    #: whether any file was not valid
    failed: bool = False


def validate_files(files: list[str]) -> ValidatedFiles:
    """Load each spec file; every problem is kept (one message per line, ``FILE:LINE:
    field: message``), not raised."""
    out = ValidatedFiles()
    seen: dict[str, str] = {}
    for f in files:
        try:
            spec = load_spec(f)
            if spec.workflow in seen and seen[spec.workflow] != f:
                # said, not refused (two versions may be compared with --store), since `provkg
                # ingest --spec a --spec b` refuses them: a folder check that says ok must not
                # be followed by a load that fails
                said = (f"{f} and {seen[spec.workflow]} are both specs of workflow "
                        f"{spec.workflow!r}: an ingest takes one spec per workflow")
                out.messages.append(("note", said))
            seen.setdefault(spec.workflow, f)
            out.valid.append((f, spec))
        except BadSpec as exc:
            out.failed = True
            out.messages += [("error", line) for line in getattr(exc, "problems", [str(exc)])]
        except NotFound as exc:
            out.failed = True
            out.messages.append(("error", str(exc)))
    return out


def ok_line(path: str, spec: Spec) -> str:
    """``FILE: ok (workflow 'w', phase p, N transformations)``."""
    n = len(spec.transformations)
    return (f"{path}: ok (workflow {spec.workflow!r}, phase {spec.phase}, "
            f"{n} transformation{'' if n == 1 else 's'})")
