"""Triple stores behind one small interface, picked by URL.

Store URLs (``--store URL`` or ``PROVKG_STORE``):

=============================================  ==============================================
``oxigraph:DIR``                               embedded Oxigraph on disk (default ``oxigraph:provkg-data``)
``memory:``                                    embedded Oxigraph in memory
``rdflib:``                                    rdflib ``Dataset`` in memory (small graphs; slow queries)
``oxigraph+http://HOST:PORT``                  an Oxigraph server (``oxigraph serve``): ``/query``,
                                               ``/update``, Graph Store Protocol at ``/store``
``virtuoso+http://HOST:PORT``                  a Virtuoso server: ``/sparql``, updates through the
                                               authenticated ``/sparql-auth`` (``?user=dba&password=dba``)
``sparql+http(s)://HOST:PORT/PATH``            any SPARQL 1.1 endpoint; the URL is the query endpoint
=============================================  ==============================================

Options for the server forms go in the query string and are removed from the endpoint URL:
``update=URL|/path`` (update endpoint; default: the query URL), ``gsp=URL|/path`` (Graph Store
Protocol endpoint for fast bulk loads), ``user=`` / ``password=`` (HTTP credentials, digest or
basic; ``user:password@HOST`` works too), ``default_graph=IRI`` (where writes without a graph
go, for stores with no writable default graph), ``union=PARAM`` (query parameter asking the
endpoint for the union default graph), ``connect_timeout=S`` (seconds to connect; default 5),
``timeout=S`` (seconds to wait for an answer when no time limit is given; default 900; writes
wait at least 600). Example:
``sparql+http://127.0.0.1:7878/query?update=/update&gsp=/store&union=union-default-graph``.
Messages show store URLs through :func:`display_url`, which hides passwords.

>>> with open_store("memory:") as store:
...     store.count()
0
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from provkg.errors import BadParameter, NotFound, StoreUnavailable
from provkg.store.base import Rows, Store, display_url

__all__ = ["open_store", "store_dialect", "display_url", "Store", "Rows", "STORE_SCHEMES"]


def _oxigraph(rest: str, url: str, read_only: bool) -> Store:
    from provkg.store.oxigraph_store import OxigraphStore

    if not rest:
        raise BadParameter(f"store URL {display_url(url)!r} names no folder: expected oxigraph:DIR, "
                           "e.g. oxigraph:provkg-data")
    return OxigraphStore(rest, url=url, read_only=read_only)


def _memory(rest: str, url: str, read_only: bool) -> Store:
    from provkg.store.oxigraph_store import OxigraphStore

    if rest:  # memory:foo is refused, not taken with the foo silently ignored
        raise BadParameter(f"store URL {display_url(url)!r}: memory: is in memory only and takes "
                           "no path; for a store on disk use oxigraph:DIR")
    return OxigraphStore(None, url=url)


def _rdflib(rest: str, url: str, read_only: bool) -> Store:
    from provkg.store.rdflib_store import RdflibStore

    if rest:  # it holds nothing on disk: a path here would be silently forgotten at exit
        raise BadParameter(f"store URL {display_url(url)!r}: rdflib: is in memory only and takes no path; "
                           "for a store on disk use oxigraph:DIR")

    return RdflibStore(url=url)


def _sparql(rest: str, url: str, read_only: bool) -> Store:
    from provkg.store.sparql_store import open_endpoint

    return open_endpoint(url)


#: URL scheme -> factory(rest of the URL after "scheme:", whole URL, read_only: only the
#: on-disk store has a lock another process may hold); imports are lazy
STORE_SCHEMES: dict[str, Callable[[str, str, bool], Store]] = {
    "oxigraph": _oxigraph,
    "memory": _memory,
    "rdflib": _rdflib,
    "sparql+http": _sparql,
    "sparql+https": _sparql,
    "oxigraph+http": _sparql,
    "oxigraph+https": _sparql,
    "virtuoso+http": _sparql,
    "virtuoso+https": _sparql,
}


def store_dialect(url: str | None) -> str:
    """How canned queries are rendered for the store at ``url`` (without opening it).

    >>> store_dialect("virtuoso+http://127.0.0.1:8890"), store_dialect("oxigraph:data")
    ('virtuoso', 'standard')
    """
    return "virtuoso" if (url or "").lower().startswith("virtuoso+") else "standard"


def open_store(url: str, *, existing: bool = False, read_only: bool = False) -> Store:
    """Open the store named by ``url`` (forms in this module's docstring). An on-disk
    Oxigraph folder is created when missing, unless ``existing`` (for commands that only
    read: a mistyped folder would otherwise answer every question with nothing).
    ``read_only`` (commands that only read): when another process holds an on-disk Oxigraph
    store (a running ingest or server), open it read-only instead of failing; the store's
    ``snapshot`` is then True.

    Raises:
        BadParameter: the URL has no known scheme.
        NotFound: ``existing`` and no store in the folder.
        StoreUnavailable: the store cannot be opened or reached.
    """
    scheme, sep, rest = url.partition(":")
    factory = STORE_SCHEMES.get(scheme.lower()) if sep else None
    if factory is None:
        raise BadParameter(
            f"unknown store URL {display_url(url)!r}: expected one of oxigraph:DIR, memory:, rdflib:, "
            "oxigraph+http://HOST:PORT, virtuoso+http://HOST:PORT, sparql+http://HOST:PORT/PATH "
            "(see `provkg --help`)"
        )
    if factory is _oxigraph and re.match(r"(?i)(https?|sparql|virtuoso|oxigraph)(\+https?)?://", rest):
        # oxigraph:http://HOST:PORT would make a folder "http:/HOST:PORT" here and ingest
        # into it
        raise BadParameter(f"store URL {display_url(url)!r} names a server, not a folder: for an "
                           "Oxigraph server write oxigraph+http://HOST:PORT (with a + after "
                           "oxigraph); oxigraph:DIR is an embedded store in folder DIR")
    if existing and factory is _oxigraph and rest and not _is_folder(rest, url):
        raise NotFound(f"no store in {rest!r} (store URL {display_url(url)!r}): load or ingest "
                       "into it first, or give --store / $PROVKG_STORE")
    try:
        return factory(rest, url, read_only)
    except ImportError as exc:  # a backend's package is not installed
        raise StoreUnavailable(f"store {display_url(url)!r} needs the package {exc.name!r}: "
                               f"pip install {exc.name}") from exc


def _is_folder(path: str, url: str) -> bool:
    """Whether ``path`` is a folder; a path that cannot be looked at (a parent folder not
    readable: ``oxigraph:/proc/1/root``) is a :class:`StoreUnavailable`, not a traceback."""
    try:
        return Path(path).is_dir()
    except OSError as exc:
        raise StoreUnavailable(f"cannot open the store folder {path!r} (store URL "
                               f"{display_url(url)!r}): {exc.strerror or exc}") from exc
