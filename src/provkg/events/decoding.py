"""Events from text: the JSON rule every transport shares, then the models, with errors that
name the JSON path of each bad field (``events[3].used[0].value``) and never echo what was
sent.

The JSON rule is :func:`provkg.wire.loads` (one exact-integer decoder for the server and the
capture library); this module only words what it refuses as a :class:`~provkg.errors.BadEvent`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from provkg.errors import BadEvent
from provkg.events.models import EVENT_ADAPTER, NOT_AN_IRI, Batch, TaskEvent, WorkflowEvent
from provkg.problems import describe
from provkg.wire import MAX_TIME, MalformedJson, RefusedNumbers, loads, strip_bom

__all__ = [
    "NotJson", "load_json", "load_json_line", "parse_batch", "parse_event", "parse_events_jsonl",
]


_TAGS = ("workflow", "task")
_UNION_MEMBER = re.compile(r"^(int|float|bool|str|none|list\[.*\]|dict\[.*\]|function-.*|constrained-.*)$")


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        prev_is_index = i == 0 or isinstance(loc[i - 1], int)
        if part in _TAGS and prev_is_index and i < len(loc) - 1:
            continue  # the discriminator tag pydantic inserts into the path
        if _UNION_MEMBER.match(str(part)):
            continue  # which member of a union was tried: noise for the reader
        out += f".{part}" if out else str(part)
    return out or "(root)"


def _bad(exc: ValidationError, *, where: str = "") -> BadEvent:
    by_path: dict[str, list[str]] = {}
    for err in exc.errors(include_input=False, include_url=False):
        msgs = by_path.setdefault(_path(tuple(err["loc"])), [])
        msg = describe(err)
        if err["type"] == "union_tag_invalid":  # pydantic's text echoes the submitted tag
            msg = "'type' must be 'workflow' or 'task'"
        elif err["type"] == "string_pattern_mismatch" and err["loc"][-1:] == ("domain",):
            msg = NOT_AN_IRI  # one message for a domain IRI, whichever check refused it
        elif err["type"] == "string_pattern_mismatch":  # only URIs have a pattern; not the regex
            msg = ("not a URI: expected scheme:rest (file:///data/a.csv, s3://bucket/key) without "
                   "spaces, quotes, <, >, {, }, |, ^, ` or backslashes (percent-encode them: a "
                   "space is %20)")
        if msg not in msgs:
            msgs.append(msg)
    lines = []
    for path, msgs in by_path.items():
        msg = msgs[0] if len(msgs) == 1 else "not a valid value of this field (" + " / ".join(
            msgs) + ")"
        lines.append(f"{where}{path}: {msg}")
    more = f" (and {len(lines) - 20} more)" if len(lines) > 20 else ""
    return BadEvent("; ".join(lines[:20]) + more)


class NotJson(BadEvent):
    """The text is not JSON by the events' rule (:func:`load_json`): malformed or truncated.
    ``reason`` is the message without the ``where`` prefix; ``line`` and ``column`` (1-based)
    say where the text stopped being JSON, when it did."""

    def __init__(self, message: str, reason: str = "", *, line: int | None = None,
                 column: int | None = None):
        super().__init__(message)
        self.reason = reason
        self.line = line
        self.column = column


def load_json(data: bytes | str, *, where: str = "") -> Any:
    """Decode JSON text of events by the rule every transport shares (:func:`provkg.wire.loads`).

    Strict JSON as the queue worker's parser (orjson) reads it: ``NaN``, ``Infinity``,
    ``-Infinity``, a number overflowing a double or a lone surrogate are refused, so nothing
    accepted can fail later. Integers are exact, beyond 64 bits too (up to ``MAX_INT_DIGITS``
    digits). A BOM is *not* skipped here: call :func:`strip_bom` at the start of a document.

    Raises:
        BadEvent: the path of each non-finite number and how to send it instead
            (``events[0].used[1].value: NaN is not JSON ...``), prefixed by ``where``.
        NotJson: malformed text (orjson's reason, with line and column).
    """
    try:
        return loads(data)
    except (MalformedJson, RefusedNumbers) as exc:
        raise _not_loaded(exc, where) from None


def load_json_line(line: bytes, where: Callable[[], str]) -> Any:
    """:func:`load_json` of one line of an event file, ``where`` built only for an error
    message: a file has millions of lines, and formatting each one's place cost more than
    parsing it."""
    try:
        return loads(line)
    except (MalformedJson, RefusedNumbers) as exc:
        raise _not_loaded(exc, where()) from None


def _not_loaded(exc: MalformedJson | RefusedNumbers, where: str) -> BadEvent:
    """The BadEvent (a NotJson for malformed text) for what :func:`provkg.wire.loads` refused."""
    if isinstance(exc, MalformedJson):
        return NotJson(f"{where}{exc.message}", exc.reason, line=exc.line, column=exc.column)
    return _number_problems(exc.found, where)


#: fields that take numbers only, with the form to say instead of "send it as a string"
#: (advice these fields would refuse: a NaN time sent as a string, say)
_NUMBER_FIELDS = {
    "time": f"time is a finite number of seconds since the epoch (UTC), 0 <= time < {MAX_TIME}",
    "index": "index is an integer",
}


_EVENT_PATH = re.compile(r"(events\[\d+\])?")


def _number_problems(found: list[tuple[str, str]], where: str) -> BadEvent:
    problems = []
    for path, problem in found:
        head, _, field = path.rpartition(".")
        form = _NUMBER_FIELDS.get(field) if _EVENT_PATH.fullmatch(head) else None
        if form is not None:  # the reason without the advice that fits a value's `value`
            # (provkg.wire's reasons put their advice after these words)
            problem = problem.split(" (Python's")[0].split(" is refused")[0] + f"; {form}"
        problems.append(f"{where}{path}: {problem}")
    more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
    return BadEvent("; ".join(problems[:20]) + more)


def parse_batch(data: bytes | str | dict[str, Any]) -> Batch:
    """Validate a batch (JSON text, a leading BOM skipped, or an already-decoded object).

    Raises:
        BadEvent: naming the path of each bad field, e.g. ``events[2].time: ...``.
    """
    if not isinstance(data, dict):
        data = load_json(strip_bom(data))
    try:
        return Batch.model_validate(data)
    except ValidationError as exc:
        raise _bad(exc) from None


def parse_event(data: bytes | str | dict[str, Any], *, where: str = "") -> WorkflowEvent | TaskEvent:
    """Validate one event (JSON text, a leading BOM skipped, or a decoded object).
    ``where`` prefixes error paths (``"line 7: "``)."""
    if not isinstance(data, dict):
        data = load_json(strip_bom(data), where=where)
    return _validate_event(data, where)


def _validate_event(data: Any, where: str) -> WorkflowEvent | TaskEvent:
    try:
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise _bad(exc, where=where) from None


def parse_events_jsonl(lines: Any, *, source: str = "") -> Any:
    """Yield events from JSONL lines; errors name the source and line number. A BOM is
    skipped at the start of the first line only (the start of the file)."""
    for n, line in enumerate(lines, 1):
        if n == 1:
            line = strip_bom(line)
        if not line.strip():
            continue
        where = f"{source}{':' if source else 'line '}{n}: "
        yield _validate_event(load_json(line, where=where), where)
