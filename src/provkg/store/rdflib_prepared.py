"""Prepared rdflib queries, kept per query *shape*: the text with its VALUES data taken out.

Parsing is most of an rdflib query's time (pyparsing: 1.2 s for the 15 kB q7 text, whose
evaluation on a small graph takes 0.2 s), and dashboards re-run the same canned queries while a
training runs. provkg binds parameters as VALUES blocks, so each parameter value makes a new
text: kept per text, a dashboard cycling through more (query, parameter) pairs than the cache
holds would never find one, and every poll would parse its queries again. So the
prepared query is kept per template -- the text with each VALUES block's rows replaced by
marker IRIs of the same shape -- and a run puts its own rows (parsed once per block text, a
few milliseconds) into the template's VALUES nodes just before evaluating it.

A text whose VALUES blocks cannot be told apart safely (a block inside which the scan is
unsure, an empty block, a block the algebra does not show once) is kept per text, as before.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rdflib import Variable
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery
from rdflib.plugins.sparql.parserutils import CompValue

from provkg.store.base import SPARQL_PARSER_LOCK
from provkg.store.rdflib_plan import improve

__all__ = ["prepare_query"]

_PREPARED_MAX = 64  # templates (a q7 is ~1.6 MB prepared)
_ROWS_MAX = 4096  # parsed VALUES blocks (small)
_prepared: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], Any] = OrderedDict()
_rows: OrderedDict[tuple[str, str, str, tuple[tuple[str, str], ...]], list[dict[Any, Any]] | None] = OrderedDict()
_slots: dict[int, list[list[CompValue]]] = {}  # id(template) -> VALUES nodes per block

_MARKER = "urn:provkg:values:"
_VALUES_HEAD = re.compile(r"VALUES\s*(\((?:\s*[?$]\w+)*\s*\)|[?$]\w+)\s*\{", re.IGNORECASE)
_IRI = re.compile(r"<[^<>\"{}|^`\\\x00-\x20]*>")
_VAR = re.compile(r"[?$](\w+)")
_PROLOGUE = re.compile(r"(?:\s+|#[^\n]*|PREFIX\s+[^\s:]*:\s*<[^<>\s]*>|BASE\s*<[^<>\s]*>)*", re.IGNORECASE)


def prepare_query(query: str, namespaces: dict[str, Any]) -> tuple[Any, Callable[[], None]]:
    """The prepared (translated, improved) query for ``query`` and a ``bind`` to call right
    before evaluating it, under the lock that serializes evaluations: it puts this text's
    VALUES rows into the shared template."""
    prefixes = tuple(sorted((k, str(v)) for k, v in namespaces.items()))
    split = _template(query, prefixes, namespaces)
    if split is None:
        return _prepare(query, prefixes, namespaces), _nothing
    template, rows = split
    prepared = _prepare(template, prefixes, namespaces)
    slots = _slots.get(id(prepared))
    if slots is None:
        slots = _find_slots(prepared.algebra, len(rows))
        if slots is None:  # the algebra does not show each block once: no template
            return _prepare(query, prefixes, namespaces), _nothing
        _slots[id(prepared)] = slots

    def bind() -> None:
        for nodes, block in zip(slots, rows):
            for node in nodes:
                node["res"] = block

    return prepared, bind


def _nothing() -> None:
    return None


def _prepare(text: str, prefixes: tuple[tuple[str, str], ...], namespaces: dict[str, Any]) -> Any:
    key = (text, prefixes)
    with SPARQL_PARSER_LOCK:  # pyparsing is not thread-safe; the caches are guarded with it
        prepared = _prepared.get(key)
        if prepared is not None:
            _prepared.move_to_end(key)
            return prepared
        parsed = parseQuery(text)
    prepared = translateQuery(parsed, None, namespaces)
    improve(prepared.algebra)  # (provkg.store.rdflib_plan)
    with SPARQL_PARSER_LOCK:
        _prepared[key] = prepared
        while len(_prepared) > _PREPARED_MAX:
            _, old = _prepared.popitem(last=False)
            _slots.pop(id(old), None)
    return prepared


def _template(query: str, prefixes: tuple[tuple[str, str], ...],
              namespaces: dict[str, Any]) -> tuple[str, list[list[dict[Any, Any]]]] | None:
    """(the text with marker rows in each VALUES block, each block's own rows), or None."""
    blocks = _values_blocks(query)
    if not blocks:
        return None
    opening = _PROLOGUE.match(query)
    assert opening is not None  # _PROLOGUE is (...)*: it matches every text, empty at worst
    prologue = opening.group(0)  # the block's prefixed names need it
    out, rows, last = [], [], 0
    for i, (start, end, head) in enumerate(blocks):
        block = _block_rows(prologue, head, query[start:end], prefixes, namespaces)
        if not block:  # unparsable or empty: nothing to tell this block's node by
            return None
        names = _VAR.findall(head)
        cells = [" ".join(f"<{_MARKER}{i}:{r}:{c}>" if row.get(Variable(name), "UNDEF") != "UNDEF"
                          else "UNDEF" for c, name in enumerate(names))
                 for r, row in enumerate(block)]
        out += [query[last:start], " ".join(f"({c})" for c in cells) if head.startswith("(")
                else " ".join(cells)]
        rows.append(block)
        last = end
    out.append(query[last:])
    return "".join(out), rows


def _block_rows(prologue: str, head: str, data: str, prefixes: tuple[tuple[str, str], ...],
                namespaces: dict[str, Any]) -> list[dict[Any, Any]] | None:
    """The rows of ``VALUES head { data }`` as rdflib reads them (cached), None if it cannot."""
    key = (prologue, head, data, prefixes)
    with SPARQL_PARSER_LOCK:
        if key in _rows:
            _rows.move_to_end(key)
            return _rows[key]
        try:
            parsed = parseQuery(f"{prologue}\nSELECT * WHERE {{ VALUES {head} {{ {data} }} }}")
        except Exception:  # noqa: BLE001 (the whole text is parsed as it is, then)
            parsed = None
    rows = None
    if parsed is not None:
        try:
            found = _find_values(translateQuery(parsed, None, namespaces).algebra)
            rows = found[0]["res"] if len(found) == 1 else None
        except Exception:  # noqa: BLE001
            rows = None
    with SPARQL_PARSER_LOCK:
        _rows[key] = rows
        while len(_rows) > _ROWS_MAX:
            _rows.popitem(last=False)
    return rows


def _find_values(node: Any) -> list[CompValue]:
    """Every VALUES node (``CompValue('values', res=[...])``) under ``node``, once each."""
    found: dict[int, CompValue] = {}
    stack, seen = [node], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, CompValue):
            if x.name == "values":
                found[id(x)] = x
                continue
            stack.extend(x.values())
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
    return list(found.values())


def _find_slots(algebra: Any, blocks: int) -> list[list[CompValue]] | None:
    """The template's VALUES nodes per block (told by their markers); None unless every
    block has at least one node and every node belongs to one block."""
    slots: list[list[CompValue]] = [[] for _ in range(blocks)]
    for node in _find_values(algebra):
        marks = {str(v)[len(_MARKER):].split(":", 1)[0] for row in node["res"]
                 for v in row.values() if str(v).startswith(_MARKER)}
        if len(marks) != 1 or not next(iter(marks)).isdigit() or int(next(iter(marks))) >= blocks:
            return None
        slots[int(marks.pop())].append(node)
    return slots if all(slots) else None


def _values_blocks(query: str) -> list[tuple[int, int, str]] | None:
    """(start, end, head) of the inside of each VALUES block's braces, scanning past IRIs,
    strings and comments; None when the text is not plain enough to split."""
    blocks: list[tuple[int, int, str]] = []
    i, n = 0, len(query)
    inside: tuple[int, str] | None = None  # (start, head) while in a block
    while i < n:
        ch = query[i]
        if ch == "<":
            m = _IRI.match(query, i)
            i = m.end() if m else i + 1
        elif ch in "\"'":
            quote = ch * 3 if query.startswith(ch * 3, i) else ch
            j = i + len(quote)
            while True:
                if j >= n:
                    return None
                if query[j] == "\\":
                    j += 2
                elif query.startswith(quote, j):
                    break
                elif len(quote) == 1 and query[j] in "\r\n":
                    return None
                else:
                    j += 1
            i = j + len(quote)
        elif ch == "#":
            j = query.find("\n", i)
            if inside is not None:
                return None  # a comment inside a block: not worth the risk
            i = n if j < 0 else j + 1
        elif inside is not None:
            if ch == "{":
                return None
            if ch == "}":
                blocks.append((inside[0], i, inside[1]))
                inside = None
            i += 1
        elif ch in "Vv" and (i == 0 or not (query[i - 1].isalnum() or query[i - 1] in "_?$:")):
            m = _VALUES_HEAD.match(query, i)
            if m:
                inside = (m.end(), m.group(1))
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return None if inside is not None else blocks
