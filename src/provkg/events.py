"""Wire format v1 of capture events (DESIGN.md section 3), as strict pydantic models.

A batch is ``{"format": "provkg.events/1", "events": [...]}``; on disk one event
per line (JSONL). Unknown fields are refused, and every error names the JSON
path of the bad field (``events[3].used[0].value``) without echoing the
submitted value. This module imports no RDF, store or web package: the
capture library depends on it.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from provkg.errors import BadEvent
from provkg.term import is_valid_iri

__all__ = [
    "FORMAT", "MAX_VALUE_DEPTH", "Value", "WorkflowEvent", "TaskEvent", "Event", "Batch",
    "parse_batch", "parse_event", "parse_events_jsonl", "event_schema", "batch_schema",
    "default_value_id", "value_id",
]

FORMAT = "provkg.events/1"
#: nesting depth allowed inside a value's list (deeper input is refused)
MAX_VALUE_DEPTH = 8

Scalar = Union[StrictBool, StrictInt, StrictFloat, StrictStr, None]
Id = Annotated[StrictStr, Field(min_length=1, max_length=1024)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=256)]
Uri = Annotated[StrictStr, Field(min_length=1, max_length=4096, pattern=r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|^`\\]*$")]
Seconds = Annotated[Union[StrictInt, StrictFloat], Field(ge=0)]


def _depth(v: Any) -> int:
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Value(_Model):
    """One used or generated value: a scalar, a list, null, or data by reference."""

    name: Name
    value: Union[Scalar, list[Any]] = None
    id: Id | None = None
    location: Uri | None = None
    domain: Uri | None = None
    derived_from: list[Id] | None = None

    @field_validator("domain")
    @classmethod
    def _domain_is_an_iri(cls, v: str | None) -> str | None:
        # it becomes an IRI node of the graph, so it must be one RDF stores accept
        if v is not None and not is_valid_iri(v):
            raise ValueError("must be an absolute IRI (scheme:..., no spaces or <>\"{}|^`\\, "
                             "% only as %XX, a numeric port)")
        return v

    @field_validator("value")
    @classmethod
    def _plain_json(cls, v: Any) -> Any:
        if isinstance(v, list):
            if _depth(v) > MAX_VALUE_DEPTH:
                raise ValueError(f"lists may nest at most {MAX_VALUE_DEPTH} deep")
            _check_json_list(v)
        return v


def _check_json_list(v: list[Any]) -> None:
    for x in v:
        if isinstance(x, list):
            _check_json_list(x)
        elif not (x is None or isinstance(x, (bool, int, float, str))):
            raise ValueError("list items must be JSON scalars, lists or null (objects are not values)")


class _EventBase(_Model):
    event: Literal["begin", "end"]
    id: Id
    time: Seconds
    status: Literal["finished", "failed"] | None = None
    message: StrictStr | None = None
    used: list[Value] = Field(default_factory=list)
    generated: list[Value] = Field(default_factory=list)
    agent: Name | None = None
    environment: dict[StrictStr, Union[Scalar, list[Scalar], dict[StrictStr, Scalar]]] | None = None

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
    index: StrictInt | None = None
    dependencies: list[Id] | None = None


Event = Annotated[Union[WorkflowEvent, TaskEvent], Field(discriminator="type")]


class Batch(_Model):
    """The envelope every transport carries."""

    format: Literal["provkg.events/1"]
    events: list[Event]


_EVENT = TypeAdapter(Event)


def default_value_id(task_id: str, name: str, *, used: bool) -> str:
    """The id of a value the client sent without one (design decision S4)."""
    return f"{task_id}/used/{name}" if used else f"{task_id}/{name}"


def value_id(value: Value, task_id: str, *, used: bool) -> str:
    """A value's stable id: its own, else its location (so the same data used by
    several workflows is one node), else one derived from its task and name."""
    if value.id is not None:
        return value.id
    if value.location is not None:
        return value.location
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
        msg = err["msg"]
        if err["type"] == "union_tag_invalid":  # pydantic's text echoes the submitted tag
            msg = "'type' must be 'workflow' or 'task'"
        if msg not in msgs:
            msgs.append(msg)
    lines = []
    for path, msgs in by_path.items():
        msg = msgs[0] if len(msgs) == 1 else "not a valid value of this field (" + " / ".join(
            m.removeprefix("Input should be ") for m in msgs) + ")"
        lines.append(f"{where}{path}: {msg}")
    more = f" (and {len(lines) - 20} more)" if len(lines) > 20 else ""
    return BadEvent("; ".join(lines[:20]) + more)


def parse_batch(data: bytes | str | dict[str, Any]) -> Batch:
    """Validate a batch (JSON text or an already-decoded object).

    Raises:
        BadEvent: naming the path of each bad field, e.g. ``events[2].time: ...``.
    """
    try:
        if isinstance(data, dict):
            return Batch.model_validate(data)
        return Batch.model_validate_json(data)
    except ValidationError as exc:
        raise _bad(exc) from None


def parse_event(data: bytes | str | dict[str, Any], *, where: str = "") -> WorkflowEvent | TaskEvent:
    """Validate one event. ``where`` prefixes error paths (``"line 7: "``)."""
    try:
        if isinstance(data, dict):
            return _EVENT.validate_python(data)
        return _EVENT.validate_json(data)
    except ValidationError as exc:
        raise _bad(exc, where=where) from None


def parse_events_jsonl(lines: Any, *, source: str = "") -> Any:
    """Yield events from JSONL lines; errors name the source and line number."""
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        if not line.strip():
            continue
        yield parse_event(line, where=f"{source}{':' if source else 'line '}{n}: ")


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
