"""Classify user SPARQL before it reaches a store: read-only forms only, no open SERVICE.

The one read-only guard: ``provkg sparql`` and the server's ``/v1/sparql`` both run it.

The query is parsed (rdflib's SPARQL 1.1 grammar), never matched with regular
expressions: keywords inside strings, comments or IRIs cannot fool a parser.
Updates (``INSERT``, ``DELETE``, ``LOAD``, ``CLEAR``, ``DROP``, ...) are refused
with a message; ``SERVICE`` is refused unless its endpoint is explicitly allowed,
because the store would fetch any URL the caller names (server-side request
forgery). ``SERVICE ?variable`` is always refused.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from typing import Any

from provkg.errors import BadParameter, QuerySyntaxError, ReadOnlyQuery
from provkg.store.base import SPARQL_PARSER_LOCK, refuse_deep_nesting, syntax_error
from provkg.term import SPARQL_NOISE, nesting_depth
from provkg.vocab import PREFIXES

__all__ = ["GuardedQuery", "check_query", "query_form", "query_form_of", "with_provkg_prefixes",
           "MAX_QUERY_CHARS", "UPDATE_REFUSED",
           "SERVICE_REFUSED"]

#: longer query texts are refused before parsing
MAX_QUERY_CHARS = 100_000

UPDATE_REFUSED = ("SPARQL updates (INSERT, DELETE, LOAD, CLEAR, DROP, CREATE, ADD, MOVE, COPY) "
                   "are refused: this endpoint is read-only; use POST /v1/events to write")
SERVICE_REFUSED = ("SERVICE is refused for endpoints not listed in the server's "
                   "allowed_service_endpoints setting (PROVKG_ALLOWED_SERVICE_ENDPOINTS)")

_FORMS = {"SelectQuery": "select", "AskQuery": "ask", "ConstructQuery": "construct",
          "DescribeQuery": "describe"}


@dataclass(frozen=True)
class GuardedQuery:
    """A query that passed the guard: its text, form and the SERVICE endpoints it calls."""

    text: str
    form: str  # select | ask | construct | describe
    services: tuple[str, ...]


def check_query(text: str, *, allowed_service_endpoints: list[str] | tuple[str, ...] = ()
                ) -> GuardedQuery:
    """Parse ``text`` and decide whether the read-only endpoint may run it.

    >>> check_query("SELECT * WHERE { ?s ?p ?o } LIMIT 1").form
    'select'
    >>> query_form("PREFIX p: <http://x/> # comment\\nSELECT * WHERE { ?s ?p ?o }")
    'SELECT'

    Raises:
        ReadOnlyQuery: an update, or ``SERVICE`` to an endpoint not allowed.
        QuerySyntaxError: not SPARQL 1.1 (line and column from the parser).
    """
    endpoints = tuple(sorted(set(allowed_service_endpoints)))
    if len(text) <= _CACHED_QUERY_CHARS:
        return _check_cached(text, endpoints)
    return _check(text, endpoints)


#: the recursion limit while the guard parses (see _check)
_PARSE_RECURSION_LIMIT = 40_000

#: accepted queries up to this length are remembered (a client polling one query, e.g. a
#: dashboard or the persistence probe of benchmarks/service.py, is parsed once: parsing
#: costs ~6 ms of the server's CPU and GIL); refusals are not cached (they raise)
_CACHED_QUERY_CHARS = 4096


@functools.lru_cache(maxsize=256)
def _check_cached(text: str, endpoints: tuple[str, ...]) -> GuardedQuery:
    return _check(text, endpoints)


def query_form_of(text: str) -> str:
    """select | ask | construct | describe from the keyword after the prologue (strings,
    comments and IRIs skipped), without parsing: cheap enough for the server itself when
    :func:`check_query` runs later inside the time limit (it checks the form again).

    Raises:
        ReadOnlyQuery: an update.  QuerySyntaxError: empty, too long, or no query form."""
    _check_size(text)
    try:
        form = query_form(text)
    except BadParameter:
        raise QuerySyntaxError("expected a SELECT, ASK, CONSTRUCT or DESCRIBE query") from None
    if form == "UPDATE":
        raise ReadOnlyQuery(UPDATE_REFUSED, refused="update")
    return form.lower()


def query_form(text: str) -> str:
    """The form of a SPARQL request: SELECT, ASK, CONSTRUCT, DESCRIBE, or UPDATE."""
    body = _PROLOGUE.sub("", SPARQL_NOISE.sub(lambda m: "<>" if m.group(0).startswith("<") else " ", text))
    word = re.match(r"\s*([A-Za-z]+)", body)
    first = word.group(1).upper() if word else ""
    if first in _READ_FORMS:
        return first
    if first in _UPDATE_WORDS:
        return "UPDATE"
    raise BadParameter("not a SPARQL query: expected SELECT, ASK, CONSTRUCT or DESCRIBE "
                       "after the PREFIX / BASE lines")


_READ_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
_UPDATE_WORDS = ("INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY",
                 "WITH")
_PROLOGUE = re.compile(r"^\s*(?:(?:PREFIX\s+[\w\-.]*:\s*<>|BASE\s*<>)\s*)*", re.IGNORECASE)


def with_provkg_prefixes(text: str) -> tuple[str, int]:
    """``text`` with PREFIX lines for the provkg prefixes (``provml:``, ``prov:``, ... as in
    :data:`provkg.vocab.PREFIXES`) it uses without declaring, on one line of their own before
    it, and how many lines that added (0 or 1: an error's line number is that much too high).
    A prefix the query declares keeps its own IRI.

    >>> text, added = with_provkg_prefixes("SELECT * { ?x a provml:Model }")
    >>> added, text.splitlines()[0]
    (1, 'PREFIX provml: <https://w3id.org/provkg/provml#>')
    >>> with_provkg_prefixes("PREFIX provml: <urn:x#> SELECT * { ?x a provml:Model }")[1]
    0
    """
    body = SPARQL_NOISE.sub(" ", text)
    declared = {m.group(1) for m in _DECLARED.finditer(body)}
    used = sorted(p for p in PREFIXES if p not in declared
                  and re.search(rf"(?<![\w?$:.\-]){re.escape(p)}:", body))
    if not used:
        return text, 0
    return " ".join(f"PREFIX {p}: <{PREFIXES[p]}>" for p in used) + "\n" + text, 1


_DECLARED = re.compile(r"\bPREFIX\s+([A-Za-z][\w.\-]*)?\s*:", re.IGNORECASE)


def _check_size(text: str) -> None:
    if len(text) > MAX_QUERY_CHARS:
        raise QuerySyntaxError(f"query longer than {MAX_QUERY_CHARS} characters")
    if not text.strip():
        raise QuerySyntaxError("empty query")


def _check(text: str, allowed_service_endpoints: tuple[str, ...]) -> GuardedQuery:
    from pyparsing import ParseBaseException
    from rdflib.plugins.sparql.parser import parseQuery, parseUpdate

    _check_size(text)
    # SPARQL ends a comment at CR or LF, as Oxigraph does; rdflib's grammar at LF only, so
    # "# x\r SERVICE <...>" would be a comment to this guard and a SERVICE call to the store
    # (server-side request forgery). The guard parses the text
    # with CR read as LF, which changes no token of the query (CR is whitespace, or ends a
    # comment, or sits in a long string), and the store runs the text as sent.
    view = text.replace("\r", "\n")
    refuse_deep_nesting(text)  # the stores' own limit, said in the same words
    try:
        with SPARQL_PARSER_LOCK:  # pyparsing is not thread-safe
            # pyparsing recurses about 60 Python frames per nested bracket: with the default
            # limit (1,000) queries the stores take would be refused from ~160 levels; 500
            # levels need ~32,000, pure Python frames, not the C stack
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(limit, _PARSE_RECURSION_LIMIT))
            try:
                parsed = parseQuery(view)
            finally:
                sys.setrecursionlimit(limit)
    except RecursionError:
        raise QuerySyntaxError("the query nests too deeply to parse") from None
    except ParseBaseException as exc:
        if _is_update(view, parseUpdate):
            raise ReadOnlyQuery(UPDATE_REFUSED, refused="update") from None
        raise _in_oxigraph_words(text) or QuerySyntaxError(
            f"SPARQL syntax error: {exc.msg}", line=exc.lineno, column=exc.col) from None
    form = _FORMS.get(getattr(parsed[1], "name", ""), "")
    if not form:
        raise QuerySyntaxError("expected a SELECT, ASK, CONSTRUCT or DESCRIBE query")
    services = tuple(_services(parsed, _prefixes(parsed[0])))
    allowed = set(allowed_service_endpoints)
    for endpoint in services:
        if endpoint not in allowed:
            raise ReadOnlyQuery(SERVICE_REFUSED, refused="service")
    return GuardedQuery(text=text, form=form, services=services)


#: deeper, Oxigraph's recursive parser may take the process down
_OXIGRAPH_PARSE_DEPTH = 64


def _in_oxigraph_words(text: str) -> QuerySyntaxError | None:
    """The syntax error as Oxigraph (the default store) says it, so that one query gets one
    message and position from ``provkg sparql`` and from the API; None when Oxigraph is not
    installed, parses the text, or nests too deeply to ask it."""
    try:
        import pyoxigraph as ox
    except ImportError:
        return None
    if nesting_depth(text) > _OXIGRAPH_PARSE_DEPTH:
        return None
    try:
        ox.Store().query(text)  # an empty store: parses, and has nothing to evaluate
    except SyntaxError as parsed:
        return syntax_error(str(parsed), query=text)
    except Exception:  # noqa: BLE001 - Oxigraph's verdict is only a better message
        return None
    return None


def _is_update(text: str, parse_update: Any) -> bool:
    try:
        with SPARQL_PARSER_LOCK:
            parse_update(text)
    except Exception:
        return False
    return True


def _prefixes(prologue: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for decl in prologue or []:
        if getattr(decl, "name", "") == "PrefixDecl":
            out[str(decl.get("prefix") or "")] = str(decl.get("iri"))
    return out


def _services(node: Any, prefixes: dict[str, str]):
    """SERVICE endpoints in a parse tree; a variable or unresolvable name yields ``"?"``."""
    from rdflib.plugins.sparql.parserutils import CompValue
    from rdflib.term import URIRef

    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, CompValue):
            if item.name == "ServiceGraphPattern":
                term = item.get("term")
                if isinstance(term, URIRef):
                    yield str(term)
                elif isinstance(term, CompValue) and term.name == "pname":
                    base = prefixes.get(str(term.get("prefix") or ""))
                    yield base + str(term.get("localname") or "") if base else "?"
                else:
                    yield "?"  # SERVICE ?var: the caller picks the URL at run time
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)) or type(item).__name__ == "ParseResults":
            stack.extend(item)
