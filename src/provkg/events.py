"""Wire format v1 of capture events (DESIGN.md section 3), as strict pydantic models.

A batch is ``{"format": "provkg.events/1", "events": [...]}``; on disk one event
per line (JSONL). Unknown fields are refused, and every error names the JSON
path of the bad field (``events[3].used[0].value``) without echoing the
submitted value. This module imports no RDF, store or web package: the
capture library depends on it.

One JSON rule for every transport (HTTP body, MQTT message, JSONL line, the
server's queue worker), :func:`load_json`: strict JSON as orjson reads it -- no
``NaN`` / ``Infinity`` / ``-Infinity``, no number overflowing a double, no lone
surrogate -- with integers kept exact. A UTF-8 BOM is skipped at the start of a
document only (:func:`strip_bom`). The validator refuses non-finite numbers from
Python objects too, and times outside ``0 .. MAX_TIME`` (``xsd:dateTime`` stops at
the end of year 9999), which the store could not keep.

The format's name, its limits (``MAX_ID``, ``MAX_NAME``, ``MAX_URI``, ``MAX_INT_DIGITS``,
``MAX_VALUE_DEPTH``, ``MAX_VALUE_BYTES``, ``MAX_TIME``) and the JSON rule live in
:mod:`provkg.wire`, shared with the capture library (which must not import pydantic); the
models here enforce them, and they are importable from here too.

Integers beyond 64 bits are valid events and stay exact on every path (the server's
queue worker decodes with :func:`load_json` too).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from provkg.errors import BadEvent
from provkg.problems import describe
from provkg.term import is_valid_iri, json_size, location_form
from provkg.wire import (
    FORMAT,
    MAX_ID,
    MAX_INT_DIGITS,
    MAX_NAME,
    MAX_TIME,
    MAX_URI,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    NON_FINITE_REFUSED,
    URI_PATTERN,
    MalformedJson,
    RefusedNumbers,
    loads,
    strip_bom,
)

__all__ = [
    "FORMAT", "MAX_VALUE_DEPTH", "MAX_TIME", "NotJson", "Value",
    "WorkflowEvent", "TaskEvent", "Event", "Batch", "load_json", "load_json_line", "strip_bom",
    "parse_batch", "parse_event", "parse_events_jsonl", "event_schema", "batch_schema",
    "default_value_id", "value_id",
]

_SCALAR_SCHEMA: dict[str, Any] = {"type": ["string", "number", "boolean", "null"]}


def _list_schema(depth: int) -> dict[str, Any]:
    items = _SCALAR_SCHEMA if depth == 1 else {"anyOf": [_SCALAR_SCHEMA, _list_schema(depth - 1)]}
    return {"type": "array", "items": items}


_VALUE_SCHEMA: dict[str, Any] = {
    "anyOf": [_SCALAR_SCHEMA, _list_schema(MAX_VALUE_DEPTH)],
    "default": None,
    "description": ("A JSON scalar, a list of scalars and lists (nested at most "
                    f"{MAX_VALUE_DEPTH} deep; no objects), or null. Numbers are finite (send "
                    'NaN / Infinity as the strings "NaN" / "Infinity" / "-Infinity"); '
                    f"integers are kept exact, however large (up to {MAX_INT_DIGITS} digits)."),
}
_ENV_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "object", "additionalProperties": {"anyOf": [
        _SCALAR_SCHEMA, {"type": "array", "items": _SCALAR_SCHEMA},
        {"type": "object", "additionalProperties": _SCALAR_SCHEMA}]}}, {"type": "null"}],
    "default": None,
    "description": "host, pid, cluster, job id, software versions: scalars, lists of scalars, "
                   "or one level of objects of scalars",
}
_TIME_SCHEMA: dict[str, Any] = {
    "type": "number", "minimum": 0, "exclusiveMaximum": MAX_TIME,
    "description": f"seconds since the epoch (UTC), fractions allowed; below {MAX_TIME} (the "
                   "end of year 9999): milliseconds (JavaScript's Date.now()) are refused",
}
_INDEX_SCHEMA: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}


def _scalar_problem(v: Any) -> str | None:
    """Why ``v`` is not a scalar an event may carry (None if it is one)."""
    if v is None or isinstance(v, (bool, int, str)):
        return None
    if isinstance(v, float):
        return None if math.isfinite(v) else "NaN / Infinity " + NON_FINITE_REFUSED
    return "must be a JSON scalar (string, number, boolean) or null"


def _too_deep(v: list[Any], limit: int) -> bool:
    """Does the list nest more than ``limit`` deep (looking no deeper than that)?"""
    level = [x for x in v if isinstance(x, list)]
    for _ in range(limit):
        if not level:
            return False
        level = [y for x in level for y in x if isinstance(y, list)]
    return bool(level)


def _list_problem(v: list[Any], at: str) -> str | None:
    for i, x in enumerate(v):
        if isinstance(x, list):
            problem = _list_problem(x, f"{at}[{i}]")
            if problem:
                return problem
        elif x is not None and not isinstance(x, (bool, int, float, str)):
            return (f"item {at}[{i}]: list items must be JSON scalars, lists or null "
                    "(objects are not values)")
        else:
            problem = _scalar_problem(x)
            if problem:
                return f"item {at}[{i}]: {problem}"
    return None


_PLAIN = (str, int, bool, type(None))


def _too_large(size: int, what: str) -> str:
    return (f"{what} of {size:,} bytes is too large to store as one value (limit "
            f"{MAX_VALUE_BYTES:,} bytes as UTF-8 JSON): keep big content in a file and record "
            "its location (capture.ref)")


def _check_value(v: Any) -> Any:
    # the common cases first: this runs once per captured value on the accept path
    if type(v) in _PLAIN or (type(v) is float and -math.inf < v < math.inf):
        if type(v) is str and len(v) > MAX_VALUE_BYTES // 4 and \
                (size := len(v.encode("utf-8", "surrogatepass"))) > MAX_VALUE_BYTES:
            raise ValueError(_too_large(size, "a string"))
        return v
    if isinstance(v, list):
        if _too_deep(v, MAX_VALUE_DEPTH - 1):
            raise ValueError(f"lists may nest at most {MAX_VALUE_DEPTH} deep")
        problem = _list_problem(v, "")
        if not problem and (size := json_size(v)) > MAX_VALUE_BYTES:
            # refused here: accepted, the queue worker's store would refuse it later, and the
            # batch would be set aside with every other event in it
            problem = _too_large(size, "a list")
    elif isinstance(v, dict):
        problem = ("objects are not values: send a JSON scalar, a list or null (a record as "
                   "several values, or data by reference with location)")
    else:
        problem = _scalar_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def _check_environment(env: dict[str, Any]) -> dict[str, Any]:
    for key, v in env.items():
        if isinstance(v, list):
            problem = next((f"item [{i}]: {p}" for i, x in enumerate(v)
                            if (p := _scalar_problem(x))), None)
        elif isinstance(v, dict):
            problem = next((f"{k!r}: {p}" if isinstance(k, str) else "keys must be strings"
                            for k, x in v.items()
                            if not isinstance(k, str) or (p := _scalar_problem(x))), None)
        else:
            problem = _scalar_problem(v)
        if problem:
            raise ValueError(f"{key[:64]!r}: {problem}")
    if (size := json_size(env)) > MAX_VALUE_BYTES:  # stored as one rdf:JSON literal
        raise ValueError(_too_large(size, "an environment"))
    return env


def _check_int(v: Any) -> int | None:
    if v is None or type(v) is int:
        return v
    if type(v) is float and v.is_integer():  # 1.0: an integer to JSON Schema and JavaScript
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("must be an integer")  # noqa: TRY004 (pydantic reports ValueErrors)
    return v


def _time_hint(t: float) -> str:
    for factor, unit, source in ((1e3, "milliseconds", "JavaScript's Date.now()"),
                                 (1e6, "microseconds", ""),
                                 (1e9, "nanoseconds", "Python's time.time_ns()")):
        if t < MAX_TIME * factor:
            return (f"; this looks like {unit} since the epoch"
                    f"{f' ({source})' if source else ''}: divide by {factor:.0f}")
    return ""


def _check_time(t: Any) -> Any:
    if type(t) is float and 0 <= t < MAX_TIME:  # the common case (NaN fails the comparison)
        return t
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise ValueError("must be a number: seconds since the epoch (UTC)")  # noqa: TRY004
    if isinstance(t, float) and not math.isfinite(t):
        raise ValueError("must be a finite number of seconds since the epoch (UTC): NaN / "
                         "Infinity " + NON_FINITE_REFUSED)
    if t < 0:
        raise ValueError("must be seconds since the epoch (UTC), 0 or more")
    if t >= MAX_TIME:
        raise ValueError(f"must be seconds since the epoch (UTC) below {MAX_TIME} (the end of "
                         "year 9999, the last time xsd:dateTime can write)" + _time_hint(t))
    return t


Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME)]
Uri = Annotated[StrictStr, Field(min_length=1, max_length=MAX_URI, pattern=URI_PATTERN)]
Seconds = Annotated[Any, AfterValidator(_check_time), WithJsonSchema(_TIME_SCHEMA)]
JsonValue = Annotated[Any, AfterValidator(_check_value), WithJsonSchema(_VALUE_SCHEMA)]
Index = Annotated[Any, AfterValidator(_check_int), WithJsonSchema(_INDEX_SCHEMA)]
Environment = Annotated[dict[StrictStr, Any], AfterValidator(_check_environment)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True,
                              allow_inf_nan=False)


_NOT_AN_IRI = ("must be an absolute IRI of the domain KG (https://kg.example.org/well/7: "
               "scheme:..., no spaces or <>\"{}|^`\\, % only as %XX, a numeric port)")


class Value(_Model):
    """One used or generated value: a scalar, a list, null, or data by reference."""

    name: Name
    value: JsonValue = None
    id: Id | None = None
    location: Uri | None = None
    domain: Uri | None = None
    derived_from: list[Id] | None = None

    @field_validator("domain")
    @classmethod
    def _domain_is_an_iri(cls, v: str | None) -> str | None:
        # it becomes an IRI node of the graph, so it must be one RDF stores accept
        if v is not None and not is_valid_iri(v):
            raise ValueError(_NOT_AN_IRI)
        return v


class _EventBase(_Model):
    event: Literal["begin", "end"]
    id: Id
    time: Seconds
    status: Literal["finished", "failed"] | None = None
    message: StrictStr | None = None
    used: list[Value] = Field(default_factory=list)
    generated: list[Value] = Field(default_factory=list)
    agent: Name | None = None
    environment: Annotated[Environment | None, WithJsonSchema(_ENV_SCHEMA)] = None

    @field_validator("used", "generated")
    @classmethod
    def _names_once(cls, values: list[Value], info: Any) -> list[Value]:
        # two values of one name (say two losses) land on one node with two values, and the
        # per-batch and summary forms of the graph then disagree on which one counts
        first: dict[str, int] = {}
        for i, v in enumerate(values):
            if v.name in first:
                verb = "uses" if info.field_name == "used" else "generates"
                raise ValueError(f"the name of [{i}] repeats that of [{first[v.name]}]: each "
                                 f"value an event {verb} needs a name of its own")
            first[v.name] = i
        return values

    # the published schema says it too, so a client validating with it gets no surprise 422s
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"event": {"const": "begin"}}, "required": ["event"]},
        "then": {"not": {"required": ["status"]}}})

    @model_validator(mode="after")
    def _status_only_on_end(self) -> _EventBase:
        if self.event == "begin" and self.status is not None:
            raise ValueError("status belongs to end events only")
        return self


class WorkflowEvent(_EventBase):
    """Begin or end of a workflow run."""

    type: Literal["workflow"]
    workflow: Name


class TaskEvent(_EventBase):
    """Begin or end of a task: one execution of a prospective transformation."""

    type: Literal["task"]
    workflow_id: Id
    transformation: Name
    parent: Id | None = None
    index: Index = None
    dependencies: list[Id] | None = None


Event = Annotated[Union[WorkflowEvent, TaskEvent], Field(discriminator="type")]


class Batch(_Model):
    """The envelope every transport carries."""

    format: Literal[FORMAT]
    events: list[Event]


_EVENT = TypeAdapter(Event)


def default_value_id(task_id: str, name: str, *, used: bool, run: bool = False) -> str:
    """The id of a value the client sent without one (design decision S4): the task id, then
    ``used/`` for a value the task used, then the name; a value of a workflow run itself
    (``run=True``, ``task_id`` its run id) under ``run/``. Different (task or run, name, side)
    never give the same id:

    * a '/' or '%' in the name is percent-encoded, so task ``job`` generating ``train/loss``
      and task ``job/train`` generating ``loss`` stay two values;
    * in the task id, '%' is encoded and a last segment ``used`` is written ``%75sed``, so
      task ``job/used`` generating ``lr`` and task ``job`` using ``lr`` stay two values;
    * a first segment ``run`` of a task id is written ``%72un``, so run ``exp.1`` and the task
      ``exp.1`` of run ``exp`` (the capture library's ids) keep their values apart;
    * a ':' in the first segment of a task id is written ``%3A``, so a derived id never reads
      as a URI: task ``s3://bucket/job`` generating ``model`` and a value at the location
      ``s3://bucket/job/model`` (whose id is that location) stay two values.

    >>> default_value_id("job", "train/loss", used=False), default_value_id("t", "lr", used=True)
    ('job/train%2Floss', 't/used/lr')
    >>> default_value_id("job/used", "lr", used=False)
    'job/%75sed/lr'
    >>> default_value_id("exp.1", "lr", used=True, run=True), default_value_id("run/x", "lr", used=True)
    ('run/exp.1/used/lr', '%72un/x/used/lr')
    >>> default_value_id("s3://bucket/job", "model", used=False)
    's3%3A//bucket/job/model'
    """
    if "/" in name or "%" in name:
        name = name.replace("%", "%25").replace("/", "%2F")
    if "%" in task_id:
        task_id = task_id.replace("%", "%25")
    if task_id == "used" or task_id.endswith("/used"):
        task_id = task_id[:-4] + "%75sed"
    if run:
        task_id = "run/" + task_id
    elif task_id == "run" or task_id.startswith("run/"):
        task_id = "%72un" + task_id[3:]
    else:
        head, slash, rest = task_id.partition("/")
        if ":" in head:  # a scheme: the id would read as a location's
            task_id = head.replace(":", "%3A") + slash + rest
    return f"{task_id}/used/{name}" if used else f"{task_id}/{name}"


def value_id(value: Value, task_id: str, *, used: bool) -> str:
    """A value's stable id: its own, else its location (so the same data used by
    several workflows is one node), else one derived from its task and name."""
    if value.id is not None:
        return value.id
    if value.location is not None:
        return location_form(value.location)
    return default_value_id(task_id, value.name, used=used)


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
            msg = _NOT_AN_IRI  # one message for a domain IRI, whichever check refused it
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
        return _EVENT.validate_python(data)
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


def event_schema() -> dict[str, Any]:
    """JSON Schema of one event (for clients in other languages)."""
    return _EVENT.json_schema()


def batch_schema() -> dict[str, Any]:
    """JSON Schema of the batch envelope."""
    schema = Batch.model_json_schema()
    schema["$id"] = "https://w3id.org/provkg/schema/events-1.json"
    schema["title"] = "provkg capture batch, wire format v1"
    return schema


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(batch_schema(), indent=2))
