"""What the stores and their users share besides the interface: the rows a SELECT returns,
store URLs as they may be shown, the RDF file formats, graph IRIs checked, time limits for
engines that cannot interrupt a query, and the lock around rdflib's SPARQL parser.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from provkg.errors import BadParameter, NotFound, QueryTimeout
from provkg.term import is_valid_iri

__all__ = ["Rows", "display_url", "checked_iri", "RDF_FORMATS", "rdf_format_of", "rdf_file",
           "run_with_timeout", "SPARQL_PARSER_LOCK"]

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


def checked_iri(value: str) -> str:
    """``value`` when it is an absolute IRI (to write between ``<>`` in SPARQL text).

    Raises:
        BadParameter: it is not.
    """
    if not is_valid_iri(value):
        raise BadParameter(f"graph must be an absolute IRI, got {value!r}")
    return value


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
