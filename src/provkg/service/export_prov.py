"""A W3C PROV document (``prov.model.ProvDocument``) of what an export covers.

Records: every node typed with a PROV class or a provkg subclass of one
(:func:`provkg.service.export_graph.prov_classes`) is an activity (with its start and end),
an entity (a plan is an entity with ``prov:type prov:Plan``) or an agent; its classes are its
``prov:type``, ``rdfs:label`` its ``prov:label``, ``prov:value`` its value, and every other
property of it an attribute of the same name. Relations: each ``prov:used``,
``prov:wasGeneratedBy``, ``prov:wasDerivedFrom``, ``prov:wasInformedBy``,
``prov:actedOnBehalfOf``, ``prov:hadMember``, ``prov:wasAttributedTo`` of the graph, and one
association per agent of an activity with the plan it followed (``prov:hadPlan`` of a qualified
association, else the plan it ``prov:wasInfluencedBy``).

A captured value's ``prov:wasDerivedFrom`` its prospective attribute (an IRI under
``{base}spec/``: the PROVLake convention) is not a derivation here: the attribute is the
``prov:role`` of the value's usage or generation by an activity of that attribute's
transformation, and the ``prov:type`` of a value no such activity used or generated.
Times on usages and generations are those the graph states (qualified ``prov:atTime``).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from provkg.errors import BadParameter
from provkg.term import literal
from provkg.vocab import DEFAULT_BASE, PREFIXES, PROV, PROVKG, RDF, RDFS, XSD

if TYPE_CHECKING:
    import pyoxigraph
    from prov.identifier import QualifiedName
    from prov.model import ProvDocument

    from provkg.service.export_graph import ProvClasses

__all__ = ["PROV_FORMATS", "prov_document", "serialize_prov"]

#: export format -> the ``prov`` serializer that writes it
PROV_FORMATS = {"prov-json": "json", "prov-n": "provn", "prov-xml": "xml", "prov-jsonld": "jsonld"}

_Q = {name: PROV.term(name) for name in (
    "qualifiedAssociation", "qualifiedUsage", "qualifiedGeneration", "hadPlan", "agent", "entity",
    "activity", "hadRole", "atTime", "hadMember", "Plan", "Activity", "Entity", "Agent")}
#: properties an export writes as records or relations, not as attributes
_STRUCTURE = {RDF.type, PROV.startedAtTime, PROV.endedAtTime, PROV.used, PROV.wasGeneratedBy,
              PROV.wasDerivedFrom, PROV.wasAssociatedWith, PROV.wasInformedBy, PROV.wasInfluencedBy,
              PROV.actedOnBehalfOf, PROV.wasAttributedTo, PROVKG.term("dependsOn"),
              _Q["qualifiedAssociation"], _Q["qualifiedUsage"], _Q["qualifiedGeneration"], _Q["hadMember"]}
_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_INTEGERS = {XSD.integer, XSD.term("int"), XSD.term("long"), XSD.term("short")}


class _Names:
    """IRIs as qualified names: provkg's vocabularies under their usual prefixes, instance IRIs
    under one prefix per kind (``task:run-1/training-0``), any other IRI under a namespace
    ``nsN`` cut at its last ``#`` or ``/``, so that every IRI is a valid qualified name."""

    def __init__(self, document: ProvDocument, base: str):
        from prov.identifier import Namespace

        self._document, self._base, self._new = document, base, Namespace
        self._spaces: dict[str, Any] = {}
        for prefix, uri in sorted(PREFIXES.items(), key=lambda kv: -len(kv[1])):
            self._spaces[uri] = document.add_namespace(prefix, uri)
        self._counter = 0
        self._prefixes = set(PREFIXES) | {"prov", "xsd"}

    def _space(self, uri: str, wanted: str | None) -> Any:
        space = self._spaces.get(uri)
        if space is None:
            prefix = wanted if wanted and _PREFIX.match(wanted) and wanted not in self._prefixes else None
            while prefix is None or prefix in self._prefixes:
                self._counter += 1
                prefix = f"ns{self._counter}"
            self._prefixes.add(prefix)
            space = self._spaces[uri] = self._document.add_namespace(prefix, uri)
        return space

    def __call__(self, uri: str) -> QualifiedName:
        for space_uri in (u for u in self._spaces if uri.startswith(u) and len(uri) > len(u)):
            return self._spaces[space_uri][uri[len(space_uri):]]
        if uri.startswith(self._base) and "/" in uri[len(self._base):].rstrip("/"):
            kind = uri[len(self._base):].split("/", 1)[0]
            return self._space(f"{self._base}{kind}/", kind)[uri[len(self._base) + len(kind) + 1:]]
        cut = max(uri.rfind("#", 0, len(uri) - 1), uri.rfind("/", 0, len(uri) - 1))
        if cut < uri.find(":"):  # no path to cut (urn:x:y): after the last colon
            cut = uri.rfind(":", 0, len(uri) - 1)
        if cut < 0:  # nothing to cut at (``a:``): the whole IRI is the namespace, prov needs one
            return self._space(uri, None)[""]
        return self._space(uri[:cut + 1], None)[uri[cut + 1:]]


def _rows(graph: pyoxigraph.Store, query: str) -> list[tuple[Any, ...]]:
    solutions = graph.query(query, use_default_graph_as_union=True)
    names = [v.value for v in solutions.variables]  # type: ignore[union-attr]
    return [tuple(s[n] for n in names) for s in solutions]  # type: ignore[union-attr]


def _datetime(term: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(term.value)
    except (AttributeError, ValueError):
        return None


def _value(term: Any, names: _Names) -> Any:
    """An RDF term as a PROV attribute value: an IRI as a qualified name, a literal as the
    Python value of its JSON type where that is exact, else as a typed ``prov`` Literal."""
    import pyoxigraph as ox
    from prov.model import Literal

    if isinstance(term, ox.NamedNode):
        return names(term.value)
    if not isinstance(term, ox.Literal):
        return Literal(str(term), names(XSD.string))
    datatype, text = term.datatype.value, term.value
    if term.language:
        return Literal(text, langtag=term.language)
    try:
        if datatype == XSD.string:
            return text
        if datatype == XSD.boolean:
            return text in ("true", "1")
        if datatype in _INTEGERS and abs(int(text)) < 2**63:
            return int(text)
        if datatype == XSD.double and math.isfinite(float(text)):
            return float(text)
        if datatype == XSD.dateTime and _datetime(term) is not None:
            return _datetime(term)
    except ValueError:
        pass
    return Literal(text, names(datatype))


def _attribute_name(predicate: str, names: _Names) -> Any:
    from prov.constants import PROV_LABEL, PROV_LOCATION, PROV_VALUE

    return {RDFS.label: PROV_LABEL, PROV.value: PROV_VALUE, PROV.atLocation: PROV_LOCATION}.get(
        predicate) or names(predicate)


def prov_document(graph: pyoxigraph.Store, classes: ProvClasses, *, base: str = DEFAULT_BASE) -> ProvDocument:
    """The PROV document of ``graph`` (a local copy: :func:`~provkg.service.export_graph.local_copy`)."""
    from prov.constants import PROV_TYPE
    from prov.model import ProvDocument

    document = ProvDocument()
    names = _Names(document, base)
    spec = literal(f"{base}spec/")
    kinds: dict[str, set[str]] = defaultdict(set)
    types: dict[str, set[str]] = defaultdict(set)
    for node, cls in _rows(graph, "SELECT DISTINCT ?s ?c WHERE { ?s a ?c . FILTER(isIRI(?s) && isIRI(?c)) }"):
        types[node.value].add(cls.value)
        for kind, members in (("activity", classes.activity), ("entity", classes.entity),
                              ("agent", classes.agent)):
            if cls.value in members:
                kinds[node.value].add(kind)
    plans = {n for n, cs in types.items() if cs & classes.plan}

    attributes: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    starts: dict[str, datetime | None] = {}
    ends: dict[str, datetime | None] = {}
    for s, p, o in _rows(graph, "SELECT ?s ?p ?o WHERE { ?s ?p ?o . FILTER(isIRI(?s)) }"):
        if s.value not in kinds:
            continue
        if p.value == PROV.startedAtTime:
            starts[s.value] = _datetime(o)
        elif p.value == PROV.endedAtTime:
            ends[s.value] = _datetime(o)
        elif p.value not in _STRUCTURE:
            attributes[s.value].append((_attribute_name(p.value, names), _value(o, names)))

    # the spec-attribute convention: roles, not derivations
    prospective: dict[str, set[str]] = defaultdict(set)
    for value, attr in _rows(graph, f"SELECT ?v ?a WHERE {{ ?v <{PROV.wasDerivedFrom}> ?a . "
                                    f"FILTER(isIRI(?v) && STRSTARTS(STR(?a), {spec})) }}"):
        prospective[value.value].add(attr.value)
    plan_of: dict[str, set[str]] = defaultdict(set)
    for act, plan in _rows(graph, f"SELECT ?a ?p WHERE {{ ?a <{PROV.wasInfluencedBy}> ?p . FILTER(isIRI(?p)) }}"):
        if plan.value in plans or plan.value.startswith(f"{base}spec/"):
            plan_of[act.value].add(plan.value)
    roled: set[str] = set()

    def role(activity: str, entity: str, given: Any) -> Any:
        if given is not None:
            return names(given.value) if hasattr(given, "value") else given
        for attr in sorted(prospective.get(entity, ())):
            owner = attr.rsplit("/", 1)[0]
            if owner in plan_of.get(activity, ()):
                roled.add(entity)
                return names(attr)
        return None

    for node in sorted(kinds):
        extra = [(PROV_TYPE, names(c)) for c in sorted(types[node])
                 if c not in (_Q["Activity"], _Q["Entity"], _Q["Agent"])]
        if "activity" in kinds[node]:
            document.activity(names(node), starts.get(node), ends.get(node), extra + attributes[node])
        if "entity" in kinds[node]:
            document.entity(names(node), extra + attributes[node])
        if "agent" in kinds[node]:
            document.agent(names(node), extra + attributes[node])

    _usages_and_generations(graph, document, names, role)
    for node in sorted(prospective):
        if node in kinds and node not in roled and "entity" in kinds[node]:
            for attr in sorted(prospective[node]):
                document.get_record(names(node))[0].add_attributes([(PROV_TYPE, names(attr))])
    _other_relations(graph, document, names, spec, plan_of)
    return document


def _usages_and_generations(graph: pyoxigraph.Store, document: ProvDocument, names: _Names,
                            role: Any) -> None:
    """One usage per (activity, entity) and one generation per (entity, activity), with the
    role and time of a qualified usage / generation when the graph has one."""
    from prov.constants import PROV_ROLE

    q = _Q
    for relation, rows in (
        ("usage", _rows(graph, f"""SELECT ?a ?e (SAMPLE(?r) AS ?role) (SAMPLE(?t) AS ?time) WHERE {{
            {{ ?a <{PROV.used}> ?e }} UNION {{ ?a <{q['qualifiedUsage']}> ?u . ?u <{q['entity']}> ?e .
              OPTIONAL {{ ?u <{q['hadRole']}> ?r }} OPTIONAL {{ ?u <{q['atTime']}> ?t }} }}
            FILTER(isIRI(?a) && isIRI(?e)) }} GROUP BY ?a ?e ORDER BY ?a ?e""")),
        ("generation", _rows(graph, f"""SELECT ?a ?e (SAMPLE(?r) AS ?role) (SAMPLE(?t) AS ?time) WHERE {{
            {{ ?e <{PROV.wasGeneratedBy}> ?a }} UNION {{ ?e <{q['qualifiedGeneration']}> ?g . ?g <{q['activity']}> ?a .
              OPTIONAL {{ ?g <{q['hadRole']}> ?r }} OPTIONAL {{ ?g <{q['atTime']}> ?t }} }}
            OPTIONAL {{ ?e <{PROV.generatedAtTime}> ?at }}
            FILTER(isIRI(?a) && isIRI(?e)) }} GROUP BY ?a ?e ORDER BY ?e ?a""")),
    ):
        for activity, entity, given_role, time in rows:
            found = role(activity.value, entity.value, given_role)
            attrs = [(PROV_ROLE, found)] if found is not None else None
            when = _datetime(time) if time is not None else None
            if relation == "usage":
                document.usage(names(activity.value), names(entity.value), when, other_attributes=attrs)
            else:
                document.generation(names(entity.value), names(activity.value), when, other_attributes=attrs)


def _other_relations(graph: pyoxigraph.Store, document: ProvDocument, names: _Names, spec: str,
                     plan_of: dict[str, set[str]]) -> None:
    q = _Q
    for derived, source in _rows(graph, f"SELECT DISTINCT ?d ?s WHERE {{ ?d <{PROV.wasDerivedFrom}> ?s . "
                                        f"FILTER(isIRI(?d) && isIRI(?s) && !STRSTARTS(STR(?s), {spec})) }} "
                                        "ORDER BY ?d ?s"):
        document.derivation(names(derived.value), names(source.value))
    associated: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    for act, agent, plan in _rows(graph, f"""SELECT DISTINCT ?a ?ag ?p WHERE {{ ?a <{q['qualifiedAssociation']}> ?x .
            OPTIONAL {{ ?x <{q['agent']}> ?ag }} OPTIONAL {{ ?x <{q['hadPlan']}> ?p }} FILTER(isIRI(?a)) }}"""):
        associated[act.value].add((agent.value if agent else None, plan.value if plan else None))
    for act, agent in _rows(graph, f"SELECT DISTINCT ?a ?ag WHERE {{ ?a <{PROV.wasAssociatedWith}> ?ag . "
                                   "FILTER(isIRI(?a) && isIRI(?ag)) }"):
        if agent.value not in {ag for ag, _ in associated[act.value]}:
            plans_of_act: list[str | None] = [*sorted(plan_of.get(act.value, set()))] or [None]
            for plan in plans_of_act:
                associated[act.value].add((agent.value, plan))
    for act, plans in plan_of.items():  # a plan followed, whoever the agent
        followed = {p for _, p in associated[act]}
        associated[act].update((None, p) for p in plans - followed)
    for act in sorted(associated):
        for agent, plan in sorted(associated[act], key=lambda ap: (ap[0] or "", ap[1] or "")):
            document.association(names(act), names(agent) if agent else None, names(plan) if plan else None)
    for prop, make in ((PROV.wasInformedBy, document.communication),
                       (PROVKG.term("dependsOn"), document.communication),
                       (PROV.actedOnBehalfOf, document.delegation),
                       (q["hadMember"], document.membership),
                       (PROV.wasAttributedTo, document.attribution)):
        for a, b in _rows(graph, f"SELECT DISTINCT ?a ?b WHERE {{ ?a <{prop}> ?b . FILTER(isIRI(?a) && isIRI(?b)) }} "
                                 "ORDER BY ?a ?b"):
            make(names(a.value), names(b.value))
    for a, b in _rows(graph, f"SELECT DISTINCT ?a ?b WHERE {{ ?a <{PROV.wasInfluencedBy}> ?b . "
                             "FILTER(isIRI(?a) && isIRI(?b)) } ORDER BY ?a ?b"):
        if b.value not in plan_of.get(a.value, ()):
            document.influence(names(a.value), names(b.value))


def serialize_prov(document: ProvDocument, fmt: str) -> bytes:
    """``document`` written in the export format ``fmt`` (a key of :data:`PROV_FORMATS`).

    Raises:
        BadParameter: ``prov-xml`` without the ``lxml`` package, which ``prov`` writes it with.
    """
    if fmt == "prov-xml":
        import importlib.util

        if importlib.util.find_spec("lxml") is None:
            raise BadParameter("--format prov-xml needs the lxml package, which is not installed "
                               "(pip install lxml); prov-json, prov-n and prov-jsonld need nothing more")
    options: dict[str, Any] = {"indent": 2} if fmt in ("prov-json", "prov-jsonld") else {}
    text = document.serialize(format=PROV_FORMATS[fmt], **options)
    return (text or "").encode("utf-8") if isinstance(text, str) or text is None else text
