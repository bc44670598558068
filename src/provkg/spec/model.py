"""The spec model: a workflow's transformations, their attributes and roles, its data stores.

Frozen pydantic models that refuse unknown fields; the cross-field rules (a section's ``of``,
unique names, summaries only on innermost sections) are :mod:`provkg.spec.checks`', which
report every problem with its line rather than stopping at the first.
"""

from __future__ import annotations

import re
from pathlib import PureWindowsPath
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, StrictStr

from provkg.errors import BadSpec
from provkg.term import is_valid_iri, location_form, path_location
from provkg.vocab import PREFIXES
from provkg.wire import KINDS, MAX_NAME, PHASES, ROLES

__all__ = [
    "KINDS",
    "PHASES",
    "ROLES",
    "Attribute",
    "DataStore",
    "Spec",
    "Transformation",
    "expand_curie",
]


Kind = Literal["transformation", "training", "validation", "evaluation", "section",
               "feature_extraction", "adaptation"]
Role = Literal["hyperparameter", "model_hyperparameter", "model", "model_schema",
               "evaluation_measure", "dataset", "dataset_characteristic", "feature_set",
               "data_reference", "domain_reference", "plain"]
# Literals take values, not variables: these spell out wire.KINDS / ROLES, checked here
if get_args(Kind) != KINDS or get_args(Role) != ROLES:
    raise RuntimeError("spec.model's Kind / Role differ from wire.KINDS / wire.ROLES")
#: names end up in IRIs next to the names events carry, so they share the wire format's limit
Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Attribute(_Model):
    """A used or generated attribute of a transformation."""

    name: Name
    role: Role = "plain"
    #: domain concept the attribute holds: an IRI or a CURIE with a prefix of ``vocab.PREFIXES``
    concept: StrictStr | None = None
    #: name of a data store of the spec's ``data_stores`` where its data lives
    store: Name | None = None
    description: StrictStr | None = None

    @property
    def concept_iri(self) -> str | None:
        """The concept as a full IRI (CURIEs expanded), or None."""
        return None if self.concept is None else expand_curie(self.concept)


class Transformation(_Model):
    """A prospective data transformation: a stage, a section of one, or any step."""

    name: Name
    kind: Kind = "transformation"
    #: for sections: the stage or section this one is part of
    of: Name | None = None
    used: list[Attribute] = Field(default_factory=list)
    generated: list[Attribute] = Field(default_factory=list)
    #: sections only: ``full`` keeps every execution, ``summary`` per-parent summaries (rollups)
    #: instead, ``both`` every execution and the rollups. Unset, an innermost section is
    #: ``both`` and anything else ``full`` (resolved by the :class:`Spec` holding it)
    granularity: Literal["full", "summary", "both"] | None = None
    description: StrictStr | None = None

    def attribute(self, name: str) -> Attribute | None:
        """The used or generated attribute called ``name`` (generated wins a tie)."""
        for a in self.generated:
            if a.name == name:
                return a
        for a in self.used:
            if a.name == name:
                return a
        return None


def _store_location(text: str) -> str:
    """A data store's location in the spelling values' locations have (a path as its
    ``file:`` URI): it is written as an ``xsd:anyURI``, which a reasoner checks."""
    expected = "expected a URI (file:///data/lake, s3://bucket/prefix) or an absolute path"
    if text.startswith("~"):  # a spec POSTed to a server would get the server's home
        raise ValueError(f"{expected}: a spec is read on other machines and by other users, "
                         "where ~ is another folder")
    if text.startswith("/"):
        return path_location(text)
    if re.match(r"[A-Za-z]:[\\/]", text):  # C:\data\lake: a Windows path, not scheme "c"
        return path_location(PureWindowsPath(text))
    if re.match(r"[A-Za-z]:", text):  # C:data\lake, C: (drive-relative), not scheme "c"
        raise ValueError(f"{expected}: {text!r} is relative to a drive's current folder")
    if text.startswith("\\\\"):  # \\server\share\lake: a UNC path, file://server/share/lake
        return location_form("file:" + PureWindowsPath(text).as_posix())
    form = location_form(text)
    if not (":" in text[1:] and text[0].isalpha() and is_valid_iri(form)):
        raise ValueError(expected)
    if form.lower().startswith("file:") and not form[5:].startswith("/"):
        raise ValueError(f"{expected}: {text!r} is a relative file: URI")
    return form


class DataStore(_Model):
    """Where data lives: a file system, an object store, a DBMS."""

    name: Name
    kind: StrictStr | None = None
    location: Annotated[StrictStr, AfterValidator(_store_location)] | None = None
    description: StrictStr | None = None


class Spec(_Model):
    """A workflow's prospective provenance."""

    workflow: Name
    phase: Literal["curation", "preparation", "learning"]
    transformations: list[Transformation] = Field(min_length=1)
    data_stores: list[DataStore] = Field(default_factory=list)
    description: StrictStr | None = None

    _by_name: dict[str, Transformation] = PrivateAttr(default_factory=dict)
    _parents: set[str] = PrivateAttr(default_factory=set)  # what sections are ``of``

    def model_post_init(self, __context: Any) -> None:
        self._by_name = {t.name: t for t in self.transformations}
        self._parents = {t.of for t in self.transformations if t.kind == "section" and t.of}

    def transformation(self, name: str) -> Transformation | None:
        """The transformation called ``name``, or None."""
        return self._by_name.get(name)

    def has_sections(self, name: str) -> bool:
        """Whether a section of this spec is ``of`` transformation ``name`` (a section without
        any is innermost: the batches)."""
        return name in self._parents

    def granularity(self, name: str) -> str:
        """How transformation ``name``'s executions are kept: its ``granularity``, or when
        unset ``both`` for an innermost section (rollups beside the detail, which the
        queries read) and ``full`` for anything else."""
        t = self._by_name.get(name)
        if t is None:
            return "full"
        if t.granularity is not None:
            return t.granularity
        return "both" if t.kind == "section" and name not in self._parents else "full"

    def summarised(self, name: str) -> bool:
        """Whether transformation ``name`` keeps per-parent rollups (``summary`` or ``both``)."""
        return self.granularity(name) in ("summary", "both")

    def rolled_up(self, name: str) -> bool:
        """Whether section ``name``'s executions get a rollup per parent: an innermost one when
        it is summarised, one with sections of its own (an epoch, rolled up per training) when
        every innermost section of the spec is. So a parent that has a rollup has one for each
        of its declared sections, which the queries rely on (they answer a parent from its
        rollups or from its executions, never both), and an explicit ``full`` anywhere (the
        paper's form) leaves every level without rollups. Not a granularity of its own: only
        innermost sections set one."""
        t = self._by_name.get(name)
        if t is None or t.kind != "section":
            return False
        if name not in self._parents:
            return self.summarised(name)
        return all(self.summarised(s.name) for s in self.transformations
                   if s.kind == "section" and s.name not in self._parents)

    def detailed(self, name: str) -> bool:
        """Whether transformation ``name`` keeps every execution (``full`` or ``both``)."""
        return self.granularity(name) != "summary"

    def stage_kind(self, name: str) -> str | None:
        """The kind of the stage a transformation belongs to: its own kind, or for a
        section the kind of the first non-section up its ``of`` chain."""
        seen: set[str] = set()
        t = self._by_name.get(name)
        while t is not None and t.kind == "section" and t.of is not None and t.name not in seen:
            seen.add(t.name)
            t = self._by_name.get(t.of)
        return None if t is None else t.kind


def expand_curie(text: str) -> str:
    """An IRI from ``prefix:local`` (a prefix of ``vocab.PREFIXES``) or an absolute IRI.

    >>> expand_curie("seis:numberOfSlices")
    'https://w3id.org/provkg/seismic#numberOfSlices'

    Raises:
        BadSpec: when ``text`` is neither.
    """
    prefix, sep, local = text.partition(":")
    if sep and prefix in PREFIXES and not local.startswith("//"):
        full = PREFIXES[prefix] + local
        if is_valid_iri(full):
            return full
    elif sep and (local.startswith("//") or prefix in ("urn", "tag", "mailto")) and is_valid_iri(text):
        return text
    known = ", ".join(sorted(PREFIXES))
    raise BadSpec(f"expected an absolute IRI (https://...) or a CURIE with one of the prefixes {known}")
