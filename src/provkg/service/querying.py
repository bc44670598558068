"""Use case: ask a store lifecycle questions (canned queries) or read-only SPARQL.

>>> [q.name for q in query_catalog()][:2]
['q1', 'q2']
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from provkg.errors import ReadOnlyQuery
from provkg.mapper.terms import PL, A, P
from provkg.queries.catalog import CannedQuery, canned_queries, get_query
from provkg.queries.lifecycle import measure_lower
from provkg.queries.params import term_for
from provkg.schemas import Schema
from provkg.service.ingest import schemas_in_store
from provkg.service.links import value_named, values_at_location
from provkg.service.sparql_guard import check_query, query_form
from provkg.store import Rows, Store
from provkg.term import Triple, iri, is_valid_iri, literal, mint_iri
from provkg.vocab import DEFAULT_BASE, PROV, PROVKG, RDFS

__all__ = [
    "QueryAnswer",
    "answer_query",
    "query_catalog",
    "render_query",
    "run_query",
    "run_sparql",
    "schema_mismatch",
    "unknown_attributes",
    "why_empty",
]



def query_catalog() -> list[CannedQuery]:
    """Every canned query (``.name``, ``.question``, ``.parameters``, ``.columns``)."""
    return canned_queries()


def render_query(name: str, params: dict[str, object], *, schema: str = "typed",
                 base: str = DEFAULT_BASE, dialect: str = "standard") -> str:
    """The SPARQL canned query ``name`` runs for ``params`` on ``schema``.

    Raises:
        UnknownQuery: no such query.  BadParameter: a missing or malformed parameter.
    """
    return get_query(name).render(params, schema=schema, base=base, dialect=dialect)


def run_query(store: Store, name: str, params: dict[str, object], *, schema: str = "typed",
              base: str = DEFAULT_BASE, timeout: float | None = None,
              relative_to: str | Path | None = None) -> Rows:
    """Run canned query ``name`` on ``store``: rows in the query's fixed columns.

    A ``data`` parameter is a value id or a location (URI or path); with ``relative_to`` (the
    CLI gives its working directory) a relative path also names the file it is there.

    Raises:
        UnknownQuery, BadParameter, StoreError (and QueryTimeout past ``timeout``).
    """
    query = get_query(name)
    data_terms = _values_at_locations(store, query, params, base=base, relative_to=relative_to)
    first = query.render_precondition(params, schema=schema, base=base,
                                      dialect=store.query_dialect, data_terms=data_terms)
    if first is not None and not store.select(first, timeout=timeout, hide_system_graphs=False).rows:
        return Rows(list(query.columns), [])  # it cannot have a row (see CannedQuery.precondition)
    for options in ({}, dict(query.fallback)) if query.fallback else ({},):
        text = query.render(params, schema=schema, base=base, dialect=store.query_dialect,
                            data_terms=data_terms, options=options)
        # canned queries match provkg's vocabularies only: no need to hide a store's own graphs
        rows = store.select(text, timeout=timeout, hide_system_graphs=False)
        finished = query.finish(rows.columns, rows.rows, sparql=text)
        if finished:
            break
    return Rows(list(query.columns), finished)


@dataclass
class QueryAnswer:
    """A canned query's rows, and what to tell about them."""

    rows: Rows
    #: rows: parameters that name no attribute; none: why (:func:`why_empty`)
    notes: list[str] = field(default_factory=list)
    #: an S-PROV query on a store without S-PROV data (:func:`schema_mismatch`)
    mismatch: str | None = None


def answer_query(store: Store, name: str, params: dict[str, object], *, schema: str = "typed",
                 base: str = DEFAULT_BASE, relative_to: str | Path | None = None) -> QueryAnswer:
    """:func:`run_query`, with the notes that explain its rows (or their absence).

    Raises:
        as :func:`run_query`."""
    rows = run_query(store, name, params, schema=schema, base=base, relative_to=relative_to)
    notes = (unknown_attributes(store, name, params) if rows.rows
             else why_empty(store, name, params, schema=schema, base=base,
                            relative_to=relative_to))
    return QueryAnswer(rows, notes, schema_mismatch(store, name, schema))


#: what the no-spec notes of why_empty say next
_PLAIN_RUNS = ("so they are stored as plain PROVLake, which the canned queries do not read as "
               "stages and measures: register its spec (`provkg ingest --spec FILE`, or POST "
               "/v1/specs) and the stored runs are typed")
_WHAT = {"data": "captured value (id or location)", "task": "task id",
         "workflow": "workflow (spec name)"}


def why_empty(store: Store, name: str, params: dict[str, object], *, schema: str,
              base: str = DEFAULT_BASE, timeout: float = 10.0,
              relative_to: str | Path | None = None) -> list[str]:
    """Why canned query ``name`` gave no rows, as far as cheap checks tell: a task, data or
    workflow parameter that names nothing in the store (a typo, or another run's id), or
    rows the same query has in another schema (data mapped with another ``--schema``).
    Each schema check is bounded by ``timeout`` seconds; one that runs out says nothing."""
    from provkg.errors import QueryTimeout

    query = get_query(name)
    values = query.parse(params)
    located = _values_at_locations(store, query, params, base=base, relative_to=relative_to)
    notes = []
    for p in query.parameters:
        if p.type not in _WHAT or values.get(p.name) is None:
            continue
        terms = " ".join(located.get(p.name) or (term_for(p, values[p.name], base=base),))
        if not (store.ask(f"ASK {{ VALUES ?x {{ {terms} }} ?x ?p ?o }}")
                or store.ask(f"ASK {{ VALUES ?x {{ {terms} }} ?s ?p ?x }}")):
            given = values[p.name]
            hint = ("; a path names data when absolute (/…) or in a home folder (~/…)"
                    if p.type == "data" and isinstance(given, str) and "/" in given
                    and given[0] not in "/~" and ":" not in given else "")
            notes.append(f"the store has no {_WHAT[p.type]} {given!r} (parameter {p.name}){hint}")
        elif p.type == "workflow" and not store.ask(
                f"ASK {{ {term_for(p, values[p.name], base=base)} ?p ?o }}"):  # the spec's own triples, any schema
            # its runs are there, mapped as plain PROVLake (p1 would answer nothing, and say
            # nothing)
            notes.append(f"the store has runs of workflow {values[p.name]!r} but no spec for "
                         f"it, {_PLAIN_RUNS}")
        elif p.type in ("data", "task") and store.ask(
                f"ASK {{ VALUES ?x {{ {terms} }} "
                + (f"{{ ?t {P.used} ?x }} UNION {{ ?x {P.wasGeneratedBy} ?t }} "
                   f"?t {P.wasInfluencedBy} ?tr " if p.type == "data" else f"?x {P.wasInfluencedBy} ?tr ")
                + "FILTER NOT EXISTS { ?tr ?p ?o } }"):
            # the same for data or a task of such runs (q4 by a dataset of a workflow without
            # a spec would answer nothing, and say nothing)
            notes.append(f"{values[p.name]!r} (parameter {p.name}) belongs to runs of a workflow "
                         f"whose spec the store does not hold, {_PLAIN_RUNS}")
    notes += unknown_attributes(store, name, params)
    if not notes and isinstance(hyperparameter := values.get("hyperparameter"), str) and "value" in values:
        notes += _unrecorded_value(store, hyperparameter, values["value"])
    if not notes and name in _THROUGH_DOMAIN_KG:
        notes += _dangling_links(store, name, base=base)
    if notes:
        return notes
    held = schemas_in_store(store)
    if Schema.named(schema) is not Schema.SPROV and Schema.SPROV in held:
        notes.append(f"this store holds S-PROV data (s-prov:Invocation) and {name} reads the "
                     f"{schema} schema: ingest the events with --schema {schema} to ask it")
    for other in query.schemas:
        if other == schema or other not in held:  # no data of that schema: no need to ask
            continue
        try:
            found = run_query(store, name, params, schema=other, base=base, timeout=timeout)
        except QueryTimeout:
            continue
        if found.rows:
            notes.append(f"with --schema {other} the same query has {len(found.rows)} "
                         f"row{'s' if len(found.rows) != 1 else ''}: the data were mapped "
                         f"in the {other} schema, not {schema}")
    if not notes and name == "q7" and isinstance(measure := values.get("measure"), str):
        param = next(p for p in query.parameters if p.name == "dataset")
        dataset = " ".join(located.get("dataset") or (term_for(param, values["dataset"], base=base),))
        notes += _no_section_measure(store, dataset, measure,
                                     lower=measure_lower(values), timeout=timeout)
    return notes


def _no_section_measure(store: Store, dataset: str, measure: str, *, lower: bool,
                        timeout: float = 10.0) -> list[str]:
    """q7's note when no section of the trainings that used ``dataset`` (VALUES terms) recorded
    ``measure``, in full or in a summary: q7 reads batch measures only (an accuracy recorded
    per training gives q7 no rows, while d5 and q3 answer).

    Each check starts from the dataset, one section depth at a time (a UNION of the two depths
    is evaluated on its own over every task of the store, in a time that grows with the
    square of the store); together they take at most ``timeout`` seconds, and one that runs
    out says nothing."""
    import time

    from provkg.errors import QueryTimeout

    deadline = time.monotonic() + timeout
    m = literal(measure)
    anchor = f"VALUES ?d {{ {dataset} }} ?t {P.used} ?d ."
    depths = (f"?x {P.wasInformedBy} ?t .", f"?e {P.wasInformedBy} ?t . ?x {P.wasInformedBy} ?e .")
    recorded = (f"?x {P.wasInfluencedBy} ?xt . ?xt {iri(PROVKG.innermost)} true . "
                f"?v {P.wasGeneratedBy} ?x ; {P.wasDerivedFrom} ?a . ?a {iri(RDFS.label)} {m} .")
    # a rollup of innermost sections only: an epoch measure rolled up per training is no batch's
    summarised = (f"?s {iri(PROVKG.hasMeasureSummary)} ?ms . ?ms {P.wasDerivedFrom} ?a . "
                  f"?a {iri(RDFS.label)} {m} . ?s {P.wasInfluencedBy} ?st . "
                  f"?st {iri(PROVKG.innermost)} true .")
    checks = [f"{anchor} {depth} {recorded}" for depth in depths]
    checks.append(f"{anchor} ?t {iri(PROVKG.hasSectionSummary)} ?s . {summarised}")
    checks += [f"{anchor} {depth} ?x {iri(PROVKG.hasSectionSummary)} ?s . {summarised}"
               for depth in depths]

    def found(body: str) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise QueryTimeout("no time left")
        return bool(store.select(f"SELECT * WHERE {{ {body} }} LIMIT 1", timeout=left,
                                 hide_system_graphs=False).rows)

    try:
        if not found(anchor) or any(found(body) for body in checks):
            return []
    except QueryTimeout:
        return []
    return [f"no batch (section) of the tasks that used this dataset recorded {measure!r}: q7 "
            f"takes the {'least' if lower else 'greatest'} {measure} over the batches of each "
            "training; a measure recorded per epoch, per training or per stage is in q3, d5 and p2"]


#: canned queries that reach basins, fields and surveys through ``provlake:denotes`` links
_THROUGH_DOMAIN_KG = ("q1", "q2", "q6")


def _dangling_links(store: Store, name: str, *, base: str) -> list[str]:
    """A note when captured values link to domain resources no loaded graph describes: the
    domain-KG queries find nothing through them (a SEG-Y file taken out of the KG empties
    q1): said here as check-links lists it."""
    from provkg.service.links import check_links

    dangling = check_links(store, base=base)
    if not dangling:
        return []
    shown = ", ".join(f"{v} -> {d}" for v, d in dangling[:3])
    more = f" and {len(dangling) - 3} more" if len(dangling) > 3 else ""
    noun = "link" if len(dangling) == 1 else "links"
    return [f"the store has {len(dangling)} dangling domain {noun} ({shown}{more}): "
            f"{name} reads the domain KG through such links, so if the data asked about comes "
            "from one of them, load the domain KG that describes it (`provkg check-links` "
            "lists them all)"]


def unknown_attributes(store: Store, name: str, params: dict[str, object]) -> list[str]:
    """A note for each ``measure`` / ``hyperparameter`` parameter no spec attribute in the store
    is named: asked whatever the answer, since some queries (d3) still give their rows, with
    that column empty (``measure=Loss`` draws an empty loss curve)."""
    values = get_query(name).parse(params)
    notes = []
    for named in ("measure", "hyperparameter"):  # attribute names of the specs
        given = values.get(named)
        if isinstance(given, str) and not store.ask(
                f"ASK {{ ?attribute {iri(RDFS.label)} {literal(given)} }}"):
            notes.append(f"no attribute of any spec in the store is named {given!r} "
                         f"(parameter {named})")
    return notes


def _unrecorded_value(store: Store, hyperparameter: str, value: object) -> list[str]:
    """A note when no value of ``hyperparameter`` is ``value`` as text, naming a few that are
    (a value given in another case or spacing gives no rows)."""
    rows = store.select(
        f"SELECT DISTINCT ?v WHERE {{ ?a {iri(RDFS.label)} {literal(hyperparameter)} . "
        f"?x {iri(PROV.wasDerivedFrom)} ?a ; {iri(PROV.value)} ?v }} LIMIT 200").rows
    recorded = sorted({str(v) for (v,) in rows}, key=lambda t: (len(t), t))
    wanted = str(value).lower() if isinstance(value, bool) else str(value)
    if not recorded or wanted in recorded:
        return []
    shown = ", ".join(repr(v) for v in recorded[:6]) + (", ..." if len(recorded) > 6 else "")
    return [f"no value {value!r} is recorded for hyperparameter {hyperparameter!r} (recorded: "
            f"{shown}; values match exactly, case and spaces included)"]


def _values_at_locations(store: Store, query: CannedQuery, params: dict[str, object], *,
                         base: str, relative_to: str | Path | None = None
                         ) -> dict[str, tuple[str, ...]]:
    """The values each ``data`` parameter names, where that is more than the IRI of its id
    (a data parameter is a value id or its location: a URI, or a path, relative ones read
    against ``relative_to`` when given):

    - a location URI (or path), or the IRI of the value captured by that location alone:
      every value captured at that location, and the id's own value if one has it;
    - an id (or its IRI), for queries about the tasks that used the data
      (``Parameter.users``): also the value captured by its location alone, what a consumer
      that knew only the path used. Lineage queries keep the id exact: that node also
      derives from every other id written to the same path (two versions of a file)."""
    out: dict[str, tuple[str, ...]] = {}
    values = query.parse(params)
    for p in query.parameters:
        given = values.get(p.name)
        if p.type != "data" or not isinstance(given, str):
            continue
        # a value's IRI, as a query printed it (one that is no IRI, e.g. with a space, is read
        # as a location like any other text with a scheme)
        if given.startswith(base + "value/") and is_valid_iri(given):
            own = iri(given)
            location = _location_named_by(store, own, base=base)
            found = values_at_location(store, location) if location is not None else []
        else:
            own = term_for(p, given, base=base)
            found = values_at_location(store, given)
            if not found and relative_to is not None and _relative_path(given):
                # as capture.ref spells a relative path (absolute, unnormalised), then normalised
                joined = os.path.join(relative_to, given)
                for path in dict.fromkeys((joined, os.path.normpath(joined))):
                    found = found or values_at_location(store, path)
        if not found and not given.startswith(base + "value/"):
            # a value only ever named in derived_from, by another spelling of its location
            named = value_named(store, given, base=base)
            if named is not None and named != own:
                out[p.name] = (named,)
                continue
        if not found:  # an id
            if p.users:
                found = _values_sharing_location(store, own, base=base)
                if len(found) > 1:
                    out[p.name] = tuple(found)
            continue
        # the id's own IRI only if a value has it (one VALUES row less: Virtuoso's compiler
        # runs out of code space on q3 with two rows repeated through its sub-selects); the
        # node a location bridge names (mapper.common.location_bridge: its links and its
        # prov:Entity type) is not a value
        if own not in found and store.ask(
                f"ASK {{ {own} ?p ?o FILTER(?p NOT IN ({iri(PROV.wasDerivedFrom)}, "
                f"{iri(PROVKG.locationOf)}) && !(?p = {A} && ?o = {iri(PROV.Entity)})) }}"):
            found.insert(0, own)
        out[p.name] = tuple(found)
    return out


def _relative_path(text: str) -> bool:
    """A path relative to some folder (``data/x.h5``, ``./x``): no URI scheme, not absolute,
    not in a home folder."""
    return bool(text) and not text.startswith(("/", "~")) and not _SCHEME.match(text)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def _location_named_by(store: Store, value: str, *, base: str) -> str | None:
    """The location URI whose value ``value`` (an IRI term) is, when it is the value captured
    by that location alone (``capture.ref(path)``); None for a value with an id of its own."""
    rows = store.select(f"SELECT DISTINCT ?loc WHERE {{ {value} {PL.location} ?loc }}",
                        hide_system_graphs=False)
    for (loc,) in rows.rows:
        if isinstance(loc, str) and _named_by_location(value, loc, base):
            return loc
    return None


def _named_by_location(value: object, location: object, base: str) -> bool:
    """Whether ``value`` (a term or a bare IRI) is the value captured by ``location`` alone:
    the mapper names it after the location (``capture.ref(path)``, no id)."""
    return (isinstance(value, str) and isinstance(location, str)
            and value.strip("<>") == mint_iri("value", location, base=base))


def _values_sharing_location(store: Store, value: str, *, base: str) -> list[str]:
    """``value`` (an IRI term), then the value captured by its location alone, if any: a
    consumer that read the file by its path (``capture.ref(path)``, no id) used the same data
    as one that named the producer's id. Other ids at that location stay apart: a client
    that gave two values two ids at one path (two versions of a file) told them apart."""
    rows = store.select(f"SELECT DISTINCT ?v ?loc WHERE {{ {value} {PL.location} ?loc . "
                        f"?v {PL.location} ?loc }}", hide_system_graphs=False)
    by_path = sorted({iri(v) for v, loc in rows.rows
                      if isinstance(v, str) and _named_by_location(v, loc, base)} - {value})
    return [value, *by_path]


def run_sparql(store: Store, text: str, *, timeout: float | None = None) -> Rows | bool | list[Triple]:
    """Run a read-only SPARQL query: rows for SELECT, a bool for ASK, triples for
    CONSTRUCT / DESCRIBE. The text passes the server's own guard
    (:func:`provkg.service.sparql_guard.check_query`) first.

    Raises:
        ReadOnlyQuery: an update (INSERT, DELETE, LOAD, CLEAR, DROP, ...) or a SERVICE call,
            refused because this entry point is read-only and must not fetch URLs.
        QuerySyntaxError: the query does not parse.
    """
    form = query_form(text)
    if form == "UPDATE":
        raise ReadOnlyQuery(_UPDATE_REFUSED_HERE, refused="update")
    try:
        form = check_query(text).form.upper()
    except ReadOnlyQuery as refusal:
        words = _UPDATE_REFUSED_HERE if refusal.refused == "update" else _SERVICE_REFUSED_HERE
        raise ReadOnlyQuery(words, refused=refusal.refused) from None
    if form == "SELECT":
        return store.select(text, timeout=timeout)
    if form == "ASK":
        return store.ask(text)
    return store.construct(text)


_UPDATE_REFUSED_HERE = ("read-only: SPARQL updates (INSERT, DELETE, LOAD, CLEAR, DROP, ...) "
                        "are refused here; load data with `provkg load` / `provkg ingest`")
_SERVICE_REFUSED_HERE = ("read-only: SERVICE (federated queries) is refused; it would make "
                         "the store fetch other URLs")


def schema_mismatch(store: Store, name: str, schema: str) -> str | None:
    """A note when an S-PROV query runs on a store without S-PROV data: its lineage steps
    (``prov:wasDerivedFrom``) then also match the typed graph's links from each value to its
    spec attribute, which look like lineage but are not. None otherwise."""
    if Schema.named(schema) is not Schema.SPROV or Schema.SPROV in schemas_in_store(store):
        return None
    return (f"{name} reads the S-PROV schema and this store holds no S-PROV data (no "
            "s-prov:Invocation): its rows, if any, are not S-PROV lineage; ingest the events "
            "with --schema sprov (into a store of their own) to ask it")
