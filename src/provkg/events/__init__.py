"""Wire format v1 of capture events (docs/reference/wire-format.md), as strict pydantic models.

A batch is ``{"format": "provkg.events/1", "events": [...]}``; on disk one event
per line (JSONL). Unknown fields are refused, and every error names the JSON
path of the bad field (``events[3].used[0].value``) without echoing the
submitted value. This package imports no RDF, store or web package: the
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

Its parts: the models (:mod:`.models`), decoding and validating text (:mod:`.decoding`) and
the stable ids of values (:mod:`.ids`); every name is importable from ``provkg.events``.
"""

from __future__ import annotations

from provkg.events.decoding import (
    NotJson,
    load_json,
    load_json_line,
    parse_batch,
    parse_event,
    parse_events_jsonl,
)
from provkg.events.ids import default_value_id, value_id
from provkg.events.models import (
    Batch,
    Event,
    TaskEvent,
    Value,
    WorkflowEvent,
    batch_schema,
    event_schema,
)

# the wire format's name and limits are provkg.wire's (one table, shared with the capture
# library); importable from here too
from provkg.wire import (  # noqa: F401
    FORMAT,
    MAX_ID,
    MAX_INT_DIGITS,
    MAX_NAME,
    MAX_TIME,
    MAX_URI,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    strip_bom,
)

__all__ = [
    "FORMAT", "MAX_VALUE_DEPTH", "MAX_TIME", "NotJson", "Value",
    "WorkflowEvent", "TaskEvent", "Event", "Batch", "load_json", "load_json_line", "strip_bom",
    "parse_batch", "parse_event", "parse_events_jsonl", "event_schema", "batch_schema",
    "default_value_id", "value_id",
]
