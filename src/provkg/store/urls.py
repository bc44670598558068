"""Store URLs read: which backend a URL names, and for servers, the endpoints and options.

The forms are listed in :mod:`provkg.store`'s docstring. :func:`open_store` picks the backend
by the URL's scheme (:data:`STORE_SCHEMES`; backends are imported only when used);
:func:`parse_endpoint` reads a server URL (``sparql+``, ``oxigraph+``, ``virtuoso+``) into an
:class:`Endpoint`, with each preset's default paths.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import parse_qsl, unquote, urljoin, urlsplit, urlunsplit

from provkg.errors import BadParameter, NotFound, StoreUnavailable
from provkg.store.base import Store, display_url
from provkg.store.endpoint import Endpoint
from provkg.term import is_valid_iri

if TYPE_CHECKING:
    from provkg.store.sparql_store import SparqlStore

__all__ = ["open_store", "store_dialect", "STORE_SCHEMES", "parse_endpoint", "open_endpoint"]

#: the options a server URL's query string may hold (the rest go to a ``sparql+`` endpoint)
OPTIONS = frozenset({"update", "gsp", "user", "password", "default_graph", "union", "timeout",
                     "connect_timeout"})


class _Timeouts(TypedDict, total=False):
    """The timeouts a server URL sets (seconds), as the :class:`Endpoint` fields they are."""

    timeout: float
    connect_timeout: float


def _authority_problem(url: str) -> str:
    """What is wrong with the HOST:PORT of a URL that ``urlsplit`` refused, read from the URL."""
    authority = url.partition("//")[2].split("/", 1)[0].rpartition("@")[2]
    if "[" in authority and "]" not in authority:
        return "an IPv6 address opened with [ is not closed with ]"
    return "the port must be a number from 0 to 65535"


def parse_endpoint(url: str) -> tuple[str, Endpoint]:
    """The flavour (``sparql``, ``oxigraph``, ``virtuoso``) and endpoint of a server URL.

    >>> parse_endpoint("oxigraph+http://127.0.0.1:7878")[1].update_url
    'http://127.0.0.1:7878/update'

    Raises:
        BadParameter: the URL is malformed or has an unknown option.
    """
    flavour, _, rest = url.partition("+")
    flavour = flavour.lower()
    shown = display_url(url)
    try:
        parts = urlsplit(rest)
        parts.port  # noqa: B018 -- raises on a port that is not a number
    except ValueError:
        raise BadParameter(f"store URL {shown!r}: {_authority_problem(rest)}; expected "
                           f"{flavour}+http://HOST:PORT[/PATH]") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadParameter(f"store URL {shown!r}: expected {flavour}+http://HOST:PORT[/PATH]")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    own = {k: options.pop(k) for k in list(options) if k in OPTIONS}
    # an unknown option of a preset is a typo (?timout=2 would wait 900 s, and ?pasword=...
    # be sent to the server and shown in clear); a plain sparql+ endpoint passes
    # its own parameters on, unless the name is one letter off a known option
    for name in options:
        close = difflib.get_close_matches(name, sorted(OPTIONS), n=1, cutoff=0.75)
        if flavour in ("oxigraph", "virtuoso") or close:
            where = f"{flavour}+{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise BadParameter(f"store URL {where!r}: unknown option {name[:40]!r}{hint} (known: "
                               f"{', '.join(sorted(OPTIONS))})")
    # user:password@ in the authority: credentials like ?user=&password= (kept out of the
    # endpoint URLs, which messages show)
    netloc = parts.netloc.rpartition("@")[2]
    origin = f"{parts.scheme}://{netloc}"
    if parts.username is not None and "user" not in own:
        own["user"] = unquote(parts.username)
        if parts.password is not None and "password" not in own:
            own["password"] = unquote(parts.password)
    timeouts: _Timeouts = {}
    for option in ("timeout", "connect_timeout"):
        if option in own:
            try:
                seconds = float(own[option])
            except ValueError:
                seconds = -1.0
            if not 0 < seconds < float("inf"):
                raise BadParameter(f"store URL {shown!r}: {option} must be a number of seconds "
                                   f"more than 0, got {own[option]!r}")
            timeouts[option] = seconds

    def resolve(path_or_url: str | None, fallback: str | None) -> str | None:
        return urljoin(origin + "/", path_or_url) if path_or_url else fallback

    user = own.get("user")
    path = parts.path if parts.path not in ("", "/") else None
    extra: dict[str, Any] = {}
    if flavour == "oxigraph":
        query_url = origin + (path or "/query")
        update, gsp, union = origin + "/update", origin + "/store", "union-default-graph"
        extra = dict(dataset_post="gsp" not in own, streaming_upload=True)
    elif flavour == "virtuoso":
        query_url = origin + (path or "/sparql")
        update = origin + ("/sparql-auth" if user else "/sparql")
        gsp = origin + ("/sparql-graph-crud-auth" if user else "/sparql-graph-crud")
        union = None
    elif flavour == "sparql":
        query_url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        update, gsp, union = query_url, None, None
    else:
        raise BadParameter(f"store URL {shown!r}: unknown endpoint kind {flavour!r}")
    if own.get("default_graph") and not is_valid_iri(own["default_graph"]):
        raise BadParameter(f"store URL {shown!r}: default_graph must be an absolute IRI")
    endpoint = Endpoint(
        query_url=query_url,
        update_url=resolve(own.get("update"), update) or query_url,
        gsp_url=resolve(own.get("gsp"), gsp),
        user=user, password=own.get("password"),
        default_graph=own.get("default_graph") or None,
        union_param=own.get("union", union) or None,
        extra_params=options,
        **timeouts,
        **extra,
    )
    return flavour, endpoint


def open_endpoint(url: str) -> SparqlStore:
    """The store for a ``sparql+…``, ``oxigraph+…`` or ``virtuoso+…`` URL.

    Raises:
        BadParameter: the URL is malformed or has an unknown option.
    """
    flavour, endpoint = parse_endpoint(url)
    if flavour == "virtuoso":
        from provkg.store.virtuoso_store import VirtuosoStore

        return VirtuosoStore(endpoint, url=url)
    from provkg.store.sparql_store import SparqlStore

    return SparqlStore(endpoint, url=url)


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
