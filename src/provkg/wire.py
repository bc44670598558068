"""Wire format v1 of capture events: its name, its limits and its JSON rule, one home each.

The server's validator (:mod:`provkg.events`, pydantic models) and the capture library
(:mod:`provkg.capture`, which fits every value to these limits before sending) both import them
from here, so the two sides cannot disagree: the server refuses a whole batch for one field
past a limit. This module imports only the standard library and orjson -- never pydantic or
anything of provkg -- because every process that captures imports it.

tests/test_wire.py holds the models of provkg.events and the capture library to each limit at
its boundary (the limit passes, one more is refused).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = [
    "FORMAT",
    "KINDS",
    "MAX_TAGS",
    "MAX_TAG_VALUE",
    "PHASES",
    "ROLES",
    "MAX_ID",
    "MAX_INT_DIGITS",
    "MAX_NAME",
    "MAX_TIME",
    "MAX_URI",
    "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH",
    "NON_FINITE_REFUSED",
    "URI_PATTERN",
    "UTF8_BOM",
    "MalformedJson",
    "RefusedNumbers",
    "has_long_digits",
    "loads",
    "loads_own",
    "strip_bom",
]

#: the batch envelope's ``format`` tag: ``{"format": FORMAT, "events": [...]}``
FORMAT = "provkg.events/1"

# -- roles: what a transformation or a value is (spec format, and events that carry them) --

#: the kinds of transformation (a spec's ``kind``; a task begin's optional ``kind``)
KINDS = ("transformation", "training", "validation", "evaluation", "section",
         "feature_extraction", "adaptation")
#: the roles of an attribute (a spec's ``role``; a value's optional ``role``)
ROLES = ("hyperparameter", "model_hyperparameter", "model", "model_schema", "evaluation_measure",
         "dataset", "dataset_characteristic", "feature_set", "data_reference", "domain_reference",
         "plain")
#: the phases of a workflow (a spec's ``phase``; a workflow begin's optional ``phase``)
PHASES = ("curation", "preparation", "learning")
#: most tags a workflow event carries, and longest tag value (characters)
MAX_TAGS, MAX_TAG_VALUE = 64, 1024

# -- limits: what the server refuses, and so what the capture library fits values to ---------

#: longest name (1 .. MAX_NAME characters): a value's name, a workflow's, a transformation's, an
#: agent's. Names end up inside ids and IRIs (``task/used/name``), so they stay short.
MAX_NAME = 256
#: longest id (1 .. MAX_ID characters): of an event, a workflow run, a parent, a dependency, a
#: value, a ``derived_from`` entry. Each becomes part of a node's IRI in the graph.
MAX_ID = 1024
#: longest ``location`` or ``domain`` URI (1 .. MAX_URI characters), matching URI_PATTERN
MAX_URI = 4096
#: what a ``location`` or ``domain`` must look like: ``scheme:rest`` without whitespace or the
#: characters an IRI cannot hold unescaped (``<>"{}|^`` backquote, backslash)
URI_PATTERN = r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|^`\\]*$"
#: most decimal digits of an integer (sign not counted), in a value or a task's ``index``:
#: below Python's int <-> str conversion limit (4300 digits, ``sys.int_max_str_digits``), past
#: which decoding the JSON or writing the integer as a literal raises ValueError
MAX_INT_DIGITS = 4000
#: how deep a value's lists may nest (``[[1]]`` is 2): the checks that walk them stay shallow
MAX_VALUE_DEPTH = 8
#: the largest value (a string, or a list as compact JSON) and environment, in UTF-8 bytes:
#: Oxigraph holds one RDF term of at most 16 MiB, and a value is stored as one literal
MAX_VALUE_BYTES = 4 * 1024 * 1024
#: times (seconds since the epoch, UTC) are below this: 10000-01-01T00:00:00Z, past the last
#: instant xsd:dateTime writes
MAX_TIME = 253402300800

# -- the JSON rule every transport shares -----------------------------------------------------

#: why a NaN / Infinity is refused, and what to send instead
NON_FINITE_REFUSED = ("is not JSON (Python's json.dumps writes it unless allow_nan=False): send "
                      'a non-finite number as the string "NaN", "Infinity" or "-Infinity", or as '
                      "null")
_OVERFLOW = ("a number too large for a double (beyond about 1.8e308) is refused: send it as a "
             "string, or as null")
_HUGE_INT = f"an integer with more than {MAX_INT_DIGITS} digits is refused: send it as a string"


class MalformedJson(ValueError):
    """The text is not JSON by :func:`loads`' rule. ``message`` says so in full, ``reason`` is
    the cause alone; ``line`` and ``column`` (1-based) say where it stopped being JSON, when
    known."""

    def __init__(self, message: str, reason: str, *, line: int | None = None,
                 column: int | None = None):
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.line = line
        self.column = column


class RefusedNumbers(ValueError):
    """The text is JSON, but holds numbers no event may carry: ``found`` is ``(path, problem)``
    of each, in document order (``("events[0].time", "NaN is not JSON ...")``)."""

    def __init__(self, found: list[tuple[str, str]]):
        super().__init__("; ".join(f"{path}: {problem}" for path, problem in found[:20]))
        self.found = found


UTF8_BOM = b"\xef\xbb\xbf"
#: a run of 19 digits may be an integer orjson would turn into a double (or a long string of
#: digits): such text takes the exact, slower parse
_LONG_DIGITS_S = re.compile(r"\d{19}")
#: every ASCII digit -> "0", every other byte -> " ": 19 digits in a row (an integer that may
#: not fit 64 bits) become a substring search, ~13x faster than a regex over a request body
_DIGITS_ONLY = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_NINETEEN = b"0" * 19
#: an integer past a double's range (309 digits or more): what orjson refuses and json reads
_LONG_INTEGER = re.compile(r"\d{309}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_long_digits(data: bytes | bytearray | str) -> bool:
    """Does ``data`` hold 19 digits in a row? Only then may orjson have read an integer beyond
    64 bits as a double: text without such a run decodes exactly with orjson alone."""
    if isinstance(data, str):
        return _LONG_DIGITS_S.search(data) is not None
    return _NINETEEN in data.translate(_DIGITS_ONLY)


def strip_bom(data: bytes | str) -> bytes | str:
    """``data`` without a UTF-8 byte order mark at its very start (Windows tools write one)."""
    if isinstance(data, bytes):
        return data.removeprefix(UTF8_BOM)
    return data.removeprefix("\ufeff")


def loads(data: bytes | str) -> Any:
    """Decode JSON text of events by the rule every transport shares.

    Strict JSON as the queue worker's parser (orjson) reads it: ``NaN``, ``Infinity``,
    ``-Infinity``, a number overflowing a double, an integer of more than MAX_INT_DIGITS digits
    or a lone surrogate are refused, so nothing accepted can fail later. Integers are exact,
    beyond 64 bits too. A BOM is *not* skipped here: call :func:`strip_bom` at the start of a
    document.

    Raises:
        MalformedJson: malformed text (the reason, with line and column when known).
        RefusedNumbers: the path of each number no event may carry and how to send it instead.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        refused = True  # malformed, or what orjson cannot hold: a long integer, a lone surrogate
    else:
        if not has_long_digits(data):  # orjson would have made a long integer a double
            return obj
        refused = False
    return _loads_exact(data, refused=refused)


def loads_own(data: bytes | str) -> Any:
    """JSON this library wrote (a spooled or sinked event line) back, integers beyond 64 bits
    kept exact. Lenient, unlike :func:`loads`: what provkg wrote is read back as it is (the
    server judges it when it is sent).

    Raises:
        ValueError: the text is not JSON.
    """
    if not has_long_digits(data):  # 19 digits in a row: maybe an integer beyond 64 bits
        return orjson.loads(data)
    return json.loads(data)


class _Unreadable:
    """Where the exact parse met a number no event may carry (NaN, an overflowing float...)."""

    __slots__ = ("problem",)

    def __init__(self, problem: str):
        self.problem = problem


def _loads_exact(data: bytes | str, *, refused: bool) -> Any:
    """The slow path: the standard parser keeps integers exact and says where a NaN is.
    ``refused``: orjson refused the text (json must find why, or the text is refused)."""
    found: list[int] = []

    def unreadable(problem: str) -> _Unreadable:
        found.append(1)
        return _Unreadable(problem)

    def number(text: str) -> Any:
        x = float(text)
        return x if math.isfinite(x) else unreadable(_OVERFLOW)

    def integer(text: str) -> Any:
        if len(text) - text.startswith("-") <= MAX_INT_DIGITS:
            return int(text)
        return unreadable(_HUGE_INT)

    def constant(text: str) -> Any:
        return unreadable(f"{text} {NON_FINITE_REFUSED}")

    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    except UnicodeDecodeError as exc:
        reason = (f"not UTF-8 text (byte {exc.start}): events are JSON in UTF-8; a UTF-16 file, "
                  "or a compressed body sent without its Content-Encoding?")
        raise MalformedJson(reason, reason) from None
    try:
        exact = json.loads(text, parse_float=number, parse_int=integer, parse_constant=constant)
    except json.JSONDecodeError as exc:
        reason = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise MalformedJson(f"not JSON ({reason})", reason, line=exc.lineno,
                            column=exc.colno) from None
    except RecursionError:
        reason = "nested too deeply"
        raise MalformedJson(f"not JSON ({reason})", reason) from None
    if found:
        raise RefusedNumbers(_bad_numbers(exact))
    if refused:
        # json read what orjson refused: a lone surrogate (refused: no UTF-8 for it) or an
        # integer of 309 to MAX_INT_DIGITS digits, which orjson reads as an overflowing double
        # (exact here)
        if _has_lone_surrogate(exact):
            reason = "a string holds an escaped lone surrogate (\\ud800-\\udfff)"
            raise MalformedJson(f"not JSON ({reason})", reason)
        if _LONG_INTEGER.search(text) is None:  # no other difference is known: refuse, to be safe
            reason = "a value the events' parser cannot read"
            raise MalformedJson(f"not JSON ({reason})", reason)
    return exact


def _has_lone_surrogate(obj: Any) -> bool:
    """Does a decoded document hold a string (or key) with a lone surrogate, which orjson
    refuses and json lets through?"""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if _SURROGATE.search(x):
                return True
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return False


def _bad_numbers(obj: Any) -> list[tuple[str, str]]:
    """``(path, problem)`` of each :class:`_Unreadable` in a decoded document, in order."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, _Unreadable):
            out.append((path or "(root)", x.problem))
        elif isinstance(x, dict):
            stack.extend((f"{path}.{k[:64]}" if path else k[:64], v)
                         for k, v in reversed(list(x.items())))
        elif isinstance(x, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(x))))
    return out
