"""Compose SPARQL 1.1 SELECT queries from query parts, plus the portable duration expression.

Only constant text (vocabulary terms, variable names chosen here) and terms made by
:mod:`provkg.term` go into a query: user values arrive through ``VALUES`` blocks
(:func:`provkg.queries.params.values_block`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from provkg.queries.parts import Part
from provkg.vocab import PREFIXES

__all__ = [
    "DIALECTS",
    "LINEAGE_PATH",
    "MAX_LINEAGE_DEPTH",
    "anchored_optional",
    "check_dialect",
    "duration",
    "group",
    "lineage",
    "optional",
    "seconds_between",
    "select",
    "subquery",
    "union",
    "with_prefixes",
]

#: how many derivation steps the lineage parts follow back: None, no bound in either dialect
#: (the ``virtuoso`` dialect once unrolled 3 steps; ``lineage(..., depth=k)`` still can)
MAX_LINEAGE_DEPTH: int | None = None

#: one derivation step back: derived from, or an input of the task that generated it
LINEAGE_PATH = "(prov:wasDerivedFrom|prov:wasGeneratedBy/prov:used)"

#: ``standard``: lineage as a SPARQL 1.1 property path (Oxigraph, rdflib: evaluated from the
#: bound end, milliseconds at 10M triples); ``virtuoso``: Virtuoso's transitive sub-query
#: (``OPTION (TRANSITIVE ...)``), because Virtuoso 7.2 refuses or mis-answers ``(a|b/c)*``
#: paths. A store gets the dialect of its URL scheme (``Store.query_dialect``, set by
#: ``virtuoso+http://``; :func:`provkg.store.store_dialect`): a Virtuoso opened as
#: ``sparql+http://`` is sent the standard dialect.
DIALECTS = ("standard", "virtuoso")

def check_dialect(name: str) -> str:
    """``name`` if it is one of :data:`DIALECTS`.

    Raises:
        ValueError: another name."""
    if name not in DIALECTS:
        raise ValueError(f"unknown SPARQL dialect {name!r}; known: {', '.join(DIALECTS)}")
    return name


def _day_number(t: str) -> str:
    """Days from a fixed origin to the date of dateTime ``t`` (proleptic Gregorian, March-based
    years so leap days fall at a year's end); integer arithmetic through FLOOR only."""
    y = f"(YEAR({t}) - IF(MONTH({t}) <= 2, 1, 0))"
    m = f"IF(MONTH({t}) > 2, MONTH({t}) - 3, MONTH({t}) + 9)"
    return (f"(365 * {y} + FLOOR({y} / 4) - FLOOR({y} / 100) + FLOOR({y} / 400)"
            f" + FLOOR((153 * {m} + 2) / 5) + DAY({t}))")


def seconds_between(begin_var: str, end_var: str) -> str:
    """A SPARQL 1.1 expression for ``end - begin`` in seconds (xsd:decimal) over xsd:dateTime.

    SPARQL 1.1 has no standard dateTime subtraction, so this counts days with a day-number
    formula over YEAR / MONTH / DAY and adds HOURS / MINUTES / SECONDS: the same answer on
    every store. Both times must be in the same time zone (the mapper writes UTC).

    >>> "HOURS(?end)" in seconds_between("?begin", "?end")
    True
    """
    def diff(fn: str) -> str:
        return f"({fn}({end_var}) - {fn}({begin_var}))"

    days = f"({_day_number(end_var)} - {_day_number(begin_var)})"
    return (f"({days} * 86400 + {diff('HOURS')} * 3600 + {diff('MINUTES')} * 60"
            f" + {diff('SECONDS')})")


def duration(begin_var: str, end_var: str, out: str, *, dialect: str = "standard") -> list[str]:
    """BIND lines giving ``out`` = ``end - begin`` in seconds, the arithmetic of
    :func:`seconds_between` with a fast path: the day-number formula (two dozen operations)
    runs only when the two times fall on different dates, which batches almost never do
    (2.8x less expression work per row on Oxigraph). Helper variables are named after ``out``.

    In the ``virtuoso`` dialect: Virtuoso's own ``bif:datediff`` in microseconds, exact to
    the microsecond like the formula and a third faster over 480,000 batches (Q5 typed over
    all eight workflows at full scale: 1.07 s against 1.64 s).

    >>> duration("?b", "?e", "?s")[-1].startswith("BIND((?s_days * 86400")
    True
    """
    if dialect == "virtuoso":
        return [f"BIND(bif:datediff('microsecond', {begin_var}, {end_var}) / 1000000.0 AS {out})"]
    same_date = " && ".join(f"{fn}({end_var}) = {fn}({begin_var})" for fn in ("DAY", "MONTH", "YEAR"))

    def diff(fn: str) -> str:
        return f"({fn}({end_var}) - {fn}({begin_var}))"

    return [f"BIND(IF({same_date}, 0, {_day_number(end_var)} - {_day_number(begin_var)})"
            f" AS {out}_days)",
            f"BIND(({out}_days * 86400 + {diff('HOURS')} * 3600 + {diff('MINUTES')} * 60"
            f" + {diff('SECONDS')}) AS {out})"]


def _hop(a: str, b: str, task: str) -> str:
    """One derivation step from ``a`` back to ``b``: derived from it, or the task that
    generated ``a`` used it. A sub-select, so that a chain of steps stays a chain of joins
    (Virtuoso would otherwise distribute the joins over every UNION: 2^k branches)."""
    return (f"{{ SELECT {a} {b} WHERE {{ {{ {a} prov:wasDerivedFrom {b} . }} UNION "
            f"{{ {a} prov:wasGeneratedBy {task} . {task} prov:used {b} . }} }} }}")


def _transitive(start: str, node: str, task: str) -> str:
    """Virtuoso's transitive sub-query: every ``node`` reached from ``start`` by zero or more
    derivation steps (``t_min(0)``: ``start`` itself too), each once (``t_distinct``, so a
    cycle ends the walk), at any depth."""
    return (f"{{ SELECT {start} {node} WHERE {{ {{ {start} prov:wasDerivedFrom {node} . }} UNION "
            f"{{ {start} prov:wasGeneratedBy {task} . {task} prov:used {node} . }} }} }} "
            f"OPTION (TRANSITIVE, t_distinct, t_in({start}), t_out({node}), t_min(0)) .")


def lineage(start: str, at: Callable[[str, int | None], Sequence[str | Part]], *,
            dialect: str = "standard", depth: int | None = None, prefix: str = "?lin",
            end: str | None = None) -> str:
    """``start`` and its ancestors; ``at(node, k)`` gives what the query asks of the node
    reached (e.g. that it denotes a SEG-Y file); ``end`` names that node's variable.

    In the ``standard`` dialect (see :data:`DIALECTS`): one property path
    ``start LINEAGE_PATH* end`` written as plain triples in the enclosing group, so the store
    walks it from the already-bound ``start`` (a nested group or sub-select would be
    evaluated on its own, from every node of the graph); ``k`` is ``None``, depth unbounded.

    In the ``virtuoso`` dialect, at any depth as well: a UNION of ``start`` itself (``k`` = 0)
    and of one explicit step from ``start`` followed by Virtuoso's transitive sub-query from
    the node that step reached (``k`` ``None``). The explicit first step matters: Virtuoso
    walks from ``t_in`` only when it is bound by a join; a ``start`` bound by a one-row
    ``VALUES`` (q6) is not, and it then walks from the other end and drops the anchor
    (every SEG-Y file of the store, not the dataset's). A ``BIND`` of ``start`` would fix
    that but is unbound inside an ``OPTIONAL`` (q2). Cost on the test data: faster than
    the 3-step chains it replaces (typed Q1, Q2, Q5, Q6: 135 ms -> 57 ms in all).

    With ``depth`` (``virtuoso`` only): the older bounded form, a UNION with one explicit
    chain per distance k = 0..depth, each written from ``at`` back to ``start`` (Q5 grows
    to seconds from depth 6 on).

    >>> "TRANSITIVE" in lineage("?d", lambda node, k: [f"{node} a ?c ."], dialect="virtuoso")
    True
    >>> "TRANSITIVE" in lineage("?d", lambda node, k: [f"{node} a ?c ."])
    False
    """
    node = end or f"{prefix}_n"
    if dialect == "standard":
        return _lines([f"{start} {LINEAGE_PATH}* {node} .", *at(node, None)], "")
    if depth is None:
        first = f"{prefix}_1"
        return union([*at(start, 0)],
                     [_hop(start, first, f"{prefix}_t0"), _transitive(first, node, f"{prefix}_t"),
                      *at(node, None)])
    branches = []
    for k in range(depth + 1):
        nodes = [start] + [f"{prefix}{k}_{i}" for i in range(1, k + 1)]
        hops = [_hop(nodes[i], nodes[i + 1], f"{prefix}{k}_t{i}") for i in reversed(range(k))]
        branches.append([*at(nodes[-1], k), *hops])
    return union(*branches)


def _lines(items: Iterable[str | Part], indent: str) -> str:
    out: list[str] = []
    for item in items:
        text = item.sparql() if isinstance(item, Part) else item
        out.extend(indent + line for line in text.splitlines() if line.strip())
    return "\n".join(out)


def group(items: Iterable[str | Part], *, indent: str = "  ") -> str:
    """``{ ... }`` around patterns, parts and nested blocks."""
    return "{\n" + _lines(items, indent + "  ") + "\n" + indent + "}"


def optional(*items: str | Part) -> str:
    return "OPTIONAL " + group(items)


def anchored_optional(anchor: Sequence[str | Part], *items: str | Part, dialect: str) -> str:
    """OPTIONAL ``items``, carrying ``anchor`` too: Oxigraph evaluates an OPTIONAL's
    patterns on their own and joins afterwards, so without the anchor it reads every match
    in the store. Not on Virtuoso, whose planner feeds the bindings into the OPTIONAL: the
    repeated anchor gives the same rows but cost tagged p1 about 2x at full scale."""
    if dialect == "virtuoso":
        return optional(*items)
    return optional(*anchor, *items)


def union(*branches: Sequence[str | Part]) -> str:
    return "\nUNION\n".join(group(b) for b in branches)


def select(projection: Sequence[str], where: Sequence[str | Part], *,
           distinct: bool = False, group_by: Sequence[str] = (), having: str | None = None,
           order_by: Sequence[str] = (), limit: int | None = None) -> str:
    """A SELECT query (or sub-query) text. ``projection`` items are variables (``?x``)
    or ``(expr AS ?x)``; ``limit`` is an int (never text from a user)."""
    head = "SELECT " + ("DISTINCT " if distinct else "") + " ".join(projection)
    text = head + " WHERE " + group(where, indent="")
    if group_by:
        text += "\nGROUP BY " + " ".join(group_by)
    if having:
        text += f"\nHAVING ({having})"
    if order_by:
        text += "\nORDER BY " + " ".join(order_by)
    if limit is not None:
        text += f"\nLIMIT {int(limit)}"
    return text


def subquery(projection: Sequence[str], where: Sequence[str | Part], **kw: object) -> str:
    """A sub-SELECT wrapped in braces, to use as one item of a ``where`` list."""
    return "{ " + select(projection, where, **kw) + " }"  # type: ignore[arg-type]


_PREFIXED = re.compile(r"(?<![\w?$<\"'])([A-Za-z][\w\-]*):(?=[A-Za-z_])")


def with_prefixes(body: str) -> str:
    """``body`` preceded by the PREFIX lines of the vocab prefixes it uses."""
    used = sorted({m.group(1) for m in _PREFIXED.finditer(_without_literals(body))} & PREFIXES.keys())
    return "".join(f"PREFIX {p}: <{PREFIXES[p]}>\n" for p in used) + body


#: Virtuoso joins these canned queries' parts in the order written (their anchor first). Left
#: to choose, Virtuoso 7.2 answered Q5 at the paper's full scale with 500 of its 600 rows (an
#: OPTIONAL's second row lost for 100 of 300 epochs, typed and tagged alike, every run), and
#: took a poorer plan for Q7 (0.45 -> 0.10 s typed, 1.82 -> 0.25 s tagged) and d8 (tagged
#: 1.01 -> 0.01 s). Not for all: d6 in that order exceeds Virtuoso's code vector ("SQ199") on
#: a workflow without adaptations, and the others gained nothing
#: (benchmarks/results/schemas-analysis.md). On the first line, so line numbers in an error
#: message stay right.
VIRTUOSO_PRAGMA = 'define sql:select-option "ORDER" '
VIRTUOSO_ORDERED = frozenset({"q5", "q7", "d8"})


def _without_literals(text: str) -> str:
    """Text with string literals and IRIs blanked, so a prefix-like word inside them is ignored."""
    return re.sub(r'"(?:[^"\\]|\\.)*"|<[^<>\s]*>', '""', text)
