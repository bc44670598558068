"""provkg.wire is the one home of the wire format's name, limits and JSON rule.

The server's models (provkg.events) refuse exactly past each limit of provkg.wire, and the
capture library keeps exactly what the server accepts: a value or id it keeps at a limit
passes the server's validation, one past it is fitted (cut, converted to text) or left out.
Everything the server sees is JSON text decoded by its own rule, so each check goes through
JSON, as a batch from the capture library does.
"""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provkg import capture, events, wire
from provkg.capture import encoding
from provkg.capture import values as client
from provkg.errors import BadEvent

# -- the module itself -----------------------------------------------------------------------


def test_wire_imports_only_the_standard_library_and_orjson() -> None:
    tree = ast.parse(Path(wire.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert imported - sys.stdlib_module_names == {"orjson"}
    # and in a fresh process: nothing beyond what `import provkg` itself loads, no pydantic
    code = ("import sys, json; import provkg; before = set(sys.modules); import provkg.wire; "
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, check=True).stdout)
    assert [m for m in loaded if m.startswith(("provkg", "pydantic"))] == ["provkg.wire"]


def test_every_old_home_re_exports_the_one_constant() -> None:
    assert events.FORMAT is wire.FORMAT and encoding.FORMAT is wire.FORMAT
    assert events.MAX_TIME is wire.MAX_TIME and events.MAX_VALUE_DEPTH is wire.MAX_VALUE_DEPTH
    assert events.MAX_VALUE_BYTES is wire.MAX_VALUE_BYTES
    for name in ("MAX_NAME", "MAX_ID", "MAX_URI", "MAX_INT_DIGITS", "MAX_VALUE_BYTES"):
        assert getattr(client, name) is getattr(wire, name), name
    assert client.MAX_DEPTH is wire.MAX_VALUE_DEPTH
    assert capture.MAX_ITEMS is client.MAX_ITEMS
    assert events.strip_bom is wire.strip_bom
    # the published schema states the limits the models apply
    schema = json.dumps(events.batch_schema())
    assert f'"maxLength": {wire.MAX_ID}' in schema and f'"maxLength": {wire.MAX_NAME}' in schema
    assert f'"maxLength": {wire.MAX_URI}' in schema and f'"const": "{wire.FORMAT}"' in schema
    assert f"up to {wire.MAX_INT_DIGITS} digits" in schema
    assert f'"exclusiveMaximum": {wire.MAX_TIME}' in schema


# -- the server's models draw each line at wire's limit ---------------------------------------


def _task(**fields: Any) -> dict[str, Any]:
    return {"type": "task", "event": "begin", "id": "t", "time": 1.0, "workflow_id": "w",
            "transformation": "x", **fields}


def _workflow(**fields: Any) -> dict[str, Any]:
    return {"type": "workflow", "event": "begin", "id": "r", "time": 1.0, "workflow": "x",
            **fields}


def _accepted(event: dict[str, Any] | str) -> bool:
    """Does the server take this event, sent as JSON text (as every transport carries it)?"""
    try:
        events.parse_event(event if isinstance(event, str) else json.dumps(event))
    except BadEvent:
        return False
    return True


def _at_and_past(limit: int, make: Any) -> tuple[bool, bool]:
    return _accepted(make(limit)), _accepted(make(limit + 1))


@pytest.mark.parametrize("make", [
    lambda n: _task(transformation="n" * n),
    lambda n: _task(agent="a" * n),
    lambda n: _workflow(workflow="w" * n),
    lambda n: _task(used=[{"name": "v" * n}]),
    lambda n: _task(generated=[{"name": "v" * n}]),
], ids=["transformation", "agent", "workflow", "used-name", "generated-name"])
def test_names_are_1_to_MAX_NAME_characters(make: Any) -> None:
    assert _at_and_past(wire.MAX_NAME, make) == (True, False)
    assert not _accepted(make(0))


@pytest.mark.parametrize("make", [
    lambda n: _task(id="i" * n),
    lambda n: _workflow(id="r" * n),
    lambda n: _task(workflow_id="w" * n),
    lambda n: _task(parent="p" * n),
    lambda n: _task(dependencies=["ok", "d" * n]),
    lambda n: _task(used=[{"name": "v", "id": "i" * n}]),
    lambda n: _task(used=[{"name": "v", "derived_from": ["s" * n]}]),
], ids=["task-id", "run-id", "workflow_id", "parent", "dependencies", "value-id", "derived_from"])
def test_ids_are_1_to_MAX_ID_characters(make: Any) -> None:
    assert _at_and_past(wire.MAX_ID, make) == (True, False)
    assert not _accepted(make(0))


@pytest.mark.parametrize("field, head", [("location", "s3://b/"), ("domain", "https://kg.org/")])
def test_uris_are_1_to_MAX_URI_characters(field: str, head: str) -> None:
    def make(n: int) -> dict[str, Any]:
        return _task(used=[{"name": "v", field: head + "k" * (n - len(head))}])

    assert _at_and_past(wire.MAX_URI, make) == (True, False)
    assert not _accepted(_task(used=[{"name": "v", field: ""}]))


def test_uris_follow_URI_PATTERN() -> None:
    # the same pattern decides for the server (pydantic) and the client (Python's re)
    import re

    uri = re.compile(wire.URI_PATTERN)
    for text in ("file:///a.csv", "s3://b/k", "urn:x", "x+y.z-w:rest", "file:///a b", "a.csv",
                 "1http://x", "http://x/<y>", "http://x/{y}", "http://x/a\\b", "http://x/`",
                 "http://x/\u00e9", ":x", "file:///a\tb"):
        server = _accepted(_task(used=[{"name": "v", "location": text}]))
        assert server == bool(uri.match(text)), text


def _with_value(value_json: str, *, field: str = "value") -> str:
    """A task event as JSON text whose one used value (or ``index``) is ``value_json``."""
    if field == "index":
        return json.dumps(_task())[:-1] + ', "index": ' + value_json + "}"
    return json.dumps(_task())[:-1] + ', "used": [{"name": "v", "value": ' + value_json + "}]}"


@pytest.mark.parametrize("field", ["value", "index"])
@pytest.mark.parametrize("sign", ["", "-"])
def test_integers_have_at_most_MAX_INT_DIGITS_digits(field: str, sign: str) -> None:
    digits = wire.MAX_INT_DIGITS
    at, past = sign + "9" * digits, sign + "9" * (digits + 1)
    event = events.parse_event(_with_value(at, field=field))
    kept = event.index if field == "index" else event.used[0].value
    assert kept == int(at)  # exact, not a double
    with pytest.raises(BadEvent, match=f"more than {digits} digits"):
        events.parse_event(_with_value(past, field=field))
    with pytest.raises(BadEvent, match=f"more than {digits} digits"):
        events.load_json_line(_with_value(past, field=field).encode(), lambda: "line 1: ")


def test_lists_nest_at_most_MAX_VALUE_DEPTH_deep() -> None:
    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value

    assert _at_and_past(wire.MAX_VALUE_DEPTH,
                        lambda n: _task(used=[{"name": "v", "value": nested(n)}])) == (True, False)


def test_a_value_and_an_environment_are_at_most_MAX_VALUE_BYTES() -> None:
    limit = wire.MAX_VALUE_BYTES
    # a string: its UTF-8 bytes (2 a character here); a list and an environment: compact JSON
    assert _accepted(_task(used=[{"name": "v", "value": "é" * (limit // 2)}]))
    assert not _accepted(_task(used=[{"name": "v", "value": "é" * (limit // 2) + "z"}]))
    # '["' + x + '"]': 4 bytes around the string; '{"k":"' + x + '"}': 8
    assert _at_and_past(limit, lambda n: _task(used=[{"name": "v", "value": ["x" * (n - 4)]}])) \
        == (True, False)
    assert _at_and_past(limit, lambda n: _task(environment={"k": "x" * (n - 8)})) == (True, False)


def test_times_are_below_MAX_TIME_and_the_format_is_FORMAT() -> None:
    assert _accepted(_task(time=wire.MAX_TIME - 0.5))
    assert not _accepted(_task(time=wire.MAX_TIME))
    batch = {"format": wire.FORMAT, "events": [_task()]}
    assert events.parse_batch(json.dumps(batch)).format == wire.FORMAT
    with pytest.raises(BadEvent, match="format"):
        events.parse_batch(json.dumps({**batch, "format": wire.FORMAT + "x"}))


def test_events_load_json_is_wires_rule_with_the_place_named() -> None:
    with pytest.raises(wire.MalformedJson) as plain:
        wire.loads(b'{"a": 1')
    with pytest.raises(events.NotJson) as named:
        events.load_json(b'{"a": 1', where="line 3: ")
    assert str(named.value) == "line 3: " + plain.value.message
    assert (named.value.reason, named.value.line, named.value.column) == \
        (plain.value.reason, plain.value.line, plain.value.column)
    with pytest.raises(wire.RefusedNumbers) as numbers:
        wire.loads('{"events": [{"time": NaN}], "v": [1, Infinity]}')
    assert [path for path, _ in numbers.value.found] == ["events[0].time", "v[1]"]
    assert wire.loads(b'{"n": ' + b"7" * 400 + b"}") == {"n": int("7" * 400)}


# -- the capture library keeps exactly what the server accepts --------------------------------


def _sent(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as the capture library sends them (one encoded line, through the server's
    validator): the name -> value the server keeps."""
    line = encoding.encode_event(_task(used=dict(values)))
    assert line is not None
    return {v.name: v.value for v in events.parse_event(line).used}


def test_values_the_client_keeps_at_each_limit_pass_the_server(
        caplog: pytest.LogCaptureFixture) -> None:
    digits, name = wire.MAX_INT_DIGITS, wire.MAX_NAME
    at, past = 10 ** digits - 1, 10 ** digits  # MAX_INT_DIGITS digits, and one more
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        kept = _sent({"n" * name: 1, "m" * (name + 1): 2, "at": at, "neg": -at, "past": past,
                      "listed": [at, [past]]})
    assert kept == {"n" * name: 1, "at": at, "neg": -at, "past": str(past),
                    "listed": [at, [str(past)]]}
    assert f"at most {name} characters" in caplog.text


def _list_of(size: int) -> list[str]:
    """Strings of at most MAX_STRING characters (the client's own limit) whose list is
    ``size`` bytes of compact JSON."""
    items: list[str] = []
    used = 2  # the brackets
    while True:
        room = size - used - 2 - (1 if items else 0)  # its quotes, and a comma
        items.append("x" * min(room, client.MAX_STRING))
        used += len(items[-1]) + 2 + (1 if len(items) > 1 else 0)
        if used == size:
            assert len(json.dumps(items, separators=(",", ":")).encode()) == size
            return items


def test_lists_the_client_keeps_pass_the_server() -> None:
    depth, limit = wire.MAX_VALUE_DEPTH, wire.MAX_VALUE_BYTES
    deep: Any = 1
    for _ in range(depth):
        deep = [deep]
    assert client.convert_value(deep) == deep
    with pytest.raises(client.Refused, match=f"at most {depth} deep"):
        client.convert_value([deep])
    assert _sent({"deep": deep}) == {"deep": deep}
    exact, over = _list_of(limit), _list_of(limit + 1)
    assert _sent({"exact": exact, "over": over, "y": 1}) == {"exact": exact, "y": 1}
    # the client's own string limit stays within the wire's byte limit, whatever the characters
    widest = "\U0001f600" * client.MAX_STRING  # 4 UTF-8 bytes each
    assert client.MAX_STRING * 4 <= limit and _sent({"s": widest}) == {"s": widest}


def test_ids_indexes_and_uris_the_client_keeps_pass_the_server() -> None:
    ident, uri = wire.MAX_ID, wire.MAX_URI
    assert client.fit_id("i" * ident, "t") == "i" * ident
    assert client.fit_id("i" * (ident + 1), "t") is None
    at = 10 ** wire.MAX_INT_DIGITS - 1
    assert client.fit_index(at) == at and client.fit_index(-at) == -at
    assert client.fit_index(at + 1) is None
    location, domain = "s3://b/" + "k" * (uri - 7), "https://kg.org/" + "d" * (uri - 15)
    ref = capture.ref(location, id="i" * ident, domain=domain, derived_from=["s" * ident])
    assert (ref.location, ref.domain) == (location, domain)
    assert capture.ref(location + "k").location is None
    assert capture.ref(location, domain=domain + "d").domain is None
    line = encoding.encode_event(_task(used={"r": ref}, parent="p" * ident, index=at,
                                       dependencies=["d" * ident]))
    assert line is not None
    sent = events.parse_event(line)
    assert sent.used[0].location == location and sent.used[0].id == "i" * ident
    assert sent.used[0].domain == domain and sent.used[0].derived_from == ["s" * ident]


def test_names_the_client_records_fit_MAX_NAME(tmp_path: Path) -> None:
    name = wire.MAX_NAME
    sink = capture.MemorySink()
    with capture.workflow("w" * (name + 1), sink=sink, agent="a" * name,
                          spool=tmp_path / "sp") as wf:
        with wf.task("t" * name):
            pass
        with wf.task("u" * (name + 1), parent="p" * wire.MAX_ID,
                     dependencies=["d" * (wire.MAX_ID + 1)]):
            pass
    batch = events.parse_batch(json.dumps({"format": wire.FORMAT, "events": sink.events}))
    by_type = {(e.type, getattr(e, "transformation", None)) for e in batch.events}
    assert ("task", "t" * name) in by_type and ("task", "u" * name) in by_type  # cut to fit
    runs = [e for e in batch.events if e.type == "workflow"]
    assert {e.workflow for e in runs} == {"w" * name}
    assert {e.agent for e in runs if e.event == "begin"} == {"a" * name}
    second = next(e for e in batch.events if e.event == "begin"
                  and getattr(e, "transformation", None) == "u" * name)
    assert second.parent == "p" * wire.MAX_ID and not second.dependencies


def test_a_hand_built_ref_the_client_keeps_passes_the_server() -> None:
    kept = _sent({"r": client.Ref("file:///x\n")})
    assert "r" not in kept or kept["r"] is None


def test_a_spool_segment_reads_back_integers_beyond_64_bits_exact(tmp_path) -> None:
    from provkg.capture.spool import read_segment

    big = int("9" * 400)  # past a double's range: a plain orjson read refused the line
    segment = tmp_path / "seg.jsonl"
    segment.write_bytes(b'{"v": %d}\n{"v": 18446744073709551617}\n' % big)
    assert read_segment(segment) == [{"v": big}, {"v": 18446744073709551617}]
