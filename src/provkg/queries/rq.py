"""Canned queries kept as ``.rq`` files in ``queries/`` (shipped as ``provkg/_data/queries``).

Parameter convention: a header of ``# key: value`` comment lines, then the query::

    # name: s3
    # question: Invocations per component, with their last event time
    # schemas: sprov
    # columns: component, invocations, last_event_time
    # param: workflow workflow                (name, type[, default])
    # pairs: parameters                       (optional: columns of encoded pairs)
    SELECT ... WHERE {
      ...uses ?workflow...
    }

Each parameter ``p`` is the variable ``?p``; :func:`bind_rq` binds all of them with one
``VALUES`` row (terms from :mod:`provkg.term`) placed right after the first ``WHERE {``,
so the parameters anchor the query. Types are those of
:class:`provkg.queries.params.Parameter`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from provkg.errors import NotFound, ProvkgError
from provkg.queries.params import REQUIRED, Parameter, values_block
from provkg.term import blank_noise

__all__ = ["bind_rq", "read_rq", "queries_dir", "rq_paths", "rq_texts"]

_HEADER = re.compile(r"^#\s*(name|question|schemas|columns|pairs|param)\s*:\s*(.*?)\s*$")
_WHERE = re.compile(r"\bWHERE\s*\{", re.IGNORECASE)


@cache
def queries_dir() -> Path:
    """The folder of canned ``.rq`` files: the repository's, else the installed wheel's."""
    in_repo = Path(__file__).resolve().parents[3] / "queries"
    if in_repo.is_dir():
        return in_repo
    packaged = Path(__file__).resolve().parents[1] / "_data" / "queries"
    if packaged.is_dir():
        return packaged
    raise NotFound(f"queries folder not found: looked in {in_repo} and {packaged}")


def rq_paths() -> list[Path]:
    return sorted(queries_dir().glob("*.rq"))


def _param(spec: str, *, where: str) -> Parameter:
    fields = spec.split()
    if len(fields) not in (2, 3):
        raise ProvkgError(f"{where}: '# param:' expects 'name type [default]', got {spec!r}")
    name, kind = fields[0], fields[1]
    default: object = REQUIRED
    if len(fields) == 3:
        default = int(fields[2]) if kind == "int" else fields[2]
    return Parameter(name, kind, default, minimum=1 if kind == "int" else None)


def read_rq(text: str, *, source: str = "<string>") -> dict[str, Any]:
    """The fields of a canned query (``CannedQuery``'s keyword arguments) from ``.rq`` text
    with the header described in this module."""
    head: dict[str, str] = {}
    params: list[Parameter] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if not m:
            continue
        key, value = m.groups()
        if key == "param":
            params.append(_param(value, where=f"{source}:{n}"))
        else:
            head[key] = value
    missing = [k for k in ("name", "question", "columns") if k not in head]
    if missing:
        raise ProvkgError(f"{source}: header lacks '# {missing[0]}: ...'")
    if not _first_where(text):
        raise ProvkgError(f"{source}: no 'WHERE {{' to bind parameters after")
    return dict(
        name=head["name"], question=head["question"], parameters=tuple(params),
        columns=tuple(c.strip() for c in head["columns"].split(",")),
        schemas=tuple(s.strip() for s in head.get("schemas", "typed, tagged").split(",")),
        rq_text=text,
        pair_columns=tuple(c.strip() for c in head.get("pairs", "").split(",") if c.strip()))


def rq_texts() -> list[tuple[str, str]]:
    """``(text, path)`` of every ``.rq`` file, by file name."""
    return [(p.read_text(encoding="utf-8"), str(p)) for p in rq_paths()]


def _first_where(text: str) -> re.Match[str] | None:
    """The query's first ``WHERE {``: never one in a comment, a string or an IRI (a VALUES
    row put there would bind nothing, and the query would answer for every value)."""
    return _WHERE.search(blank_noise(text))


def bind_rq(text: str, terms: dict[str, str]) -> str:
    """``text`` with a VALUES row for ``terms`` (variable -> RDF term) after its first WHERE."""
    block = values_block(terms)
    if not block:
        return text
    m = _first_where(text)
    assert m is not None  # read_rq checked
    return text[:m.end()] + "\n  " + block + text[m.end():]
