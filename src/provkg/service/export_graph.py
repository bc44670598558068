"""What an export reads: the PROV classes provkg's own classes specialise, and a local copy of
the part of the store an export covers (the whole store, one run, or one value's lineage).

Executions, values and agents are typed with PROV-ML / PROVLake / S-PROV classes only (or also
with the base PROV class, once the mapper writes it): which of them are activities, entities,
agents and plans is read from the ``rdfs:subClassOf`` axioms of provkg's bundled ontologies and
their PROV-O / ML Schema / ProvONE imports, joined with those the store holds, so an export needs
neither a reasoner nor `provkg init`.

The copy is an in-memory Oxigraph store: the export's SPARQL then runs on one engine, with RDF
terms kept exactly (datatypes, big integers), whatever the store behind it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from provkg.errors import NotFound, StoreError
from provkg.term import id_from_iri, iri, is_valid_iri, literal, mint_iri
from provkg.vocab import DEFAULT_BASE, OWL, PROV, PROVKG, PROVLAKE, RDFS, SPROV

if TYPE_CHECKING:
    import pyoxigraph

    from provkg.store import Store

__all__ = ["ProvClasses", "Scope", "local_copy", "prov_classes", "run_activities", "scope_of"]

#: VALUES blocks of at most this many IRIs per query (SPARQL servers limit request sizes)
CHUNK = 400
#: links from a node of a run or a lineage to the nodes that describe it (its agents, plan,
#: prospective attribute, summaries, qualified influences, S-PROV instances and changes)
_DESCRIBING = (PROV.wasAssociatedWith, PROV.wasInfluencedBy, PROV.actedOnBehalfOf, PROV.atLocation,
               PROV.term("qualifiedAssociation"), PROV.term("qualifiedUsage"),
               PROV.term("qualifiedGeneration"), PROV.term("hadPlan"), PROV.term("agent"),
               PROV.term("hadRole"), PROVKG.term("hasSectionSummary"), PROVKG.term("hasMeasureSummary"),
               SPROV.qualifiedChange)
_BASES = ("Activity", "Entity", "Agent", "Plan")


@dataclass(frozen=True)
class ProvClasses:
    """The IRIs of every class that is (a subclass of) prov:Activity, Entity, Agent and Plan."""

    activity: frozenset[str]
    entity: frozenset[str]
    agent: frozenset[str]
    plan: frozenset[str]


@cache
def _bundled_axioms() -> tuple[tuple[str, str], ...]:
    """(class, superclass) of every ``rdfs:subClassOf`` between named classes in provkg's
    ontologies and their local imports."""
    import pyoxigraph as ox

    from provkg.ontology import all_ontology_paths, import_paths

    pairs: set[tuple[str, str]] = set()
    paths = [*all_ontology_paths(), *import_paths()]
    provone = import_paths()[0].parent / "provone.owl"
    for path in [*paths, *([provone] if provone.is_file() else [])]:
        fmt = ox.RdfFormat.RDF_XML if path.suffix in (".owl", ".rdf") else ox.RdfFormat.TURTLE
        for quad in ox.parse(path=str(path), format=fmt):
            if (quad.predicate.value == RDFS.subClassOf and isinstance(quad.subject, ox.NamedNode)
                    and isinstance(quad.object, ox.NamedNode)):
                pairs.add((quad.subject.value, quad.object.value))
    return tuple(sorted(pairs))


def prov_classes(store: Store | None = None) -> ProvClasses:
    """The PROV classes and their subclasses, from the bundled ontologies and, given a
    ``store``, the subclass axioms it holds (a domain ontology's own subclasses of PROV)."""
    pairs = set(_bundled_axioms())
    if store is not None:
        rows = store.select(f"SELECT DISTINCT ?c ?s WHERE {{ ?c <{RDFS.subClassOf}> ?s . "
                            "FILTER(isIRI(?c) && isIRI(?s)) }", hide_system_graphs=False)
        pairs.update((str(c), str(s)) for c, s in rows.rows)
    supers: dict[str, set[str]] = {}
    for sub, sup in pairs:
        supers.setdefault(sup, set()).add(sub)

    def below(top: str) -> frozenset[str]:
        seen, todo = {top}, [top]
        while todo:
            for sub in supers.get(todo.pop(), ()):
                if sub not in seen:
                    seen.add(sub)
                    todo.append(sub)
        return frozenset(seen)

    activity, entity, agent, plan = (below(PROV.term(name)) for name in _BASES)
    return ProvClasses(activity, entity | plan, agent, plan)  # a plan is an entity (PROV-O)


@dataclass
class Scope:
    """What an export covers: ``nodes`` (IRIs) of one run or lineage, or None for the whole
    store; ``label`` says which, for reports."""

    nodes: frozenset[str] | None
    label: str
    run: str | None = None


def _values(var: str, iris: Iterable[str]) -> str:
    return f"VALUES ?{var} {{ {' '.join(iri(i) for i in iris)} }}"


def _chunks(items: Iterable[str]) -> list[list[str]]:
    ordered = sorted(items)
    return [ordered[i:i + CHUNK] for i in range(0, len(ordered), CHUNK)]


def _objects(store: Store, subjects: Iterable[str], where: str) -> set[str]:
    """Every IRI ``?o`` of ``where`` (a pattern over ``?s`` and ``?o``) for the ``subjects``."""
    found: set[str] = set()
    for chunk in _chunks(subjects):
        rows = store.select(f"SELECT DISTINCT ?o WHERE {{ {_values('s', chunk)} {where} FILTER(isIRI(?o)) }}",
                            hide_system_graphs=False)
        found.update(str(o) for (o,) in rows.rows if isinstance(o, str) and is_valid_iri(o))
    return found


def run_activities(store: Store, run: str) -> set[str]:
    """The run, its tasks (``provlake:isPartOf`` it, or at an S-PROV instance of it) and
    their sections at any depth (``prov:wasInformedBy`` a task, with no run of their own)."""
    activities = {run} | _objects(store, [run], f"?o <{PROVLAKE.isPartOf}> ?s .")
    activities |= _objects(store, [run], f"?s <{PROV.wasAssociatedWith}> ?i . ?i a <{SPROV.ComponentInstance}> . "
                                         f"?o <{PROV.wasAssociatedWith}> ?i .")
    frontier = set(activities) - {run}
    while frontier:
        frontier = _objects(store, frontier, f"?o <{PROV.wasInformedBy}> ?s . "
                                             f"FILTER NOT EXISTS {{ ?o <{PROVLAKE.isPartOf}> ?any }}") - activities
        activities |= frontier
    return activities


def _described(store: Store, nodes: set[str]) -> set[str]:
    """``nodes`` with what describes them (:data:`_DESCRIBING`, followed to a fixpoint) and
    the location nodes that stand for a value (``provkg:locationOf``)."""
    links = " | ".join(f"<{p}>" for p in _DESCRIBING)
    out, frontier = set(nodes), set(nodes)
    while frontier:
        frontier = _objects(store, frontier, f"?s ({links}) ?o .") - out
        out |= frontier
    return out | _objects(store, out, f"?o <{PROVKG.term('locationOf')}> ?s .")


def _run_scope(store: Store, run_id: str, base: str) -> Scope:
    run = run_id if run_id.startswith(f"{base}run/") and is_valid_iri(run_id) else mint_iri("run", run_id, base=base)
    if not store.ask(f"ASK {{ {iri(run)} a ?class }}"):
        rows = store.select(f"SELECT DISTINCT ?r WHERE {{ ?t <{PROVLAKE.isPartOf}> ?r . "
                            f"FILTER(STRSTARTS(STR(?r), {literal(base + 'run/')})) }} ORDER BY ?r LIMIT 5",
                            hide_system_graphs=False)
        known = ", ".join(id_from_iri(str(r), "run") or str(r) for (r,) in rows.rows) or "none"
        raise NotFound(f"the store has no run {run_id!r} (runs it holds include: {known})")
    activities = run_activities(store, run)
    used = _objects(store, activities, f"?s <{PROV.used}> ?o .")
    generated = _objects(store, activities, f"?o <{PROV.wasGeneratedBy}> ?s .")
    entities = used | generated
    sources = _objects(store, entities, f"?s <{PROV.wasDerivedFrom}> ?o .")  # one hop: the spec's
    # attribute (a role) or the data it was made from, which a reader needs to see
    return Scope(frozenset(_described(store, activities | entities | sources)),
                 f"run {id_from_iri(run, 'run') or run}", run=run)


def _lineage_scope(store: Store, value: str, base: str) -> Scope:
    from provkg.queries.generic import MAX_WALK_DEPTH
    from provkg.service.links import value_named, values_at_location
    from provkg.service.querying import run_query

    starts = {t[1:-1] for t in values_at_location(store, value)}
    named = value_named(store, value, base=base)
    if named is not None:
        starts.add(named[1:-1])
    if value.startswith(f"{base}value/") and is_valid_iri(value):
        starts.add(value)
    starts = {s for s in starts if store.ask(f"ASK {{ {{ {iri(s)} ?p ?o }} UNION {{ ?x ?q {iri(s)} }} }}")}
    if not starts:
        raise NotFound(f"the store has no value {value!r} (a captured value id, its IRI or its location)")
    nodes, frontier, walked = set(starts), set(starts), set()
    while frontier:  # each walk reaches MAX_WALK_DEPTH hops: walk again from where it stopped
        walked |= frontier
        reached: set[str] = set()
        for start in sorted(frontier):
            rows = run_query(store, "lineage", {"data": start, "depth": MAX_WALK_DEPTH}, base=base)
            for data, derived_from, activity, depth in rows.rows:
                nodes.update(str(n) for n in (data, derived_from, activity) if isinstance(n, str) and is_valid_iri(n))
                if depth == MAX_WALK_DEPTH and isinstance(derived_from, str):
                    reached.add(derived_from)
        frontier = reached - walked
    kg = _objects(store, nodes, f"?s <{PROVLAKE.denotes}> ?o .")  # a KG resource: not provenance
    return Scope(frozenset(_described(store, nodes - kg) | kg), f"lineage of {value}")


def scope_of(store: Store, *, run: str | None = None, lineage: str | None = None,
             base: str = DEFAULT_BASE) -> Scope:
    """The whole store, the run ``run`` (an id or its IRI) or the lineage of the value
    ``lineage`` (an id, its IRI or a location).

    Raises:
        NotFound: no such run or value.
    """
    if run is not None:
        return _run_scope(store, run, base)
    if lineage is not None:
        return _lineage_scope(store, lineage, base)
    return Scope(None, "the whole store")


def data_copy(store: Store) -> pyoxigraph.Store:
    """An in-memory Oxigraph store holding ``store``'s data: every graph but the ontologies'
    (a graph declaring an ``owl:Ontology``: provkg's, PROV-O and ML Schema as ``provkg init``
    loads them, a vocabulary loaded with ``provkg load --graph``). What exports and
    ``provkg validate`` read."""
    import pyoxigraph as ox

    copy = ox.Store()
    dump = io.BytesIO()
    try:
        store.dump(dump)
    except StoreError:  # a SPARQL server has no dump of its own here: its triples, bar ontologies'
        triples = store.construct(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o FILTER NOT EXISTS "
                                  f"{{ GRAPH ?g {{ ?s ?p ?o . ?ont a <{OWL.Ontology}> }} }} }}")
        copy.bulk_load("".join(f"{s} {p} {o} .\n" for s, p, o in triples).encode("utf-8"),
                       format=ox.RdfFormat.N_TRIPLES)
        return copy
    copy.bulk_load(dump.getvalue(), format=ox.RdfFormat.N_QUADS)
    ontologies = copy.query(f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ ?o a <{OWL.Ontology}> }} }}")
    for row in list(ontologies):  # type: ignore[arg-type]
        copy.remove_graph(row["g"])
    return copy


def local_copy(store: Store, scope: Scope) -> pyoxigraph.Store:
    """An in-memory Oxigraph store holding what ``scope`` covers: the store's data
    (:func:`data_copy`), or every triple whose subject is a node of the scope (in the
    default graph)."""
    import pyoxigraph as ox

    if scope.nodes is None:
        return data_copy(store)
    copy = ox.Store()
    for chunk in _chunks(scope.nodes):
        triples = store.construct(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ {_values('s', chunk)} ?s ?p ?o }}")
        text = "".join(f"{s} {p} {o} .\n" for s, p, o in triples)
        copy.bulk_load(text.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)
    return copy
