"""Answers in the format the Accept header asks for.

Canned-query rows: JSON ``{"columns": [...], "rows": [...]}`` or CSV (:func:`rows_response`).
SPARQL answers (``/v1/sparql``): the W3C SPARQL 1.1 result formats (JSON, XML, CSV, TSV)
for SELECT / ASK, Turtle, N-Triples, JSON-LD or RDF/XML for CONSTRUCT / DESCRIBE, chosen
with q-values (:func:`sparql_format`, :func:`sparql_response`).
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any
from urllib.parse import quote

import orjson
from fastapi.responses import Response

from provkg.service.json_values import rows_json, term_value, text_cell
from provkg.store.base import Rows
from provkg.term import escape_string

__all__ = ["ROWS_FORMATS", "rows_format", "rows_response", "negotiate", "sparql_format",
           "sparql_response", "SPARQL_FORMATS", "NOTE_HEADER", "header_text"]

#: the formats of canned-query answers, the default first
ROWS_FORMATS = ("application/json", "text/csv")


def rows_format(accept: str | None) -> str | None:
    """The format (a member of :data:`ROWS_FORMATS`) a canned query's answer is written in,
    by the Accept header with q-values as for ``/v1/sparql``; None when it allows neither.

    >>> rows_format("text/csv;q=0.1, application/json;q=0.9"), rows_format("text/turtle")
    ('application/json', None)
    """
    return negotiate(accept, ROWS_FORMATS)


def rows_response(media: str, rows: Rows) -> Response:
    """The rows in ``media`` (chosen by :func:`rows_format`): JSON ``{"columns", "rows"}``
    with exact numbers (:mod:`provkg.service.json_values`), or CSV."""
    if media == "text/csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180, as the SPARQL CSV
        writer.writerow(rows.columns)
        for row in rows.rows:
            writer.writerow([text_cell(v) for v in row])
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                        headers={"Vary": "Accept"})
    return Response(rows_json(rows.columns, rows.rows), media_type="application/json",
                    headers={"Vary": "Accept"})


#: a note on an answer (why a canned query's answer is empty), one header per note
NOTE_HEADER = "Provkg-Note"


#: the typographic characters provkg's own notes use, in the ASCII they stand for
_ASCII_FORMS = str.maketrans({"\u2026": "...", "\u2013": "-", "\u2014": "-", "\u2018": "'",
                              "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2192": "->"})


def header_text(note: str) -> str:
    """``note`` as the value of a :data:`NOTE_HEADER` header: one line of visible ASCII, as
    RFC 9110 (5.5) asks of new fields (clients read other bytes as Latin-1, UTF-8 or not at
    all). Line breaks and runs of spaces become one space; the typographic characters of
    provkg's own notes become ASCII (``…`` -> ``...``, en and em dashes -> ``-``, curly
    quotes -> straight ones, ``→`` -> ``->``); any other character outside printable ASCII,
    and ``%`` itself, is percent-encoded as UTF-8 (RFC 3986), so that
    ``urllib.parse.unquote(value)`` gives back the note's own text (a parameter's value
    named in it, say).

    >>> header_text("a path names data when absolute (/\u2026) \u2014 or ~/\u2026")
    'a path names data when absolute (/...) - or ~/...'
    >>> header_text("no task id 'n\u00fcpe' (parameter training, 100%)")
    "no task id 'n%C3%BCpe' (parameter training, 100%25)"
    """
    one_line = " ".join(note.split()).translate(_ASCII_FORMS)
    return "".join(c if " " <= c <= "~" and c != "%" else quote(c, safe="") for c in one_line)


# -- the SPARQL 1.1 Protocol: content negotiation and the W3C result formats -----------------

SPARQL_JSON = "application/sparql-results+json"
SPARQL_XML = "application/sparql-results+xml"
CSV = "text/csv"
TSV = "text/tab-separated-values"
#: provkg's own ``{"columns": [...], "rows": [[...]]}`` with numbers as JSON numbers (an ASK
#: as one column ``boolean``, as the CLI writes it): asked for explicitly, never a default
ROWS_JSON = "application/vnd.provkg.rows+json"
TURTLE = "text/turtle"
NTRIPLES = "application/n-triples"
JSON_LD = "application/ld+json"
RDF_XML = "application/rdf+xml"

#: query form -> the formats it can be answered in, the server's preference first (the first
#: is the default for no Accept or ``*/*``)
SPARQL_FORMATS: dict[str, tuple[str, ...]] = {
    "select": (SPARQL_JSON, SPARQL_XML, CSV, TSV, ROWS_JSON),
    "ask": (SPARQL_JSON, SPARQL_XML, ROWS_JSON),
    "construct": (TURTLE, NTRIPLES, JSON_LD, RDF_XML),
}
SPARQL_FORMATS["describe"] = SPARQL_FORMATS["construct"]
#: media types also accepted, answered in the format they map to
_ALIASES = {"application/json": SPARQL_JSON, "application/xml": SPARQL_XML, "text/xml": SPARQL_XML}
_CONTENT_TYPES = {CSV: "text/csv; charset=utf-8", TSV: "text/tab-separated-values; charset=utf-8",
                  TURTLE: "text/turtle; charset=utf-8"}


def _accept_ranges(header: str) -> list[tuple[str, str, float, int]]:
    """``(type, subtype, q, position)`` per media range of an Accept header; malformed
    ranges and q-values are skipped."""
    ranges = []
    for position, item in enumerate(header.split(",")):
        media, *params = (part.strip() for part in item.split(";"))
        media = media.lower()
        if media == "*":  # some old clients send a bare "*"
            media = "*/*"
        main, sep, sub = media.partition("/")
        if not sep or not main or not sub or (main == "*" and sub != "*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = -1.0
        if 0.0 <= q <= 1.0:
            ranges.append((main, sub, q, position))
    return ranges


def negotiate(accept: str | None, offers: tuple[str, ...] | list[str], *,
              exact_only: tuple[str, ...] | list[str] = ()) -> str | None:
    """The offer the Accept header prefers, or None when it accepts none of them.

    The q-value of an offer is that of the most specific range matching it (RFC 9110);
    the highest q wins, then the more specific match, then the client's order, then the
    order of ``offers``. No Accept header, or one with no well-formed range, accepts
    the first offer. Offers in ``exact_only`` match only when named (not by ``*/*``).

    >>> negotiate("text/csv;q=0.5, application/sparql-results+json", ["text/csv", SPARQL_JSON])
    'application/sparql-results+json'
    >>> negotiate("image/png", ["text/csv"]) is None
    True
    """
    if not offers:
        return None
    if accept is None or not accept.strip():
        return offers[0]
    ranges = _accept_ranges(accept)
    if not ranges:
        return offers[0]
    best: str | None = None
    best_key: tuple[float, int, int, int] | None = None
    for rank, offer in enumerate(offers):
        main, _, sub = offer.lower().partition("/")
        match: tuple[int, float, int] | None = None  # (specificity, q, client position)
        for r_main, r_sub, q, position in ranges:
            if (r_main, r_sub) == (main, sub):
                specificity = 3
            elif offer in exact_only:
                continue
            elif r_main == main and r_sub == "*":
                specificity = 2
            elif (r_main, r_sub) == ("*", "*"):
                specificity = 1
            else:
                continue
            if match is None or specificity > match[0]:
                match = (specificity, q, position)
        if match is None or match[1] <= 0:
            continue
        key = (match[1], match[0], -match[2], -rank)
        if best_key is None or key > best_key:
            best, best_key = offer, key
    return best


def sparql_format(accept: str | None, form: str) -> str | None:
    """The format to answer a ``form`` query in (a member of :data:`SPARQL_FORMATS`), or
    None when the Accept header allows none of them."""
    formats = SPARQL_FORMATS[form]
    aliases = [a for a, target in _ALIASES.items() if target in formats]
    chosen = negotiate(accept, [*formats, *aliases], exact_only=aliases)
    return _ALIASES.get(chosen, chosen) if chosen is not None else None


def _nt_text(term: dict[str, Any]) -> str:
    """A result term in N-Triples / Turtle syntax (as the TSV format writes it)."""
    kind, value = term["type"], term["value"]
    if kind == "uri":
        return f"<{value}>"
    if kind == "bnode":
        return f"_:{value}"
    if kind == "triple":
        return (f"<< {_nt_text(value['subject'])} {_nt_text(value['predicate'])} "
                f"{_nt_text(value['object'])} >>")
    text = f'"{escape_string(value)}"'
    if "xml:lang" in term:
        return f"{text}@{term['xml:lang']}"
    if "datatype" in term:
        return f"{text}^^<{term['datatype']}>"
    return text


def _python(term: dict[str, Any] | None) -> object:
    if term is not None and term["type"] == "triple":
        return _nt_text(term)
    return term_value(term)


_XML_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_XML_ATTR = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                           "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})


def _xml_term(term: dict[str, Any]) -> str:
    kind, value = term["type"], term["value"]
    if kind == "triple":
        return ("<triple>" + "".join(f"<{part}>{_xml_term(value[part])}</{part}>"
                                     for part in ("subject", "predicate", "object")) + "</triple>")
    if kind in ("uri", "bnode"):
        return f"<{kind}>{value.translate(_XML_TEXT)}</{kind}>"
    attrs = ""
    if "xml:lang" in term:
        attrs = f' xml:lang="{term["xml:lang"].translate(_XML_ATTR)}"'
    elif "datatype" in term:
        attrs = f' datatype="{term["datatype"].translate(_XML_ATTR)}"'
    return f"<literal{attrs}>{value.translate(_XML_TEXT)}</literal>"


_XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<sparql xmlns="http://www.w3.org/2005/sparql-results#">\n'


def _select_body(media: str, columns: list[str], rows: list[list[Any]]) -> bytes:
    if media == SPARQL_JSON:
        bindings = [{c: t for c, t in zip(columns, row) if t is not None} for row in rows]
        return orjson.dumps({"head": {"vars": columns}, "results": {"bindings": bindings}})
    if media == ROWS_JSON:
        return rows_json(columns, [[_python(t) for t in row] for row in rows])
    if media == SPARQL_XML:
        out = [_XML_HEAD, "<head>"]
        out += [f'<variable name="{c.translate(_XML_ATTR)}"/>' for c in columns]
        out.append("</head>\n<results>\n")
        for row in rows:
            out.append("<result>")
            out += [f'<binding name="{c.translate(_XML_ATTR)}">{_xml_term(t)}</binding>'
                    for c, t in zip(columns, row) if t is not None]
            out.append("</result>\n")
        out.append("</results>\n</sparql>\n")
        return "".join(out).encode("utf-8")
    if media == CSV:  # W3C SPARQL 1.1 Query Results CSV: plain values, CRLF line ends
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if t is None else _nt_text(t) if t["type"] == "triple" else
                             f"_:{t['value']}" if t["type"] == "bnode" else t["value"] for t in row])
        return buffer.getvalue().encode("utf-8")
    if media == TSV:  # W3C SPARQL 1.1 Query Results TSV: terms in Turtle syntax
        lines = ["\t".join(f"?{c}" for c in columns)]
        lines += ["\t".join("" if t is None else _nt_text(t) for t in row) for row in rows]
        return ("\n".join(lines) + "\n").encode("utf-8")
    raise ValueError(f"no SELECT serializer for {media}")


def _ask_body(media: str, boolean: bool) -> bytes:
    if media == SPARQL_JSON:
        return orjson.dumps({"head": {}, "boolean": boolean})
    if media == ROWS_JSON:  # as the CLI writes it: columns and rows, as for a SELECT
        return orjson.dumps({"columns": ["boolean"], "rows": [[boolean]]})
    if media == SPARQL_XML:
        return (f"{_XML_HEAD}<head/>\n<boolean>{'true' if boolean else 'false'}</boolean>\n"
                "</sparql>\n").encode()
    raise ValueError(f"no ASK serializer for {media}")


def _graph_body(media: str, ntriples: str) -> bytes:
    import pyoxigraph as ox

    from provkg.vocab import PREFIXES

    if media == NTRIPLES:
        return ntriples.encode("utf-8")
    formats = {TURTLE: ox.RdfFormat.TURTLE, JSON_LD: ox.RdfFormat.JSON_LD,
               RDF_XML: ox.RdfFormat.RDF_XML}
    triples = [q.triple for q in ox.parse(ntriples.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)]
    prefixes = {p: ns for p, ns in PREFIXES.items() if f"<{ns}" in ntriples}
    body = ox.serialize(triples, format=formats[media],
                        prefixes=None if media == JSON_LD else prefixes)
    assert body is not None  # without an output file, serialize returns the bytes
    return body


#: characters XML 1.0 cannot carry at all, not even as character references
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _check_xml_chars(body: bytes, media: str) -> None:
    """Refuse (406) an XML answer that would not be well-formed: a stored string may hold a
    control character (an ANSI colour code in an error message) that XML 1.0 cannot carry."""
    found = _NOT_XML.search(body.decode("utf-8", "surrogatepass"))
    if found is None:
        return
    from provkg.api.errors import NotAcceptable

    other = ("application/sparql-results+json, text/csv or text/tab-separated-values"
             if media == SPARQL_XML else "text/turtle, application/n-triples or application/ld+json")
    raise NotAcceptable(f"the answer holds the character U+{ord(found.group()):04X}, which XML 1.0 "
                        f"cannot carry, so it cannot be sent as {media}; ask for {other}")


def sparql_response(media: str, *, columns: list[str] | None = None,
                    rows: list[list[Any]] | None = None, boolean: bool | None = None,
                    ntriples: str | None = None) -> Response:
    """One SPARQL answer in ``media`` (chosen by :func:`sparql_format`): ``rows`` of SPARQL
    JSON terms for SELECT, ``boolean`` for ASK, ``ntriples`` for CONSTRUCT / DESCRIBE."""
    if rows is not None:
        body = _select_body(media, list(columns or []), rows)
    elif boolean is not None:
        body = _ask_body(media, boolean)
    else:
        body = _graph_body(media, ntriples or "")
    if media in (SPARQL_XML, RDF_XML):
        _check_xml_chars(body, media)
    return Response(body, media_type=_CONTENT_TYPES.get(media, media), headers={"Vary": "Accept"})
