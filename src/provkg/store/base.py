"""The store interface every backend implements, and the rows queries return.

A :class:`Store` has one job per method (like httpx's transports): add triples,
bulk-load a file, answer SELECT / ASK / CONSTRUCT, run an update, count, list
graphs, clear, close. Queries always see the union of all graphs. Terms going in
and out are N-Triples text (what :mod:`provkg.term` writes); values in SELECT
rows are plain Python (see :func:`python_value`).
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TypeVar

from provkg.errors import BadParameter, NotFound, QueryTimeout, StoreError
# the SPARQL text analysis the backends share, re-exported where they import it from
from provkg.store.sparql_text import (  # noqa: F401
    declared_prefixes,
    has_dataset_clause,
    prefix_declarations,
    refuse_deep_nesting,
    syntax_error,
    undeclared_prefix,
)
from provkg.term import Triple, escape_string, literal
from provkg.vocab import XSD

__all__ = [
    "Store", "Rows", "python_value", "ntriples_term", "rdf_file", "rdf_format_of", "syntax_error",
    "ntriples_bytes", "RDF_FORMATS", "run_with_timeout", "result_term", "display_url",
    "refuse_deep_nesting",
]

T = TypeVar("T")

#: query-string options whose values are secrets: never shown (``password=``, ``token=``, ...)
_SECRET_OPTION = re.compile(r"pass|secret|token|key|auth|credential", re.IGNORECASE)
#: ``scheme://user:password@host``: the password part of the authority
_USERINFO = re.compile(r"^(?P<scheme>[^:/?#]*://)(?P<user>[^:/?#@]*):(?P<secret>[^/?#]*)@")


def display_url(url: str | None) -> str:
    """A store (or endpoint) URL as it may be shown: in messages, logs, API answers and
    command output. Passwords in the authority (``user:password@``) and the values of
    secret options (``password=``, ``token=``, ``api_key=``, ...) become ``***``; the rest,
    including malformed URLs, is kept as given. Every message naming a store URL goes
    through this, so no ``?password=`` value reaches an API error answer.

    >>> display_url("virtuoso+http://127.0.0.1:8890?user=dba&password=dba")
    'virtuoso+http://127.0.0.1:8890?user=dba&password=***'
    >>> display_url("sparql+https://me:s3cr%40t@db.example.org/sparql?timeout=5")
    'sparql+https://me:***@db.example.org/sparql?timeout=5'
    >>> display_url("oxigraph:provkg-data")
    'oxigraph:provkg-data'
    """
    if not url:
        return url or ""
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url, count=1)
    head, sep, query = text.partition("?")
    if not sep:
        return text
    fragment_sep = "#" if "#" in query else ""
    query, _, fragment = query.partition("#")
    options = []
    for option in query.split("&"):
        name, eq, _value = option.partition("=")
        options.append(f"{name}=***" if eq and _SECRET_OPTION.search(name) else option)
    return f"{head}?{'&'.join(options)}{fragment_sep}{fragment}"


@dataclass
class Rows:
    """The answer to a SELECT: column names and rows of Python values.

    >>> rows = Rows(["name", "n"], [["a", 1], ["b", None]])
    >>> rows.as_dicts()
    [{'name': 'a', 'n': 1}, {'name': 'b', 'n': None}]
    >>> rows.column("n"), len(rows)
    ([1, None], 2)
    """

    columns: list[str]
    rows: list[list[object]] = field(default_factory=list)

    def as_dicts(self) -> list[dict[str, object]]:
        """One ``{column: value}`` dict per row."""
        return [dict(zip(self.columns, row)) for row in self.rows]

    def column(self, name: str) -> list[object]:
        """Every value of column ``name``, in row order."""
        try:
            i = self.columns.index(name)
        except ValueError:
            raise BadParameter(f"no column {name!r}; columns are {self.columns}") from None
        return [row[i] for row in self.rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[list[object]]:
        return iter(self.rows)


class Store(ABC):
    """A triple store provkg can write to and query. Use :func:`provkg.store.open_store`.

    Stores are context managers: ``with open_store("memory:") as store: ...``.
    """

    #: the URL the store was opened with
    url: str = ""
    #: how canned queries are rendered for this store (``provkg.queries.builder.DIALECTS``)
    query_dialect: str = "standard"
    #: opened read-only because another process holds it (``open_store(..., read_only=True)``):
    #: the store answers from what was written when it was opened, and refuses writes
    snapshot: bool = False
    #: how many ``add`` calls may run at once from different threads (bulk ingest keeps this
    #: many loads in flight); 1 for stores that are not safe to write from several threads
    parallel_adds: int = 1

    @abstractmethod
    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        """Add triples (tuples of N-Triples terms) to ``graph`` (IRI; default graph if None).

        Adding a triple that is already there changes nothing. Returns how many
        triples were given. ``trusted``: the terms come from provkg's own mapper, which
        built every IRI through :func:`provkg.term.iri` (validated); a store may then skip
        validating them again (embedded Oxigraph parses ~20 % faster).

        Raises:
            StoreError: a term is not valid N-Triples, or the store refused the data.
        """

    @abstractmethod
    def load_file(self, path: str | Path, *, format: str | None = None,
                  graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
        """Bulk-load an RDF file (Turtle, N-Triples, N-Quads, RDF/XML; ``.gz`` too) into
        ``graph`` (triple formats; quad formats keep their own graphs).

        ``format`` is a key of :data:`RDF_FORMATS`, guessed from the extension when
        None; ``progress`` is called with byte counts as the file is read. Returns how
        many triples the store gained (0 when the file was loaded before; blank nodes
        are fresh per load, as RDF has it).

        Raises:
            NotFound: no such file.  BadParameter: unknown format.
            StoreError: the file does not parse (with line) or the store refused it.
        """

    @abstractmethod
    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        """Run a SPARQL SELECT over the union of all graphs.

        ``hide_system_graphs=False``: the query matches provkg's vocabularies only (the canned
        queries), so a store need not hide graphs of its own from it. Virtuoso hides its
        system graphs with ``define input:default-graph-exclude``, which turns its plans for
        large joins from seconds into minutes (Q7 typed at 10M triples: 3 s vs > 60 s).

        Raises:
            QuerySyntaxError: the query does not parse (line and column when known).
            QueryTimeout: it ran past ``timeout`` seconds.  StoreError: any other failure.
        """

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows:
        """Like :meth:`select` (user queries: system graphs hidden), but each value keeps its
        RDF term type: a SPARQL 1.1 Query Results JSON term (see :func:`result_term`), or
        None when unbound. The ``/v1/sparql`` endpoint serializes these.

        Raises:
            NotImplementedError: the backend does not provide typed terms.
        """
        raise NotImplementedError(f"{type(self).__name__} does not provide typed SELECT terms")

    @abstractmethod
    def ask(self, query: str) -> bool:
        """Run a SPARQL ASK over the union of all graphs."""

    @abstractmethod
    def construct(self, query: str) -> list[Triple]:
        """Run a SPARQL CONSTRUCT (or DESCRIBE); triples as N-Triples terms."""

    @abstractmethod
    def update(self, sparql: str) -> None:
        """Run a SPARQL 1.1 Update."""

    @abstractmethod
    def count(self, *, graph: str | None = None) -> int:
        """Triples in ``graph``, or summed over the default graph and every named graph."""

    @abstractmethod
    def graphs(self) -> list[str]:
        """IRIs of the named graphs holding data, sorted."""

    @abstractmethod
    def clear(self, *, graph: str | None = None) -> None:
        """Remove every triple of ``graph``, or of the whole store when None."""

    def dump(self, out: BinaryIO, *, graph: str | None = None) -> None:
        """Write the whole store as N-Quads (every named graph kept), or the triples of
        ``graph`` as N-Triples, to ``out``; ``provkg load`` reads either back.

        Raises:
            StoreError: a store that cannot (remote ones: their servers dump faster).
        """
        raise StoreError(f"{display_url(self.url)} cannot be exported by provkg: use the "
                         "server's own dump (`oxigraph dump`, Virtuoso's dump_nquads), then "
                         "`provkg load` the file")

    def compact(self, *, force: bool = False) -> float | None:
        """Reorganize the store's files for reading after large bulk loads; the seconds it
        took, or None when there was nothing worth doing (a store that needs no such step,
        or little was bulk-loaded since it was opened). Commands that bulk-load (``ingest``,
        ``load``) call it at the end; ``force`` compacts whatever was loaded."""
        return None

    def close(self) -> None:
        """Release files, locks and connections. Closing twice is harmless."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({display_url(self.url)!r})"


# -- values ------------------------------------------------------------------

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


# -- files --------------------------------------------------------------------

#: format name -> (media type, file extensions)
RDF_FORMATS: dict[str, tuple[str, tuple[str, ...]]] = {
    "turtle": ("text/turtle", (".ttl", ".turtle")),
    "ntriples": ("application/n-triples", (".nt",)),
    "nquads": ("application/n-quads", (".nq",)),
    "rdfxml": ("application/rdf+xml", (".rdf", ".owl", ".xml")),
    "trig": ("application/trig", (".trig",)),
}


def rdf_format_of(path: str | Path, format: str | None = None) -> tuple[str, bool]:
    """The format name of ``path`` (from ``format`` or the extension) and whether it is gzipped.

    >>> rdf_format_of("kg/survey.nt.gz")
    ('ntriples', True)

    Raises:
        BadParameter: the format is unknown or cannot be guessed.
    """
    name = Path(path).name.lower()
    gzipped = name.endswith(".gz")
    if gzipped:
        name = name[:-3]
    if format is not None:
        if format not in RDF_FORMATS:
            raise BadParameter(f"unknown RDF format {format!r}; expected one of {sorted(RDF_FORMATS)}")
        return format, gzipped
    for fmt, (_, extensions) in RDF_FORMATS.items():
        if name.endswith(extensions):
            return fmt, gzipped
    known = " ".join(e for _, exts in RDF_FORMATS.values() for e in exts)
    raise BadParameter(f"cannot tell the RDF format of {path}: expected an extension among "
                       f"{known} (optionally .gz), or give the format (provkg load --format)")


def rdf_file(path: str | Path, format: str | None = None) -> tuple[Path, str, bool]:
    """An existing RDF file to load: its path, format name and whether it is gzipped.

    Raises:
        NotFound: no such file.
        BadParameter: the format is unknown or cannot be guessed.
    """
    path = Path(path)
    fmt, gzipped = rdf_format_of(path, format)
    if not path.is_file():
        raise NotFound(f"no such file: {path}")
    return path, fmt, gzipped


_pool: concurrent.futures.ThreadPoolExecutor | None = None


#: rdflib's SPARQL grammar is one pyparsing parser per process, and pyparsing is not
#: thread-safe (pyparsing issue 89): parses from two threads at once broke the parser for the
#: process's life (every new query text then failed). Every use of it holds this lock.
SPARQL_PARSER_LOCK = threading.Lock()


def run_with_timeout(run: Callable[[], T], timeout: float | None) -> T:
    """Run ``run`` with a time limit. Embedded engines cannot interrupt a query: past the
    limit the caller gets :class:`QueryTimeout` while the query finishes in the background."""
    global _pool
    if timeout is None:
        return run()
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="provkg-query")
    future = _pool.submit(run)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise QueryTimeout(f"the query ran past {timeout:g} s") from None
