"""The models of wire format v1: values, workflow and task events, the batch envelope.

Strict pydantic models: unknown fields are refused, numbers must be finite, times lie in
``0 .. MAX_TIME``, and every value stays within the limits of :mod:`provkg.wire` (the ones the
capture library fits values to). Their JSON Schema is published for clients in other
languages (:func:`event_schema`, :func:`batch_schema`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    TypeAdapter,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from provkg.term import is_valid_iri, json_size
from provkg.wire import (
    FORMAT,
    KINDS,
    MAX_ID,
    MAX_INT_DIGITS,
    MAX_NAME,
    MAX_TAG_VALUE,
    MAX_TAGS,
    MAX_TIME,
    MAX_URI,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    NON_FINITE_REFUSED,
    PHASES,
    ROLES,
    URI_PATTERN,
)

__all__ = [
    "EVENT_ADAPTER", "NOT_AN_IRI", "Batch", "Event", "TaskEvent", "Value", "WorkflowEvent",
    "batch_schema", "event_schema",
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


#: what a domain IRI must look like (the models and the error rendering say it alike)
Kind = Literal["transformation", "training", "validation", "evaluation", "section",
               "feature_extraction", "adaptation"]
Role = Literal["hyperparameter", "model_hyperparameter", "model", "model_schema",
               "evaluation_measure", "dataset", "dataset_characteristic", "feature_set",
               "data_reference", "domain_reference", "plain"]
Phase = Literal["curation", "preparation", "learning"]
if (get_args(Kind), get_args(Role), get_args(Phase)) != (KINDS, ROLES, PHASES):
    raise RuntimeError("events.models' Kind / Role / Phase differ from wire's KINDS / ROLES / PHASES")

NOT_AN_IRI = ("must be an absolute IRI of the domain KG (https://kg.example.org/well/7: "
               "scheme:..., no spaces or <>\"{}|^`\\, % only as %XX, a numeric port)")


class Value(_Model):
    """One used or generated value: a scalar, a list, null, or data by reference."""

    name: Name
    value: JsonValue = None
    id: Id | None = None
    location: Uri | None = None
    domain: Uri | None = None
    derived_from: list[Id] | None = None
    #: what the value is (a spec attribute's role), for a workflow without a written spec
    role: Role | None = None

    @field_validator("domain")
    @classmethod
    def _domain_is_an_iri(cls, v: str | None) -> str | None:
        # it becomes an IRI node of the graph, so it must be one RDF stores accept
        if v is not None and not is_valid_iri(v):
            raise ValueError(NOT_AN_IRI)
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
    #: the workflow's phase (a spec's ``phase``), for a workflow without a written spec
    phase: Phase | None = None
    #: a readable name of the run (a trainer's or logger's run name); begin events
    label: StrictStr | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    #: key -> value text, set by the user or the framework (``{"team": "seismic"}``)
    tags: dict[Name, Annotated[StrictStr, Field(max_length=MAX_TAG_VALUE)]] | None = Field(
        default=None, max_length=MAX_TAGS)


class TaskEvent(_EventBase):
    """Begin or end of a task: one execution of a prospective transformation."""

    type: Literal["task"]
    workflow_id: Id
    transformation: Name
    parent: Id | None = None
    index: Index = None
    dependencies: list[Id] | None = None
    #: what the transformation is (a spec's ``kind``), for a workflow without a written spec
    kind: Kind | None = None
    #: sections: kept in full, as per-parent summaries, or both (a spec's ``granularity``)
    granularity: Literal["full", "summary", "both"] | None = None


Event = Annotated[WorkflowEvent | TaskEvent, Field(discriminator="type")]

#: the envelope's ``format`` tag as a type: a Literal takes a value, not a variable, so it
#: spells out wire.FORMAT, and the check below keeps the two the same
_FormatTag = Literal["provkg.events/1"]
if get_args(_FormatTag) != (FORMAT,):
    raise RuntimeError(f"Batch.format spells {get_args(_FormatTag)}, wire.FORMAT is {FORMAT!r}")


class Batch(_Model):
    """The envelope every transport carries."""

    format: _FormatTag
    events: list[Event]


#: validates one event of either type (the discriminated union has no class of its own)
EVENT_ADAPTER = TypeAdapter(Event)


def event_schema() -> dict[str, Any]:
    """JSON Schema of one event (for clients in other languages)."""
    return EVENT_ADAPTER.json_schema()


def batch_schema() -> dict[str, Any]:
    """JSON Schema of the batch envelope."""
    schema = Batch.model_json_schema()
    schema["$id"] = "https://w3id.org/provkg/schema/events-1.json"
    schema["title"] = "provkg capture batch, wire format v1"
    return schema
