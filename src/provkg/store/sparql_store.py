"""Any SPARQL 1.1 endpoint, through SPARQLWrapper (queries, updates) and the Graph Store
Protocol (bulk writes, with httpx), with presets for Oxigraph server and Virtuoso.

URL forms (see :mod:`provkg.store`): ``sparql+http(s)://HOST:PORT/PATH?update=…&gsp=…``,
``oxigraph+http://HOST:PORT``, ``virtuoso+http://HOST:PORT``. Queries always see the
union of all graphs: Oxigraph server is asked for it (``union-default-graph``),
Virtuoso does it by default (its own system graphs are excluded with
``define input:default-graph-exclude``, except for canned queries: see :meth:`Store.select`).

Known limit: Virtuoso prints ``xsd:double`` values with 15 significant digits, so
doubles needing 16-17 digits (0.30000000000000004) come back rounded; the other
backends keep every bit.
"""

from __future__ import annotations

import ast
import difflib
import functools
import gzip
import http.client
import itertools
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urljoin, urlsplit, urlunsplit

import httpx
import pyoxigraph as ox
from SPARQLWrapper import JSON, POST, TURTLE, URLENCODED, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import (
    EndPointInternalError,
    EndPointNotFound,
    QueryBadFormed,
    SPARQLWrapperException,
    Unauthorized,
    URITooLong,
)

from provkg.errors import (BadParameter, ProvkgError, QuerySyntaxError, QueryTimeout, StoreError,
                           StoreUnavailable, StoreUnreachable)
from provkg.store.base import (
    RDF_FORMATS,
    SPARQL_PARSER_LOCK,
    Rows,
    Store,
    display_url,
    has_dataset_clause,
    ntriples_term,
    python_value,
    rdf_file,
    refuse_deep_nesting,
    result_term,
    syntax_error,
    undeclared_prefix,
)
from provkg.store.oxigraph_store import oxigraph_result_term
from provkg.store.progress import counting_reader
from provkg.term import Triple, blank_noise, is_valid_iri

__all__ = ["SparqlStore", "Endpoint", "open_endpoint"]

#: graphs a fresh Virtuoso holds for itself; hidden from queries, graphs() and count()
VIRTUOSO_SYSTEM_GRAPHS = ("http://www.openlinksw.com/schemas/virtrdf#", "http://www.w3.org/ns/ldp#")
#: where writes without a graph go on Virtuoso, which has no writable default graph
VIRTUOSO_DEFAULT_GRAPH = "urn:x-provkg:default"

#: seconds to connect to an endpoint (store URL option ``connect_timeout=``)
CONNECT_TIMEOUT_S = 5.0
#: seconds to wait for an answer when the caller sets no time limit (store URL option
#: ``timeout=``): past Virtuoso's MaxQueryExecutionTime of 600 s (docs/reference/stores.md), so that
#: its own time-limit answer comes first
READ_TIMEOUT_S = 900.0
#: writes (updates, Graph Store Protocol uploads) wait at least this long for the answer:
#: the server parses a whole bulk load before it answers
WRITE_TIMEOUT_S = 600.0
#: the first request to an endpoint is ``ASK {}``, answered at once by any SPARQL endpoint
#: that is up: one that accepts connections but does not answer it within this many seconds
#: (or ``timeout=`` when shorter) is reported at once, not after a query's whole time limit
CHECK_TIMEOUT_S = 10.0

_OX_FORMATS = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES,
               "nquads": ox.RdfFormat.N_QUADS, "rdfxml": ox.RdfFormat.RDF_XML,
               "trig": ox.RdfFormat.TRIG}


@dataclass(frozen=True)
class Endpoint:
    """Where and how to talk to a SPARQL service."""

    query_url: str
    update_url: str
    gsp_url: str | None = None  # Graph Store Protocol endpoint, for fast bulk writes
    user: str | None = None
    password: str | None = None
    default_graph: str | None = None  # writes without a graph go here (None: the default graph)
    union_param: str | None = None  # query parameter asking for the union default graph
    hidden_graphs: tuple[str, ...] = ()  # the server's own graphs
    dataset_post: bool = False  # GSP POST of N-Quads to gsp_url adds to the whole dataset
    streaming_upload: bool = False  # takes a whole file as one chunked POST (Virtuoso stores
    # nothing from a chunked body yet answers 201: it gets sized chunks instead)
    insert_batch: int = 20_000  # triples per INSERT DATA request when there is no GSP
    turtle_results: bool = False  # SELECT answers as Turtle (Virtuoso: JSON/XML cut doubles to 6 digits)
    #: what CONSTRUCT / DESCRIBE answers are asked as (Virtuoso: RDF/JSON, the one of its
    #: writers that keeps both the digits and the datatype of doubles)
    graph_results: str = "application/n-triples, text/turtle;q=0.5"
    crs_wkt: bool = True  # takes WKT literals that name their coordinate system (Virtuoso 7.2
    # refuses them: RDFGE "a geometry RDF type and a non-geometry content")
    query_dialect: str = "standard"  # canned-query rendering (provkg.queries.builder.DIALECTS)
    extra_params: dict[str, str] = field(default_factory=dict)
    connect_timeout: float = CONNECT_TIMEOUT_S  # seconds to connect
    timeout: float = READ_TIMEOUT_S  # seconds to wait for an answer when the caller sets no limit


def _authority_problem(url: str) -> str:
    """What is wrong with the HOST:PORT of a URL that ``urlsplit`` refused, read from the URL."""
    authority = url.partition("//")[2].split("/", 1)[0].rpartition("@")[2]
    if "[" in authority and "]" not in authority:
        return "an IPv6 address opened with [ is not closed with ]"
    return "the port must be a number from 0 to 65535"


def open_endpoint(url: str) -> SparqlStore:
    """A :class:`SparqlStore` for ``sparql+…``, ``oxigraph+…`` or ``virtuoso+…`` URLs.

    >>> open_endpoint("oxigraph+http://127.0.0.1:7878").endpoint.update_url
    'http://127.0.0.1:7878/update'

    Raises:
        BadParameter: the URL is malformed or has an unknown option.
    """
    flavour, _, rest = url.partition("+")
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
    known = {"update", "gsp", "user", "password", "default_graph", "union", "timeout",
             "connect_timeout"}
    own = {k: options.pop(k) for k in list(options) if k in known}
    # an unknown option of a preset is a typo (?timout=2 would wait 900 s, and ?pasword=...
    # be sent to the server and shown in clear); a plain sparql+ endpoint passes
    # its own parameters on, unless the name is one letter off a known option
    for name in options:
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        if flavour in ("oxigraph", "virtuoso") or close:
            where = f"{flavour}+{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise BadParameter(f"store URL {where!r}: unknown option {name[:40]!r}{hint} (known: "
                               f"{', '.join(sorted(known))})")
    # user:password@ in the authority: credentials like ?user=&password= (urllib cannot send
    # them from there; kept out of the endpoint URLs, which messages show)
    netloc = parts.netloc.rpartition("@")[2]
    origin = f"{parts.scheme}://{netloc}"
    if parts.username is not None and "user" not in own:
        own["user"] = unquote(parts.username)
        if parts.password is not None and "password" not in own:
            own["password"] = unquote(parts.password)
    timeouts = {}  # Endpoint.timeout, Endpoint.connect_timeout
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

    user, password = own.get("user"), own.get("password")
    if flavour == "oxigraph":
        query_url = origin + (parts.path if parts.path not in ("", "/") else "/query")
        defaults = dict(update=origin + "/update", gsp=origin + "/store",
                        union="union-default-graph", default_graph=None)
        extra: dict[str, Any] = dict(dataset_post="gsp" not in own, streaming_upload=True)
    elif flavour == "virtuoso":
        query_url = origin + (parts.path if parts.path not in ("", "/") else "/sparql")
        crud = "/sparql-graph-crud-auth" if user else "/sparql-graph-crud"
        defaults = dict(update=origin + ("/sparql-auth" if user else "/sparql"), gsp=origin + crud,
                        union=None, default_graph=VIRTUOSO_DEFAULT_GRAPH)
        hidden = [*VIRTUOSO_SYSTEM_GRAPHS]
        for host in {origin, "http://localhost:8890", f"http://{netloc}"}:
            hidden += [f"{host}/sparql", f"{host}/DAV/"]
        extra = dict(hidden_graphs=tuple(dict.fromkeys(hidden)), turtle_results=True,
                     graph_results=RDF_JSON, crs_wkt=False,
                     query_dialect="virtuoso",
                     # its SPARQL compiler gives up near a few thousand triples per INSERT DATA
                     insert_batch=1_000)
    elif flavour == "sparql":
        query_url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        defaults = dict(update=query_url, gsp=None, union=None, default_graph=None)
        extra = {}
    else:
        raise BadParameter(f"store URL {shown!r}: unknown endpoint kind {flavour!r}")
    for iri_option in ("default_graph",):
        if own.get(iri_option) and not is_valid_iri(own[iri_option]):
            raise BadParameter(f"store URL {shown!r}: {iri_option} must be an absolute IRI")
    endpoint = Endpoint(
        query_url=query_url,
        update_url=resolve(own.get("update"), defaults["update"]) or query_url,
        gsp_url=resolve(own.get("gsp"), defaults["gsp"]),
        user=user, password=password,
        default_graph=own.get("default_graph") or defaults["default_graph"],
        union_param=own.get("union", defaults["union"]) or None,
        extra_params=options,
        **timeouts,
        **extra,
    )
    return SparqlStore(endpoint, url=url)


class SparqlStore(Store):
    """A remote SPARQL 1.1 service. Use :func:`provkg.store.open_store` with a server URL."""

    def __init__(self, endpoint: Endpoint, *, url: str):
        self.endpoint = endpoint
        self.url = url
        self.shown_url = display_url(url)  # the URL as messages show it: no passwords
        self.query_dialect = endpoint.query_dialect
        self._probing = threading.local()  # in _declares_prefix's probe query (not re-entered)
        auth: httpx.Auth | None = None
        if endpoint.user:
            auth = httpx.DigestAuth(endpoint.user, endpoint.password or "")
        self._write_timeout = max(endpoint.timeout, WRITE_TIMEOUT_S)
        self._http: httpx.Client | None = httpx.Client(
            auth=auth, timeout=httpx.Timeout(self._write_timeout, connect=endpoint.connect_timeout))
        self._checked = False  # the endpoint answered ASK {} (see CHECK_TIMEOUT_S)
        # Virtuoso: keep its own graphs out of the union default graph
        self._preamble = " ".join(f"define input:default-graph-exclude <{g}>"
                                  for g in endpoint.hidden_graphs)

    # -- writing ---------------------------------------------------------------

    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        total = 0
        it = iter(triples)
        batch = 100_000 if self.endpoint.gsp_url else self.endpoint.insert_batch
        while chunk := list(itertools.islice(it, batch)):
            body = "".join(f"{s} {p} {o} .\n" for s, p, o in chunk)
            blank = any(t[0].startswith("_:") or t[2].startswith("_:") for t in chunk)
            self._write_triples(body, graph, blank_nodes=blank)
            total += len(chunk)
        return total

    def load_file(self, path: str | Path, *, format: str | None = None,
                  graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
        path, fmt, gzipped = rdf_file(path, format)
        before = self.count(graph=graph) if graph and fmt not in ("nquads", "trig") else self.count()
        with path.open("rb") as raw:
            stream = counting_reader(raw, progress)
            source = gzip.GzipFile(fileobj=stream) if gzipped else stream
            if self.endpoint.gsp_url and self.endpoint.streaming_upload and (
                    fmt not in ("nquads", "trig") or self.endpoint.dataset_post):
                # the server parses the file itself: the fastest path
                target = None if fmt in ("nquads", "trig") else (graph or self.endpoint.default_graph)
                self._gsp_post(_read_chunks(source), RDF_FORMATS[fmt][0], target, what=str(path))
            else:
                self._load_parsed(source, fmt, graph, base=path.resolve().as_uri(), what=str(path))
        after = self.count(graph=graph) if graph and fmt not in ("nquads", "trig") else self.count()
        return after - before

    def update(self, sparql: str) -> None:
        # Virtuoso needs a default graph for updates that name none; declaring it breaks
        # updates that do name one (DELETE WHERE { GRAPH <g> ... } deletes nothing)
        # (the keywords, not the words in a literal: a spec document saying "with" is none)
        names_graph = re.search(r"\b(GRAPH|WITH)\b", blank_noise(sparql), re.IGNORECASE)
        preamble = (f"define input:default-graph-uri <{self.endpoint.default_graph}> "
                    if self.endpoint.default_graph and not names_graph else "")
        self._request(preamble + sparql, update=True)

    def clear(self, *, graph: str | None = None) -> None:
        targets = [graph] if graph else [*self.graphs()]
        if graph is None:
            if self.endpoint.default_graph:
                targets.append(self.endpoint.default_graph)
            else:
                self._request("CLEAR DEFAULT", update=True)
        for g in targets:
            self._request(f"CLEAR SILENT GRAPH <{_checked_iri(g)}>", update=True)

    # -- reading ---------------------------------------------------------------

    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        return self._select(query, timeout=timeout, hide_system_graphs=hide_system_graphs,
                            typed=False)

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows:
        return self._select(query, timeout=timeout, hide_system_graphs=True, typed=True)

    def _select(self, query: str, *, timeout: float | None, hide_system_graphs: bool,
                typed: bool) -> Rows:
        text = self._with_preamble(query) if hide_system_graphs else query
        if self.endpoint.turtle_results:
            answer = self._request(text, timeout=timeout, accept="text/turtle")
            if not isinstance(answer, tuple) or "turtle" not in answer[1] or (
                    b"ResultSet" not in answer[0]):
                raise StoreError("select() needs a SELECT query; use ask() or construct()")
            try:
                return _rows_from_turtle(answer[0], _virtuoso_term if typed else _python_term)
            except StoreError:
                # a run-time error after the answer began: Virtuoso writes it into the body
                body = answer[0].decode("utf-8", "replace")
                failed = re.search(r"^" + _VIRTUOSO_ERROR.pattern, body, re.MULTILINE)
                if failed is None:
                    raise
                raise query_failed(self.shown_url, _error_text(body[failed.start():], text)) from None
        answer = self._request(text, timeout=timeout)
        if not isinstance(answer, dict) or "results" not in answer:
            raise StoreError("select() needs a SELECT query; use ask() or construct()")
        columns = list(answer.get("head", {}).get("vars", []))
        convert = _json_term if typed else _python
        rows = [[convert(b.get(c)) for c in columns] for b in answer["results"]["bindings"]]
        return Rows(columns, rows)

    def ask(self, query: str) -> bool:
        answer = self._request(self._with_preamble(query))
        if not isinstance(answer, dict) or "boolean" not in answer:
            raise StoreError("ask() needs an ASK query")
        return bool(answer["boolean"])

    def construct(self, query: str) -> list[Triple]:
        answer = self._request(self._with_preamble(query), accept=self.endpoint.graph_results)
        if not isinstance(answer, tuple):
            raise StoreError("construct() needs a CONSTRUCT or DESCRIBE query")
        data, media = answer
        if RDF_JSON in media:
            return _triples_from_rdf_json(data, self.shown_url)
        turtle = "turtle" in media
        try:
            quads = ox.parse(data, format=ox.RdfFormat.TURTLE if turtle else ox.RdfFormat.N_TRIPLES)
            return [(_nt(q.subject), _nt(q.predicate), _nt(q.object)) for q in quads]
        except SyntaxError as exc:
            raise StoreError(f"the endpoint answered CONSTRUCT with bad Turtle: {exc}") from exc

    def count(self, *, graph: str | None = None) -> int:
        if graph is not None:
            q = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{_checked_iri(graph)}> {{ ?s ?p ?o }} }}"
        elif self.endpoint.hidden_graphs:  # no separate default graph: sum the user graphs
            hidden = ", ".join(f"<{g}>" for g in self.endpoint.hidden_graphs)
            q = (f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} "
                 f"FILTER (?g NOT IN ({hidden})) }}")
        else:
            q = ("SELECT (COUNT(*) AS ?n) WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }")
        answer = self._request(q, union=False)
        return int(answer["results"]["bindings"][0]["n"]["value"])

    def graphs(self) -> list[str]:
        answer = self._request("SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", union=False)
        skip = {*self.endpoint.hidden_graphs, self.endpoint.default_graph}
        found = {b["g"]["value"] for b in answer["results"]["bindings"] if b["g"]["type"] == "uri"}
        return sorted(found - skip)

    def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()

    # -- helpers ---------------------------------------------------------------

    def _with_preamble(self, query: str) -> str:
        # Virtuoso, given a default-graph-exclude define, matches nothing in a GRAPH naming one
        # graph (and answers such a SELECT asked as Turtle with 406): those queries go without
        # it; their default-graph patterns then see Virtuoso's own graphs too
        if not self._preamble or _NAMED_GRAPH.search(blank_noise(query)):
            return query
        # on the first line, so the line numbers of syntax errors stay right
        return f"{self._preamble} {query}"

    def _request(self, text: str, *, update: bool = False, accept: str | None = None,
                 union: bool = True, timeout: float | None = None, check: bool = True) -> Any:
        """JSON for queries (or ``(bytes, is_turtle)`` when ``accept`` is given), None for updates.

        ``timeout``: seconds to wait for the answer (default: the endpoint's ``timeout``;
        writes wait at least :data:`WRITE_TIMEOUT_S`). ``check``: make sure first, once,
        that the endpoint answers (see :meth:`_check`)."""
        if self._http is None:
            raise StoreUnavailable(f"the store {self.shown_url} is closed")
        if not update:  # a deep one can abort an Oxigraph server
            refuse_deep_nesting(text)
        if check and not self._checked:
            self._check()
        ep = self.endpoint
        target = display_url(ep.update_url if update else ep.query_url)
        wait = timeout if timeout is not None else (self._write_timeout if update else ep.timeout)
        sw = _Wrapper(ep.query_url, updateEndpoint=ep.update_url, opener=self._opener())
        sw.setMethod(POST)
        sw.setRequestMethod(URLENCODED)
        for name, value in ep.extra_params.items():
            sw.addParameter(name, value)
        if union and ep.union_param and not update and not has_dataset_clause(text):
            sw.addParameter(ep.union_param, "true")  # a FROM of the query's own wins
        sw.read_timeout = max(0.001, wait)
        sw.setOnlyConneg(True)  # Accept header only: a format= parameter overrides it on Virtuoso
        sw.setQuery(text)
        sw.setReturnFormat(TURTLE if sw.queryType in ("CONSTRUCT", "DESCRIBE") else JSON)
        if accept:  # overrides the Accept header SPARQLWrapper derives from the return format
            sw.addCustomHttpHeader("Accept", accept)
        try:
            result = sw.query()
            headers = result.info()
            if "x-sql-state" in {k.lower() for k in headers}:  # Virtuoso's "anytime" partial answer
                raise QueryTimeout("the endpoint stopped at its time limit and returned a partial "
                                   "answer (Virtuoso MaxQueryExecutionTime)")
            data = result.response.read()
            if update:
                return None
            media = headers.get("content-type", "") or ""
            status = getattr(result.response, "status", 200)
            if accept:  # RDF (Turtle, N-Triples, RDF/JSON) expected: a web page or JSON
                # results are something else
                kind = media.lower()
                if "html" in kind or ("json" in kind and RDF_JSON not in kind):
                    raise _not_sparql(target, status, media, data)
                return data, kind
            return _results_json(target, status, media, data)
        except QueryBadFormed as exc:
            body = _body(exc)
            if "memory exhausted" in body:  # Virtuoso's parser: a request too large, not bad SPARQL
                raise StoreError(f"{self.shown_url} could not parse a request this large: "
                                 f"{body[:300]}") from exc
            if _VIRTUOSO_ERROR.search(body) and not _is_syntax_error(body):
                raise query_failed(self.shown_url, _error_text(body, text)) from exc
            if not _VIRTUOSO_ERROR.search(body) and self._parses(text, update):
                # a 400 for something else (a read-only endpoint
                # refusing an update, a row limit): the store's failure, not the query text's
                raise query_failed(self.shown_url, _excerpt(_error_text(body, text), 1000,
                                                            one_line=False)) from exc
            hint = self._kind_hint(body)  # another kind of server: that is the cause to say
            raise syntax_error(_error_text(body, text) + hint, query=None if hint else text,
                               store_declares=self._declares_prefix) from exc
        except EndPointNotFound as exc:
            raise StoreUnavailable(f"no SPARQL endpoint at {target} (HTTP 404"
                                   f"{_said(_body(exc))})") from exc
        except Unauthorized as exc:
            raise StoreUnavailable(f"{target} answered HTTP 401{_said(_body(exc))} "
                                   "(give the account in the store URL: ?user=…&password=…, "
                                   "or check it)") from exc
        except SPARQLWrapperException as exc:
            body = _body(exc)
            if _is_syntax_error(body, text, update, self._declares_prefix):  # Virtuoso: 500 for some
                raise syntax_error(_error_text(body, text), query=text,
                                   store_declares=self._declares_prefix) from exc
            raise query_failed(self.shown_url, _excerpt(_error_text(body, text), 1000,
                                                        one_line=False)) from exc
        except urllib.error.HTTPError as exc:  # codes SPARQLWrapper has no exception for
            media = exc.headers.get("content-type", "") if exc.headers else ""
            body = exc.read()
            if exc.code in (405, 501):  # the method (POST) or the request is not supported
                raise _not_sparql(target, exc.code, media, body) from exc
            hint = (" (it offers none of the formats asked for: is the store URL's scheme, "
                    "virtuoso+ / oxigraph+ / sparql+, the one of this server?)"
                    if exc.code == 406 else "")
            raise StoreError(f"{target} answered HTTP {exc.code}{_said(body)}{hint}") from exc
        except (TimeoutError, urllib.error.URLError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(reason, _ConnectTimeout):
                raise StoreUnreachable(f"cannot reach {target}: no connection within "
                                       f"{ep.connect_timeout:g} s (connect_timeout= in the store "
                                       "URL)") from exc
            if not isinstance(reason, TimeoutError):
                raise StoreUnreachable(f"cannot reach {target}: {reason}") from exc
            said = f"{target} did not answer within {wait:g} s"
            if update:
                raise StoreUnavailable(f"{said} (timeout= in the store URL)") from exc
            if timeout is None:
                raise QueryTimeout(f"{said} (timeout= in the store URL)") from exc
            raise QueryTimeout(said) from exc
        except (http.client.HTTPException, ConnectionError) as exc:
            raise StoreUnreachable(f"lost the connection to {target}: {exc}") from exc

    def _parses(self, text: str, update: bool) -> bool:
        return _parses(text, update, self._declares_prefix)

    def _declares_prefix(self, prefix: str) -> bool:
        """Does the server declare ``prefix:`` itself (Virtuoso: bif:, xsd:, ...)? Asked of the
        server, by a query that parses only if it does; only after a query failed to parse."""
        if not re.fullmatch(r"[A-Za-z][\w-]*", prefix) or getattr(self._probing, "on", False):
            return False  # the probe's own failure: its prefix is not declared
        self._probing.on = True
        try:
            self.ask(f"ASK {{ BIND({prefix}:x AS ?x) FILTER(false) }}")
        except QuerySyntaxError:
            return False
        except Exception:  # noqa: BLE001 -- no answer: nothing learnt, the server's words stand
            return True
        finally:
            self._probing.on = False
        return True

    def _kind_hint(self, body: str) -> str:
        """A hint when a syntax error comes from another kind of server than the store URL
        names: virtuoso+ on an Oxigraph server, say, would otherwise blame the canned query."""
        flavour = self.url.partition("+")[0].lower()
        from_virtuoso = "Virtuoso" in body or bool(_VIRTUOSO_ERROR.search(body))
        if (flavour == "virtuoso") != from_virtuoso and flavour in ("virtuoso", "oxigraph"):
            return (f" (this answer is not {'Virtuoso' if flavour == 'virtuoso' else 'Oxigraph'}'s, "
                    f"as the store URL {flavour}+… says: is its scheme, virtuoso+ / oxigraph+ / "
                    "sparql+, the one of this server?)")
        return ""

    def _check(self) -> None:
        """Ask the endpoint ``ASK {}`` once, with a short time limit: a server that accepts
        connections but never answers, or that is not a SPARQL endpoint, is reported now
        rather than after a query's whole time limit (``provkg query`` and ``provkg serve``
        would wait silently all that time)."""
        limit = min(CHECK_TIMEOUT_S, self.endpoint.timeout)
        try:
            self._request("ASK {}", union=False, timeout=limit, check=False)
        except QueryTimeout as exc:
            raise StoreUnreachable(
                f"{display_url(self.endpoint.query_url)} accepted the connection but did not "
                f"answer `ASK {{}}` within {limit:g} s: is it up, and is it a SPARQL endpoint? "
                f"(store {self.shown_url})") from exc
        except StoreUnavailable:
            raise
        except ProvkgError:  # it answered, as SPARQL endpoints do, yet refused this query
            pass
        self._checked = True

    def _opener(self) -> urllib.request.OpenerDirector:
        """How SPARQLWrapper's requests go out: with a connect timeout apart from the read
        timeout, and credentials (digest) without SPARQLWrapper's process-wide opener. One
        per request: urllib's digest handler counts retries in itself, so one shared by the
        API's concurrent queries could fail a request that another one retried."""
        ep = self.endpoint
        handlers: list[urllib.request.BaseHandler] = [_HTTPHandler(ep.connect_timeout),
                                                      _HTTPSHandler(ep.connect_timeout)]
        if ep.user:
            passwords = urllib.request.HTTPPasswordMgrWithDefaultRealm()
            for url in (ep.query_url, ep.update_url):
                passwords.add_password(None, url, ep.user, ep.password or "")
            handlers.append(urllib.request.HTTPDigestAuthHandler(passwords))
        return urllib.request.build_opener(*handlers)

    def _write_triples(self, ntriples: str, graph: str | None, *, blank_nodes: bool = False) -> None:
        """Write N-Triples text to ``graph``. Blank nodes keep their identity within one call."""
        if not self.endpoint.crs_wkt and _WKT in ntriples:  # a substring test first: hot path
            ntriples = _CRS_WKT.sub(r'"\1"', ntriples)  # kept as a string, with the same text
        target = graph or self.endpoint.default_graph
        if self.endpoint.gsp_url:
            self._gsp_post(ntriples.encode("utf-8"), "application/n-triples", target,
                           what="the triples")
            return
        body = f"GRAPH <{_checked_iri(target)}> {{\n{ntriples}}}" if target else f"\n{ntriples}"
        # INSERT DATA refuses blank nodes on some stores (Virtuoso); a template takes them
        self._request(f"INSERT {{ {body} }} WHERE {{}}" if blank_nodes else f"INSERT DATA {{ {body} }}",
                      update=True)

    def _gsp_post(self, body: bytes | Iterator[bytes], media_type: str, graph: str | None, *,
                  what: str) -> None:
        """POST to the Graph Store Protocol endpoint: bytes with a length, or a stream (chunked)."""
        assert self.endpoint.gsp_url is not None and self._http is not None
        if graph is None and media_type in ("application/n-quads", "application/trig"):
            params: dict[str, str] = {}  # a dataset: its own graphs
        elif graph is None:
            params = {"default": ""}
        else:
            params = {"graph": _checked_iri(graph)}
        url = self.endpoint.gsp_url + ("?" + urlencode(params) if params else "")
        target = display_url(self.endpoint.gsp_url)
        if not self._checked:
            self._check()
        try:
            response = self._http.post(url, content=body,
                                       headers={"content-type": media_type})
        except httpx.ConnectTimeout as exc:
            raise StoreUnreachable(f"cannot reach {target}: no connection within "
                                   f"{self.endpoint.connect_timeout:g} s (connect_timeout= in the "
                                   "store URL)") from exc
        except httpx.TimeoutException as exc:  # read, write or pool
            raise StoreUnavailable(f"{target} did not take {what} within {self._write_timeout:g} s "
                                   "(timeout= in the store URL)") from exc
        except httpx.TransportError as exc:
            raise StoreUnreachable(f"cannot reach {target}: {exc}") from exc
        if response.status_code == 400:
            raise StoreError(f"{what} is not valid RDF for {self.shown_url}: "
                             f"{_excerpt(response.content, 1000, one_line=False)}")
        if response.status_code in (401, 403):
            raise StoreUnavailable(f"{self.shown_url} refused {what}: HTTP "
                                   f"{response.status_code}{_said(response.content)} (check the "
                                   "account in the store URL: ?user=…&password=…)")
        if response.status_code >= 300:
            raise StoreError(f"{self.shown_url} refused {what}: HTTP {response.status_code}"
                             f"{_said(response.content)}")

    def _load_parsed(self, source: Any, fmt: str, graph: str | None, *, base: str, what: str) -> None:
        """Parse locally (streaming) and write per graph: for endpoints that cannot take the file."""
        try:
            quads: Iterator[ox.Quad] = ox.parse(source, format=_OX_FORMATS[fmt], base_iri=base)
            # triples with blank nodes wait for one final request per graph, so each blank
            # node stays one node (chunks would split it)
            held: dict[str | None, list[ox.Triple]] = {}
            batch = 100_000 if self.endpoint.gsp_url else self.endpoint.insert_batch
            while chunk := list(itertools.islice(quads, batch)):
                by_graph: dict[str | None, list[ox.Triple]] = {}
                for q in chunk:
                    g = q.graph_name.value if isinstance(q.graph_name, ox.NamedNode) else graph
                    blank = isinstance(q.subject, ox.BlankNode) or isinstance(q.object, ox.BlankNode)
                    (held if blank else by_graph).setdefault(g, []).append(q.triple)
                for g, triples in by_graph.items():
                    self._write_triples(_ntriples(triples), g)
            for g, triples in held.items():
                self._write_triples(_ntriples(triples), g, blank_nodes=True)
        except SyntaxError as exc:
            raise StoreError(f"{what} is not valid RDF: {exc}") from exc


def _ntriples(triples: list[ox.Triple]) -> str:
    return ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES).decode("utf-8")


def _read_chunks(stream: Any, size: int = 1 << 20) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


def _checked_iri(value: str) -> str:
    if not is_valid_iri(value):
        raise BadParameter(f"graph must be an absolute IRI, got {value!r}")
    return value


class _ConnectTimeout(TimeoutError):
    """Connecting (TCP, TLS) took longer than the endpoint's ``connect_timeout``."""


class _ConnectFirst:
    """An HTTP(S) connection that connects within ``connect_timeout`` seconds and then waits
    ``timeout`` seconds (urllib's one timeout) for each read."""

    def __init__(self, *args: Any, connect_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self.connect_timeout = connect_timeout

    def connect(self) -> None:
        read_timeout = self.timeout  # type: ignore[attr-defined]
        self.timeout = self.connect_timeout
        try:
            super().connect()  # type: ignore[misc]
        except TimeoutError as exc:
            raise _ConnectTimeout(f"no connection within {self.connect_timeout:g} s") from exc
        finally:
            self.timeout = read_timeout
        if isinstance(read_timeout, (int, float)):
            self.sock.settimeout(read_timeout)  # type: ignore[attr-defined]


class _HTTPConnection(_ConnectFirst, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_ConnectFirst, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connect_timeout: float) -> None:
        super().__init__()
        self.connect_timeout = connect_timeout

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_HTTPConnection, connect_timeout=self.connect_timeout),
                            req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connect_timeout: float) -> None:
        super().__init__()
        self.connect_timeout = connect_timeout

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        kwargs: dict[str, Any] = {"context": getattr(self, "_context", None)}
        if hasattr(self, "_check_hostname"):  # Python < 3.12
            kwargs["check_hostname"] = self._check_hostname
        return self.do_open(functools.partial(_HTTPSConnection, connect_timeout=self.connect_timeout),
                            req, **kwargs)


class _Wrapper(SPARQLWrapper):
    """SPARQLWrapper sending through ``opener`` (connect timeout, credentials) and waiting
    ``read_timeout`` seconds for answers: its own ``urlopen`` has no timeout unless given one,
    and installs a process-wide opener for credentials."""

    def __init__(self, *args: Any, opener: urllib.request.OpenerDirector, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opener = opener
        self.read_timeout: float = READ_TIMEOUT_S

    def _query(self) -> Any:  # SPARQLWrapper.Wrapper._query, through self.opener
        request = self._createRequest()
        try:
            return self.opener.open(request, timeout=self.read_timeout), self.returnFormat
        except urllib.error.HTTPError as e:
            kind = {400: QueryBadFormed, 404: EndPointNotFound, 401: Unauthorized, 414: URITooLong,
                    500: EndPointInternalError}.get(e.code)
            if kind is None:
                raise
            raise kind(e.read()) from e


def _excerpt(text: str | bytes, limit: int = 200, *, one_line: bool = True) -> str:
    """A short, readable piece of an answer: decoded, HTML tags dropped, spaces collapsed
    (for HTML, or when ``one_line``).

    >>> _excerpt(b"<html><body><h1>Not Found</h1>\\n<p>nothing  here</p></body></html>")
    'Not Found nothing here'
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    html = re.search(r"<(html|body|head|!doctype|h1|p|pre|title)\b", text, re.IGNORECASE)
    if html:
        text = re.sub(r"<(script|style)\b.*?</\1\s*>", " ", text, flags=re.IGNORECASE | re.DOTALL)
        text = re.sub(r"<[^>]*>", " ", text)
    text = " ".join(text.split()) if html or one_line else text.strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _said(body: str | bytes) -> str:
    """``: <excerpt>`` of an answer's body, or nothing when it is empty."""
    text = _excerpt(body)
    return f": {text}" if text else ""


def _not_sparql(target: str, status: int, media: str, body: bytes) -> StoreUnavailable:
    kind = media.split(";")[0].strip() or "no content type"
    return StoreUnavailable(f"{target} is not a SPARQL endpoint (HTTP {status}, {kind})"
                            f"{_said(body)}")


def _results_json(target: str, status: int, media: str, data: bytes) -> dict[str, Any]:
    """A SPARQL JSON results document (SELECT or ASK), checked.

    Raises:
        StoreUnavailable: the answer is not SPARQL results (a web server, not an endpoint).
        StoreError: the JSON does not parse (cut off).
    """
    if "json" not in media.lower():
        raise _not_sparql(target, status, media, data)
    try:
        answer = json.loads(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        where = f": byte {exc.pos} of {len(data)}" if isinstance(exc, json.JSONDecodeError) else ""
        raise StoreError(f"{target} answered JSON that does not parse ({getattr(exc, 'msg', exc)}"
                         f"{where}): the answer was cut off, or it is not a SPARQL endpoint") from None
    results = answer.get("results") if isinstance(answer, dict) else None
    if isinstance(answer, dict) and (
            isinstance(answer.get("boolean"), bool)
            or (isinstance(results, dict) and isinstance(results.get("bindings"), list))):
        return answer
    raise _not_sparql(target, status, media, data)


def _body(exc: SPARQLWrapperException) -> str:
    """The server's answer inside a SPARQLWrapper exception (it keeps only its repr)."""
    text = str(exc)
    _, sep, raw = text.partition("Response:\n")
    if sep:
        try:
            value = ast.literal_eval(raw)
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        except (ValueError, SyntaxError):
            return raw
    return text


#: a Virtuoso error: "Virtuoso 37000 Error SP030: ..." (SQL state, then its own code)
_WKT = "<http://www.opengis.net/ont/geosparql#wktLiteral>"
#: a GeoSPARQL WKT literal that starts with its coordinate system's IRI, in N-Triples
_CRS_WKT = re.compile(r'"(<[^>"\\]*>[^"\\]*)"\^\^<http://www\.opengis\.net/ont/geosparql#wktLiteral>')
#: ``GRAPH`` followed by an IRI or prefixed name (not a variable): see ``_with_preamble``
_NAMED_GRAPH = re.compile(r"\bGRAPH\s+(?![\s?$])", re.IGNORECASE)
_VIRTUOSO_ERROR = re.compile(r"Virtuoso (\w{5}) Error (\w+)?")


def _parses(text: str, update: bool = False,
            store_declares: Callable[[str], bool] | None = None) -> bool:
    """Is ``text`` SPARQL 1.1 (by rdflib's grammar), every prefix declared (by the text or,
    ``store_declares``, the server)? Asked after a server refused it, to tell the query's
    mistake from the server's refusal whatever the server's words."""
    from rdflib.plugins.sparql.parser import parseQuery, parseUpdate  # only on this rare path

    try:
        with SPARQL_PARSER_LOCK:
            (parseUpdate if update else parseQuery)(text)
    except RecursionError:
        return False
    except Exception:  # noqa: BLE001 -- pyparsing's ParseException and kin: it does not parse
        return False
    return undeclared_prefix(text, store_declares) is None


def _is_syntax_error(body: str, text: str | None = None, update: bool = False,
                     store_declares: Callable[[str], bool] | None = None) -> bool:
    """Whether a server's refusal of ``text`` means the text does not parse. Virtuoso says so
    by its error code: it files compile-time failures under SQL state 37000 too ("syntax
    error or access violation"), and only its code SP030 (the SPARQL parser: syntax errors,
    undefined prefixes) is one; SP031 (generated SQL too long, optimizer gave up), TR...
    (transitive sub-queries), SR... (run-time conversions), 42000 (cost estimate) are failures
    to run a valid query. Any other server: provkg parses the text itself.

    >>> _is_syntax_error("Virtuoso 37000 Error SP030: SPARQL compiler, line 1: syntax error at '}'")
    True
    >>> _is_syntax_error("Virtuoso 37000 Error SP031: SPARQL: Internal error: The length of generated "
    ...                  "SQL text has exceeded 10000 lines of code")
    False
    >>> _is_syntax_error("Virtuoso 22005 Error SR341: Invalid integer value converting '1844'")
    False
    >>> _is_syntax_error("Internal Server Error", "SELECT * WHERE { ?s ?p }")
    True
    """
    m = _VIRTUOSO_ERROR.search(body)
    if m:
        return m.group(2) == "SP030"
    return text is not None and not _parses(text, update, store_declares)


#: what to do about a Virtuoso failure, by the words of its message (some carry no code). A
#: hint only: other words lose the hint, never change the error's class or exit status
_VIRTUOSO_HINTS = (
    ("exceeds the limit of",
     ("Virtuoso refused the query by its cost estimate, which is unreliable for UNIONs and "
      "transitive sub-queries; set MaxQueryCostEstimationTime = 0 in the [SPARQL] section of "
      "virtuoso.ini and restart it (provkg's own launcher does; MaxQueryExecutionTime still "
      "bounds the run time)")),
    ("exceeded 10000 lines", "the query is too large for Virtuoso's SPARQL compiler"),
    ("failed to process the query with reasonable quality",
     "the query is too large for Virtuoso's SPARQL compiler"),
    ("Invalid integer value converting",
     ("Virtuoso holds integers of 64 bits at most: a value of the query or the data is "
      "outside that range")),
    ("No SPARQL_UPDATE permission",
     ("writes need an account allowed to update: give it in the store URL "
      "(?user=…&password=…), or grant anonymous updates with GRANT SPARQL_UPDATE TO "
      "\"SPARQL\" (docs/reference/stores.md)")),
)


def query_failed(url: str, message: str) -> StoreError:
    """A :class:`StoreError` for a valid query the store failed to run, with a hint."""
    hints = [hint for words, hint in _VIRTUOSO_HINTS if words in message]
    text = f"{display_url(url)} could not run the query: {message.strip()}"
    return StoreError(text + (f" ({hints[0]})" if hints else ""))


def _error_text(body: str, sent: str) -> str:
    """A server's syntax-error text, trimmed of the query it echoes, with Virtuoso's line
    number counted from the start of the text provkg sent (Virtuoso prepends its own lines)."""
    message, sep, echoed = body.partition("SPARQL query:\n")
    message = message.strip()
    if sep:
        start = echoed.find(sent[:200])
        shift = echoed[:start].count("\n") if start > 0 else 0
        if shift:
            message = re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) - shift}", message, count=1)
    return message


_RES = "http://www.w3.org/2005/sparql-results#"


RDF_JSON = "application/rdf+json"
#: Virtuoso's RDF/JSON writes a non-finite double as a bare word, which is no JSON
_BARE_NON_FINITE = re.compile(rb'("value" : )(-?)(nan|inf)\b')


def _triples_from_rdf_json(data: bytes, where: str) -> list[Triple]:
    """Triples from an RDF/JSON graph (``{subject: {predicate: [object, ...]}}``, objects as
    ``{"type", "value", "datatype"?, "lang"?}``), numbers kept as their lexical text."""
    fixed = _BARE_NON_FINITE.sub(
        lambda m: m.group(1) + (b'"NaN"' if m.group(3) == b"nan"
                                else b'"-INF"' if m.group(2) else b'"INF"'), data)
    try:
        graph = json.loads(fixed, parse_float=str, parse_int=str)
        triples = []
        for subject, predicates in graph.items():
            s = (ntriples_term("bnode", subject[2:]) if subject.startswith("_:")
                 else ntriples_term("uri", subject))
            for predicate, objects in predicates.items():
                p = ntriples_term("uri", predicate)
                for o in objects:
                    kind, value = o["type"], str(o["value"])
                    if kind == "bnode":
                        value = value.removeprefix("_:")
                    triples.append((s, p, ntriples_term(kind, value, o.get("datatype"),
                                                        o.get("lang"))))
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise StoreError(f"{where} answered CONSTRUCT with bad RDF/JSON: {exc}") from exc
    return triples


def _rows_from_turtle(data: bytes, convert: Callable[[Any], object] | None = None) -> Rows:
    """Rows from a SELECT answer in Turtle (the DAWG ``res:ResultSet`` vocabulary), in
    document order. Virtuoso writes doubles there with enough digits to be exact.
    ``convert`` turns each pyoxigraph term into a value (default: plain Python)."""
    convert = convert or _python_term
    columns: list[str] = []
    solutions: dict[object, dict[str, object]] = {}
    bindings: dict[object, list[object]] = {}  # binding node -> [variable, value]
    try:
        for q in ox.parse(data, format=ox.RdfFormat.TURTLE):
            p = q.predicate.value
            if p == _RES + "resultVariable":
                columns.append(q.object.value)
            elif p == _RES + "solution":
                solutions.setdefault(q.object, {})
            elif p == _RES + "binding":
                bindings.setdefault(q.object, [None, None]).append(q.subject)
            elif p == _RES + "variable":
                bindings.setdefault(q.subject, [None, None])[0] = q.object.value
            elif p == _RES + "value":
                bindings.setdefault(q.subject, [None, None])[1] = q.object
    except SyntaxError as exc:
        raise StoreError(f"the endpoint answered SELECT with bad Turtle: {exc}") from exc
    for variable, value, *owners in bindings.values():
        for owner in owners:
            solutions.setdefault(owner, {})[str(variable)] = None if value is None else convert(value)
    return Rows(columns, [[row.get(c) for c in columns] for row in solutions.values()])


_XSD_DECIMAL = ox.NamedNode("http://www.w3.org/2001/XMLSchema#decimal")
_XSD_DOUBLE = ox.NamedNode("http://www.w3.org/2001/XMLSchema#double")


def _virtuoso_term(term: Any) -> dict[str, Any] | None:
    """A term of Virtuoso's Turtle SELECT answer as a typed result term, its doubles typed
    as doubles again (else /v1/sparql answers 0.7 as the decimal 0.69999999999999995559,
    while DATATYPE() in the same row says xsd:double). The cost: a
    stored decimal of 17 or more significant digits, with a fraction, reads as a double."""
    # how Virtuoso's Turtle writes an xsd:double: a decimal of 17 or more significant digits
    # (0.7 -> 0.69999999999999995559), which no value provkg writes as a decimal is
    if (isinstance(term, ox.Literal) and term.datatype == _XSD_DECIMAL and "." in term.value
            and len(term.value.lstrip("+-").replace(".", "").strip("0")) >= 17):
        term = ox.Literal(repr(float(term.value)), datatype=_XSD_DOUBLE)
    return oxigraph_result_term(term)


def _python_term(term: Any) -> object:
    if term is None:
        return None
    if isinstance(term, ox.Literal):
        return python_value("literal", term.value, term.datatype.value)
    if isinstance(term, ox.BlankNode):
        return python_value("bnode", term.value)
    return term.value


def _python(binding: dict[str, str] | None) -> object:
    if binding is None:
        return None
    kind = "literal" if binding["type"] in ("literal", "typed-literal") else binding["type"]
    return python_value(kind, binding["value"], binding.get("datatype"))


def _json_term(binding: dict[str, Any] | None) -> dict[str, Any] | None:
    """An endpoint's SPARQL JSON term, normalized (``typed-literal``, ``xsd:string``)."""
    if binding is None:
        return None
    kind = binding.get("type")
    if kind == "triple" and isinstance(binding.get("value"), dict):
        return {"type": "triple", "value": {k: _json_term(v) for k, v in binding["value"].items()}}
    kind = "literal" if kind in ("literal", "typed-literal") else str(kind)
    return result_term(kind, binding["value"], binding.get("datatype"), binding.get("xml:lang"))


def _nt(term: Any) -> str:
    if isinstance(term, ox.Literal):
        return ntriples_term("literal", term.value, term.datatype.value, term.language)
    if isinstance(term, ox.BlankNode):
        return ntriples_term("bnode", term.value)
    return ntriples_term("uri", term.value)
