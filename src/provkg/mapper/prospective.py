"""Prospective triples: a spec as a graph (docs/reference/graph.md, "Prospective part").

Typed: transformations and attributes get the PROV-ML classes their kind and role
imply. Tagged: plain PROVLake classes qualified by ``provlake:tag`` (Listing 2).
Both: labels, ``provlake:isPartOf``, ``hasInput`` / ``hasOutput``, concepts, stores, and
the workflow and each transformation ``a prov:Plan, prov:Entity``, attributes and stores
``a prov:Entity`` (what PROV-O and PROVLake imply, asserted: :mod:`provkg.mapper.base`).
"""

from __future__ import annotations

from collections.abc import Iterator

from provkg.mapper import tagged, typed
from provkg.mapper.base import PLAN_TYPES
from provkg.mapper.common import Minter
from provkg.mapper.terms import COMMENT, LABEL, PK, PL, A, P, term_of
from provkg.schemas import Schema
from provkg.spec import Spec
from provkg.term import Triple, literal

__all__ = ["prospective_triples"]


def prospective_triples(spec: Spec, *, schema: Schema | str, mint: Minter) -> Iterator[Triple]:
    """The spec's triples in ``schema`` (``typed`` or ``tagged``)."""
    is_typed = Schema(schema).typed_classes
    wf = mint.spec(spec.workflow)
    yield wf, A, PL.Workflow
    for plan_type in PLAN_TYPES:
        yield wf, A, plan_type
    yield wf, LABEL, literal(spec.workflow)
    yield wf, PL.tag, literal(spec.phase)
    # one node per workflow and name: two workflows' "disk" may be two places, and a spec
    # registered again with a changed location must replace this workflow's (ingest forgets
    # the old spec's triples by their subjects, which are all this workflow's)
    stores = {s.name: mint.other("store", spec.workflow, s.name) for s in spec.data_stores}
    for s in spec.data_stores:
        st = stores[s.name]
        yield st, A, PL.DataStore
        yield st, A, P.Entity
        yield st, LABEL, literal(s.name)
        if s.kind is not None:
            yield st, PL.tag, literal(s.kind)
        if s.description is not None:
            yield st, COMMENT, literal(s.description)
        if s.location is not None:
            yield st, PL.location, literal(s.location, "http://www.w3.org/2001/XMLSchema#anyURI")
    for t in spec.transformations:
        tr = mint.spec(spec.workflow, t.name)
        stage = spec.stage_kind(t.name)
        if is_typed:
            yield tr, A, typed.TRANSFORMATION_CLASS[t.kind]
        else:
            yield tr, A, PL.DataTransformation
            tag = tagged.transformation_tag(t.kind, stage)
            if tag is not None:
                yield tr, PL.tag, literal(tag)
        for plan_type in PLAN_TYPES:
            yield tr, A, plan_type
        yield tr, LABEL, literal(t.name)
        yield tr, PL.isPartOf, wf
        if t.kind == "section" and t.of is not None:
            yield tr, PL.isPartOf, mint.spec(spec.workflow, t.of)
            if not spec.has_sections(t.name):
                yield tr, PK.innermost, literal(True)
        for side, link in (("used", PL.hasInput), ("generated", PL.hasOutput)):
            for a in getattr(t, side):
                at = mint.spec(spec.workflow, t.name, a.name)
                yield tr, link, at
                if is_typed:
                    yield at, A, typed.ATTRIBUTE_CLASS[a.role]
                else:
                    yield at, A, PL.Attribute
                    tag = tagged.ROLE_TAG[a.role]
                    if tag is not None:
                        yield at, PL.tag, literal(tag)
                yield at, A, P.Entity
                yield at, LABEL, literal(a.name)
                if a.concept is not None:
                    yield at, PL.concept, term_of(a.concept_iri)
                if a.store is not None:
                    yield at, PL.storedIn, stores[a.store]
