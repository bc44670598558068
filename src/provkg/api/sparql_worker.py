"""A subprocess that runs user SPARQL on an embedded Oxigraph store, read-only.

pyoxigraph cannot interrupt a running query from Python, so the API runs user
queries here, where a timeout can kill the process. It reads the store directory
through ``Store.read_only`` (a view of everything written when it was opened; the
RocksDB lock held by the serving process does not apply), runs one query per request,
and answers one JSON line. Protocol on stdin / stdout, one JSON object per line::

    -> {"path": DIR, "refresh": true, "version": V}   (open a view for V now; no query)
    <- {"kind": "refreshed"}
    -> {"path": DIR, "query": TEXT, "max_rows": N[, "version": V]
        [, "guard": [ALLOWED SERVICE IRIs], "form": F][, "default_graphs": [IRI, ...], "named_graphs": [IRI, ...]]}
    <- {"kind": "select", "columns": [...], "rows": [[TERM | null, ...]]}
     | {"kind": "ask", "boolean": true}
     | {"kind": "triples", "ntriples": "..."}
     | {"error": "query_syntax" | "read_only" | "too_many_rows" | "store_error", "message": "..."}

With ``version`` (the writer's :attr:`~provkg.store.oxigraph_store.OxigraphStore.write_version`)
the worker keeps its read-only view between requests and opens the directory again only when
the version changed; without, it opens it for each request.
With ``default_graphs`` / ``named_graphs`` (the SPARQL Protocol's ``default-graph-uri`` /
``named-graph-uri``, both given, either may be empty) they are the query's dataset, in place of
its own ``FROM`` / ``FROM NAMED`` and of the union of all graphs.
With ``guard`` the read-only guard runs here first (inside the time limit). Before the first
request the worker writes ``{"ready": true}`` once its parsers are loaded: the time limit of a
query starts there, not while a fresh worker starts (seconds on a busy machine).

Each TERM keeps its RDF type, as SPARQL 1.1 Query Results JSON writes it
(``{"type": "literal", "value": "7", "datatype": "...#integer"}``, see
:func:`provkg.store.base.result_term`): the API serializes them in the format the
client asked for. CONSTRUCT / DESCRIBE triples come as N-Triples.

Run as ``python -m provkg.api.sparql_worker``.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
import pyoxigraph as ox

from provkg.store.base import syntax_error
from provkg.store.oxigraph_terms import oxigraph_ntriples_term as _nt
from provkg.store.oxigraph_terms import oxigraph_result_term, union_default_graph

__all__ = ["answer", "main", "too_many_rows_message"]


#: a read-only RocksDB instance can race the writer's compaction (a table file listed in the
#: manifest it read is deleted before it opens it): open again and re-run, a few times
_ATTEMPTS = 5


#: the read-only view kept between requests: (directory, the writer's version when opened, store)
_held: tuple[str, int, ox.Store] | None = None


def _view(request: dict[str, Any]) -> ox.Store:
    """A read-only view of the store that has seen every write before the request: the one
    kept from an earlier request while the writer's ``version`` is the same (nothing was
    written since: the open, which replays the write-ahead log, is skipped), else a new one."""
    global _held
    version = request.get("version")
    if _held is not None and version is not None and _held[:2] == (request["path"], version):
        return _held[2]
    _held = None
    store = ox.Store.read_only(request["path"])
    if version is not None:
        _held = (request["path"], int(version), store)
    return store


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Run one request (see the module docstring) and return the answer object."""
    global _held
    for attempt in range(_ATTEMPTS):
        try:
            return _answer_once(request)
        except (OSError, RuntimeError) as exc:
            _held = None  # e.g. a table file the writer's compaction removed: open again
            if attempt == _ATTEMPTS - 1:
                return {"error": "store_error", "message": f"the store could not be read: {exc}"}
    raise AssertionError("unreachable")


def _guard(text: str, allowed: list[str], form: str | None) -> dict[str, Any] | None:
    """The read-only guard (:func:`provkg.service.sparql_guard.check_query`), run here so that
    parsing counts against the time limit too: rdflib's parser takes seconds for a long
    query, and the server must not spend them outside a process it can stop. None: run it."""
    from provkg.errors import QuerySyntaxError, ReadOnlyQuery
    from provkg.service.sparql_guard import check_query

    try:
        guarded = check_query(text, allowed_service_endpoints=allowed)
    except ReadOnlyQuery as exc:
        return {"error": "read_only", "message": str(exc)}
    except QuerySyntaxError as exc:
        return {"error": "query_syntax", "message": str(exc), "line": exc.line, "column": exc.column}
    if form is not None and guarded.form != form:
        return {"error": "query_syntax", "message": f"expected a {form.upper()} query"}
    return None


def _answer_once(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("refresh"):
        _view(request)
        return {"kind": "refreshed"}
    max_rows = int(request["max_rows"])
    if "guard" in request:
        refused = _guard(request["query"], list(request["guard"]), request.get("form"))
        if refused is not None:
            return refused
    try:
        store = _view(request)
        text = request["query"]
        if "default_graphs" in request:
            result = store.query(text, default_graph=[ox.NamedNode(g) for g in request["default_graphs"]],
                                 named_graphs=[ox.NamedNode(g) for g in request["named_graphs"]])
        else:
            result = store.query(text, use_default_graph_as_union=union_default_graph(store, text))
        if isinstance(result, ox.QueryBoolean):
            return {"kind": "ask", "boolean": bool(result)}
        if isinstance(result, ox.QuerySolutions):
            columns = [v.value for v in result.variables]
            rows: list[list[dict[str, Any] | None]] = []
            for solution in result:
                if len(rows) >= max_rows:
                    return _too_many(max_rows)
                rows.append([oxigraph_result_term(solution[c]) for c in columns])
            return {"kind": "select", "columns": columns, "rows": rows}
        lines: list[str] = []
        for triple in result:
            if len(lines) >= max_rows:
                return _too_many(max_rows)
            lines.append(f"{_nt(triple.subject)} {_nt(triple.predicate)} {_nt(triple.object)} .\n")
        return {"kind": "triples", "ntriples": "".join(lines)}
    except SyntaxError as exc:  # said as the CLI says it: "(line L, column C)", a prefix named
        err = syntax_error(str(exc), query=request["query"])
        return {"error": "query_syntax", "message": str(err), "line": err.line, "column": err.column}


def _too_many(max_rows: int) -> dict[str, Any]:
    return {"error": "too_many_rows",
            "message": too_many_rows_message(max_rows)}


def too_many_rows_message(max_rows: int) -> str:
    """What a client is told of an answer past the row limit (SELECT rows, CONSTRUCT triples)."""
    return (f"the result has more than {max_rows} rows (or triples), the server's limit "
            "(PROVKG_MAX_ROWS); add LIMIT or narrow the query")


def main() -> int:
    # many flat triple patterns nest deeply in rdflib's grammar (90 hit the default 1,000)
    sys.setrecursionlimit(6000)
    from provkg.service.sparql_guard import check_query

    check_query("ASK {}")  # load the SPARQL grammar (~1 s) before the first request comes
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        out.write(orjson.dumps(answer(orjson.loads(line))) + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
