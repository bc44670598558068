"""Any SPARQL 1.1 endpoint over HTTP (httpx): the SPARQL 1.1 Protocol for queries and
updates, the Graph Store Protocol for bulk writes; presets for Oxigraph server
(``oxigraph+http://``) here, Virtuoso's in :mod:`provkg.store.virtuoso_store`.

URL forms: see :mod:`provkg.store` and :mod:`provkg.store.urls`. Queries always see the union
of all graphs: an endpoint is asked for it with the URL's ``union=`` parameter (Oxigraph
server: ``union-default-graph``). Every httpx exception goes through
:func:`~provkg.store.sparql_errors.http_errors`, every refusal through
:func:`~provkg.store.sparql_errors.refusal`.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlencode

import httpx
import pyoxigraph as ox

from provkg.errors import ProvkgError, QuerySyntaxError, QueryTimeout, StoreError, StoreUnavailable, StoreUnreachable
from provkg.store.base import (
    RDF_FORMATS,
    Rows,
    Store,
    checked_iri,
    display_url,
    has_dataset_clause,
    ntriples_term,
    python_value,
    rdf_file,
    refuse_deep_nesting,
    result_term,
)
from provkg.store.endpoint import Endpoint
from provkg.store.portable import parsed_batches
from provkg.store.progress import counting_reader
from provkg.store.sparql_errors import (
    VIRTUOSO_ERROR,
    excerpt,
    http_errors,
    not_sparql,
    partial_answer,
    refusal,
    results_json,
    said,
)
from provkg.term import Triple, blank_noise

__all__ = ["SparqlStore", "CHECK_TIMEOUT_S", "WRITE_TIMEOUT_S"]

#: writes (updates, Graph Store Protocol uploads) wait at least this long for the answer:
#: the server parses a whole bulk load before it answers
WRITE_TIMEOUT_S = 600.0
#: the first request to an endpoint is ``ASK {}``, answered at once by any SPARQL endpoint
#: that is up: one that accepts connections but does not answer it within this many seconds
#: (or ``timeout=`` when shorter) is reported at once, not after a query's whole time limit
CHECK_TIMEOUT_S = 10.0
#: the Accept header of SELECT / ASK (SPARQL JSON results, under the names servers use)
ACCEPT_RESULTS = ("application/sparql-results+json,application/json,text/javascript,"
                  "application/javascript")
#: the Accept header of a CONSTRUCT / DESCRIBE sent to select() or ask() (their refusal
#: then comes from the answer, not from content negotiation)
ACCEPT_TURTLE = "application/turtle,text/turtle"
RDF_JSON = "application/rdf+json"
_GRAPH_FORM = re.compile(r"\b(CONSTRUCT|DESCRIBE|SELECT|ASK)\b", re.IGNORECASE)

# httpx logs every request at INFO: a query is not an event of provkg's logs (``provkg serve``
# logs at INFO, and its error output must stay one line); set a level of your own to see them
if logging.getLogger("httpx").level == logging.NOTSET:
    logging.getLogger("httpx").setLevel(logging.WARNING)


class SparqlStore(Store):
    """A remote SPARQL 1.1 service. Use :func:`provkg.store.open_store` with a server URL.

    Subclasses (:class:`~provkg.store.virtuoso_store.VirtuosoStore`) override the hooks
    marked as such: how queries are dressed, answers read, triples written."""

    #: triples per INSERT DATA request when there is no Graph Store Protocol endpoint
    insert_batch = 20_000
    #: what CONSTRUCT / DESCRIBE answers are asked as
    graph_results = "application/n-triples, text/turtle;q=0.5"
    #: the server's own graphs: hidden from graphs() and count()
    hidden_graphs: tuple[str, ...] = ()

    def __init__(self, endpoint: Endpoint, *, url: str):
        self.endpoint = endpoint
        self.url = url
        self.shown_url = display_url(url)  # the URL as messages show it: no passwords
        self._probing = threading.local()  # in _declares_prefix's probe query (not re-entered)
        self._write_timeout = max(endpoint.timeout, WRITE_TIMEOUT_S)
        self._http: httpx.Client | None = httpx.Client(
            follow_redirects=True,
            timeout=httpx.Timeout(self._write_timeout, connect=endpoint.connect_timeout))
        self._checked = False  # the endpoint answered ASK {} (see CHECK_TIMEOUT_S)

    # -- writing ---------------------------------------------------------------

    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        total = 0
        it = iter(triples)
        batch = 100_000 if self.endpoint.gsp_url else self.insert_batch
        while chunk := list(itertools.islice(it, batch)):
            body = "".join(f"{s} {p} {o} .\n" for s, p, o in chunk)
            blank = any(t[0].startswith("_:") or t[2].startswith("_:") for t in chunk)
            self._write_triples(body, graph, blank_nodes=blank)
            total += len(chunk)
        return total

    def load_file(self, path: str | Path, *, format: str | None = None,
                  graph: str | None = None, progress: Callable[[int], object] | None = None) -> int:
        path, fmt, gzipped = rdf_file(path, format)
        quads = fmt in ("nquads", "trig")
        before = self.count(graph=graph) if graph and not quads else self.count()
        with path.open("rb") as raw:
            stream = counting_reader(raw, progress)
            source = gzip.GzipFile(fileobj=stream) if gzipped else stream
            if self.endpoint.gsp_url and self.endpoint.streaming_upload and (
                    not quads or self.endpoint.dataset_post):
                # the server parses the file itself: the fastest path
                target = None if quads else (graph or self.endpoint.default_graph)
                self._gsp_post(_read_chunks(source, str(path)), RDF_FORMATS[fmt][0], target,
                               what=str(path))
            else:
                batch = 100_000 if self.endpoint.gsp_url else self.insert_batch
                for g, triples, blank in parsed_batches(source, fmt, graph, batch=batch,
                                                        base=path.resolve().as_uri(),
                                                        what=str(path)):
                    body = "".join(f"{s} {p} {o} .\n" for s, p, o in triples)
                    self._write_triples(body, g, blank_nodes=blank)
        after = self.count(graph=graph) if graph and not quads else self.count()
        return after - before

    def update(self, sparql: str) -> None:
        # a store with no writable default graph (the URL's default_graph=, Virtuoso's
        # preset) is told it for updates that name none, the way Virtuoso, the one such
        # server, takes it; declaring it breaks updates that do name one (DELETE WHERE
        # { GRAPH <g> ... } deletes nothing). The keywords, not the words in a literal: a spec
        # document saying "with" is none
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
            self._request(f"CLEAR SILENT GRAPH <{checked_iri(g)}>", update=True)

    # -- reading ---------------------------------------------------------------

    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        return self._select(query, timeout=timeout, hide_system_graphs=hide_system_graphs,
                            typed=False)

    def select_terms(self, query: str, *, timeout: float | None = None) -> Rows:
        return self._select(query, timeout=timeout, hide_system_graphs=True, typed=True)

    def _select(self, query: str, *, timeout: float | None, hide_system_graphs: bool,
                typed: bool) -> Rows:
        """Hook: SELECT rows, typed terms when ``typed`` (SPARQL JSON results here)."""
        text = self._dressed(query) if hide_system_graphs else query
        answer = self._request(text, timeout=timeout)
        if not isinstance(answer, dict) or "results" not in answer:
            raise StoreError("select() needs a SELECT query; use ask() or construct()")
        convert = _json_term if typed else _python
        with self._malformed("SELECT"):
            columns = [str(v) for v in answer.get("head", {}).get("vars", [])]
            rows = [[convert(b.get(c)) for c in columns] for b in answer["results"]["bindings"]]
        return Rows(columns, rows)

    def ask(self, query: str) -> bool:
        answer = self._request(self._dressed(query))
        if not isinstance(answer, dict) or "boolean" not in answer:
            raise StoreError("ask() needs an ASK query")
        return bool(answer["boolean"])

    def construct(self, query: str) -> list[Triple]:
        answer = self._request(self._dressed(query), accept=self.graph_results)
        if not isinstance(answer, tuple):
            raise StoreError("construct() needs a CONSTRUCT or DESCRIBE query")
        return self._triples(*answer)

    def _triples(self, data: bytes, media: str) -> list[Triple]:
        """Hook: the triples of a CONSTRUCT answer (N-Triples or Turtle here)."""
        try:
            quads = ox.parse(data, format=ox.RdfFormat.TURTLE if "turtle" in media
                             else ox.RdfFormat.N_TRIPLES)
            return [(_nt(q.subject), _nt(q.predicate), _nt(q.object)) for q in quads]
        except SyntaxError as exc:
            raise StoreError(f"the endpoint answered CONSTRUCT with bad Turtle: {exc}") from exc

    def count(self, *, graph: str | None = None) -> int:
        if graph is not None:
            q = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{checked_iri(graph)}> {{ ?s ?p ?o }} }}"
        elif self.hidden_graphs:  # no separate default graph: sum the user graphs
            hidden = ", ".join(f"<{g}>" for g in self.hidden_graphs)
            q = (f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} "
                 f"FILTER (?g NOT IN ({hidden})) }}")
        else:  # asked without the union: the default graph is the store's own
            q = ("SELECT (COUNT(*) AS ?n) WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }")
        answer = self._request(q, union=False)
        with self._malformed("COUNT"):
            return int(answer["results"]["bindings"][0]["n"]["value"])

    def graphs(self) -> list[str]:
        answer = self._request("SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", union=False)
        skip = {*self.hidden_graphs, self.endpoint.default_graph}
        with self._malformed("SELECT"):
            found = {b["g"]["value"] for b in answer["results"]["bindings"]
                     if b["g"]["type"] == "uri"}
        return sorted(found - skip)

    def dump(self, out: BinaryIO, *, graph: str | None = None) -> None:
        """Refused: a server's own dump is faster and complete (see :meth:`Store.dump`)."""
        raise StoreError(f"{self.shown_url} cannot be exported by provkg: use the "
                         "server's own dump (`oxigraph dump`, Virtuoso's dump_nquads), then "
                         "`provkg load` the file")

    def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()

    @contextmanager
    def _malformed(self, form: str) -> Iterator[None]:
        """SPARQL JSON results that do not follow the format (a binding without its type or
        value, an unbound count): the server's fault, said as a :class:`StoreError`."""
        try:
            yield
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise StoreError(f"{display_url(self.endpoint.query_url)} answered {form} with "
                             f"results that do not follow the SPARQL JSON format ({exc!r})") from exc

    # -- hooks -------------------------------------------------------------------

    def _dressed(self, query: str) -> str:
        """Hook: a user query as sent (Virtuoso adds its graph exclusions)."""
        return query

    def _write_triples(self, ntriples: str, graph: str | None, *, blank_nodes: bool = False) -> None:
        """Write N-Triples text to ``graph``. Blank nodes keep their identity within one call."""
        target = graph or self.endpoint.default_graph
        if self.endpoint.gsp_url:
            self._gsp_post(ntriples.encode("utf-8"), "application/n-triples", target,
                           what="the triples")
            return
        body = f"GRAPH <{checked_iri(target)}> {{\n{ntriples}}}" if target else f"\n{ntriples}"
        # INSERT DATA refuses blank nodes on some stores (Virtuoso); a template takes them
        self._request(f"INSERT {{ {body} }} WHERE {{}}" if blank_nodes else f"INSERT DATA {{ {body} }}",
                      update=True)

    # -- the protocol ------------------------------------------------------------

    def _auth(self) -> httpx.Auth | None:
        """Credentials, digest (what Virtuoso's ``/sparql-auth`` asks): one per request, since
        a digest's nonce count is per exchange and the API runs queries concurrently."""
        ep = self.endpoint
        return httpx.DigestAuth(ep.user, ep.password or "") if ep.user else None

    def _request(self, text: str, *, update: bool = False, accept: str | None = None,
                 union: bool = True, timeout: float | None = None, check: bool = True) -> Any:
        """JSON for queries (or ``(bytes, media type)`` when ``accept`` is given), None for
        updates.

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
        url = ep.update_url if update else ep.query_url
        target = display_url(url)
        wait = max(0.001, timeout if timeout is not None
                   else (self._write_timeout if update else ep.timeout))
        form = dict(ep.extra_params)
        if union and ep.union_param and not update and not has_dataset_clause(text):
            form[ep.union_param] = "true"  # a FROM of the query's own wins
        form["update" if update else "query"] = text
        wants_rdf = accept is not None  # the caller asked for RDF (CONSTRUCT), not results
        if accept is None:
            accept = "*/*" if update else _accept_for(text)

        def timed_out() -> ProvkgError:
            said_ = f"{target} did not answer within {wait:g} s"
            if update:
                return StoreUnavailable(f"{said_} (timeout= in the store URL)")
            if timeout is None:
                return QueryTimeout(f"{said_} (timeout= in the store URL)")
            return QueryTimeout(said_)

        with http_errors(target, connect_timeout=ep.connect_timeout, timed_out=timed_out):
            response = self._http.post(url, data=form, headers={"accept": accept},
                                       auth=self._auth() or httpx.USE_CLIENT_DEFAULT,
                                       timeout=httpx.Timeout(wait, connect=ep.connect_timeout))
        if response.status_code >= 300:
            raise refusal(response, target=target, store=self.shown_url, text=text, update=update,
                          declares=self._declares_prefix, kind_hint=self._kind_hint)
        partial = partial_answer(response.headers)
        if partial is not None:
            raise partial
        if update:
            return None
        data, status = response.content, response.status_code
        media = response.headers.get("content-type", "") or ""
        if wants_rdf:
            # RDF (Turtle, N-Triples, RDF/JSON) expected: a web page or JSON results are
            # something else
            kind = media.lower()
            if "html" in kind or ("json" in kind and RDF_JSON not in kind):
                raise not_sparql(target, status, media, data)
            return data, kind
        return results_json(target, status, media, data)

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
        from_virtuoso = "Virtuoso" in body or bool(VIRTUOSO_ERROR.search(body))
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

    def _gsp_post(self, body: bytes | Iterator[bytes], media_type: str, graph: str | None, *,
                  what: str) -> None:
        """POST to the Graph Store Protocol endpoint: bytes with a length, or a stream (chunked)."""
        assert self.endpoint.gsp_url is not None
        if self._http is None:
            raise StoreUnavailable(f"the store {self.shown_url} is closed")
        if graph is None and media_type in ("application/n-quads", "application/trig"):
            params: dict[str, str] = {}  # a dataset: its own graphs
        elif graph is None:
            params = {"default": ""}
        else:
            params = {"graph": checked_iri(graph)}
        url = self.endpoint.gsp_url + ("?" + urlencode(params) if params else "")
        target = display_url(self.endpoint.gsp_url)
        if not self._checked:
            self._check()
        with http_errors(target, connect_timeout=self.endpoint.connect_timeout,
                         timed_out=lambda: StoreUnavailable(
                             f"{target} did not take {what} within {self._write_timeout:g} s "
                             "(timeout= in the store URL)")):
            response = self._http.post(url, content=body, headers={"content-type": media_type},
                                       auth=self._auth() or httpx.USE_CLIENT_DEFAULT)
        if response.status_code == 400:
            raise StoreError(f"{what} is not valid RDF for {self.shown_url}: "
                             f"{excerpt(response.content, 1000, one_line=False)}")
        if response.status_code in (401, 403):
            raise StoreUnavailable(f"{self.shown_url} refused {what}: HTTP "
                                   f"{response.status_code}{said(response.content)} (check the "
                                   "account in the store URL: ?user=…&password=…)")
        if response.status_code >= 300:
            raise StoreError(f"{self.shown_url} refused {what}: HTTP {response.status_code}"
                             f"{said(response.content)}")


def _accept_for(text: str) -> str:
    """The Accept header of a query sent without one: SPARQL results, or Turtle for a
    CONSTRUCT / DESCRIBE (by its first query-form keyword outside strings and comments)."""
    form = _GRAPH_FORM.search(blank_noise(text))
    if form and form.group(1).upper() in ("CONSTRUCT", "DESCRIBE"):
        return ACCEPT_TURTLE
    return ACCEPT_RESULTS


def _read_chunks(stream: Any, what: str, size: int = 1 << 20) -> Iterator[bytes]:
    """The file in chunks for an upload; a file that cannot be read (a bad gzip) is a
    :class:`StoreError`, raised through httpx as it is."""
    try:
        while chunk := stream.read(size):
            yield chunk
    except (OSError, EOFError) as exc:
        raise StoreError(f"cannot read {what}: {exc}") from exc


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
