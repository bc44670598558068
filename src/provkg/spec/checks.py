"""A spec's cross-field rules, each broken one added to a :class:`~provkg.spec.report.Report`.

:func:`check_spec` checks a spec the models accepted; :func:`check_raw` the same rules as far
as the raw data allows, for a document the models refused, so that every problem is reported
at once rather than one fix at a time.
"""

from __future__ import annotations

from typing import Any

from provkg.errors import BadSpec
from provkg.spec.model import Attribute, Spec, Transformation, expand_curie
from provkg.spec.report import Report

__all__ = ["check_raw", "check_spec"]


def check_raw(data: dict[str, Any], report: Report) -> None:
    """Cross-field checks on a spec pydantic refused, so every problem shows at once."""
    try:
        trs = [t for t in data.get("transformations") or [] if isinstance(t, dict)]
    except TypeError:
        return
    names = {t.get("name") for t in trs if isinstance(t.get("name"), str)}
    of = {t["name"]: t.get("of") for t in trs if isinstance(t.get("name"), str) and t.get("kind") == "section"}
    first: dict[str, int] = {}
    for i, t in enumerate(data.get("transformations") or []):
        name = t.get("name") if isinstance(t, dict) else None
        if isinstance(name, str) and name in first:
            report.add(("transformations", i, "name"),
                       f"duplicate transformation name{report.said(name)} (first at transformations[{first[name]}])")
        elif isinstance(name, str):
            first[name] = i
        if isinstance(name, str) and name in of and _raw_cycle(of, name):
            report.add(("transformations", i, "of"), f"sections form a cycle through{report.said(name, ' this one')}; "
                       "the chain must end at a stage (training, validation, ...)")
        if isinstance(t, dict) and t.get("kind") == "section" and not t.get("of"):
            report.add(("transformations", i, "of"), "a section needs `of`: the stage or section it is part of")
        elif isinstance(t, dict) and isinstance(t.get("of"), str) and t["of"] not in names:
            report.add(("transformations", i, "of"), f"no transformation {report.named(t['of'])} in this spec")
        for side in ("used", "generated"):
            attrs = t.get(side) if isinstance(t, dict) else None
            for j, a in enumerate(attrs if isinstance(attrs, list) else []):
                if isinstance(a, dict) and isinstance(a.get("concept"), str):
                    try:
                        expand_curie(a["concept"])
                    except BadSpec as exc:
                        report.add(("transformations", i, side, j, "concept"), str(exc))


def _raw_cycle(of: dict[str, Any], name: str) -> bool:
    """``name``'s ``of`` chain (sections only, as written) comes back to a section."""
    seen: set[str] = set()
    while isinstance(name, str) and name in of:
        if name in seen:
            return True
        seen.add(name)
        name = of[name]
    return False


def check_spec(spec: Spec, report: Report) -> None:
    by_name: dict[str, int] = {}
    for i, t in enumerate(spec.transformations):
        if t.name in by_name:
            report.add(("transformations", i, "name"),
                       f"duplicate transformation name{report.said(t.name)} "
                       f"(first at transformations[{by_name[t.name]}])")
        by_name.setdefault(t.name, i)
    stores: dict[str, int] = {}
    for i, s in enumerate(spec.data_stores):
        if s.name in stores:
            report.add(("data_stores", i, "name"), f"duplicate data store name{report.said(s.name)}")
        stores.setdefault(s.name, i)
    for i, t in enumerate(spec.transformations):
        where = ("transformations", i)
        if t.kind == "section":
            if t.of is None:
                report.add(where + ("of",), "a section needs `of`: the stage or section it is part of")
            elif t.of not in by_name:
                report.add(where + ("of",), f"no transformation {report.named(t.of)} in this spec")
            elif _cyclic(spec, t.name):
                report.add(where + ("of",), f"sections form a cycle through{report.said(t.name, ' this one')}; "
                           "the chain must end at a stage (training, validation, ...)")
        elif t.of is not None:
            report.add(where + ("of",), f"only sections have `of` (this one is kind {t.kind!r})")
        if t.granularity not in (None, "full") and t.kind != "section":
            report.add(where + ("granularity",), "only sections have a granularity")
        elif t.granularity not in (None, "full") and spec.has_sections(t.name):
            # its executions would be summaries only, and the sections of it would hang
            # from executions the graph no longer holds (q4, q5 and q7 would lose every
            # batch of such epochs)
            report.add(where + ("granularity",), "only an innermost section (no section is `of` "
                       "it) may be kept as a summary or with rollups (`both`): summarise the "
                       "sections inside it instead")
        _check_attributes(t, where, stores, report)


def _cyclic(spec: Spec, name: str) -> bool:
    return _raw_cycle({t.name: t.of for t in spec.transformations if t.kind == "section"}, name)


def _check_attributes(t: Transformation, where: tuple[Any, ...], stores: dict[str, int],
                      report: Report) -> None:
    first: dict[str, tuple[str, Attribute]] = {}
    for side in ("used", "generated"):
        seen: set[str] = set()
        for j, a in enumerate(getattr(t, side)):
            path = where + (side, j)
            if a.name in seen:
                report.add(path + ("name",), f"duplicate attribute name{report.said(a.name)} in {side}")
            seen.add(a.name)
            other = first.get(a.name)
            if other is not None and (other[1].role, other[1].concept) != (a.role, a.concept):
                report.add(path + ("name",), f"{report.said(a.name, ' this name').strip()} is also "
                           f"{other[0]} with another role or "
                           "concept; one name is one attribute")
            first.setdefault(a.name, (side, a))
            if a.concept is not None:
                try:
                    expand_curie(a.concept)
                except BadSpec as exc:
                    report.add(path + ("concept",), str(exc))
            if a.store is not None and a.store not in stores:
                known = (", ".join(sorted(stores)) if report.echo else f"{len(stores)} declared") \
                    if stores else "none declared"
                report.add(path + ("store",), f"no data store {report.named(a.store)} in data_stores ({known})")
