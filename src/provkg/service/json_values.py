"""Values of answer rows as JSON, one rule for the API and the CLI.

- Numbers are JSON numbers, exact however large: an integer beyond 64 bits, or a decimal a
  double cannot hold (``1000…0.5`` with 400 digits), is written digit for digit (JSON numbers
  may be arbitrarily long; orjson needs them as :class:`orjson.Fragment`).
- A non-finite double (JSON has none) is the string ``"NaN"``, ``"Infinity"`` or
  ``"-Infinity"``: what the capture library sends for them, so answers read like the events.
- An ill-typed literal (``"x"^^xsd:boolean``, ``"abc"^^xsd:integer``) keeps its lexical text.

No FastAPI here: the CLI uses this module too.

>>> json_cell(float("nan")), json_cell(float("-inf")), json_cell(2 ** 70)
('NaN', '-Infinity', 1180591620717411303424)
>>> rows_json(["v"], [[2 ** 70, float("inf")]])
b'{"columns":["v"],"rows":[[1180591620717411303424,"Infinity"]]}'
>>> term_value({"type": "literal", "value": "x", "datatype": _XSD + "boolean"})
'x'
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from provkg.store.base import INTEGER_TYPES, python_value

__all__ = ["NON_FINITE", "json_cell", "orjson_cell", "rows_json", "term_value", "text_cell"]

_XSD = "http://www.w3.org/2001/XMLSchema#"
_DOUBLE_TYPES = {_XSD + "double", _XSD + "float"}
_DECIMAL = _XSD + "decimal"

#: the strings standing for the doubles JSON has no number for
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_XSD_SPECIAL = {"NaN": math.nan, "INF": math.inf, "+INF": math.inf, "-INF": -math.inf}
#: XSD lexical forms (ASCII digits only: Python's int() and float() also read "1_000",
#: "١٢" and "infinity", which XSD does not)
_INTEGER = re.compile(r"\s*([+-]?)0*([0-9]+)\s*", re.ASCII)
_DECIMAL_FORM = re.compile(r"\s*([+-]?)([0-9]*)(?:\.([0-9]*))?\s*", re.ASCII)
_DOUBLE_FORM = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*",
                          re.ASCII)
#: orjson writes integers in this range itself
_ORJSON_MIN, _ORJSON_MAX = -(2 ** 63), 2 ** 64 - 1


def json_cell(value: object) -> object:
    """``value`` as the standard ``json`` module may write it with ``allow_nan=False``: a
    non-finite float becomes ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``; anything else is
    returned unchanged (Python's json writes integers of any size exactly)."""
    if type(value) is float and not math.isfinite(value):
        return NON_FINITE[str(value)]
    return value


#: non-finite doubles as CSV and tables write them: their xsd:double lexical forms
_NON_FINITE_TEXT = {"nan": "NaN", "inf": "INF", "-inf": "-INF"}


def text_cell(value: object) -> str:
    """``value`` as CSV or table text: unbound as empty, booleans as SPARQL writes them
    (``true``), non-finite doubles as ``NaN`` / ``INF`` / ``-INF`` (not Python's ``nan``)."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is float and not math.isfinite(value):
        return _NON_FINITE_TEXT[str(value)]
    return str(value)


def orjson_cell(value: object) -> object:
    """``value`` as orjson may write it: :func:`json_cell`, and an integer beyond 64 bits as
    its exact digits (:class:`orjson.Fragment`)."""
    if type(value) is float:  # exactly: a subclass is not what this writes
        return value if math.isfinite(value) else NON_FINITE[str(value)]
    if type(value) is int and not _ORJSON_MIN <= value <= _ORJSON_MAX:
        return _number(value)
    return value


def _number(value: int) -> orjson.Fragment:
    return orjson.Fragment(_digits(value))


def _digits(value: int) -> str:
    """``str(value)``, also past the 4300 digits Python converts at once."""
    try:
        return str(value)
    except ValueError:
        high, low = divmod(abs(value), 10 ** 1000)
        return ("-" if value < 0 else "") + _digits(high) + str(low).zfill(1000)


def rows_json(columns: list[str], rows: list[list[Any]]) -> bytes:
    """``{"columns": [...], "rows": [[...]]}`` as JSON bytes, every value through
    :func:`orjson_cell` (values already converted, e.g. by :func:`term_value`, pass through)."""
    return orjson.dumps({"columns": columns,
                         "rows": [[orjson_cell(v) for v in row] for row in rows]})


def term_value(term: dict[str, Any] | None) -> object:
    """A SPARQL 1.1 Query Results JSON term as a value :func:`rows_json` writes: IRIs and
    plain literals as text, blank nodes as ``_:id``, numbers as exact JSON numbers, booleans
    as booleans, an ill-typed literal as its lexical text (other types as
    :func:`provkg.store.base.python_value` has them); None (unbound) stays None. Quoted
    triples are the caller's (:mod:`provkg.api.render` writes them in N-Triples syntax)."""
    if term is None:
        return None
    kind = term["type"]
    value: str = term["value"]
    datatype = term.get("datatype")
    if kind != "literal" or datatype is None:
        return python_value(kind, value, datatype)
    if datatype in INTEGER_TYPES:
        return _integer(value)
    if datatype in _DOUBLE_TYPES:
        return _double(value)
    if datatype == _DECIMAL:
        return _decimal(value)
    return python_value(kind, value, datatype)


def _integer(lexical: str) -> object:
    m = _INTEGER.fullmatch(lexical)
    if m is None:
        return lexical  # ill-typed: what the data says
    sign, digits = m.groups()
    sign = "-" if sign == "-" and digits != "0" else ""
    if len(digits) <= 18:
        return int(sign + digits)
    return orjson.Fragment(sign + digits)


def _double(lexical: str) -> object:
    special = _XSD_SPECIAL.get(lexical.strip())
    if special is not None:
        return NON_FINITE[str(special)]
    if _DOUBLE_FORM.fullmatch(lexical) is None:
        return lexical
    return orjson_cell(float(lexical))


def _decimal(lexical: str) -> object:
    m = _DECIMAL_FORM.fullmatch(lexical)
    if m is None or not (m.group(2) or m.group(3)):
        return lexical  # ill-typed (no digit at all, an exponent, ...): what the data says
    sign, whole, fraction = m.groups()
    whole, fraction = whole.lstrip("0"), (fraction or "").rstrip("0")
    if not (whole or fraction):
        return 0.0
    x = float(f"{whole or '0'}.{fraction or '0'}")
    if x != 0 and math.isfinite(x):
        return -x if sign == "-" else x
    # too large or too small for a double: the exact digits, as a JSON number
    return orjson.Fragment(("-" if sign == "-" else "") + (whole or "0")
                           + (f".{fraction}" if fraction else ""))
