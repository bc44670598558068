"""Captured values: their limits, their conversion to JSON, and their fitting to the wire format.

The caller's thread only checks a value's type: immutable JSON scalars pass untouched, mutable
or foreign values (lists, numpy, Path, datetime) are copied into plain JSON now
(:func:`snapshot_values`), because the caller may change them after the call. The background
thread then turns the ``name -> value`` mapping into wire-format value dicts
(:mod:`provkg.capture.expand`), fitting each value (:func:`_fit`). A value that cannot be
converted is refused: logged once per cause and left out, never raised into user code.

Every event stays within the server's limits (``MAX_NAME``, ``MAX_ID``, ``MAX_URI``,
``MAX_INT_DIGITS``, ``MAX_DEPTH``, ``MAX_VALUE_BYTES``: the wire format's, from
:mod:`provkg.wire`), one value at a time: the server refuses a whole batch for one bad field, so
a value or id it would refuse is converted (an integer of more than ``MAX_INT_DIGITS`` digits
becomes its decimal text) or left out here, with a warning, and its event goes on. Data passed
by reference is a :class:`Ref` (made by :func:`provkg.capture.refs.ref`).
"""

from __future__ import annotations

import datetime as _dt
import enum
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import PurePath
from typing import Any, ClassVar

from provkg.capture.domains import note_domain_sent
from provkg.capture.report import report_once
from provkg.capture.roles import Roled, RoleValue, flat_items, is_config
from provkg.term import json_size
from provkg.wire import MAX_ID, MAX_INT_DIGITS, MAX_NAME, MAX_URI, MAX_VALUE_BYTES
from provkg.wire import MAX_VALUE_DEPTH as MAX_DEPTH

__all__ = ["Ref", "Refused", "convert_value", "snapshot_values", "fit_id", "fit_index",
           "MAX_ITEMS", "MAX_NAME", "MAX_STRING", "MAX_ID", "MAX_URI", "MAX_INT_DIGITS",
           "MAX_DEPTH", "MAX_VALUE_BYTES"]

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

#: types that are JSON scalars and immutable: safe to hand to the background thread as they are
_PLAIN = frozenset({int, float, str, bool, type(None)})


class Refused(ValueError):
    """A value that cannot be captured (the message says why and what to do instead)."""


@dataclass(frozen=True, slots=True)
class Ref:
    """Data captured by reference: where it lives, what it denotes, what it came from."""

    #: a value in itself, not a record of settings to flatten (capture.roles.is_config)
    CAPTURED_AS_VALUE: ClassVar[bool] = True

    location: str | None
    id: str | None = None
    domain: str | None = None
    derived_from: tuple[str, ...] = ()

    @property
    def key(self) -> str | None:
        """The id other values use to point at this one (its own id, else its location)."""
        return self.id if self.id is not None else self.location


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
            dtype_kind = getattr(getattr(value, "dtype", None), "kind", "")
            if dtype_kind == "f" and value.dtype.itemsize != 8:
                # float32 / float16 / longdouble: each number's shortest text, read as a double
                # (numpy does both in C); tolist() gives float32 0.001 as 0.0010000000474974513
                value = value.astype(str).astype("float64").tolist()
            elif dtype_kind in ("c", "m", "M"):
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


def snapshot_values(values: Mapping[str, Any], *, into: dict[str, Any], where: str) -> None:
    """Copy ``values`` into ``into`` on the caller's thread, converting what is not immutable;
    a nested configuration becomes dotted names (``optimizer.lr``), and the values of a
    :class:`~provkg.capture.roles.Roled` mapping keep its role.

    Refused values are logged once per (where, name, cause) and left out.
    """
    role = getattr(values, "role", None) if type(values) is not dict else None
    for name, value in values.items():
        if type(value) in _PLAIN:
            into[name] = value if role is None else RoleValue(value, role)
            continue
        if is_config(value):  # a record of settings: each field its own value
            snapshot_values(_with_role(role, flat_items(value, f"{name}.")), into=into, where=where)
            continue
        if type(value) is Ref and value.domain and value.key is not None:
            note_domain_sent(value.key)  # its domain goes out
        try:
            own = value.role if type(value) is RoleValue else role
            converted = convert_value(value.value if type(value) is RoleValue else value)
            into[name] = converted if own is None else RoleValue(converted, own)
        except Refused as exc:
            report_once((where, name, str(exc)[:60]), f"{where}: value {name!r} not captured: {exc}")
        except Exception as exc:  # a foreign object whose tolist()/item() failed
            report_once((where, name, type(exc)), f"{where}: value {name!r} not captured: "
                        f"converting it raised {type(exc).__name__}: {exc}")


def _with_role(role: str | None, items: Any) -> Mapping[str, Any]:
    pairs = dict(items)
    return pairs if role is None else Roled(role, pairs)


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
