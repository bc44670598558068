"""Data captured by reference: ``capture.ref(...)`` and the wire form of a ``Ref``.

A reference names where data lives (a URI; a local path becomes a ``file:`` URI), what it
denotes (a domain IRI) and what it came from (``derived_from``: ids only, in wire format v1; see
:mod:`provkg.capture.domains`). Nothing here raises: a malformed argument is logged and left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePath, PureWindowsPath
from typing import Any

from provkg.capture.domains import note_domain_waiting
from provkg.capture.report import report_once
from provkg.capture.values import MAX_ID, MAX_URI, Ref, fit_id
from provkg.term import is_valid_iri, location_form, path_location
from provkg.wire import URI_PATTERN

__all__ = ["ref", "ref_item"]

_URI = re.compile(URI_PATTERN)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def ref(uri: str, *, id: str | None = None, domain: str | None = None,
        derived_from: Iterable[str | Ref] | str | Ref | None = None) -> Ref:
    """Capture data by reference instead of by value.

    Args:
        uri: where the data lives (``file:///data/train.h5``, ``s3://bucket/key``); a local
            path (``/data/my set.h5``, ``runs/x.h5``, ``~/x.h5``, a ``Path``) becomes a ``file:`` URI, and
            spaces and other characters a URI cannot hold are percent-encoded.
        id: an explicit unique id; by default the location is the id.
        domain: IRI of the domain-KG resource the data denotes.
        derived_from: ids (strings) or other refs this data was derived from.

    Returns:
        A ``Ref`` to pass as a value to ``Task.use`` / ``Task.generate``. A malformed argument is
        logged and dropped; this function never raises.

    >>> r = ref("file:///data/train.h5", derived_from=[ref("file:///raw/cube.segy")])
    >>> r.derived_from
    ('file:///raw/cube.segy',)
    """
    try:
        location = _uri_or_none(uri, "ref(uri)")
    except Exception as exc:  # an object whose str / fspath raises
        report_once(("ref-uri", type(exc)), f"capture.ref(uri): {exc!r}; the reference is "
                    "captured without a location")
        location = None
    try:
        domain = _uri_or_none(domain, "ref(domain=)", paths=False, iri=True) \
            if domain is not None else None
    except Exception as exc:
        report_once(("ref-domain", type(exc)), f"capture.ref(domain=): {exc!r}; ignored")
        domain = None
    if id is not None:
        id = fit_id(id, "capture.ref(id=)")
    return Ref(location, id, domain, _sources(derived_from))


def _sources(derived_from: object) -> tuple[str, ...]:
    """The ids of ``ref(derived_from=...)``: bad entries (and an iterable that raises midway:
    the entries read until then are kept) are logged and left out; never raises."""
    if derived_from is None:
        return ()
    keys: list[str] = []
    try:
        if isinstance(derived_from, (str, Ref)):
            items: Iterable[object] = [derived_from]
        elif isinstance(derived_from, Mapping) or not isinstance(derived_from, Iterable):
            raise TypeError(f"derived_from takes ids (strings) or refs, or a list of them, not "
                            f"{type(derived_from).__name__}")
        else:
            items = derived_from
        for item in items:
            key = item.key if isinstance(item, Ref) else item
            if isinstance(item, Ref) and item.domain and isinstance(key, str):
                note_domain_waiting(key)  # its domain is lost unless it is a value too
            if isinstance(key, str):
                key = fit_id(key, "capture.ref(derived_from=)")
                if key is not None:
                    keys.append(key)
            else:
                report_once(("ref-derived", type(item)), "capture.ref: derived_from takes ids "
                            f"(strings) or refs, not {type(item).__name__}; that entry is ignored")
    except Exception as exc:
        report_once(("ref-derived-iter", type(exc)), f"capture.ref(derived_from=): {exc!r}; "
                    f"{'the entries before it are kept' if keys else 'ignored'}")
    return tuple(keys)


def _uri_or_none(uri: object, where: str, *, paths: bool = True, iri: bool = False) -> str | None:
    """``uri`` as a URI: a local path (``PurePath``, ``/data/x.h5``, ``runs/x.h5``,
    ``C:\\data\\x.h5``) becomes a ``file:`` URI, and characters a URI cannot hold (spaces) are
    percent-encoded; None (logged) when it is not text at all, or longer than ``MAX_URI``.
    ``iri``: it must also be an IRI the store takes (a ``domain``: ``% only as %XX``)."""
    if isinstance(uri, PurePath):
        uri = str(uri)
    if isinstance(uri, str) and 0 < len(uri) <= MAX_URI and "\0" not in uri:
        if _URI.fullmatch(uri) and not (paths and _WINDOWS_PATH.match(uri)):
            if not iri:
                return location_form(uri)  # one spelling per location (accents escaped too)
            if is_valid_iri(uri):
                return uri
        try:
            if paths and _WINDOWS_PATH.match(uri):
                fixed = path_location(PureWindowsPath(uri))
            elif not _SCHEME.match(uri):  # no scheme: a path on this machine
                if not paths:
                    raise ValueError(uri)
                fixed = path_location(uri)  # ~/x.h5 is home's
            else:
                fixed = location_form(uri)
            if iri:  # an IRI has '%' only as %XX: a stray one becomes %25
                fixed = _STRAY_PERCENT.sub("%25", fixed)
        except ValueError:
            fixed = ""
        if len(fixed) <= MAX_URI and _URI.fullmatch(fixed) and (not iri or is_valid_iri(fixed)):
            return fixed
    why = f"longer than {MAX_URI} characters" if isinstance(uri, str) and len(uri) > MAX_URI \
        else "not a URI (expected text such as file:///data/x.h5, or a path)"
    report_once((where, type(uri), why[:8]), f"capture.{where}: {why}; the reference is captured "
                "without it")
    return None


def ref_item(name: str, value: Ref) -> dict[str, Any]:
    """The wire value of a ref; a field a ``Ref(...)`` built by hand got wrong is left out."""
    item: dict[str, Any] = {"name": name}
    location = value.location
    if location is not None:
        if type(location) is str and len(location) <= MAX_URI and _URI.fullmatch(location):
            item["location"] = location
        else:
            report_once(("ref-location", name), f"value {name!r}: the ref's location is not a "
                        f"URI of at most {MAX_URI} characters; left out")
    if value.id is not None and fit_id(value.id, f"value {name!r}: ref id") is not None:
        item["id"] = value.id
    domain = value.domain
    if domain is not None:
        if type(domain) is str and len(domain) <= MAX_URI and _URI.fullmatch(domain) and \
                is_valid_iri(domain):
            item["domain"] = domain
        else:
            report_once(("ref-domain", name), f"value {name!r}: the ref's domain is not an IRI "
                        f"of at most {MAX_URI} characters; left out")
    if value.derived_from:
        sources = value.derived_from
        if type(sources) is not tuple or not all(type(k) is str and 0 < len(k) <= MAX_ID
                                                 for k in sources):
            sources = _sources(list(sources) if isinstance(sources, (tuple, list)) else sources)
        if sources:
            item["derived_from"] = list(sources)
    return item
