"""Terms going in and out of stores: SPARQL result terms as Python values, as SPARQL JSON
result terms, and as N-Triples text (what :mod:`provkg.term` writes), so every backend
answers with the same values for the same data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from provkg.term import Triple, escape_string, literal
from provkg.vocab import XSD

__all__ = ["python_value", "result_term", "ntriples_term", "ntriples_bytes", "canonical_datetime",
           "INTEGER_TYPES"]

_XSD = XSD.namespace
INTEGER_TYPES = {_XSD + t for t in (
    "integer", "long", "int", "short", "byte", "nonNegativeInteger", "positiveInteger",
    "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort",
    "unsignedByte")}
_FLOAT_TYPES = {_XSD + "double", _XSD + "float", _XSD + "decimal"}
_SPECIAL_FLOATS = {"INF": "inf", "+INF": "inf", "-INF": "-inf", "NaN": "nan"}
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
_DATETIME = re.compile(r"(-?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?")


def canonical_datetime(lexical: str) -> str:
    """An xsd:dateTime in one form whatever store computed it: no trailing zeros in the
    fraction, UTC as ``Z`` (Oxigraph wrote ``.75Z``, Virtuoso ``.750Z``, rdflib
    ``.750000+00:00`` for the same MAX of times).

    >>> canonical_datetime("2024-02-29T10:00:50.750000+00:00"), canonical_datetime("2024-01-01T00:00:00.000Z")
    ('2024-02-29T10:00:50.75Z', '2024-01-01T00:00:00Z')
    """
    m = _DATETIME.fullmatch(lexical.strip())
    if m is None:
        return lexical
    day, fraction, zone = m.groups()
    fraction = (fraction or "").rstrip("0")
    zone = "Z" if zone in ("+00:00", "-00:00") else (zone or "")
    return day + ("." + fraction if fraction else "") + zone


_WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")


def python_value(kind: str, value: str, datatype: str | None = None) -> object:
    """A SPARQL result term as Python: IRI -> str, xsd integers -> int, double / float /
    decimal -> float (exact: parsed from the lexical form), boolean -> bool, anything
    else (strings, dateTime, ...) -> its lexical form. ``kind`` is ``uri``, ``bnode``
    or ``literal`` (SPARQL JSON results' names).

    >>> python_value("literal", "1e-300", XSD.double), python_value("literal", "42", XSD.integer)
    (1e-300, 42)
    """
    if kind == "bnode":
        return f"_:{value}"
    if kind != "literal" or datatype is None:
        return value
    try:
        if datatype in INTEGER_TYPES:
            return int(value)
        if datatype in _FLOAT_TYPES:
            if datatype == _XSD + "decimal" and _WHOLE.fullmatch(value) and len(value) > 15:
                whole = int(value)  # a big integer (term.literal writes them as decimals)
                if abs(whole) >= 2**53:
                    return whole  # exact, where a float would round it
            x = float(_SPECIAL_FLOATS.get(value.strip(), value))
            if datatype == _XSD + "decimal" and abs(x) == float("inf"):
                return value  # a decimal beyond a double's range: exact text, not inf
            return x
    except ValueError:
        return value  # ill-typed literal: keep what the data says
    if datatype == XSD.boolean:
        b = _BOOLEANS.get(value.strip())
        return value if b is None else b  # ill-typed ("yes"): the text, not False
    if datatype == XSD.dateTime:
        return canonical_datetime(value)
    return value


_RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


def result_term(kind: str, value: str, datatype: str | None = None,
                language: str | None = None) -> dict[str, str]:
    """A term as SPARQL 1.1 Query Results JSON writes it, with the value untouched:
    ``{"type": "uri" | "bnode" | "literal", "value": ...}`` plus ``datatype`` (absent for
    ``xsd:string``) or ``xml:lang``. ``typed-literal`` (SPARQL 1.0 JSON) reads as ``literal``.

    >>> result_term("literal", "chat", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "fr")
    {'type': 'literal', 'value': 'chat', 'xml:lang': 'fr'}
    """
    if kind in ("uri", "bnode"):
        return {"type": kind, "value": value}
    term = {"type": "literal", "value": value}
    if language:
        term["xml:lang"] = language
    elif datatype and datatype not in (XSD.string, _RDF_LANG_STRING):
        term["datatype"] = datatype
    return term


def ntriples_term(kind: str, value: str, datatype: str | None = None,
                  language: str | None = None) -> str:
    """A result term written the way :mod:`provkg.term` writes it (so backends agree).

    >>> ntriples_term("literal", 'a "b"'), ntriples_term("uri", "http://x/y")
    ('"a \\\\"b\\\\""', '<http://x/y>')
    """
    if kind == "uri":
        return f"<{value}>"
    if kind == "bnode":
        return f"_:{value}"
    if datatype == XSD.double:  # one lexical form per value, as provkg.term writes it
        value = _canonical_double(value)
    text = f'"{escape_string(value)}"'
    if language:
        return f"{text}@{language}"
    if datatype and datatype != XSD.string:
        return f"{text}^^<{datatype}>"
    return text


def _canonical_double(lexical: str) -> str:
    try:
        x = float(_SPECIAL_FLOATS.get(lexical.strip(), lexical))
    except ValueError:
        return lexical
    if x != x:  # the XSD forms: rdflib writes Python's "nan" and "-inf"
        return "NaN"
    if abs(x) == float("inf"):
        return "INF" if x > 0 else "-INF"
    return literal(x).split('"')[1]


def ntriples_bytes(triples: Iterable[Triple], graph: str | None = None) -> tuple[bytes, int]:
    """N-Triples (or N-Quads when ``graph`` is given) for ``triples``, and how many there were."""
    if graph is None:
        lines = [f"{s} {p} {o} .\n" for s, p, o in triples]
    else:
        g = f"<{graph}>"
        lines = [f"{s} {p} {o} {g} .\n" for s, p, o in triples]
    return "".join(lines).encode("utf-8"), len(lines)
