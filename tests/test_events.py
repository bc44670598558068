"""Wire format v1 (provkg.events): round trips, strict refusals with paths, the JSON Schema."""

from __future__ import annotations

import json
import subprocess
import sys

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provkg.capture.http_sink import FORMAT as CAPTURE_FORMAT
from provkg.errors import BadEvent
from provkg.events import FORMAT, batch_schema, parse_batch, parse_event, parse_events_jsonl

ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
uris = st.from_regex(r"\A(file|https|s3):/{0,3}[a-z0-9._/-]{1,30}\Z")
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=12)


@st.composite
def values(draw):
    value = {"name": draw(names)}
    if draw(st.booleans()):
        value["value"] = draw(json_values)
    for key, strategy in (("id", ids), ("location", uris), ("domain", uris)):
        if draw(st.booleans()):
            value[key] = draw(strategy)
    if draw(st.booleans()):
        value["derived_from"] = draw(st.lists(ids, max_size=3))
    return value


@st.composite
def events(draw):
    kind = draw(st.sampled_from(["workflow", "task"]))
    event = {"type": kind, "event": draw(st.sampled_from(["begin", "end"])), "id": draw(ids),
             "time": draw(st.floats(0, 4e9))}
    if kind == "workflow":
        event["workflow"] = draw(names)
    else:
        event["workflow_id"] = draw(ids)
        event["transformation"] = draw(names)
        if draw(st.booleans()):
            event["parent"] = draw(ids)
        if draw(st.booleans()):
            event["index"] = draw(st.integers(0, 10**6))
        if draw(st.booleans()):
            event["dependencies"] = draw(st.lists(ids, max_size=3))
    if event["event"] == "end" and draw(st.booleans()):
        event["status"] = draw(st.sampled_from(["finished", "failed"]))
        if draw(st.booleans()):
            event["message"] = draw(st.text(max_size=40))
    for key in ("used", "generated"):
        if draw(st.booleans()):
            event[key] = draw(st.lists(values(), max_size=3, unique_by=lambda v: v["name"]))
    if draw(st.booleans()):
        event["agent"] = draw(names)
    if draw(st.booleans()):
        event["environment"] = {"host": "node-1", "pid": 7, "packages": {"numpy": "2.0"}}
    return event


def _normalize(event: dict) -> dict:
    """What the model adds on its own: empty used / generated lists; a null value is no value."""
    out = dict(event)
    for key in ("used", "generated"):
        out[key] = [{k: v for k, v in value.items() if v is not None} for value in out.get(key, [])]
    return out


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(events())
def test_any_valid_event_round_trips_through_json_unchanged(event):
    text = orjson.dumps(event)
    model = parse_event(text)
    again = json.loads(model.model_dump_json(exclude_none=True))
    assert again == _normalize(json.loads(text))
    assert parse_event(again) == model


_CORRUPTIONS = [
    (("time",), -1.0, "time"),
    (("time",), "yesterday", "time"),
    (("id",), "", "id"),
    (("event",), "middle", "event"),
    (("used", 0, "name"), "", "used[0].name"),
    (("used", 0, "value"), {"an": "object"}, "used[0].value"),
    (("used", 0, "location"), "has spaces in it", "used[0].location"),
    (("used", 0, "surprise"), 1, "used[0].surprise"),
    (("colour",), "blue", "colour"),
]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.sampled_from(_CORRUPTIONS))
def test_any_invalid_event_is_refused_with_the_path_of_the_bad_field(event, corruption):
    path, bad, where = corruption
    if path[0] == "used":
        event["used"] = [{"name": "x", "value": 1}]
    target = event
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = bad
    with pytest.raises(BadEvent) as caught:
        parse_batch({"format": FORMAT, "events": [event]})
    assert f"events[0].{where}" in str(caught.value)
    if isinstance(bad, str) and len(bad) > 3:
        assert bad not in str(caught.value)  # the submitted value is never echoed


def test_a_location_that_is_no_uri_is_explained_without_the_regex():
    event = {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "w",
             "transformation": "x", "used": [{"name": "a", "location": "file:///my data/a.csv"}]}
    with pytest.raises(BadEvent) as caught:
        parse_event(event)
    text = str(caught.value)
    assert "used[0].location: not a URI" in text and "a space is %20" in text
    assert "pattern" not in text and "[A-Za-z]" not in text


def test_status_only_on_end_and_jsonl_errors_name_the_line():
    begin = {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "w",
             "transformation": "x", "status": "finished"}
    with pytest.raises(BadEvent, match="end events only"):
        parse_event(begin)
    good = json.dumps({"type": "workflow", "event": "begin", "id": "w", "time": 1, "workflow": "f"})
    with pytest.raises(BadEvent, match=r"spool.jsonl:3: "):
        list(parse_events_jsonl([good, "", '{"type": "task"}'], source="spool.jsonl"))


def test_capture_uses_the_same_format_tag():
    assert CAPTURE_FORMAT == FORMAT == "provkg.events/1"


def test_schema_command_prints_the_batch_json_schema():
    out = subprocess.run([sys.executable, "-m", "provkg.cli", "schema", "events"],
                         capture_output=True, text=True, check=True).stdout
    schema = json.loads(out)
    assert schema == json.loads(json.dumps(batch_schema()))
    assert schema["properties"]["format"]["const"] == FORMAT
    assert "TaskEvent" in json.dumps(schema) and "WorkflowEvent" in json.dumps(schema)


def test_a_domain_that_rdf_stores_would_refuse_is_refused_with_its_path() -> None:
    import pytest

    from provkg.errors import BadEvent
    from provkg.events import parse_event

    for bad in ("file://:.9/x", "http://example.org/100%", "not an iri"):
        event = {"type": "workflow", "event": "begin", "id": "r", "time": 1, "workflow": "w",
                 "used": [{"name": "f", "domain": bad}]}
        with pytest.raises(BadEvent, match=r"used\[0\]\.domain"):
            parse_event(event)
    ok = {"type": "workflow", "event": "begin", "id": "r", "time": 1, "workflow": "w",
          "used": [{"name": "f", "domain": "https://w3id.org/provkg/seismic-kg#file-1",
                    "location": "file:///data/100%.sgy"}]}  # a location may hold a stray %
    assert parse_event(ok).used[0].location == "file:///data/100%.sgy"


def test_two_values_of_one_name_in_one_list_are_refused():
    # black-box finding: both landed on one node with two values, and the per-batch and the
    # summary graph disagreed on which one counted
    event = {"type": "task", "event": "end", "id": "t", "time": 1, "workflow_id": "w",
             "transformation": "x", "generated": [{"name": "loss", "value": 0.9},
                                                  {"name": "loss", "value": 0.01}]}
    with pytest.raises(BadEvent, match=r"generated: the name of \[1\] repeats that of \[0\]"):
        parse_event(event)
    # a name used and generated by the same task (an update in place) is fine
    event["used"] = [{"name": "loss", "value": 1.0}]
    event["generated"] = event["generated"][:1]
    assert parse_event(event).generated[0].name == "loss"


def test_a_body_that_is_not_utf8_is_named_as_such():
    # black-box finding: orjson's "str is not valid UTF-8: surrogates not allowed" told a
    # client nothing; a UTF-16 file or a gzip body without its Content-Encoding is the cause
    import gzip

    from provkg.events import NotJson

    good = json.dumps({"format": CAPTURE_FORMAT, "events": []})
    for body in (good.encode("utf-16"), gzip.compress(good.encode())):
        with pytest.raises(NotJson, match=r"^not UTF-8 text \(byte \d+\): events are JSON in UTF-8"):
            parse_batch(body)


def test_a_bad_domain_gets_one_message_whichever_check_refused_it() -> None:
    # found by black-box testing: a domain with a space was told a location's message
    # (file:///data/a.csv, s3://...), one with a stray % an IRI's
    from provkg.errors import BadEvent
    from provkg.events import parse_event

    messages = set()
    for domain in ("https://x.org/a b", "not an iri", "https://x.org/100%"):
        with pytest.raises(BadEvent) as info:
            parse_event({"type": "task", "event": "begin", "id": "t", "time": 1.0, "workflow_id": "r",
                         "transformation": "x", "used": [{"name": "f", "domain": domain}]})
        messages.add(str(info.value).split("domain: ", 1)[1])
    assert len(messages) == 1 and "absolute IRI of the domain KG" in messages.pop()
