"""RDF terms as N-Triples text: the one place IRIs are minted and literals escaped.

The mapper writes triples as tuples of N-Triples terms (``<iri>``,
``"lexical"^^<datatype>``) because every backend bulk-loads N-Triples fast
and exactly; the query layer binds parameters with the same functions, so a
user string can only ever become one well-formed, escaped term.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from provkg.errors import BadParameter
from provkg.vocab import DEFAULT_BASE, RDF, XSD

__all__ = [
    "Triple", "iri", "is_valid_iri", "literal", "mint_iri", "id_from_iri",
    "datetime_literal", "escape_string", "ntriples_line", "SPARQL_NOISE", "blank_noise", "noise_readings",
    "MAX_NESTING", "nesting_depth",
    "location_form", "path_location", "json_size",
]

#: (subject, predicate, object), each an N-Triples term
Triple = tuple[str, str, str]

# RFC 3987 forbids these in an IRI; N-Triples / SPARQL IRIREF forbids them too.
_BAD_IRI_CHARS = re.compile(r'[\x00-\x20<>"{}|^`\\]|%(?![0-9A-Fa-f]{2})')
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
# characters left readable in minted IRIs; everything else is percent-encoded,
# including '%', so minting is injective
_SAFE_ID_CHARS = "-._~:@/"
#: the same without '/', for parts joined by '/'
_SAFE_PART_CHARS = "-._~:@"
#: what ``quote(x, safe=_SAFE_ID_CHARS)`` leaves unchanged: ASCII letters, digits and those
_PLAIN_ID = re.compile(r"[A-Za-z0-9\-._~:@/]*")


def is_valid_iri(value: str) -> bool:
    """True when ``value`` is an absolute IRI that can be written as ``<value>``.

    >>> is_valid_iri("https://w3id.org/provkg/id/task/t1"), is_valid_iri("x> } DROP ALL #")
    (True, False)
    >>> is_valid_iri("http://example.org/a%20b"), is_valid_iri("http://example.org/100%")
    (True, False)
    >>> is_valid_iri("https://example.org:8080/x"), is_valid_iri("file://:.9/x")
    (True, False)
    """
    if not _SCHEME.match(value) or _BAD_IRI_CHARS.search(value):
        return False
    if "//" in value[:value.find(":") + 3]:
        try:  # an authority's port must be a number: RDF parsers refuse "file://:x/"
            _ = urlsplit(value).port  # reading it parses it
        except ValueError:
            return False
    return True


def iri(value: str) -> str:
    """``<value>`` after checking that ``value`` is an absolute, well-formed IRI.

    >>> iri("http://www.w3.org/ns/prov#used")
    '<http://www.w3.org/ns/prov#used>'

    Raises:
        BadParameter: when ``value`` is not an absolute IRI or holds a character IRIs forbid.
    """
    if not isinstance(value, str) or not is_valid_iri(value):
        raise BadParameter(
            "expected an absolute IRI such as https://example.org/x "
            "(a scheme, no spaces, none of <>\"{}|^`\\, and % only as %XX)"
        )
    return f"<{value}>"


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    return _ESCAPES.get(c) or f"\\u{ord(c):04X}"


def escape_string(text: str) -> str:
    """Escape ``text`` for the inside of an N-Triples / SPARQL string literal."""
    # backslashes first, so the ones added after are not doubled; str.replace, not a callback
    # per match: a rollup's JSON state holds a quote every few characters
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if '"' in text:
        text = text.replace('"', '\\"')
    return _CONTROL.sub(_escape_char, text) if _CONTROL.search(text) else text


def _double_lexical(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "INF" if x > 0 else "-INF"
    return repr(x)  # shortest repr that round-trips exactly


_INT64 = 2**63


def literal(value: object, datatype: str | None = None) -> str:
    """An N-Triples literal keeping the JSON type of ``value``.

    bool -> xsd:boolean, int -> xsd:integer (xsd:decimal beyond 64 bits), float -> xsd:double
    (exact, shortest round-trip form), str -> xsd:string, list / dict -> rdf:JSON, datetime -> xsd:dateTime.

    >>> for v in (3, 0.1, True, 'say "hi"'):
    ...     print(literal(v))
    "3"^^<http://www.w3.org/2001/XMLSchema#integer>
    "0.1"^^<http://www.w3.org/2001/XMLSchema#double>
    "true"^^<http://www.w3.org/2001/XMLSchema#boolean>
    "say \\"hi\\""
    """
    if datatype is not None:
        return f'"{escape_string(str(value))}"^^<{datatype}>'
    if isinstance(value, bool):
        return f'"{"true" if value else "false"}"^^<{XSD.boolean}>'
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return f'"{value}"^^<{XSD.integer}>'
        # the same number as xsd:decimal (integer's supertype), still exact: Oxigraph holds
        # an xsd:integer in 64 bits and treats a bigger one as no number at all (a training
        # whose FLOP count is 1e19 dropped out of every ranking); its decimals reach ~1.7e20
        return f'"{value}"^^<{XSD.decimal}>'
    if isinstance(value, float):
        return f'"{_double_lexical(value)}"^^<{XSD.double}>'
    if isinstance(value, str):
        return f'"{escape_string(value)}"'
    if isinstance(value, datetime):
        return datetime_literal(value.timestamp())
    if isinstance(value, (list, tuple, dict)):
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        return f'"{escape_string(text)}"^^<{RDF.JSON}>'
    raise BadParameter(f"cannot write a {type(value).__name__} as an RDF literal")


def datetime_literal(seconds: float) -> str:
    """xsd:dateTime in UTC with microseconds, from seconds since the epoch.

    >>> datetime_literal(0.5)
    '"1970-01-01T00:00:00.500000Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
    """
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    return f'"{dt.strftime("%Y-%m-%dT%H:%M:%S.%f")}Z"^^<{XSD.dateTime}>'


def mint_iri(kind: str, *parts: str, base: str = DEFAULT_BASE, composite: bool = False) -> str:
    """The IRI (without angle brackets) of an instance: ``{base}{kind}/{part}/...``.

    Each part is percent-encoded so any client-chosen id gives a valid IRI and
    two different ids never give the same IRI.

    An id (one part) keeps its '/' readable. Names of spec elements (workflow,
    transformation, attribute) and the parts of composite IRIs also encode '/', so
    ``("w", "train/lr")`` and ``("w", "train", "lr")`` stay two IRIs (TensorBoard-style
    names like ``train/loss``).

    >>> mint_iri("task", "run-1/epoch 3")
    'https://w3id.org/provkg/id/task/run-1/epoch%203'
    >>> mint_iri("spec", "w", "train/lr")
    'https://w3id.org/provkg/id/spec/w/train%2Flr'

    A segment ``.`` or ``..`` is encoded (``%2E``): IRI tools resolve dot segments away, so
    ``value/run/..`` would become ``value/``, another resource.

    >>> mint_iri("value", "run-9/.."), mint_iri("spec", "w", ".")
    ('https://w3id.org/provkg/id/value/run-9/%2E%2E', 'https://w3id.org/provkg/id/spec/w/%2E')

    ``composite``: a kind minted from a varying number of parts (a process from its run, or
    from its run, host and pid) encodes '/' in a single part too, so ``("a/b",)`` and
    ``("a", "b")`` stay two IRIs.

    >>> mint_iri("change", "t/x", composite=True), mint_iri("change", "t", "x")
    ('https://w3id.org/provkg/id/change/t%2Fx', 'https://w3id.org/provkg/id/change/t/x')
    """
    if len(parts) == 1 and kind != "spec" and not composite:
        # ids made of unreserved characters only (most are) are their own encoding: the check
        # costs half of quote()'s, which is a few % of mapping
        path = parts[0] if _PLAIN_ID.fullmatch(parts[0]) else quote(parts[0], safe=_SAFE_ID_CHARS)
        if path[:1] == "." or "/." in path:
            path = "/".join(map(_no_dots, path.split("/")))
        return base + kind + "/" + path
    return base + kind + "/" + "/".join(_no_dots(quote(p, safe=_SAFE_PART_CHARS)) for p in parts)


def _no_dots(segment: str) -> str:
    return "%2E" * len(segment) if segment in (".", "..") else segment


def id_from_iri(value: str, kind: str, *, base: str = DEFAULT_BASE) -> str | None:
    """The id inside an IRI minted by :func:`mint_iri`, or None if it is not one."""
    from urllib.parse import unquote

    prefix = base + kind + "/"
    return unquote(value[len(prefix):]) if value.startswith(prefix) else None


def ntriples_line(t: Triple) -> str:
    return f"{t[0]} {t[1]} {t[2]} .\n"


#: what hides SPARQL keywords: comments (to CR or LF, as SPARQL and Oxigraph end them), long and
#: short strings, IRIs (blanked before a scan), and a prefixed name's escaped character
#: (``ex:a\#``, ``ex:a\)``: no comment, bracket or quote, else they would bypass the
#: nesting limit)
_COMMENT_AND_STRINGS = (r'#[^\n\r]*|"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*\'\'\''
                        r'|"(?:[^"\\\n\r]|\\.)*"|\'(?:[^\'\\\n\r]|\\.)*\'')
_IRI = r'<[^<>"{}|^`\\\s]*>'
_ESCAPED = r'\\[^\n\r]'
SPARQL_NOISE = re.compile(f"{_COMMENT_AND_STRINGS}|{_IRI}|{_ESCAPED}")


#: the same without IRIs: a ``<`` may also be a comparison (``1<(2)&&3>1``, ``1<'x>'``), which
#: only the grammar tells from an IRI's start (10,000 brackets, or a SERVICE call, can hide
#: in such an "IRI"); checks that must not be fooled read the text both ways
SPARQL_NOISE_NO_IRI = re.compile(f"{_COMMENT_AND_STRINGS}|{_ESCAPED}")


def blank_noise(query: str, *, iris: bool = True) -> str:
    """``query`` with its comments, strings and IRIs blanked out, character for character:
    keywords found in it are the query's own, at the same offsets in ``query``. ``iris=False``
    reads every ``<`` as a comparison (see :data:`SPARQL_NOISE_NO_IRI`)."""
    return (SPARQL_NOISE if iris else SPARQL_NOISE_NO_IRI).sub(lambda m: " " * len(m.group(0)), query)


def noise_readings(query: str) -> tuple[str, str]:
    """The query blanked both ways (``<`` as an IRI's start, and as a comparison): a keyword
    or a bracket that either reading shows may be the query's own."""
    return blank_noise(query), blank_noise(query, iris=False)


#: brackets a query may nest: far beyond any real query, and far below where Oxigraph's
#: recursive parser runs out of stack (about 3,000 braces took the process down)
MAX_NESTING = 500


def nesting_depth(query: str) -> int:
    r"""How deep a query's brackets ``{ ( [`` and quoted triples ``<< >>`` nest (strings, IRIs
    and comments aside), a run of ``!`` counting as that many levels (each is one more
    recursion of a parser), whatever blanks or comments stand between its marks.

    >>> nesting_depth("ASK { FILTER(! ! #x\n !true) }"), nesting_depth("SELECT * { << << ?a ?b ?c >> ?p ?o >> ?q ?r }")
    (5, 3)
    """
    return max(_depth(text) for text in noise_readings(query))


def _depth(text: str) -> int:
    """:func:`nesting_depth` of one blanked reading."""
    depth = deepest = run = 0
    previous = ""
    for c in text:
        if c == "!":
            run += 1
        elif not c.isspace():
            run = 0
        if c in "{([" or c == "<" and previous == "<":
            depth += 1
            c = "" if c == "<" else c  # "<<<" is one quoted triple, then an IRI's "<"
        elif c in "})]" or c == ">" and previous == ">":
            depth -= 1
            c = "" if c == ">" else c
        deepest = max(deepest, depth + run)
        previous = c
    return deepest


# -- locations: one spelling per place ---------------------------------------------------

_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: what ``quote`` leaves as it is: URI delimiters and existing %-escapes
_URI_SAFE = ":/?#[]@!$&'()*+,;=%~"
#: what a path keeps as it is in its file: URI (a path has no query, fragment or escapes)
_PATH_SAFE = ":/@!$&'()*+,;=~"


@lru_cache(maxsize=4096)  # the same few datasets and models, named again and again
def location_form(uri: str) -> str:
    """A location URI in the one spelling provkg stores (``capture.ref`` and the mapper):
    characters a URI cannot hold (a space, an accent) percent-encoded, so a query can name the
    data as its user wrote the path.

    A local ``file:`` URI takes one spelling (RFC 8089 allows three), so the same file is
    the same location whichever a program wrote:

    >>> location_form("file:///data/my set.h5")
    'file:///data/my%20set.h5'
    >>> location_form("file:/data/a.sgy"), location_form("FILE://localhost/data/a.sgy")
    ('file:///data/a.sgy', 'file:///data/a.sgy')

    Characters a URI may hold stay as they are, and a ``%`` that starts no escape is one:

    >>> location_form("file:///data/run (1)/café 100%.h5")
    'file:///data/run%20(1)/caf%C3%A9%20100%25.h5'
    >>> location_form("file:///data/run%20%281%29%2Ba.h5")  # as Path.as_uri() writes it
    'file:///data/run%20(1)+a.h5'
    """
    # surrogateescape: a name's bytes that are no UTF-8 (os.listdir gives them as lone
    # surrogates) are escaped as those bytes
    uri = _one_file_form(_STRAY_PERCENT.sub("%25", quote(uri, safe=_URI_SAFE,
                                                         errors="surrogateescape")))
    if uri.startswith("file://"):  # Path.as_uri() escapes ( ) + , = ... : a path shows them
        uri = _PATH_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), uri)
    return uri


#: in a file: URI's path, the escapes of characters a path segment holds as they are (RFC
#: 3986 sub-delims, ":" and "@"; "~" and the unreserved ones): decoded, one spelling per file
_PATH_ESCAPE = re.compile(r"%(2[146789ABCabc]|3[ABDabd]|40|7[Ee]|5[Ff]|2[Dd]|2[Ee])")


def path_location(path: str | PurePath) -> str:
    """The location URI of a local path, in the one spelling :func:`location_form` gives the
    same file written as a ``file:`` URI (``Path.as_uri()`` escapes ``( ) + , =`` too, so a
    program that wrote the path and one that wrote the URI named two locations). A ``%`` in a
    path is a character of its name.

    >>> path_location("/data/run (1)/café 100%.h5"), path_location("/data/run#1?.h5")
    ('file:///data/run%20(1)/caf%C3%A9%20100%25.h5', 'file:///data/run%231%3F.h5')
    >>> path_location("/data/caf\\udce9.h5")  # a Latin-1 name, as os.listdir gives it
    'file:///data/caf%E9.h5'
    >>> path_location("/data/tiles/")  # a folder, as file:///data/tiles/ names it
    'file:///data/tiles/'
    """
    text = Path(path).expanduser().absolute().as_posix() if not isinstance(path, PureWindowsPath) \
        else PureWindowsPath(path).as_posix()
    if not text.startswith("/"):  # C:/data/x.h5
        text = "/" + text
    if isinstance(path, str) and path.endswith("/") and not text.endswith("/"):
        # a folder keeps its slash, as file:///data/tiles/ written as a URI keeps it, so
        # "/data/tiles/" and "file:///data/tiles/" are one location
        text += "/"
    # a path is not a URI: its % # ? [ ] are characters of names, escaped
    return "file://" + quote(text, safe=_PATH_SAFE, errors="surrogateescape")


#: scheme, then userinfo and host of an authority: case-insensitive parts (RFC 3986 §3.1, §3.2.2)
_SCHEME_HOST = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:)(?://([^/?#@]*@)?(\[[^\]/?#]*\]|[^/?#:]*))?")


def _one_file_form(uri: str) -> str:
    """``file:/x`` and ``file://localhost/x`` (any case of the scheme) as ``file:///x``; for
    any other URI the scheme and host in lower case, as RFC 3986 compares them, so
    ``HTTP://Example.ORG/x`` and ``http://example.org/x`` are one location. The path,
    query and fragment keep their case.

    >>> _one_file_form("HTTP://Me@Example.ORG:8080/A?B=1#F"), _one_file_form("S3://Bucket/Key")
    ('http://Me@example.org:8080/A?B=1#F', 's3://bucket/Key')
    >>> _one_file_form("file://NAS01/Share/A.h5"), _one_file_form("http://%C3%89xample.org/%C3%9C")
    ('file://nas01/Share/A.h5', 'http://%C3%89xample.org/%C3%9C')
    """
    if uri[:5].lower() != "file:":
        m = _SCHEME_HOST.match(uri)
        if m is None:
            return uri
        scheme, user, host = m.group(1), m.group(2), m.group(3)
        if host is None:
            return scheme.lower() + uri[m.end(1):]
        return f"{scheme.lower()}//{user or ''}{_host_form(host)}{uri[m.end():]}"
    rest = uri[5:]
    if rest[:12].lower() == "//localhost/":
        rest = rest[11:]
    if rest.startswith("/") and not rest.startswith("//"):
        return "file://" + rest
    if rest.startswith("//") and not rest.startswith("///"):  # file://HOST/share (UNC)
        host, slash, path = rest[2:].partition("/")
        return f"file://{_host_form(host)}{slash}{path}"
    return "file:" + rest


def _host_form(host: str) -> str:
    """A host in lower case, its %-escapes' hex digits in upper case (RFC 3986 §6.2.2.1)."""
    return re.sub(r"%[0-9a-f]{2}", lambda m: m.group(0).upper(), host.lower())


def json_size(value: Any) -> int:
    """The UTF-8 bytes of a JSON value (a list, an environment) as compact JSON: the size of the
    one literal it is stored as (``provkg.events.MAX_VALUE_BYTES``)."""
    try:
        return len(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):  # an integer past 64 bits
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                   .encode("utf-8", "surrogatepass"))
