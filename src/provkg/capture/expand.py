"""Wire-format value dicts from snapshots: the background thread's half of captured values.

``expand_values`` turns a snapshot (``name -> value``, made on the caller's thread by
:func:`provkg.capture.values.snapshot_values`) into the wire format's ``[{"name": ..., "value":
...}]``, fitting each value to the wire's limits; the common case (valid names, finite scalars)
takes C-level passes only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from provkg.capture.refs import ref_item
from provkg.capture.report import report_once
from provkg.capture.roles import RoleValue
from provkg.capture.values import _INT_BOUND, _LEFT_OUT, MAX_NAME, MAX_STRING, Ref, _fit

__all__ = ["expand_values", "fit_wire_values", "valid_names"]


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
        role = None
        if type(value) is RoleValue:
            value, role = value.value, value.role
        if isinstance(value, Ref):
            item = ref_item(name, value)
        else:
            value = _fit(value, name)
            if value is _LEFT_OUT:
                continue
            item = {"name": name, "value": value}
        if role is not None:
            item["role"] = role
        out.append(item)
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
