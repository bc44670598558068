"""Compose SPARQL 1.1 SELECT queries from query parts, plus the portable duration expression.

Only constant text (vocabulary terms, variable names chosen here) and terms made by
:mod:`provkg.term` go into a query: user values arrive through ``VALUES`` blocks
(:func:`provkg.queries.params.values_block`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from provkg.queries.parts import Part
from provkg.vocab import PREFIXES

__all__ = ["seconds_between", "select", "subquery", "group", "optional", "union", "with_prefixes"]


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


def _lines(items: Iterable[str | Part], indent: str) -> str:
    out = []
    for item in items:
        text = item.sparql() if isinstance(item, Part) else item
        out.extend(indent + line for line in text.splitlines() if line.strip())
    return "\n".join(out)


def group(items: Iterable[str | Part], *, indent: str = "  ") -> str:
    """``{ ... }`` around patterns, parts and nested blocks."""
    return "{\n" + _lines(items, indent + "  ") + "\n" + indent + "}"


def optional(*items: str | Part) -> str:
    return "OPTIONAL " + group(items)


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


def _without_literals(text: str) -> str:
    """Text with string literals and IRIs blanked, so a prefix-like word inside them is ignored."""
    return re.sub(r'"(?:[^"\\]|\\.)*"|<[^<>\s]*>', '""', text)
