"""Events to bytes, once: the background thread serializes each event a single time.

An encoded event is one JSON text followed by ``\\n`` (a JSONL line). The same lines make a file
segment (``b"".join(lines)``), a spool segment, and an HTTP / MQTT batch envelope (the newline
is JSON whitespace, so the lines can be joined with commas as they are). A spooled batch is
therefore never parsed and serialized again on its way to a built-in sink.

Values are the bulk of an event. The wire form ``[{"name": n, "value": v}, ...]`` would cost one
small dict per value; for the common case -- scalars without ',' or ':' in their JSON -- the
list is rewritten from one ``orjson.dumps`` of the ``name -> value`` snapshot by C-level byte
operations (a translate and two single-byte replaces). Anything else (None, NaN, lists, refs,
names or strings holding ',' or ':', invalid names) takes the dict path. Both give the same
JSON value (tests/test_capture_encoding.py checks it property by property).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from orjson import Fragment

from provkg.capture.expand import expand_values, fit_wire_values, valid_names
from provkg.capture.report import report_once
from provkg.capture.values import MAX_STRING
from provkg.wire import FORMAT
from provkg.wire import loads_own as loads_exact

__all__ = ["FORMAT", "encode_event", "encode_events", "envelope", "expand_events", "loads_exact",
           "values_json"]

# FORMAT (the batch envelope's format tag) is provkg.wire's, re-exported here
_HEAD = b'{"format":"' + FORMAT.encode() + b'","events":['
_TAIL = b"]}"
_NEWLINE = orjson.OPT_APPEND_NEWLINE


def expand_events(batch: list[dict[str, Any]]) -> None:
    """Turn the caller's value snapshots (``name -> value`` dicts) into wire value lists, in place
    (for sinks that take event dicts). Events expanded already are left as they are."""
    for event in batch:
        for key in ("used", "generated"):
            values = event.get(key)
            if type(values) is dict:
                if values:
                    event[key] = expand_values(values)
                else:
                    del event[key]


def encode_events(batch: list[dict[str, Any]]) -> list[bytes]:
    """Serialize each event once: one newline-terminated JSON line per event. The event dicts
    are left as they were; an event that cannot be written at all is logged and left out."""
    lines: list[bytes] = []
    append = lines.append
    for event in batch:
        line = encode_event(event)
        if line is not None:
            append(line)
    return lines


def encode_event(event: dict[str, Any]) -> bytes | None:
    """One event as a newline-terminated JSON line (values in wire form), or None (logged).
    The event dict is left as it was."""
    used = event.get("used")
    generated = event.get("generated")
    try:
        if used:
            event["used"] = Fragment(values_json(used))
        elif used is not None:
            del event["used"]  # empty: left out
        if generated:
            event["generated"] = Fragment(values_json(generated))
        elif generated is not None:
            del event["generated"]
        return orjson.dumps(event, option=_NEWLINE)
    except Exception:  # orjson.JSONEncodeError: an integer beyond 64 bits, a lone surrogate
        try:
            return _fallback(event, used, generated)
        except Exception as exc:  # never the delivery thread's failure: only this event's
            report_once(("encode-event", type(exc)), f"an event of {event.get('id')!r} could "
                        f"not be written as JSON and is left out: {exc!r}")
            return None
    finally:
        if used is not None:
            event["used"] = used
        if generated is not None:
            event["generated"] = generated


def values_json(values: dict[str, Any] | list[dict[str, Any]]) -> bytes:
    """The JSON of the wire value list for a snapshot (``name -> value``) or an expanded list.

    Raises:
        TypeError: a value orjson cannot write (the caller falls back to ``json``).
    """
    if type(values) is not dict:
        return orjson.dumps(values)
    if valid_names(values):
        try:
            body = orjson.dumps(values)[1:-1].translate(_MARKS)
        except TypeError:  # a huge int: the dict path finds it
            body = b""
        # With ':' and ',' marked as \0 and \1, a value that begins with 'n' is null (None,
        # NaN or inf: the dict path writes NaN and inf as strings) and one that begins with '['
        # a list (which may hold a NaN): both are left to the dict path.
        # (a body longer than MAX_STRING may hold a string too long to send: the dict path
        # leaves such a value out)
        if len(body) <= MAX_STRING and body.find(b"\0n") < 0 and body.find(b"\0[") < 0:
            out = body.replace(b"\1", b'},{"name":').replace(b"\0", b',"value":')
            # '"a":1,"b":"x"' has one ':' per value and one ',' between values, unless a name or
            # a value holds some (a ref, "a,b" ...): each of those would lengthen the result
            n = len(values)
            if len(out) == len(body) + 9 * (n - 1) + 8 * n:
                return b"".join((b'[{"name":', out, b"}]"))
    return orjson.dumps(expand_values(values))


#: ':' -> \0 and ',' -> \1 (bytes orjson never writes: control characters are escaped)
_MARKS = bytes.maketrans(b":,", b"\0\1")


def _fallback(event: dict[str, Any], used: Any, generated: Any) -> bytes | None:
    whole = {k: v for k, v in event.items() if k not in ("used", "generated")}
    if used:
        whole["used"] = fit_wire_values(used) if type(used) is not dict else expand_values(used)
    if generated:
        whole["generated"] = fit_wire_values(generated) if type(generated) is not dict \
            else expand_values(generated)
    try:
        return _dumps(whole, event)
    except (TypeError, ValueError, RecursionError) as exc:
        # one value the JSON writer refuses must not take the event with it: leave out those
        # values (each logged), keep the rest
        for key in ("used", "generated"):
            if whole.get(key):
                whole[key] = [v for v in whole[key] if _writable(v, event)]
        try:
            return _dumps(whole, event)
        except (TypeError, ValueError, RecursionError):
            pass
        report_once(("encode", type(exc)), f"an event of {event.get('id')!r} could not be written "
                    f"as JSON and is left out: {exc}")
        return None


def _dumps(whole: dict[str, Any], event: dict[str, Any]) -> bytes:
    text = json.dumps(whole, ensure_ascii=False, allow_nan=False, default=str)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: no JSON reader takes one
        report_once(("surrogate",), f"an event of {event.get('id')!r} holds text that is not "
                    "valid Unicode (a file name read with surrogateescape?); those characters "
                    "are written as backslash escapes")
        return json.dumps(_valid_text(whole), ensure_ascii=False, allow_nan=False,
                          default=str).encode() + b"\n"


def _writable(value: Any, event: dict[str, Any]) -> bool:
    try:
        json.dumps(value, allow_nan=False, default=str)
        return True
    except (TypeError, ValueError, RecursionError) as exc:
        name = value.get("name") if type(value) is dict else None
        report_once(("encode-value", type(exc)), f"value {str(name)[:40]!r} of {event.get('id')!r} "
                    f"could not be written as JSON and is left out: {exc}")
        return False


def _valid_text(value: Any) -> Any:
    """``value`` with every string made encodable: lone surrogates become backslash escapes
    (``surrogateescape`` bytes as ``\\xff``, others as ``\\udcff``), so nothing else is lost."""
    if isinstance(value, str):
        try:
            value.encode()
            return value
        except UnicodeEncodeError:
            try:
                return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                return value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid_text(v) for v in value]
    return value


def envelope(lines: list[bytes]) -> bytes:
    """The batch envelope ``{"format": ..., "events": [...]}`` made of encoded lines."""
    return b"".join((_HEAD, b",".join(lines), _TAIL))
