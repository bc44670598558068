"""What SPARQL servers answer, read: their refusals as provkg errors, and the one place where
httpx's exceptions become :mod:`provkg.errors` ones (:func:`http_errors`).

Virtuoso's error grammar is here rather than in :mod:`provkg.store.virtuoso_store` because
any server URL may reach a Virtuoso (``sparql+http://HOST:8890/sparql`` is one, and so is a
mistyped ``oxigraph+`` URL): its codes tell a syntax error from a failure to run, and its
partial "anytime" answers must never pass as whole ones, whatever the URL says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from provkg.errors import ProvkgError, QueryTimeout, StoreError, StoreUnavailable, StoreUnreachable
from provkg.store.common import SPARQL_PARSER_LOCK, display_url
from provkg.store.sparql_text import syntax_error, undeclared_prefix

__all__ = ["http_errors", "refusal", "results_json", "not_sparql", "query_failed",
           "is_syntax_error", "error_text", "excerpt", "said", "parses", "partial_answer",
           "VIRTUOSO_ERROR"]


@contextmanager
def http_errors(target: str, *, connect_timeout: float,
                timed_out: Callable[[], ProvkgError]) -> Iterator[None]:
    """Every exception of an HTTP exchange with ``target`` (display form) as a provkg one:
    no connection in time or at all is :class:`StoreUnreachable`, no answer in time is
    ``timed_out()``, a connection lost midway is :class:`StoreUnreachable`."""
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise StoreUnreachable(f"cannot reach {target}: no connection within {connect_timeout:g} s "
                               "(connect_timeout= in the store URL)") from exc
    except httpx.TimeoutException as exc:  # read, write or pool
        raise timed_out() from exc
    except httpx.ConnectError as exc:
        raise StoreUnreachable(f"cannot reach {target}: {exc}") from exc
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:  # remote hung up, bad stream
        raise StoreUnreachable(f"lost the connection to {target}: {exc}") from exc


def partial_answer(headers: httpx.Headers) -> QueryTimeout | None:
    """Virtuoso's "anytime" answer (a header ``X-SQL-State``): what it found before its time
    limit, which must not pass as the whole answer."""
    if "x-sql-state" in headers:
        return QueryTimeout("the endpoint stopped at its time limit and returned a partial "
                            "answer (Virtuoso MaxQueryExecutionTime)")
    return None


#: what a refusal says when its body is empty, by status (SPARQLWrapper's words, kept)
_EMPTY_BODY = {
    400: "QueryBadFormed: A bad request has been sent to the endpoint: probably the SPARQL "
         "query is badly formed.",
    401: "Unauthorized: Access to that endpoint is denied due to invalid credentials "
         "(unauthorized). Check the credentials.",
    404: "EndPointNotFound: It was not possible to connect to the given endpoint: check it is "
         "correct.",
    414: "URITooLong: The URI requested by the client is longer than the server is willing to "
         "interpret. Check if the request was sent using GET method instead of POST method.",
    500: "EndPointInternalError: The endpoint returned the HTTP status code 500.",
}


def refusal(response: httpx.Response, *, target: str, store: str, text: str, update: bool,
            declares: Callable[[str], bool], kind_hint: Callable[[str], str]) -> ProvkgError:
    """The provkg error for a server's refusal (status 300 and up) of ``text``.

    ``target``: the endpoint as shown; ``store``: the store URL as shown; ``declares``: does
    the server declare a prefix itself; ``kind_hint``: words for an answer from another kind
    of server than the store URL names (empty when none)."""
    status, content = response.status_code, response.content
    body = content.decode("utf-8", "replace") or _EMPTY_BODY.get(status, "")
    if status == 400:
        if "memory exhausted" in body:  # Virtuoso's parser: a request too large, not bad SPARQL
            return StoreError(f"{store} could not parse a request this large: {body[:300]}")
        if VIRTUOSO_ERROR.search(body) and not is_syntax_error(body):
            return query_failed(store, error_text(body, text))
        if not VIRTUOSO_ERROR.search(body) and parses(text, update, declares):
            # a 400 for something else (a read-only endpoint refusing an update, a row
            # limit): the store's failure, not the query text's
            return query_failed(store, excerpt(error_text(body, text), 1000, one_line=False))
        hint = kind_hint(body)  # another kind of server: that is the cause to say
        return syntax_error(error_text(body, text) + hint, query=None if hint else text,
                            store_declares=declares)
    if status == 404:
        return StoreUnavailable(f"no SPARQL endpoint at {target} (HTTP 404{said(body)})")
    if status == 401:
        return StoreUnavailable(f"{target} answered HTTP 401{said(body)} (give the account in "
                                "the store URL: ?user=…&password=…, or check it)")
    if status in (414, 500):
        if is_syntax_error(body, text, update, declares):  # Virtuoso: 500 for some
            return syntax_error(error_text(body, text), query=text, store_declares=declares)
        return query_failed(store, excerpt(error_text(body, text), 1000, one_line=False))
    media = response.headers.get("content-type", "")
    if status in (405, 501):  # the method (POST) or the request is not supported
        return not_sparql(target, status, media, content)
    hint = (" (it offers none of the formats asked for: is the store URL's scheme, "
            "virtuoso+ / oxigraph+ / sparql+, the one of this server?)" if status == 406 else "")
    return StoreError(f"{target} answered HTTP {status}{said(content)}{hint}")


def excerpt(text: str | bytes, limit: int = 200, *, one_line: bool = True) -> str:
    """A short, readable piece of an answer: decoded, HTML tags dropped, spaces collapsed
    (for HTML, or when ``one_line``).

    >>> excerpt(b"<html><body><h1>Not Found</h1>\\n<p>nothing  here</p></body></html>")
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


def said(body: str | bytes) -> str:
    """``: <excerpt>`` of an answer's body, or nothing when it is empty."""
    text = excerpt(body)
    return f": {text}" if text else ""


def not_sparql(target: str, status: int, media: str, body: bytes) -> StoreUnavailable:
    kind = media.split(";")[0].strip() or "no content type"
    return StoreUnavailable(f"{target} is not a SPARQL endpoint (HTTP {status}, {kind})"
                            f"{said(body)}")


def results_json(target: str, status: int, media: str, data: bytes) -> dict[str, Any]:
    """A SPARQL JSON results document (SELECT or ASK), checked.

    Raises:
        StoreUnavailable: the answer is not SPARQL results (a web server, not an endpoint).
        StoreError: the JSON does not parse (cut off).
    """
    if "json" not in media.lower():
        raise not_sparql(target, status, media, data)
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
    raise not_sparql(target, status, media, data)



#: a Virtuoso error: "Virtuoso 37000 Error SP030: ..." (SQL state, then its own code)
VIRTUOSO_ERROR = re.compile(r"Virtuoso (\w{5}) Error (\w+)?")


def parses(text: str, update: bool = False,
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


def is_syntax_error(body: str, text: str | None = None, update: bool = False,
                     store_declares: Callable[[str], bool] | None = None) -> bool:
    """Whether a server's refusal of ``text`` means the text does not parse. Virtuoso says so
    by its error code: it files compile-time failures under SQL state 37000 too ("syntax
    error or access violation"), and only its code SP030 (the SPARQL parser: syntax errors,
    undefined prefixes) is one; SP031 (generated SQL too long, optimizer gave up), TR...
    (transitive sub-queries), SR... (run-time conversions), 42000 (cost estimate) are failures
    to run a valid query. Any other server: provkg parses the text itself.

    >>> is_syntax_error("Virtuoso 37000 Error SP030: SPARQL compiler, line 1: syntax error at '}'")
    True
    >>> is_syntax_error("Virtuoso 37000 Error SP031: SPARQL: Internal error: The length of generated "
    ...                 "SQL text has exceeded 10000 lines of code")
    False
    >>> is_syntax_error("Virtuoso 22005 Error SR341: Invalid integer value converting '1844'")
    False
    >>> is_syntax_error("Internal Server Error", "SELECT * WHERE { ?s ?p }")
    True
    """
    m = VIRTUOSO_ERROR.search(body)
    if m:
        return m.group(2) == "SP030"
    return text is not None and not parses(text, update, store_declares)


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


def error_text(body: str, sent: str) -> str:
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
