"""Captured values: data by reference (``ref``) and the conversion of Python values to wire values.

The caller's thread only checks a value's type: immutable JSON scalars pass untouched, mutable
or foreign values (lists, numpy, Path, datetime) are copied into plain JSON now, because the
caller may change them after the call. The background thread then turns the ``name -> value``
mapping into wire-format value dicts (``expand_values``). A value that cannot be converted is
refused: logged once per cause and left out, never raised into user code.

Every event stays within the server's limits (``MAX_NAME``, ``MAX_ID``, ``MAX_URI``,
``MAX_INT_DIGITS``, ``MAX_DEPTH``, ``MAX_VALUE_BYTES``: the wire format's, from
:mod:`provkg.wire`), one value at a time: the server refuses a whole batch for one bad field, so
a value or id it would refuse is converted (an integer of more than ``MAX_INT_DIGITS`` digits
becomes its decimal text) or left out here, with a warning, and its event goes on.
"""

from __future__ import annotations

import datetime as _dt
import enum
import math
import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any
from urllib.parse import quote

from provkg.capture.report import report_once
from provkg.term import is_valid_iri, json_size, location_form, path_location
from provkg.wire import MAX_ID, MAX_INT_DIGITS, MAX_NAME, MAX_URI, MAX_VALUE_BYTES, URI_PATTERN
from provkg.wire import MAX_VALUE_DEPTH as MAX_DEPTH

__all__ = ["Ref", "ref", "Refused", "convert_value", "location_form", "snapshot_values",
           "expand_values", "valid_names", "fit_id", "fit_index", "fit_wire_values", "MAX_ITEMS", "MAX_NAME", "MAX_STRING", "MAX_ID", "MAX_URI",
           "MAX_INT_DIGITS", "MAX_VALUE_BYTES"]

# MAX_NAME, MAX_ID, MAX_URI, MAX_INT_DIGITS, MAX_DEPTH (wire.MAX_VALUE_DEPTH), MAX_VALUE_BYTES:
# the wire format's limits (provkg.wire, shared with the server's validator), re-exported here.
# The two below are this library's own, stricter than the wire format: the server does not
# enforce them.
#: the most scalars a list value may hold; bigger data belongs in a store, captured with ``ref``
MAX_ITEMS = 10_000
#: longest string value: a batch carrying a longer one may pass the server's request limit
#: (16 MiB by default), and then the whole event is refused, not the one value. At most 4
#: UTF-8 bytes a character, so a string kept is within MAX_VALUE_BYTES too.
MAX_STRING = 1_000_000
#: integers ``-_INT_BOUND < n < _INT_BOUND`` have at most MAX_INT_DIGITS digits
_INT_BOUND = 10 ** MAX_INT_DIGITS
#: a longer integer value is captured as its decimal text, up to this many digits (the
#: conversion costs time quadratic in the length); beyond, the value is left out
_MAX_INT_TEXT_DIGITS = 50_000

_URI = re.compile(URI_PATTERN)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: types that are JSON scalars and immutable: safe to hand to the background thread as they are
_PLAIN = frozenset({int, float, str, bool, type(None)})


class Refused(ValueError):
    """A value that cannot be captured (the message says why and what to do instead)."""


@dataclass(frozen=True, slots=True)
class Ref:
    """Data captured by reference: where it lives, what it denotes, what it came from."""

    location: str | None
    id: str | None = None
    domain: str | None = None
    derived_from: tuple[str, ...] = ()

    @property
    def key(self) -> str | None:
        """The id other values use to point at this one (its own id, else its location)."""
        return self.id if self.id is not None else self.location


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


#: keys (id, else location) of refs whose domain went out in a task's or run's value, and of
#: refs with a domain named only in derived_from so far: :func:`report_unsent_domains` warns
#: about these at a run's end. Bounded: a process names few domain refs.
_domains_sent: set[str] = set()
#: key -> (pid, id() of the run current when the ref was made, None: no run then)
_domains_waiting: dict[str, tuple[int, int | None]] = {}
_DOMAIN_KEYS_MAX = 10_000
#: the run current in this context (provkg.capture.workflow sets it: no import cycle)
current_run: Callable[[], object | None] = lambda: None


def report_unsent_domains(run: object, *, last: bool) -> None:
    """Warn (once each) about refs with a domain named in ``derived_from`` but never sent as a
    value: their domain link is not captured. Called when ``run`` ends (in a forked child that
    continued it too), for the refs this process made while it was the current run (``last``:
    no run is active any more, so refs made outside any run too); another run ending meanwhile
    (nested, in another thread or a forked child) says nothing of them.
    Never raises."""
    try:
        mine, pid = id(run), os.getpid()
        for key, (made_in, owner) in list(_domains_waiting.items()):
            # a forked child inherits the parent's refs: they are the parent's to report
            if made_in != pid or owner != mine and not (last and owner is None):
                continue
            del _domains_waiting[key]
            if key not in _domains_sent:
                report_once(("ref-derived-domain", key), "capture.ref(derived_from=): the domain "
                            f"of {key!r} was not sent (derived_from carries ids only, and no task "
                            "used or generated that ref); use it in a task too, or link it "
                            "later: `provkg link ID IRI`")
    except Exception:  # a dict changed by another thread meanwhile: the warning is only advice
        pass


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
            items = derived_from  # type: ignore[assignment]
        for item in items:
            key = item.key if isinstance(item, Ref) else item
            if isinstance(item, Ref) and item.domain and isinstance(key, str) \
                    and key not in _domains_sent:
                # wire format v1 carries ids only in derived_from: unless the ref is a task's
                # value too, its domain is lost; said at the run's end (q1 / q6 through that
                # raw file answer nothing)
                if len(_domains_waiting) < _DOMAIN_KEYS_MAX:
                    run = current_run()
                    _domains_waiting[key] = (os.getpid(), None if run is None else id(run))
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


def fit_id(value: object, what: str) -> str | None:
    """``value`` when the wire format takes it as an id (a non-empty string of at most
    ``MAX_ID`` characters), else None, logged once saying why."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID:
        return value
    if isinstance(value, str):
        why = "is empty" if not value else f"has {len(value)} characters (at most {MAX_ID})"
    else:
        why = f"is a {type(value).__name__}, not a string"
    report_once(("id", what, why[:12]), f"{what}: the id {why}; ignored")
    return None


def fit_index(value: object) -> int | None:
    """A task's ``index`` as an int (numpy integers too); None, logged, for anything else and
    for an integer of more than ``MAX_INT_DIGITS`` digits. Never raises."""
    try:
        if not isinstance(value, bool):
            index = operator.index(value)  # type: ignore[arg-type]
            if -_INT_BOUND < index < _INT_BOUND:
                return index
            report_once(("index-digits",), f"task index: an integer of more than "
                        f"{MAX_INT_DIGITS} digits; ignored")
            return None
    except Exception:  # not an integer (or its __index__ raised)
        pass
    report_once(("index", type(value)), f"task index must be an integer, not "
                f"{type(value).__name__}; ignored")
    return None


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


def convert_value(value: Any) -> Any:
    """Turn a Python value into a JSON scalar, a list or a ``Ref``, deterministically.

    numpy scalars -> Python scalars, numpy arrays and tuples -> lists, sets -> sorted lists,
    ``Path`` -> its POSIX string, datetime / date -> ISO 8601, enums -> their value,
    ``Decimal`` -> int when whole, else float (its text past the range of doubles; both
    logged when the value changes). Non-finite floats stay floats here (see ``expand_values``).

    Raises:
        Refused: dicts, objects, bytes, and lists of more than ``MAX_ITEMS`` scalars.
    """
    if type(value) in _PLAIN or isinstance(value, Ref):
        return value
    budget = [MAX_ITEMS]
    return _convert(value, budget, 0)


def _convert(value: Any, budget: list[int], depth: int) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, (list, tuple, set, frozenset)) or _is_array(value):
        if depth >= MAX_DEPTH:
            raise Refused(f"lists may nest at most {MAX_DEPTH} deep")
        if _is_array(value):
            if value.size > budget[0]:
                raise _too_big(value.size)
            if value.shape == ():  # a numpy scalar, or a 0-d array
                return _convert(_array_scalar(value), budget, depth)
            kind = getattr(getattr(value, "dtype", None), "kind", "")
            if kind == "f" and value.dtype.itemsize != 8:
                # float32 / float16 / longdouble: each number's shortest text, read as a double
                # (numpy does both in C); tolist() gives float32 0.001 as 0.0010000000474974513
                value = value.astype(str).astype("float64").tolist()
            elif kind in ("c", "m", "M"):
                value = list(value)  # numpy scalars (or rows): each as its user sees it
            else:
                value = value.tolist()
        elif isinstance(value, (set, frozenset)):
            value = sorted(value, key=repr)
        budget[0] -= len(value)
        if budget[0] < 0:
            raise _too_big(MAX_ITEMS - budget[0])
        return [_convert(item, budget, depth + 1) for item in value]
    if isinstance(value, Ref):
        raise Refused("a ref inside a list cannot be captured: pass each ref as its own attribute")
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy / torch / jax scalar
        return _convert(_array_scalar(value), budget, depth)
    if isinstance(value, (bool, int, float, str)):  # subclasses: IntEnum, numpy.float64
        return value.value if isinstance(value, enum.Enum) and type(value.value) in _PLAIN else (
            bool(value) if isinstance(value, bool) else int(value) if isinstance(value, int)
            else float(value) if isinstance(value, float) else str(value))
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return _convert(value.value, budget, depth)
    if isinstance(value, Decimal):
        return _from_decimal(value, budget, depth)
    if isinstance(value, Mapping):
        raise Refused("objects (dicts) are not values: capture each field as its own attribute")
    raise Refused(f"a {kind.__module__}.{kind.__qualname__} is not a JSON value: convert it, "
                  "or store it and capture it with capture.ref(uri)")


def _array_scalar(value: Any) -> Any:
    """A numpy (torch, jax) scalar as the Python value its user sees:

    - a float32 / float16 as the shortest decimal that reads back as it (``np.float32(0.001)``
      is 0.001, not 0.0010000000474974513, so d7's value=0.001 finds it); a longdouble as the
      nearest double (its ``item()`` returns a longdouble again: the conversion recursed);
    - a timedelta64 as seconds and a datetime64 as ISO 8601 text in any unit (in nanoseconds,
      pandas' default, ``item()`` gives a bare integer); NaT as null;
    - a complex number is refused (JSON has none)."""
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    if kind == "f" and value.dtype.itemsize != 8:  # (a float64's item() is the same number)
        return float(str(value))
    if kind == "c":
        raise Refused("a complex number is not a JSON value: capture its real and imaginary "
                      "parts as two attributes")
    if kind in ("m", "M"):
        if str(value) == "NaT":
            return None
        if str(value.dtype).endswith(("[ns]", "[ps]", "[fs]", "[as]")):  # item(): an integer
            if kind == "m":
                return int(value.astype("timedelta64[ns]").astype("int64")) / 1e9
            return value.astype("datetime64[us]").item().isoformat()
    item = value.item()
    if type(item) is type(value):  # no plainer form: converting it again would recurse
        raise Refused(f"a {type(value).__module__}.{type(value).__qualname__} has no plain "
                      "Python value: convert it first")
    return item


def _is_array(value: Any) -> bool:
    return hasattr(value, "tolist") and hasattr(value, "size") and hasattr(value, "shape")


def _too_big(size: int) -> Refused:
    return Refused(f"a list of {size} items is too large to capture by value (limit {MAX_ITEMS}): "
                   "write it to a file or store and capture it with capture.ref(uri)")


def snapshot_values(values: Mapping[str, Any], *, into: dict[str, Any], where: str) -> None:
    """Copy ``values`` into ``into`` on the caller's thread, converting what is not immutable.

    Refused values are logged once per (where, name, cause) and left out.
    """
    for name, value in values.items():
        if type(value) in _PLAIN:
            into[name] = value
            continue
        if type(value) is Ref and value.domain and value.key is not None \
                and len(_domains_sent) < _DOMAIN_KEYS_MAX:
            _domains_sent.add(value.key)  # its domain goes out (report_unsent_domains)
        try:
            into[name] = convert_value(value)
        except Refused as exc:
            report_once((where, name, str(exc)[:60]), f"{where}: value {name!r} not captured: {exc}")
        except Exception as exc:  # a foreign object whose tolist()/item() failed
            report_once((where, name, type(exc)), f"{where}: value {name!r} not captured: "
                        f"converting it raised {type(exc).__name__}: {exc}")


def expand_values(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Wire-format value dicts from a snapshot (run on the background thread).

    Non-finite floats become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (JSON has no
    literal for them and a diverged loss is worth keeping), integers of more than
    ``MAX_INT_DIGITS`` digits their decimal text (the wire format refuses them); bad names are
    logged and skipped. A value that cannot be made valid is left out, logged: never the event.
    """
    if _plain_and_finite(values):  # the common case, checked with C-level passes only
        return [{"name": name, "value": value} for name, value in values.items()]
    out: list[dict[str, Any]] = []
    for name, value in values.items():
        if type(name) is not str or not 0 < len(name) <= MAX_NAME:
            shown = repr(name[:40]) if type(name) is str else f"of type {type(name).__name__}"
            # one warning per bad name (a long one by its first 40 characters): each is another
            # attribute lost, and the first says nothing of the next
            report_once(("name", type(name), shown), f"attribute name {shown} not captured: "
                        f"names are non-empty strings of at most {MAX_NAME} characters")
            continue
        if isinstance(value, Ref):
            out.append(_ref_item(name, value))
            continue
        value = _fit(value, name)
        if value is not _LEFT_OUT:
            out.append({"name": name, "value": value})
    return out


def fit_wire_values(items: list[Any]) -> list[Any]:
    """``expand_values`` for a list already in wire form (``[{"name": ..., "value": ...}]``)."""
    out = []
    for item in items:
        if type(item) is dict and "value" in item:
            value = _fit(item["value"], str(item.get("name"))[:40])
            if value is _LEFT_OUT:
                continue
            if value is not item["value"]:
                item = {**item, "value": value}
        out.append(item)
    return out


#: ``_fit``'s answer for a value that cannot be captured
_LEFT_OUT: Any = object()


def _fit(value: Any, name: str) -> Any:
    """``value`` in a form the wire format takes, or ``_LEFT_OUT`` (logged)."""
    kind = type(value)
    if kind is float:
        if math.isfinite(value):
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if kind is int:
        return value if -_INT_BOUND < value < _INT_BOUND else _int_text(value, name)
    if kind is str:
        if len(value) <= MAX_STRING:
            return value
        report_once(("string-too-long", name), f"value {name!r} not captured: a string of "
                    f"{len(value):,} characters (limit {MAX_STRING:,}): write it to a file or "
                    "store and capture it with capture.ref(uri)")
        return _LEFT_OUT
    if kind is list:
        try:
            fitted = _fit_list(value, name)
        except _Unfit:
            return _LEFT_OUT
        # numbers alone stay far below the limit (MAX_ITEMS of them: ~250 KB); strings may not
        if any(type(x) is str or type(x) is list for x in fitted):
            size = json_size(fitted)
            if size > MAX_VALUE_BYTES:  # the server refuses it (one RDF literal holds so much)
                report_once(("list-too-large", name), f"value {name!r} not captured: a list of "
                            f"{size:,} bytes as JSON (limit {MAX_VALUE_BYTES:,}): write it to a "
                            "file or store and capture it with capture.ref(uri)")
                return _LEFT_OUT
        return fitted
    return value


class _Unfit(Exception):
    """A list item that cannot be captured: the list is left out."""


def _fit_list(items: list[Any], name: str) -> list[Any]:
    if all(type(x) is not float or math.isfinite(x) for x in items) and not any(
            type(x) is list or (type(x) is int and not -_INT_BOUND < x < _INT_BOUND)
            or (type(x) is str and len(x) > MAX_STRING) for x in items):
        return items
    out = []
    for x in items:
        if type(x) is list:
            out.append(_fit_list(x, name))
            continue
        x = _fit(x, name)
        if x is _LEFT_OUT:
            raise _Unfit
        out.append(x)
    return out


def _int_text(n: int, name: str) -> Any:
    """A too long integer as its decimal text (logged), or ``_LEFT_OUT`` when it is too long
    even for that (logged)."""
    if n.bit_length() > _MAX_INT_TEXT_DIGITS * 3.3219:  # log2(10): surely too many digits
        report_once(("int-too-long", name), f"value {name!r} not captured: an integer of more "
                    f"than {_MAX_INT_TEXT_DIGITS} digits (store it and capture it with "
                    "capture.ref(uri))")
        return _LEFT_OUT
    report_once(("int-as-text", name), f"value {name!r}: an integer of more than "
                f"{MAX_INT_DIGITS} digits is captured as its decimal text (the wire format "
                "takes integers of at most that many digits)")
    return _decimal(n)


def _from_decimal(value: Decimal, budget: Any, depth: int) -> object:
    """A ``Decimal``: a whole one as the exact integer; else the nearest double, logged when
    that is not the same number; a finite one past the doubles' range as its text (logged),
    never an infinity."""
    if value.is_finite() and value == value.to_integral_value():
        return _convert(int(value), budget, depth)
    x = float(value)
    if value.is_finite() and not math.isfinite(x):
        report_once(("decimal-range",), f"a Decimal beyond the range of doubles ({str(value)[:40]}) "
                    "is captured as its decimal text")
        return str(value)
    if value.is_finite() and Decimal(repr(x)) != value:  # 0.1 is the double 0.1
        report_once(("decimal-digits",), "a Decimal with more digits than a double holds is "
                    "captured as the nearest double")
    return x


def _decimal(n: int) -> str:
    """``str(n)`` beyond ``sys.int_max_str_digits`` too (halving: never more digits at once)."""
    if n < 0:
        return "-" + _decimal(-n)
    try:
        return str(n)
    except ValueError:  # more digits than int -> str conversion allows
        half = int(n.bit_length() * 0.30103) // 2
        high, low = divmod(n, 10 ** half)
        return _decimal(high) + _decimal(low).zfill(half)


def _ref_item(name: str, value: Ref) -> dict[str, Any]:
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


_SCALARS_NO_FLOAT = frozenset({int, str, bool, type(None)})
_NUMBERS = frozenset({int, float, bool})


def _plain_and_finite(values: Mapping[str, Any]) -> bool:
    """True when every name is a valid string and every value a finite scalar (no Ref, no list).

    Checked with C-level passes only: names against a cache of names already found valid
    (attribute names repeat from task to task), value types as a set, floats by their sum
    (NaN / inf anywhere make the sum non-finite).
    """
    if not valid_names(values):
        return False
    kinds = set(map(type, values.values()))
    if kinds <= _SCALARS_NO_FLOAT:
        return (int not in kinds or _ints_fit(values)) and (str not in kinds or _strings_fit(values))
    if kinds <= _NUMBERS:
        try:
            return math.isfinite(sum(values.values())) and _ints_fit(values)
        except OverflowError:  # huge ints: let the careful path look at each value
            return False
    return False


def _strings_fit(values: Mapping[str, Any]) -> bool:
    """No string of ``values`` is longer than ``MAX_STRING``."""
    return all(len(v) <= MAX_STRING for v in values.values() if type(v) is str)


def _ints_fit(values: Mapping[str, Any]) -> bool:
    """No integer of ``values`` has more than ``MAX_INT_DIGITS`` digits."""
    return all(-_INT_BOUND < v < _INT_BOUND for v in values.values() if type(v) is int)


#: attribute names already found valid; bounded, refilled as names come
_VALID_NAMES: set[str] = set()
_MAX_VALID_NAMES = 100_000


def valid_names(values: Mapping[Any, Any]) -> bool:
    """Whether every name (key) of ``values`` is a non-empty str of at most ``MAX_NAME`` chars;
    one C-level set check once the names have been seen."""
    return _VALID_NAMES.issuperset(values) or _learn_names(values)


def _learn_names(values: Mapping[Any, Any]) -> bool:
    """Check names not seen before; remember the valid ones. False if any is invalid."""
    if len(_VALID_NAMES) > _MAX_VALID_NAMES:
        _VALID_NAMES.clear()
    for name in values:
        if type(name) is not str or not 0 < len(name) <= MAX_NAME:
            return False
        _VALID_NAMES.add(name)
    return True
