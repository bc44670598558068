"""One JSON rule for events everywhere: what the accept path takes, the queue worker can apply.

NaN / Infinity / -Infinity / numbers overflowing a double are not JSON and are refused with the
path of the field and how to send them; integers are exact, and the server's accept path refuses
those beyond 64 bits (which the worker's orjson would turn into doubles); times must fit xsd:dateTime (with a hint for milliseconds); a
BOM is skipped at the start of a document; the published JSON Schema says what the validator
enforces. And the queue's dead-letter folder: a batch the worker cannot decode never blocks it.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import jsonschema_rs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provkg.errors import BadEvent, StoreError
from provkg.events import (
    FORMAT,
    MAX_TIME,
    NotJson,
    batch_schema,
    event_schema,
    load_json,
    parse_batch,
    parse_event,
    parse_events_jsonl,
    strip_bom,
)
from provkg.service.queue import IngestQueue

BOM = b"\xef\xbb\xbf"


def task(i: int = 0, **extra: object) -> dict[str, object]:
    return {"type": "task", "event": "begin", "id": f"t{i}", "time": 1.7e9 + i,
            "workflow_id": "run", "transformation": "fit", **extra}


def body(*events: dict[str, object]) -> bytes:
    """What Python's json.dumps writes by default (allow_nan=True): NaN and Infinity bare."""
    return json.dumps({"format": FORMAT, "events": list(events)}).encode()


# -- NaN, Infinity, overflow: refused at accept time, with the path and the way out ----------


@pytest.mark.parametrize("bad, shown", [
    (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_a_non_finite_value_is_refused_naming_event_field_and_the_fix(bad: float, shown: str) -> None:
    text = body(task(0), task(1, used=[{"name": "ok", "value": 1}, {"name": "loss", "value": bad}]))
    assert shown.encode() in text  # json.dumps wrote it bare
    with pytest.raises(BadEvent) as caught:
        parse_batch(text)
    message = str(caught.value)
    assert message.startswith(f"events[1].used[1].value: {shown} is not JSON")
    assert '"NaN"' in message and "null" in message  # how to send it instead


@pytest.mark.parametrize("bad", [b"NaN", b"1e400", b"-Infinity"])
def test_a_non_finite_time_is_told_its_own_form_not_the_value_advice(bad: bytes) -> None:
    """Found by black-box testing: a NaN time was told to be sent "as a string, or as null",
    which the time field then refused."""
    text = (b'{"format": "provkg.events/1", "events": [{"type": "workflow", "event": "begin", '
            b'"id": "r", "time": ' + bad + b', "workflow": "w", "environment": {"time": NaN}}]}')
    with pytest.raises(BadEvent) as caught:
        parse_batch(text)
    time_part, env_part = str(caught.value).split("; events[0].environment")
    assert time_part.startswith("events[0].time: ") and "null" not in time_part
    assert "time is a finite number of seconds since the epoch (UTC)" in time_part
    assert "as null" in env_part  # any other field keeps the advice for values


def test_non_finite_numbers_anywhere_are_each_named() -> None:
    text = (b'{"format": "provkg.events/1", "events": [{"type": "task", "event": "begin", '
            b'"id": "t", "time": Infinity, "workflow_id": "w", "transformation": "x", '
            b'"used": [{"name": "a", "value": [1, [2, NaN]]}], '
            b'"environment": {"gpu_temp": -Infinity, "big": 1e400}}]}')
    with pytest.raises(BadEvent) as caught:
        parse_batch(text)
    message = str(caught.value)
    for path in ("events[0].time: Infinity", "events[0].used[0].value[1][1]: NaN",
                 "events[0].environment.gpu_temp: -Infinity",
                 "events[0].environment.big: a number too large for a double"):
        assert path in message, message


def test_the_same_numbers_from_python_objects_are_refused_too() -> None:
    for event in (task(time=math.nan), task(time=math.inf),
                  task(used=[{"name": "v", "value": math.nan}]),
                  task(used=[{"name": "v", "value": [1.0, -math.inf]}]),
                  task(environment={"x": math.nan}), task(environment={"x": [math.inf]})):
        with pytest.raises(BadEvent, match=r"events\[0\]\.(time|used\[0\]\.value|environment)"):
            parse_batch({"format": FORMAT, "events": [event]})


def test_non_finite_numbers_sent_as_strings_or_null_are_accepted() -> None:
    values = [{"name": n, "value": v} for n, v in
              (("a", "NaN"), ("b", "Infinity"), ("c", "-Infinity"), ("d", None), ("e", [1, "NaN"]))]
    batch = parse_batch(body(task(used=values)))
    assert [v.value for v in batch.events[0].used] == ["NaN", "Infinity", "-Infinity", None, [1, "NaN"]]


def test_malformed_json_is_not_json_with_the_parsers_reason() -> None:
    for text in (b"", b"{", b"hello", b'{"format": "provkg.events/1", "events": [}',
                 b'{"a": "\\ud800"}',  # a lone surrogate: json.loads takes it, the worker does not
                 b"[" * 5000 + b"]" * 5000):
        with pytest.raises(NotJson, match=r"^not JSON \("):
            parse_batch(text)
    with pytest.raises(NotJson, match=r"^not UTF-8 text \(byte 43\)"):
        parse_batch(b'{"format": "provkg.events/1", "events": []}\xff')


def test_underflow_and_negative_zero_are_plain_numbers() -> None:
    batch = parse_batch(body(task(used=[{"name": "tiny", "value": 1e-400}, {"name": "z", "value": -0.0}])))
    assert [v.value for v in batch.events[0].used] == [0.0, -0.0]


# -- integers: exact, and refused where the server's queue would round them ---------------------


INT_MIN, INT_MAX = -(2**63), 2**64 - 1
BIG = (INT_MAX + 1, INT_MIN - 1, 10**40, -(10**40))


def big_int_events(big: int) -> list[dict[str, object]]:
    return [task(used=[{"name": "n", "value": big}]), task(used=[{"name": "n", "value": [0, [big]]}]),
            task(environment={"seed": big}), task(index=big)]


def test_integers_beyond_64_bits_are_valid_and_kept_exact_never_rounded() -> None:
    for big in BIG:
        for event in big_int_events(big):
            for data in (json.dumps({"format": FORMAT, "events": [event]}),
                         {"format": FORMAT, "events": [event]}):
                parsed = parse_batch(data).events[0]
                kept = parsed.index if "index" in event else (
                    parsed.environment["seed"] if parsed.environment else parsed.used[0].value)
                assert kept in (big, [0, [big]]) and "e" not in repr(kept)  # an int, not a float


def test_integers_beyond_64_bits_stay_exact_on_the_accept_path_and_in_the_worker() -> None:
    for big in BIG:
        for event in big_int_events(big):
            text = json.dumps({"format": FORMAT, "events": [event]})
            batch = parse_batch(text)
            assert batch.events[0].model_dump(exclude_none=True) == parse_batch(
                {"format": FORMAT, "events": [event]}).events[0].model_dump(exclude_none=True)
            assert load_json(text) == json.loads(text)  # what the queue worker reads
    # more digits than Python converts by default: refused everywhere
    text = body(task(used=[{"name": "n", "value": 0}])).replace(b'"value": 0', b'"value": 1' + b"0" * 5000)
    with pytest.raises(BadEvent, match=r"^events\[0\]\.used\[0\]\.value: an integer with more than 4000"):
        parse_batch(text)


@pytest.mark.parametrize("digits", [309, 400, 4000])
def test_integers_beyond_a_doubles_range_up_to_4000_digits_are_kept_exact(digits: int) -> None:
    # orjson reads them as doubles, which overflow: "number is infinity when parsed as double"
    big = int("9" * digits)
    for event in big_int_events(big) + big_int_events(-big):
        text = json.dumps({"format": FORMAT, "events": [event]})
        assert parse_batch(text).events[0] == parse_batch({"format": FORMAT, "events": [event]}).events[0]
        assert load_json(text) == json.loads(text)  # what the queue worker reads
    line = json.dumps(task(used=[{"name": "n", "value": big}]))
    assert next(parse_events_jsonl([line])).used[0].value == big


def test_a_long_integer_does_not_hide_what_else_is_wrong() -> None:
    big = "1" * 400
    with pytest.raises(NotJson, match="lone surrogate"):  # orjson stopped at the integer
        load_json(f'[{big}, "\\ud800"]')
    with pytest.raises(NotJson, match=r"^not JSON \(line 1, column 410: ") as bad:
        load_json(f'[{big}, {{"a": ]')
    assert (bad.value.line, bad.value.column) == (1, 410)
    with pytest.raises(BadEvent, match=r"^\[1\]: a number too large for a double"):
        load_json(f"[{big}, 1e400]")


def test_integers_at_the_64_bit_limits_and_long_digit_strings_pass_the_accept_path_exact() -> None:
    values = [{"name": "max", "value": INT_MAX}, {"name": "min", "value": INT_MIN},
              {"name": "digits", "value": "12345678901234567890123"}, {"name": "f", "value": 1e40}]
    text = body(task(used=values, index=INT_MAX))
    batch = parse_batch(text)
    assert [v.value for v in batch.events[0].used] == [INT_MAX, INT_MIN, "12345678901234567890123", 1e40]
    assert type(batch.events[0].used[3].value) is float
    worker = orjson.loads(text)["events"][0]  # the queue worker reads the same
    assert [v["value"] for v in worker["used"]] == [INT_MAX, INT_MIN, "12345678901234567890123", 1e40]


numbers = st.one_of(st.floats(), st.integers(-(2**80), 2**80), st.integers(-5, 5))
json_values = st.recursive(st.one_of(numbers, st.none(), st.booleans(), st.text(max_size=5)),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=8)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_values, max_size=4), st.one_of(st.floats(), st.integers(-10, 2**70)))
def test_whatever_the_accept_path_takes_the_worker_decodes_to_the_same_values(values, time) -> None:
    """The queue worker decodes a queued batch with orjson.loads: it must never fail on, nor
    read differently, anything parse_batch accepted (wire format numbers, exactly)."""
    text = body(task(time=time, used=[{"name": f"v{i}", "value": v} for i, v in enumerate(values)]))
    try:
        parse_batch(text)
    except BadEvent as exc:
        assert str(exc).startswith("events[0]."), exc  # always the path of the field
        return
    worker = load_json(text)  # the queue worker's decoder
    exact = json.loads(text)
    assert worker == exact
    assert [type(v["value"]) for v in worker["events"][0]["used"]] == \
        [type(v["value"]) for v in exact["events"][0]["used"]]


# -- time: a finite number of seconds xsd:dateTime can write ----------------------------


@pytest.mark.parametrize("t, hint", [
    (1.7e12, "milliseconds"), (1_700_000_000_123, "milliseconds"), (1.7e15, "microseconds"),
    (1.7e18, "nanoseconds"), (1e20, "year 9999"), (MAX_TIME, "year 9999"), (-1, "0 or more"),
    ("1700000000", "must be a number"), (True, "must be a number"), (None, "must be a number")])
def test_a_time_outside_xsd_datetime_is_refused_with_a_hint(t: object, hint: str) -> None:
    for data in (body(task(time=t)), {"format": FORMAT, "events": [task(time=t)]}):
        with pytest.raises(BadEvent) as caught:
            parse_batch(data)
        message = str(caught.value)
        assert message.startswith("events[0].time: ") and hint in message, message
        if isinstance(t, str):
            assert t not in message  # the submitted value is never echoed


@pytest.mark.parametrize("t", [0, 0.5, 1_700_000_000, 1700000000.123456, MAX_TIME - 1, MAX_TIME - 0.001])
def test_times_from_the_epoch_to_the_end_of_year_9999_are_accepted(t: float) -> None:
    assert parse_batch(body(task(time=t))).events[0].time == t


# -- a byte order mark --------------------------------------------------------------------


def test_a_bom_at_the_start_of_a_document_is_skipped() -> None:
    text = body(task())
    assert parse_batch(BOM + text) == parse_batch(text)
    assert parse_batch((BOM + text).decode("utf-8")) == parse_batch(text)
    assert parse_event(BOM + orjson.dumps(task())) == parse_event(task())
    assert strip_bom(BOM + b"x") == b"x" and strip_bom("\ufeffx") == "x" and strip_bom(b"x") == b"x"


def test_in_jsonl_only_the_first_line_may_start_with_a_bom() -> None:
    line = orjson.dumps(task()).decode()
    assert len(list(parse_events_jsonl(["\ufeff" + line, line], source="f.jsonl"))) == 2
    with pytest.raises(NotJson, match=r"^f\.jsonl:2: not JSON"):
        list(parse_events_jsonl([line, "\ufeff" + line], source="f.jsonl"))


def test_load_json_itself_keeps_the_bom_rule_to_its_callers() -> None:
    with pytest.raises(NotJson):
        load_json(BOM + b"{}")
    assert load_json(b"{}") == {}


# -- the published schema says what the validator enforces -------------------------------


def _keys(node: object) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in _keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in _keys(v)}
    return set()


def test_the_schema_uses_json_schema_keywords_for_time() -> None:
    schema = batch_schema()
    assert not {"ge", "gt", "le", "lt"} & _keys(schema)
    for kind in ("TaskEvent", "WorkflowEvent"):
        time = schema["$defs"][kind]["properties"]["time"]
        assert time["type"] == "number" and time["minimum"] == 0
        assert time["exclusiveMaximum"] == MAX_TIME
    assert event_schema()  # the single-event schema builds too


@pytest.mark.parametrize("value, valid", [
    (1, True), ("x", True), (None, True), (True, True), ([1, "a", None, [2.5, [False]]], True),
    ({"a": 1}, False), ([1, {"a": 1}], False), ([[{"a": 1}]], False),
    ([[[[[[[[1]]]]]]]], True), ([[[[[[[[[1]]]]]]]]], False)])
def test_schema_and_validator_agree_on_values(value: object, valid: bool) -> None:
    _agree(task(used=[{"name": "v", "value": value}]), valid, r"events\[0\]\.used\[0\]\.value")


def _agree(event: dict, valid: bool, where: str) -> None:
    """The published schema and ingest's validator take (or refuse, naming ``where``) alike."""
    validator = jsonschema_rs.Draft202012Validator(batch_schema())
    batch = {"format": FORMAT, "events": [event]}
    assert validator.is_valid(batch) is valid
    if valid:
        parse_batch(batch)
    else:
        with pytest.raises(BadEvent, match=where):
            parse_batch(batch)


@pytest.mark.parametrize("t, valid", [(0, True), (1.7e9, True), (-1, False), (1.7e12, False),
                                      (MAX_TIME, False), ("1", False)])
def test_schema_and_validator_agree_on_time(t: object, valid: bool) -> None:
    _agree(task(time=t), valid, r"events\[0\]\.time")


@pytest.mark.parametrize("fields, valid", [
    ({"index": 1.0}, True), ({"index": 1.5}, False),
    ({"event": "begin", "status": "finished"}, False), ({"event": "end", "status": "failed"}, True)])
def test_schema_and_validator_agree_on_index_and_status(fields: dict, valid: bool) -> None:
    # black-box testing: the published schema took 1.0 (an integer to JSON Schema) and a status
    # on a begin event, which ingest refused
    _agree(task(**fields), valid, r"events\[0\]")


# -- the queue's dead-letter folder ---------------------------------------------------------


def worker_like(got: list[dict]):
    """Decodes like the server's applier (orjson, no second validation)."""
    def apply(payloads: list[bytes]) -> None:
        events = []
        for payload in payloads:
            events.extend(orjson.loads(payload)["events"])
        got.extend(events)
    return apply


def test_a_batch_the_worker_cannot_decode_goes_to_the_dead_letter_folder(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    got: list[dict] = []
    poison = body(task(1, used=[{"name": "loss", "value": math.nan}]))
    payloads = [body(task(0)), poison, BOM + body(task(2)), b"{torn", body(task(3))]
    with IngestQueue(tmp_path, worker_like(got)) as queue:
        for p in payloads:
            queue.submit(p, events=1)
        assert queue.wait_idle(20)
        stats = queue.stats()
        assert queue.stalled() is None
    assert [e["id"] for e in got] == ["t0", "t3"]
    assert (stats.rejected_batches, stats.dead_letters, stats.backlog_events) == (3, 3, 0)
    letters = sorted((tmp_path / "rejected").iterdir())
    assert sorted(p.read_bytes() for p in letters) == sorted([poison, BOM + body(task(2)), b"{torn"])
    ledger = (tmp_path / "rejected.log").read_text()
    assert all(p.name in ledger for p in letters) and len(ledger.splitlines()) == 3
    assert "events[0].used[0].value: NaN is not JSON" in ledger and "byte order mark" in ledger
    assert any(letters[0].name in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
    # a restart neither applies them again nor forgets them
    again: list[dict] = []
    with IngestQueue(tmp_path, worker_like(again)) as queue:
        queue.put(body(task(4)), events=1)
        assert queue.wait_idle(20)
        assert queue.stats().dead_letters == 3 and queue.stats().rejected_batches == 0
    assert [e["id"] for e in again] == ["t4"]


def test_store_outages_are_still_retried_and_reported_as_a_stall(tmp_path: Path) -> None:
    got: list[dict] = []
    store_up = threading.Event()
    decode = worker_like(got)

    def flaky(payloads: list[bytes]) -> None:
        if not store_up.is_set():
            raise StoreError("store unreachable")
        decode(payloads)

    with IngestQueue(tmp_path, flaky) as queue:
        queue.put(body(task(0)), events=1)
        assert not queue.wait_idle(0.5)
        stalled = queue.stalled()
        assert stalled is not None and "store unreachable" in stalled[1] and stalled[0] > 0
        store_up.set()
        assert queue.wait_idle(20)
        assert queue.stalled() is None
        assert queue.stats().dead_letters == 0
    assert [e["id"] for e in got] == ["t0"]
    assert not (tmp_path / "rejected").exists()


def test_a_valid_batch_failing_unexpectedly_is_retried_not_dead_lettered(tmp_path: Path) -> None:
    got: list[dict] = []
    failures = iter(range(2))
    decode = worker_like(got)

    def buggy(payloads: list[bytes]) -> None:
        if next(failures, None) is not None:
            raise RuntimeError("a bug, maybe transient")
        decode(payloads)

    with IngestQueue(tmp_path, buggy) as queue:
        queue.put(body(task(0)), events=1)
        assert queue.wait_idle(20)
        assert queue.stats().dead_letters == 0
    assert [e["id"] for e in got] == ["t0"]


def test_only_what_the_worker_cannot_decode_is_set_aside_old_but_decodable_batches_apply(
        tmp_path: Path) -> None:
    """A batch an older server accepted (a time in milliseconds, say) still decodes: it is applied
    as before, even when it shares a chunk with a NaN batch."""
    got: list[dict] = []
    with IngestQueue(tmp_path, worker_like(got), apply_events=100) as queue:
        for p in (body(task(0, time=1.7e12)), body(task(1, used=[{"name": "x", "value": math.nan}])),
                  body(task(2))):
            queue.submit(p, events=1)
        assert queue.wait_idle(20)
        assert queue.stats().dead_letters == 1
    assert [e["id"] for e in got] == ["t0", "t2"]


def test_a_decodable_batch_the_worker_fails_on_and_that_is_invalid_is_set_aside(tmp_path: Path) -> None:
    got: list[dict] = []
    decode = worker_like(got)

    def strict(payloads: list[bytes]) -> None:  # like a mapper tripping over a missing field
        for payload in payloads:
            for event in orjson.loads(payload)["events"]:
                _ = event["workflow_id"]
        decode(payloads)

    invalid = orjson.dumps({"format": FORMAT, "events": [{"type": "task", "id": "x"}]})
    with IngestQueue(tmp_path, strict, apply_events=100) as queue:
        for p in (body(task(0)), invalid, body(task(2))):
            queue.submit(p, events=1)
        assert queue.wait_idle(20)
        assert queue.stats().dead_letters == 1
    assert [e["id"] for e in got] == ["t0", "t2"]
    assert "events[0].event: required field is missing" in (tmp_path / "rejected.log").read_text()
