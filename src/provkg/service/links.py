"""Links from captured values to domain-KG resources (design decision D2).

A value captured with ``domain=IRI`` already ``provlake:denotes`` that resource. A link
found later is added with :func:`link_value`, recorded as a ``provkg:LinkAssertion``
(who asserted it and when) next to the link itself. :func:`check_links` lists links
whose target no loaded graph describes (a typo, or a domain KG not loaded yet).
"""

from __future__ import annotations

import getpass
import os
import time
from pathlib import PurePosixPath
from urllib.parse import quote, unquote

from provkg.errors import NotFound
from provkg.mapper.terms import LABEL, PK, PL, A, P
from provkg.store import Store
from provkg.term import (
    Triple,
    datetime_literal,
    id_from_iri,
    iri,
    is_valid_iri,
    literal,
    location_form,
    mint_iri,
    path_location,
)
from provkg.vocab import DEFAULT_BASE, XSD

__all__ = ["check_links", "find_values", "link_value", "link_values", "unlink_value",
           "value_named"]


def link_value(store: Store, value_id: str, target: str, *, agent: str | None = None,
               when: float | None = None, base: str = DEFAULT_BASE) -> str:
    """Say that captured value ``value_id`` denotes ``target``: every value captured at that
    location URI (the same data captured more than once, e.g. read by two runs, is one file
    in the domain KG), or else the value with that id.

    Returns the IRI of the ``provkg:LinkAssertion`` recording who (``agent``, default the
    user running this), when (``when``, seconds since the epoch, default now) and which
    values it linked (``provkg:linkedValue``, one or more).

    Raises:
        BadParameter: ``target`` is not an absolute IRI.
        NotFound: the store holds no value with that id or location.
    """
    return link_values(store, value_id, target, agent=agent, when=when, base=base)[0]


def link_values(store: Store, value_id: str, target: str, *, agent: str | None = None,
                when: float | None = None, base: str = DEFAULT_BASE) -> tuple[str, list[str]]:
    """As :func:`link_value`, returning the ``provkg:LinkAssertion``'s IRI and the values
    linked (their terms, one or more)."""
    values = find_values(store, value_id, base=base)
    return _link(store, values, value_id, target, agent=agent, when=when, base=base), values


def _link(store: Store, values: list[str], value_id: str, target: str, *, agent: str | None,
          when: float | None, base: str) -> str:
    """Record the link of ``values`` (found for ``value_id``) to ``target``; the assertion's IRI."""
    target_term = iri(target)
    assertion, record = _record("link", PK.LinkAssertion, values, value_id, target_term,
                                agent=agent, when=when, base=base)
    store.add([*((value, PL.denotes, target_term) for value in values), *record])
    return assertion


def _record(kind: str, cls: str, values: list[str], value_id: str, target_term: str, *,
            agent: str | None, when: float | None, base: str) -> tuple[str, list[Triple]]:
    """(IRI, triples) of the record of a link made or taken back: who, when, which values."""
    who = agent or os.environ.get("USER") or getpass.getuser()
    stamp = datetime_literal(time.time() if when is None else when)
    record = mint_iri(kind, value_id, target_term[1:-1], stamp.split('"')[1], base=base)
    r, person = iri(record), iri(mint_iri("agent", who, base=base))
    return record, [(r, A, cls), *((r, PK.linkedValue, v) for v in values),
                    (r, PK.linkedTo, target_term), (r, PK.assertedBy, person),
                    (r, PK.assertedAt, stamp), (person, A, P.Agent), (person, LABEL, literal(who))]


def unlink_value(store: Store, value_id: str, target: str, *, agent: str | None = None,
                 when: float | None = None, base: str = DEFAULT_BASE) -> tuple[str, list[str]]:
    """Take back the link of the value(s) ``value_id`` names to ``target`` (a wrong link, or
    a KG resource that went away), recorded as a ``provkg:LinkRetraction`` with who and when.
    A link the capture itself sent (a value's ``domain``) comes back if its events are
    ingested again.

    Returns:
        the retraction's IRI and the values that were linked.

    Raises:
        BadParameter: ``target`` is not an absolute IRI.
        NotFound: no such value, or none of them links to ``target``.
    """
    target_term = iri(target)
    values = find_values(store, value_id, base=base)
    linked = [v for v in values if store.ask(f"ASK {{ {v} {PL.denotes} {target_term} }}")]
    if not linked:
        raise NotFound(f"{value_id!r} does not link to {target} (provkg check-links and "
                       "provkg sparql show the links there are)")
    store.update("DELETE DATA { " + " ".join(f"{v} {PL.denotes} {target_term} ." for v in linked) + " }")
    record, triples = _record("unlink", PK.LinkRetraction, linked, value_id, target_term,
                              agent=agent, when=when, base=base)
    store.add(triples)
    return record, linked


def find_values(store: Store, value_id: str, *, base: str = DEFAULT_BASE) -> list[str]:
    """The terms of every value captured at this location URI, sorted, or else the term of
    the captured value with this id, or else the value itself when ``value_id`` is the IRI
    of a captured value (as queries print it).

    Raises:
        NotFound: none."""
    found = values_at_location(store, value_id)
    if found:
        return found
    value = value_named(store, value_id, base=base)
    if value is not None:
        return [value]
    if is_valid_iri(value_id) and _is_captured_value(store, iri(value_id)):
        return [iri(value_id)]
    raise NotFound(f"no captured value with id, IRI or location {value_id!r} in the store")


def value_named(store: Store, value_id: str, *, base: str = DEFAULT_BASE) -> str | None:
    """The term of the node minted from ``value_id``, or from one of its spellings as a
    location, if the store holds it; else None. A value only ever named in ``derived_from``
    (a raw file ``capture.ref`` turned into its location spelling: ``/raw/t.sgy`` as
    ``file:///raw/t.sgy``, ``s3://Lake/x`` as ``s3://lake/x``) has no ``provlake:location``
    to look up, only its minted IRI: each spelling is minted and tried, since neither the
    path nor the URI as written would find it."""
    for name in dict.fromkeys([value_id, *location_spellings(value_id)]):
        value = iri(mint_iri("value", name, base=base))
        if store.ask(f"ASK {{ {{ {value} ?p ?o }} UNION {{ ?s ?p {value} }} }}"):
            return value
    return None


def _is_captured_value(store: Store, term: str) -> bool:
    """Whether ``term`` is a value a task used or generated (not, say, a domain-KG resource:
    linking one of those to another would be a mistake, not provenance)."""
    return store.ask(f"ASK {{ {{ ?task {P.used} {term} }} UNION {{ {term} {P.wasGeneratedBy} ?task }} "
                     f"FILTER NOT EXISTS {{ {term} {A} {PK.SectionSummary} }} }}")


def values_at_location(store: Store, location: str) -> list[str]:
    """The terms of every value captured at ``location``, sorted; [] for none. The location
    is read as written and as ``capture.ref`` stores it (one spelling per file: a space or
    an accent percent-encoded); a path (absolute, or in a home folder) as the ``file:`` URI
    ``capture.ref`` makes of it, and as ``Path.as_uri()`` spelled it (older captures). Not
    a URI or a path: []."""
    forms = location_spellings(location)
    if not forms:
        return []
    # literals: any text is safe in one (a client may have sent a space)
    terms = " ".join(literal(f, XSD.anyURI) for f in forms)
    rows = store.select(f"SELECT DISTINCT ?v WHERE {{ VALUES ?loc {{ {terms} }} ?v {PL.location} ?loc }}",
                        hide_system_graphs=False)
    return sorted({iri(str(v)) for (v,) in rows.rows if isinstance(v, str) and is_valid_iri(v)})


def location_spellings(location: str) -> list[str]:
    """The spellings a location may be stored under: as written, as ``capture.ref`` writes it
    now, as ``Path.as_uri()`` writes a path (older captures; ``( ) + , =`` escaped), and a
    local ``file:`` URI also as ``file:/x`` and ``file://localhost/x`` (what other languages'
    clients send). A path (absolute, or ``~/``) is read as its ``file:`` URI. [] for text that
    is neither a URI nor such a path."""
    if location.startswith("~"):  # a path in a home folder, as capture.ref reads it
        location = os.path.expanduser(location)
    if location.startswith("/"):
        canonical, written = path_location(location), PurePosixPath(location).as_uri()
    elif ":" in location:  # a URI has a scheme
        canonical, written = location_form(location), location
    else:
        return []
    forms = [written, canonical]  # a folder's path: written has no slash, as older captures
    if canonical.startswith("file:///") and canonical.endswith("/") and len(canonical) > 8:
        forms.append(canonical[:-1])  # a folder's URI: as older captures stored it, too
    if canonical.startswith("file:///"):
        path = canonical[len("file://"):]
        # as written now; with as_uri's escapes; raw (an accent or a space as it is)
        for form in (canonical, "file://" + quote(unquote(path), safe="/"), "file://" + unquote(path)):
            forms += [form, "file:" + form[len("file://"):], "file://localhost" + form[len("file://"):]]
    return list(dict.fromkeys(forms))


def check_links(store: Store, *, base: str = DEFAULT_BASE) -> list[tuple[str, str]]:
    """(value id, target IRI) of every ``provlake:denotes`` link whose target is the
    subject of no triple in the store, sorted."""
    rows = store.select(f"SELECT DISTINCT ?v ?d WHERE {{ ?v {PL.denotes} ?d . "
                        f"FILTER NOT EXISTS {{ ?d ?p ?o }} }}")
    out = []
    for v, d in rows.rows:
        vid = id_from_iri(str(v), "value", base=base)
        out.append((vid if vid is not None else str(v), str(d)))
    return sorted(out)
