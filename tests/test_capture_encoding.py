"""Serialize once: the byte-level value encoding equals the dict path; spool bytes go out as written."""

from __future__ import annotations

import json
import math

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from provkg import capture
from provkg.capture import encoding
from provkg.capture.encoding import encode_event, encode_events, envelope
from provkg.capture.expand import expand_values
from provkg.capture.file_sink import FileSink
from provkg.capture.spool import Spool, read_segment_lines, spool_segments
from provkg.events import parse_batch, parse_event

names = st.text(min_size=0, max_size=12) | st.sampled_from(["lr", "loss", "in_0", "a,b", 'q"t', "x" * 300])
numbers = st.one_of(st.booleans(), st.integers(-2**63, 2**64 - 1),
                    st.floats(allow_nan=True, allow_infinity=True))
scalars = st.one_of(numbers, st.none(), st.text(max_size=8), st.just("1,2"), st.just('"'))
values = st.one_of(scalars, st.lists(numbers | st.text(max_size=3), max_size=3))
snapshots = st.dictionaries(names, values, max_size=8) | st.dictionaries(
    st.sampled_from([f"in_{i}" for i in range(20)]), numbers, max_size=20)


def _reference(event: dict) -> dict:
    """The wire event the dict path gives: values expanded, empty ones left out."""
    out = {k: v for k, v in event.items() if k not in ("used", "generated")}
    for key in ("used", "generated"):
        if event.get(key):
            out[key] = expand_values(event[key])
    return json.loads(json.dumps(out))  # floats and ints as any JSON reader sees them


@settings(max_examples=300, deadline=None)
@given(used=snapshots, generated=snapshots)
@example(used={"l": [math.nan]}, generated={"n": None, "s": "x:y", "t": "a,b"})
@example(used={"a:b": 1, "c,d": 2.5, 'q"': True}, generated={"x": [1.0], "y": [], "z": "n"})
@example(used={"": 1, "x" * 300: 2}, generated={"ok": math.inf, "big": 2**70})
def test_encoded_events_equal_the_dict_path_and_leave_the_event_as_it_was(used, generated):
    event = {"type": "task", "event": "end", "id": "run.1", "time": 1.5, "workflow_id": "run",
             "transformation": "t", "status": "finished", "used": dict(used),
             "generated": dict(generated)}
    before = {**event, "used": dict(used), "generated": dict(generated)}
    line = encode_event(event)
    assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == _reference(before)
    assert event == before  # the caller's snapshots are not replaced by expanded lists


def test_numbers_take_the_byte_path_and_stay_exact(monkeypatch):
    def no_dicts(values):
        raise AssertionError("numbers must not go through the value dicts")

    monkeypatch.setattr(encoding, "expand_values", no_dicts)
    used = {f"in_{i}": i * 1.5 for i in range(100)} | {"flag": True, "big": 2**62, "tiny": 1e-300}
    event = {"type": "task", "event": "begin", "id": "r.1", "time": 0.0, "workflow_id": "r",
             "transformation": "t", "used": used}
    decoded = orjson.loads(encode_event(event))
    assert decoded["used"] == [{"name": k, "value": v} for k, v in used.items()]
    parse_event(decoded)  # valid wire format v1


def test_non_finite_none_strings_and_lists_keep_their_wire_form():
    used = {"loss": math.nan, "up": math.inf, "down": -math.inf, "none": None, "s": "a,b",
            "l": [1.0, math.nan]}
    event = {"type": "task", "event": "begin", "id": "r.1", "time": 0.0, "workflow_id": "r",
             "transformation": "t", "used": used}
    decoded = orjson.loads(encode_event(event))
    assert [v["value"] for v in decoded["used"]] == ["NaN", "Infinity", "-Infinity", None, "a,b",
                                                    [1.0, "NaN"]]


def test_an_event_orjson_cannot_write_is_written_by_json():
    event = {"type": "task", "event": "begin", "id": "r.1", "time": 0.0, "workflow_id": "r",
             "transformation": "t", "used": {"huge": 2**80}}
    assert json.loads(encode_event(event))["used"] == [{"name": "huge", "value": 2**80}]


def test_envelope_of_lines_is_a_valid_batch():
    events = [{"type": "task", "event": "begin", "id": f"r.{i}", "time": float(i),
               "workflow_id": "r", "transformation": "t", "used": {"i": i, "s": f"x{i}"}}
              for i in range(5)]
    lines = encode_events(events)
    body = orjson.loads(envelope(lines))
    assert body["events"] == [orjson.loads(line) for line in lines]
    assert len(parse_batch(body).events) == 5


def test_spooled_lines_come_back_byte_for_byte_and_a_torn_tail_is_skipped(tmp_path):
    spool = Spool(tmp_path, "run")
    lines = [b'{"a":1}\n', b'{"b":2}\n']
    assert spool.append_lines(lines)
    [segment] = spool_segments(tmp_path)
    assert spool.read_lines(segment) == lines
    with open(segment, "ab") as f:
        f.write(b'{"c":')  # a crash in the middle of a write
    assert read_segment_lines(segment) == lines


def test_file_sink_writes_lines_as_given(tmp_path):
    sink = FileSink(tmp_path)
    sink.send_lines([b'{"a":1}\n', b'{"b":2}\n'])
    sink.close()
    assert sink.paths[0].read_bytes() == b'{"a":1}\n{"b":2}\n'


def test_spilled_events_reach_the_file_sink_once_each(tmp_path):
    """A tiny queue spills over and over; every event still arrives exactly once, nothing stays
    on disk, and the spill wrote the same bytes the sink got (no second serialization)."""
    wf = capture.workflow("spill", sink=f"file:{tmp_path / 'out'}", spool=tmp_path / "spool",
                          max_queue=64, flush_timeout=30)
    with wf:
        for i in range(5_000):
            with wf.task("step", index=i, used={"i": i}) as task:
                task.generate({"sq": i * i})
    assert wf.emitter.spool.spooled_events > 0, "the queue never spilled: the test proves nothing"
    lines = [line for path in sorted((tmp_path / "out").iterdir())
             for line in path.read_bytes().splitlines()]
    keys = [(e["id"], e["event"]) for e in map(orjson.loads, lines)]
    assert len(keys) == len(set(keys)) == 2 + 2 * 5_000
    assert not spool_segments(tmp_path / "spool")


def test_use_and_generate_take_a_mapping_and_copy_it():
    sink = capture.MemorySink()
    config = {"lr": 0.1, "layers": [64, 32]}
    metrics = {"loss": 0.5}
    with capture.workflow("maps", sink=sink) as wf, wf.task("train") as task:
        wf.use({"dataset": "flowers"}, seed=1)
        task.use(config, seed=7)
        task.generate(metrics)
        config["lr"], metrics["loss"] = 99.0, 99.0  # changed after the call: not recorded
        config["layers"].append(1)
    end = next(e for e in sink.events if e["type"] == "task" and e["event"] == "end")
    # used after begin: sent with the end event
    assert {v["name"]: v["value"] for v in end["used"]} == {"lr": 0.1, "layers": [64, 32], "seed": 7}
    assert end["generated"] == [{"name": "loss", "value": 0.5}]
    run_end = sink.events[-1]
    assert run_end["type"] == "workflow" and run_end["used"] == [
        {"name": "dataset", "value": "flowers"}, {"name": "seed", "value": 1}]
