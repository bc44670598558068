"""``name=value; name=value`` columns, identical on every store.

GROUP_CONCAT has no defined order and stores print numbers differently (``0.001`` vs
``1.0E-3``), so the query concatenates each pair as URI-encoded name, datatype and lexical
form, and :func:`format_pairs` decodes them, formats numbers one way and sorts by name.
"""

from __future__ import annotations

import json
import math
import re
import sys
from urllib.parse import unquote

from provkg.vocab import XSD

__all__ = ["concat_pairs", "format_pairs", "format_value"]

_INTEGERS = {XSD.integer, XSD.namespace + "int", XSD.namespace + "long", XSD.namespace + "short",
             XSD.namespace + "nonNegativeInteger", XSD.namespace + "positiveInteger"}
_REALS = {XSD.double, XSD.decimal, XSD.namespace + "float"}
#: plain text: written quoted when it could read as a number, or as more than one pair
_STRINGS = {XSD.string, "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", ""}
#: an integral xsd:decimal lexical form: digits only, no '.' and no exponent
_WHOLE = re.compile(r"[+-]?[0-9]+")


def concat_pairs(name: str, value: str) -> str:
    """The aggregate expression (for a SELECT projection) of the encoded pairs of a group."""
    enc = (f'CONCAT(ENCODE_FOR_URI(STR({name})), " ", ENCODE_FOR_URI(STR(DATATYPE({value}))),'
           f' " ", ENCODE_FOR_URI(STR({value})))')
    return f'GROUP_CONCAT(DISTINCT {enc}; separator=",")'


def format_value(value: object) -> str:
    """How a value shows in a pairs column: numbers as the shortest text of up to 15
    significant digits that reads back as the same double (0.81, not 0.8100000000000001),
    else with 16, what every store's STR() of a double keeps (Virtuoso writes
    1.9000000000000001 as "1.9"), so the same values read the same on every store.

    A double stays a double, as Python and JSON write it: ``2.0``, not ``2`` (that is the
    integer 2), so ``momentum=1.0`` reads as the ``1.0`` of the value columns.

    >>> format_value(0.001), format_value(3), format_value(2.0), format_value(True)
    ('0.001', '3', '2.0', 'true')
    >>> format_value(0.2110423373281488), format_value(1.9000000000000001), format_value(0.81)
    ('0.2110423373281488', '1.9', '0.81')
    >>> format_value(1e-05), format_value(1e16), format_value(-0.0)
    ('1e-05', '1e+16', '-0.0')
    >>> format_value(1.7976931348623157e308)
    '1.7976931348623157e+308'
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        short = f"{value:.15g}"
        text = short if float(short) == value else f"{value:.16g}"
        if abs(float(text)) == float("inf") and abs(value) != float("inf"):
            text = repr(value)  # near the largest double 16 digits round past it, to inf
        return text if any(c in text for c in ".eni") else text + ".0"  # e: 1e+16, n/i: nan, inf
    return str(value)


def _decode(datatype: str, lexical: str) -> object:
    """The Python value of a literal: an xsd:decimal written as a whole number (no ``.``, no
    exponent) is an int, exact at any size (Virtuoso answers integers above 2^53 as
    decimals: as floats they would lose digits).

    >>> _decode(XSD.decimal, "18446744073709551617"), _decode(XSD.decimal, "-3")
    (18446744073709551617, -3)
    >>> _decode(XSD.decimal, "2.50"), _decode(XSD.double, "1E3")
    (2.5, 1000.0)
    >>> _decode(XSD.double, "-1.797693134862316e+308"), _decode(XSD.double, "INF")
    (-1.7976931348623157e+308, inf)
    """
    try:
        if datatype in _INTEGERS:
            return int(lexical)
        if datatype == XSD.decimal and _WHOLE.fullmatch(lexical.strip()):
            return int(lexical)
        if datatype in _REALS:
            value = float(lexical)
            if math.isinf(value) and "INF" not in lexical.upper():
                # a finite double rounded up past the largest one: Virtuoso's STR() keeps 16
                # digits, so 1.7976931348623157e308 comes back as 1.797693134862316e+308
                return math.copysign(sys.float_info.max, value)
            return value
    except ValueError:
        return lexical
    if datatype == XSD.boolean:
        return lexical.strip() in ("true", "1")
    return lexical


#: a text that reads as a number, a boolean or a list: written quoted when a string
#: (numbers, nan and inf included, are what ``float()`` reads: _reads_as_number)
_LOOKS_TYPED = re.compile(r"true|false|null|\[.*|\{.*", re.IGNORECASE | re.DOTALL)
#: how the capture library sends a non-finite float (JSON has none): shown as the number it was
_NON_FINITE = {"NaN", "Infinity", "-Infinity"}


def _no_separator(json_text: str) -> str:
    r"""JSON text with each ``;`` (only ever inside its strings) written ``\u003b``, the same
    JSON: a pairs column then splits at ``; `` one way, whatever a value holds."""
    return json_text.replace(";", "\\u003b")


def _reads_as_number(text: str) -> bool:
    """Whether Python's ``float()`` takes ``text`` for a number (``10_000``, ``١٢٣``...)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _text(text: str, *, value: bool) -> str:
    r"""A name or a string value as the pairs column writes it: as it is, or as a JSON string
    (double quotes, backslash escapes; ``;`` as ``\u003b``, and ``=`` too in a name) when it
    holds ``;`` or ``=``, starts with a quote, has spaces at its ends or is empty, or (a value)
    reads as a number, a boolean or a list, so that the column reads back one way (else
    ``note="x; z=w"`` reads as two pairs, and the string ``"0.01"`` as the number).
    ``NaN`` / ``Infinity`` stay as they are: the capture library's non-finite floats.

    >>> _text("adam", value=True), _text("x; z=w", value=True), _text("0.01", value=True)
    ('adam', '"x\\u003b z=w"', '"0.01"')
    >>> _text("a=b", value=False), _text("NaN", value=True), _text("[64,32]", value=True)
    ('"a\\u003db"', 'NaN', '"[64,32]"')
    """
    if value and text in _NON_FINITE:
        return text
    if (not text or any(c in text for c in ";=") or text[0] == '"' or text != text.strip()
            or value and (_LOOKS_TYPED.fullmatch(text) or _reads_as_number(text))):
        quoted = _no_separator(json.dumps(text, ensure_ascii=False))
        return quoted if value else quoted.replace("=", "\\u003d")
    return text


def format_pairs(encoded: object) -> str:
    """Decode a :func:`concat_pairs` result into ``name=value`` pairs joined by ``; ``,
    sorted by name (then value). A string that could read as something else is quoted
    (:func:`_text`).

    >>> format_pairs("lr http%3A%2F%2Fwww.w3.org%2F2001%2FXMLSchema%23double 1.0E-3")
    'lr=0.001'
    >>> format_pairs("lr http%3A%2F%2Fwww.w3.org%2F2001%2FXMLSchema%23string 1.0E-3")
    'lr="1.0E-3"'
    """
    if not encoded:
        return ""
    pairs = []
    for item in str(encoded).split(","):
        parts = item.split(" ")
        if len(parts) != 3:
            continue
        name, datatype, lexical = (unquote(p) for p in parts)
        value = _decode(datatype, lexical)
        if isinstance(value, str) and datatype in _STRINGS:
            shown = _text(value, value=True)
        elif isinstance(value, str):  # a list (rdf:JSON) as its JSON text
            shown = _no_separator(value)
        else:
            shown = format_value(value)
        pairs.append((_text(name, value=False), shown))
    return "; ".join(f"{n}={v}" for n, v in sorted(set(pairs)))
