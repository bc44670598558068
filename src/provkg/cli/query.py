"""``provkg query NAME -p K=V ... | --list`` and ``provkg sparql FILE.rq``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from provkg.cli.output import error, format_rows, note, snapshot_note
from provkg.errors import BadParameter, NotFound, QuerySyntaxError
from provkg.queries.catalog import get_query
from provkg.service.querying import (
    answer_query,
    query_catalog,
    render_query,
    run_sparql,
)
from provkg.service.sparql_guard import query_form, with_provkg_prefixes
from provkg.store import Rows, open_store, store_dialect
from provkg.term import ntriples_line

__all__ = ["catalog_rows", "cmd_query", "cmd_sparql", "parse_params"]


def catalog_rows() -> Rows:
    """``provkg query --list``: one row per canned query."""
    rows: list[list[object]] = []
    for q in query_catalog():
        params = ", ".join(p.name if p.required else f"[{p.name}]" if p.default is None
                           else f"{p.name}={p.default}" for p in q.parameters)
        rows.append([q.name, params, ", ".join(q.columns), "/".join(q.schemas),
                     q.domain or "generic", q.question])
    # needs: "generic" (any workflow) or the domain whose KG / concepts the query reads
    return Rows(["name", "parameters", "columns", "schemas", "needs", "question"], rows)


def parse_params(items: list[str]) -> dict[str, object]:
    """``--param NAME=VALUE`` arguments as parameters (each given once).

    Raises:
        BadParameter: no ``=``, no name, or a name given twice."""
    params: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadParameter(f"--param expects NAME=VALUE, got {item!r}")
        key = key.strip()
        if key in params:  # as the API: not the last one silently winning
            raise BadParameter(f"parameter {key!r} given more than once (--param {key}=...); "
                               "give each parameter once")
        params[key] = value
    return params


def cmd_query(args: argparse.Namespace) -> int:
    """Run a canned query: its rows on stdout, what explains them as notes on stderr."""
    if args.list or not args.name:
        if not args.list:
            error("give a query name, or --list for the catalog")
        print(format_rows(catalog_rows(), args.format))
        return 0 if args.list else 2
    params = parse_params(args.param)
    query = get_query(args.name)
    schema = args.schema or ("typed" if "typed" in query.schemas else query.schemas[0])
    if args.show:
        print(render_query(args.name, params, schema=schema,
                           dialect=store_dialect(args.store)))
        return 0
    query.parse(params)  # bad parameters fail before the store is opened
    with open_store(args.store, existing=True, read_only=True) as store:
        snapshot_note(store, "answering from")
        answer = answer_query(store, args.name, params, schema=schema, relative_to=Path.cwd())
    rows = answer.rows
    print(format_rows(rows, args.format, short_ids=True))
    for said in answer.notes:  # on stderr: --format json / csv output stays clean
        note(f"{'' if rows.rows else 'no rows: '}{said}")
    if answer.mismatch:
        note(answer.mismatch)
    return EMPTY_ANSWER if args.fail_empty and not rows.rows else 0


#: ``provkg query --fail-empty``'s exit status for an answer without rows (1 is an error,
#: 2 a usage mistake)
EMPTY_ANSWER = 3


def _read_query(file: str) -> tuple[str, str]:
    """(the query text of FILE, ``-``: standard input; the name errors give it)."""
    if file == "-":
        data, name = sys.stdin.buffer.read(), "standard input"
    else:
        try:
            with open(file, "rb") as f:
                data, name = f.read(), file
        except OSError as exc:
            raise NotFound(f"cannot read {file}: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Windows editors) is not the query
    except UnicodeDecodeError as exc:
        raise BadParameter(f"{name}: not UTF-8 text (byte {exc.start}); a SPARQL query is "
                           "UTF-8 text") from None
    return text, name


def _in_file(exc: QuerySyntaxError, name: str, added: int) -> QuerySyntaxError:
    """``exc`` naming the file, its line counted in the file (without the ``added`` PREFIX
    lines provkg put before the query)."""
    message, line = str(exc), exc.line
    if added and line is not None and line > added:
        told = f"line {line}"
        message = message.replace(told, f"line {line - added}", 1)
        line -= added
    return QuerySyntaxError(f"{name}: {message}", line=line, column=exc.column)


def cmd_sparql(args: argparse.Namespace) -> int:
    """Run a read-only SPARQL query; CONSTRUCT / DESCRIBE as N-Triples in a table's place.
    provkg's prefixes (``provml:``, ``prov:``, ...) need no PREFIX line."""
    text, name = _read_query(args.file)
    try:
        query_form(text)  # refuse non-queries before opening the store
    except BadParameter as exc:
        raise BadParameter(f"{name}: {exc}") from None
    sent, added = with_provkg_prefixes(text)
    with open_store(args.store, existing=True, read_only=True) as store:
        snapshot_note(store, "answering from")
        try:
            result = run_sparql(store, sent)
        except QuerySyntaxError as exc:  # say which file the line and column are in
            raise _in_file(exc, name, added) from None
    if isinstance(result, bool):  # ASK: one column, so json / csv keep the rows shape
        result = Rows(["boolean"], [[result]])
    elif isinstance(result, list):  # CONSTRUCT / DESCRIBE
        if args.format == "table":  # N-Triples: what people paste elsewhere
            sys.stdout.write("".join(ntriples_line(t) for t in result))
            return 0
        result = Rows(["subject", "predicate", "object"], [list(t) for t in result])
    print(format_rows(result, args.format))
    return 0
