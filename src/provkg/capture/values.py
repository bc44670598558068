"""Captured values: data by reference (``ref``) and the conversion of Python values to wire values.

The caller's thread only checks a value's type: immutable JSON scalars pass untouched, mutable
or foreign values (lists, numpy, Path, datetime) are copied into plain JSON now, because the
caller may change them after the call. The background thread then turns the ``name -> value``
mapping into wire-format value dicts (``expand_values``). A value that cannot be converted is
refused: logged once per cause and left out, never raised into user code.
"""

from __future__ import annotations

import datetime as _dt
import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any
from urllib.parse import quote

from provkg.capture.report import report_once

__all__ = ["Ref", "ref", "Refused", "convert_value", "snapshot_values", "expand_values", "valid_names",
           "MAX_ITEMS"]

#: the most scalars a list value may hold; bigger data belongs in a store, captured with ``ref``
MAX_ITEMS = 10_000
#: how deep lists may nest (mirrors provkg.events.MAX_VALUE_DEPTH)
MAX_DEPTH = 8
#: longest attribute name the wire format accepts
MAX_NAME = 256

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|^`\\]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")
#: what ``quote`` leaves as it is: URI delimiters and existing %-escapes
_URI_SAFE = ":/?#[]@!$&'()*+,;=%~"
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
            path (``/data/my set.h5``, ``runs/x.h5``, a ``Path``) becomes a ``file:`` URI, and
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
    location = _uri_or_none(uri, "ref(uri)")
    domain = _uri_or_none(domain, "ref(domain=)", paths=False) if domain is not None else None
    if id is not None and not (isinstance(id, str) and 0 < len(id) <= 1024):
        report_once(("ref-id", type(id)), "capture.ref: id must be a non-empty string; ignored")
        id = None
    if derived_from is None:
        sources: tuple[str, ...] = ()
    else:
        items = [derived_from] if isinstance(derived_from, (str, Ref)) else list(derived_from)
        keys = []
        for item in items:
            key = item.key if isinstance(item, Ref) else item
            if isinstance(key, str) and key:
                keys.append(key)
            else:
                report_once(("ref-derived", type(item)), "capture.ref: derived_from takes ids "
                            f"(strings) or refs, not {type(item).__name__}; that entry is ignored")
        sources = tuple(keys)
    return Ref(location, id, domain, sources)


def _uri_or_none(uri: object, where: str, *, paths: bool = True) -> str | None:
    """``uri`` as a URI: a local path (``PurePath``, ``/data/x.h5``, ``runs/x.h5``,
    ``C:\\data\\x.h5``) becomes a ``file:`` URI, and characters a URI cannot hold (spaces) are
    percent-encoded; None (logged) when it is not text at all."""
    if isinstance(uri, PurePath):
        uri = str(uri)
    if isinstance(uri, str) and 0 < len(uri) <= 4096 and "\0" not in uri:
        if _URI.match(uri):
            return uri
        try:
            if paths and _WINDOWS_PATH.match(uri):
                fixed = PureWindowsPath(uri).as_uri()
            elif not _SCHEME.match(uri):  # no scheme: a path on this machine
                if not paths:
                    raise ValueError(uri)
                fixed = Path(uri).absolute().as_uri()
            else:
                fixed = quote(uri, safe=_URI_SAFE)
        except ValueError:
            fixed = ""
        if _URI.match(fixed):
            return fixed
    report_once((where, type(uri)), f"capture.{where}: not a URI (expected text such as "
                "file:///data/x.h5, or a path); the reference is captured without it")
    return None


def convert_value(value: Any) -> Any:
    """Turn a Python value into a JSON scalar, a list or a ``Ref``, deterministically.

    numpy scalars -> Python scalars, numpy arrays and tuples -> lists, sets -> sorted lists,
    ``Path`` -> its POSIX string, datetime / date -> ISO 8601, enums -> their value,
    ``Decimal`` -> float. Non-finite floats stay floats here (see ``expand_values``).

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
            value = value.tolist()
            if not isinstance(value, list):  # a 0-d array
                return _convert(value, budget, depth)
        elif isinstance(value, (set, frozenset)):
            value = sorted(value, key=repr)
        budget[0] -= len(value)
        if budget[0] < 0:
            raise _too_big(MAX_ITEMS - budget[0])
        return [_convert(item, budget, depth + 1) for item in value]
    if isinstance(value, Ref):
        raise Refused("a ref inside a list cannot be captured: pass each ref as its own attribute")
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy / torch / jax scalar
        return _convert(value.item(), budget, depth)
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
        return float(value)
    if isinstance(value, Mapping):
        raise Refused("objects (dicts) are not values: capture each field as its own attribute")
    raise Refused(f"a {kind.__module__}.{kind.__qualname__} is not a JSON value: convert it, "
                  "or store it and capture it with capture.ref(uri)")


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
    literal for them and a diverged loss is worth keeping); bad names are logged and skipped.
    """
    if _plain_and_finite(values):  # the common case, checked with C-level passes only
        return [{"name": name, "value": value} for name, value in values.items()]
    out: list[dict[str, Any]] = []
    for name, value in values.items():
        if type(name) is not str or not 0 < len(name) <= MAX_NAME:
            report_once(("name", type(name)), f"attribute name {str(name)[:40]!r} not captured: "
                        f"names are non-empty strings of at most {MAX_NAME} characters")
            continue
        if type(value) is Ref:
            item: dict[str, Any] = {"name": name}
            if value.location is not None:
                item["location"] = value.location
            if value.id is not None:
                item["id"] = value.id
            if value.domain is not None:
                item["domain"] = value.domain
            if value.derived_from:
                item["derived_from"] = list(value.derived_from)
            out.append(item)
            continue
        if type(value) is float and not math.isfinite(value):
            value = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        elif type(value) is list:
            value = _finite(value)
        out.append({"name": name, "value": value})
    return out


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
        return True
    if kinds <= _NUMBERS:
        try:
            return math.isfinite(sum(values.values()))
        except OverflowError:  # huge ints: let the careful path look at each value
            return False
    return False


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


def _finite(items: list[Any]) -> list[Any]:
    if all(type(x) is not float or math.isfinite(x) for x in items) and not any(
            type(x) is list for x in items):
        return items
    return [_finite(x) if type(x) is list else
            ("NaN" if x != x else "Infinity" if x > 0 else "-Infinity")
            if type(x) is float and not math.isfinite(x) else x for x in items]
