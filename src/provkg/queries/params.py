"""Typed parameters of canned queries: parsed from text, turned into RDF terms, never pasted.

Every value that reaches a query goes through :mod:`provkg.term` (``iri()`` validates,
``literal()`` escapes) and enters the query as a ``VALUES`` row, so a hostile string can
only ever become one well-formed term that matches nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provkg.errors import BadParameter
from provkg.term import iri, is_valid_iri, literal, mint_iri
from provkg.vocab import DEFAULT_BASE

__all__ = ["REQUIRED", "STAGES", "Parameter", "parse_params", "term_for", "values_block"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: the default of a parameter the caller must give
REQUIRED: Any = _Required()

#: parameter type -> the form shown in errors and in ``provkg query --list``
_FORMS = {
    "int": "an integer such as 3",
    "float": "a number such as 0.4",
    "str": "a string",
    "iri": "an absolute IRI such as https://example.org/x",
    "data": "a captured value id or the data's location URI",
    "task": "a captured task id (e.g. the training's id)",
    "workflow": "a prospective workflow name",
    "scalar": "a JSON value: a number, true / false, a string, or a list such as [256, 128]",
    "better": "lower or higher",
    "stage": "training, validation or evaluation",
}


@dataclass(frozen=True)
class Parameter:
    """One parameter of a canned query.

    ``type`` is one of ``int``, ``float``, ``str``, ``iri``, ``data`` (value id or location
    URI -> the value's minted IRI), ``task`` (task id -> its IRI), ``workflow`` (spec name ->
    its IRI), ``scalar`` (a number, boolean or string compared by value), ``better``
    (lower / higher) and ``stage`` (one of :data:`STAGES`).
    """

    name: str
    type: str
    default: Any = REQUIRED
    help: str = ""
    minimum: int | None = None
    #: a ``data`` parameter whose query finds the tasks that used the data: given as an id,
    #: it also matches the value captured by that id's location alone (``capture.ref(path)``)
    users: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def form(self) -> str:
        return _FORMS[self.type]

    def parse(self, raw: object) -> object:
        """The Python value of ``raw`` (text from the CLI / URL, or an already-typed value).

        Raises:
            BadParameter: naming this parameter and the expected form.
        """
        try:
            value = _PARSERS[self.type](raw)
        except (TypeError, ValueError) as exc:
            low = "-2^63" if self.minimum is None else f"{self.minimum}"
            range_note = f" between {low} and 2^63-1" if "64-bit" in str(exc) else ""
            raise BadParameter(
                f"parameter {self.name!r}: expected {self.form}{range_note}") from exc
        if self.minimum is not None and isinstance(value, int) and value < self.minimum:
            raise BadParameter(f"parameter {self.name!r}: expected an integer >= {self.minimum}")
        return value


#: integers a store can hold (xsd:integer in SPARQL engines is 64-bit) and a LIMIT accepts
_INT_RANGE = (-(2**63), 2**63 - 1)
_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def _as_int(raw: object) -> int:
    if isinstance(raw, bool):
        raise TypeError("a boolean is not an integer")
    if isinstance(raw, str):
        text = raw.strip()
        # ASCII digits only: int() also reads "1_0" and other scripts' digits
        if not _INT_TEXT.fullmatch(text):
            raise ValueError("not an integer")
        raw = int(text, 10)
    if not isinstance(raw, int):
        raise TypeError(type(raw).__name__)
    if not _INT_RANGE[0] <= raw <= _INT_RANGE[1]:
        raise ValueError("out of the 64-bit range")
    return raw


def _as_float(raw: object) -> float:
    if isinstance(raw, bool):
        raise TypeError("a boolean is not a number")
    value = float(raw) if isinstance(raw, (int, float, str)) else float("nan")
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _as_str(raw: object) -> str:
    if not isinstance(raw, str) or raw == "":
        raise ValueError("expected a non-empty string")
    return raw


def _as_iri(raw: object) -> str:
    text = _as_str(raw)
    try:
        iri(text)
    except BadParameter as exc:
        raise ValueError(str(exc)) from None
    return text


def _as_scalar(raw: object) -> object:
    """Numbers and booleans keep their type; text that reads as one becomes one. A JSON
    list or object (``[256, 128]``) is compared as the mapper stores it (``rdf:JSON``,
    canonical form); an empty string is a string like any other."""
    if isinstance(raw, (bool, int, float, list, dict)):
        return raw
    if raw == "":
        return ""
    text = _as_str(raw).strip()
    if text.lower() in ("true", "false"):  # (also Python's True / False)
        return text.lower() == "true"
    if text[:1] in ("[", "{") or (len(text) > 1 and text[0] == text[-1] == '"'):
        try:
            value = json.loads(text)
        except ValueError:
            return _as_str(raw)
        # a quoted JSON string ("1e-3") is text, compared as text: how to find a
        # hyperparameter recorded as the string argparse gave, not as a number
        if isinstance(value, (list, dict, str)):
            return value
    for convert in (int, float):
        try:
            value = convert(text)
        except ValueError:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            break
        return value
    return _as_str(raw)


def _as_better(raw: object) -> str:
    text = _as_str(raw).strip().lower()
    if text not in ("lower", "higher"):
        raise ValueError("expected lower or higher")
    return text


#: the stages whose measure can rank trainings (catalog parameter ``stage``)
STAGES = ("training", "validation", "evaluation")


def _as_stage(raw: object) -> str:
    text = _as_str(raw).strip().lower()
    if text not in STAGES:
        raise ValueError("expected training, validation or evaluation")
    return text


_PARSERS = {
    "better": _as_better,
    "stage": _as_stage,
    "int": _as_int,
    "float": _as_float,
    "str": _as_str,
    "iri": _as_iri,
    "data": _as_str,
    "task": _as_str,
    "workflow": _as_str,
    "scalar": _as_scalar,
}


def _shown(name: str) -> str:
    """A parameter name fit to repeat in an error (never an arbitrary submitted string)."""
    return repr(name) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", name) else "of that name"


def parse_params(parameters: tuple[Parameter, ...], given: dict[str, object], *,
                 query: str) -> dict[str, object]:
    """Check ``given`` against ``parameters``: unknown names refused, defaults filled in.

    Raises:
        BadParameter: an unknown or missing parameter, or a value of the wrong form.
    """
    known = {p.name: p for p in parameters}
    unknown = sorted(set(given) - set(known))
    if unknown:
        expected = ", ".join(known) or "none"
        raise BadParameter(
            f"query {query!r} has no parameter {_shown(unknown[0])}; its parameters: {expected}")
    out: dict[str, object] = {}
    for p in parameters:
        if p.name in given and given[p.name] is not None:
            out[p.name] = p.parse(given[p.name])
        elif p.required:
            raise BadParameter(
                f"query {query!r} needs parameter {p.name!r} ({p.form}); "
                f"give it as --param {p.name}=...")
        else:
            out[p.name] = p.default
    return out


def term_for(parameter: Parameter, value: object, *, base: str = DEFAULT_BASE) -> str:
    """The RDF term (N-Triples / SPARQL syntax) a parsed parameter value stands for.

    >>> term_for(Parameter("model", "data"), "file:///m.pt")
    '<https://w3id.org/provkg/id/value/file:///m.pt>'

    An IRI a query returned (a value's or task's minted IRI) names that node itself, so one
    query's answer can be another's parameter:

    >>> term_for(Parameter("model", "data"), "https://w3id.org/provkg/id/value/file:///m.pt")
    '<https://w3id.org/provkg/id/value/file:///m.pt>'
    >>> term_for(Parameter("model", "data"), "https://w3id.org/provkg/id/value/model A")
    '<https://w3id.org/provkg/id/value/model%20A>'
    >>> term_for(Parameter("measure", "str"), 'loss" } DROP ALL #')
    '"loss\\\\" } DROP ALL #"'
    """
    kind = parameter.type
    if kind in ("data", "task"):
        minted_kind = "value" if kind == "data" else "task"
        text = str(value)
        prefix = base + minted_kind + "/"
        if text.startswith(prefix) and len(text) > len(prefix):
            if is_valid_iri(text):
                return iri(text)
            # such an IRI as a person unescaped it (a space for %20): the id it was minted from
            return iri(mint_iri(minted_kind, text[len(prefix):], base=base))
        return iri(mint_iri(minted_kind, text, base=base))
    if kind == "workflow":
        return iri(mint_iri("spec", str(value), base=base))
    if kind == "iri":
        return iri(str(value))
    return literal(value)


def values_block(bindings: Mapping[str, str | tuple[str, ...]]) -> str:
    """``VALUES (?a ?b) { (t1 t2) }`` for variable -> term; empty text when no bindings.
    A variable given several terms (a location several captured values share) makes one
    VALUES per variable instead, the same rows (their product) in a form Virtuoso compiles:
    its SPARQL compiler runs out of code space on q3 with a multi-row VALUES of two
    variables repeated through sub-selects (SQ199).

    Terms must come from :func:`term_for` (or :mod:`provkg.term`).

    >>> values_block({"model": "<https://example.org/m>"})
    'VALUES (?model) { (<https://example.org/m>) }'
    >>> values_block({"d": ("<https://example.org/a>", "<https://example.org/b>"), "m": '"loss"'})
    'VALUES ?d { <https://example.org/a> <https://example.org/b> } VALUES ?m { "loss" }'
    """
    if not bindings:
        return ""
    columns = {name: (t,) if isinstance(t, str) else tuple(t) for name, t in bindings.items()}
    if all(len(terms) == 1 for terms in columns.values()):
        names = " ".join(f"?{name}" for name in columns)
        row = " ".join(terms[0] for terms in columns.values())
        return f"VALUES ({names}) {{ ({row}) }}"
    return " ".join(f"VALUES ?{name} {{ {' '.join(terms)} }}" for name, terms in columns.items())
