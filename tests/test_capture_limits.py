"""Values the server would refuse are caught in the client, one value at a time.

The server refuses a whole batch (HTTP 422, or the MQTT listener's "rejected an MQTT batch")
when one field of one event breaks the wire format; so the capture library keeps every event
within the server's limits: a value or id it cannot send is converted or left out, with a
warning, and the event goes on. And what gets refused anyway (events spooled by an older
client, a foreign producer) is isolated by sending the batch in halves: only the event refused
on its own is set aside in ``rejected/``, live (HTTP sink) and in ``provkg replay``.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest
from api_support import ApiServer
from capture_receivers import HttpReceiver, MqttSubscriber, expected_keys

from provkg import capture
from provkg.capture import values as client
from provkg.capture.broker import MosquittoBroker
from provkg.capture.replay import replay
from provkg.capture.spool import spool_segments
from provkg.errors import BadEvent
from provkg.events import (
    FORMAT,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    load_json,
    parse_batch,
    parse_event,
    parse_events_jsonl,
)


def _file_events(folder: Path) -> list:
    """Every event the file sink wrote, read and validated by the server's own parser."""
    return [e for path in sorted(folder.rglob("*.jsonl"))
            for e in parse_events_jsonl(path.read_text(encoding="utf-8").splitlines(),
                                        source=str(path))]


def _refused(event: dict) -> bool:
    try:
        parse_event(json.dumps(event))
    except BadEvent:
        return True
    return False


def _task(**fields: object) -> dict:
    return {"type": "task", "event": "begin", "id": "t", "time": 1.0, "workflow_id": "w",
            "transformation": "x", **fields}


def test_the_clients_limits_are_the_servers() -> None:
    """Each limit the client applies is exactly where the server's validator draws the line."""
    name, ident, uri = client.MAX_NAME, client.MAX_ID, client.MAX_URI
    assert not _refused(_task(transformation="n" * name))
    assert _refused(_task(transformation="n" * (name + 1)))
    assert not _refused(_task(parent="p" * ident, dependencies=["d" * ident]))
    assert _refused(_task(parent="p" * (ident + 1)))
    assert _refused(_task(dependencies=["d" * (ident + 1)]))
    value = {"name": "v", "location": "s3://" + "k" * (uri - 5), "id": "i" * ident,
             "derived_from": ["s" * ident]}
    assert not _refused(_task(used=[value]))
    for field, too_long in (("location", "s3://" + "k" * (uri - 4)), ("id", "i" * (ident + 1)),
                            ("derived_from", ["s" * (ident + 1)])):
        assert _refused(_task(used=[{**value, field: too_long}])), field
    digits = client.MAX_INT_DIGITS
    ok = '{"name": "v", "value": ' + "9" * digits + "}"
    assert parse_event(json.dumps(_task())[:-1] + ', "used": [' + ok + "]}")
    with pytest.raises(BadEvent, match="digits"):
        load_json('{"v": ' + "9" * (digits + 1) + "}")
    assert client.MAX_DEPTH == MAX_VALUE_DEPTH
    # one value's size: a list of strings whose compact JSON is exactly the limit passes
    limit = client.MAX_VALUE_BYTES
    assert limit == MAX_VALUE_BYTES and client.MAX_STRING * 4 <= limit  # any string the client sends
    item = "é" * 1000  # 2,000 bytes as UTF-8: the limit is in bytes, not characters
    exact = [item] * ((limit - 2) // (len(item.encode()) + 3) - 1) + ["z"]
    short = limit - len(json.dumps(exact, separators=(",", ":"), ensure_ascii=False).encode())
    exact[-1] = "z" * (1 + short)
    assert len(json.dumps(exact, separators=(",", ":"), ensure_ascii=False).encode()) == limit
    assert not _refused(_task(used=[{"name": "v", "value": exact}]))
    assert _refused(_task(used=[{"name": "v", "value": exact + ["a"]}]))
    assert _refused(_task(used=[{"name": "v", "value": "y" * (limit + 1)}]))
    assert client._fit(exact, "v") is exact and client._fit(exact + ["a"], "v") is client._LEFT_OUT


def test_values_and_ids_the_server_refuses_are_fixed_one_by_one_and_every_event_is_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("odd-values", sink=f"file:{out}", spool=tmp_path / "sp") as wf:
            with wf.task("ints") as ints:
                ints.generate(big=10 ** 4100, bigger=-(10 ** 5000), huge=10 ** 60_000,
                              listed=[1, 10 ** 4500, 2.5, [3, 10 ** 4001]], fine=10 ** 3999,
                              loss=0.5)
            with wf.task("ids", parent="p" * 2000, dependencies=["d" * 2000, ints, "ok-id"],
                         index=10 ** 5000) as ids:
                # 3,912 characters, 6,512 once its spaces are percent-encoded
                ids.generate(data=capture.ref("s3://bucket/" + "a b" * 1300),
                             model=capture.ref("file:///m.pt", id="i" * 2000,
                                               domain="http://example.org/100%",
                                               derived_from=["y" * 2000, "ok-source"]))
            with wf.task("t" * 300) as long_name:
                long_name.generate(x=1)
    events = _file_events(out)  # raises if the server would refuse any of them
    assert len(events) == 2 + 2 * 3  # every begin and end is there
    by_key = {(e.id, e.event): e for e in events}
    values = {v.name: v.value for v in by_key[(ints.id, "end")].generated}
    assert values["big"] == str(10 ** 4100)  # kept exactly, as its decimal text
    assert values["bigger"] == "-1" + "0" * 5000
    assert "huge" not in values  # too long even as text: that value only is left out
    assert values["listed"] == [1, "1" + "0" * 4500, 2.5, [3, "1" + "0" * 4001]]
    assert values["fine"] == 10 ** 3999 and values["loss"] == 0.5
    begin = by_key[(ids.id, "begin")]
    assert begin.parent is None and begin.index is None
    assert begin.dependencies == [ints.id, "ok-id"]
    refs = {v.name: v for v in by_key[(ids.id, "end")].generated}
    assert refs["data"].location is None
    assert refs["model"].id is None and refs["model"].location == "file:///m.pt"
    assert refs["model"].domain == "http://example.org/100%25"
    assert refs["model"].derived_from == ["ok-source"]
    assert by_key[(long_name.id, "begin")].transformation == "t" * 256
    assert "at most 1024" in caplog.text  # the reason, not "must be a non-empty string"
    assert "decimal text" in caplog.text and "'huge' not captured" in caplog.text


class _Boom:
    def __iter__(self):
        raise RuntimeError("iter boom")

    def __str__(self):
        raise RuntimeError("str boom")

    def __index__(self):
        raise RuntimeError("index boom")


def _raising(*first: str):
    yield from first
    raise ValueError("generator boom")


def test_odd_arguments_never_raise_and_never_cost_the_begin_or_end_event(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        refs = [capture.ref("file:///x", derived_from=123),
                capture.ref("file:///x", derived_from={"a": 1}),
                capture.ref("file:///x", derived_from=_Boom()),
                capture.ref("file:///x", derived_from=_raising("a")),
                capture.ref(_Boom(), id=_Boom(), domain=_Boom())]
        sink = capture.MemorySink()
        with capture.workflow(_Boom(), sink=sink, spool=tmp_path / "sp") as wf:  # type: ignore[arg-type]
            first = wf.task("first").begin()
            first.end()
            with wf.task("deps", dependencies=_raising(first.id)) as deps:
                deps.generate(r=refs[3])
            with wf.task("array", used=np.array([1, 2])) as array:  # type: ignore[arg-type]
                pass
            with wf.task("bad", dependencies=_Boom(), index=_Boom(), parent=_Boom()) as bad:  # type: ignore[arg-type]
                pass
            odd = wf.task("odd-status")
            odd.begin()
            odd.end(np.array([1, 2]), _Boom())  # type: ignore[arg-type]
    assert [r.derived_from for r in refs] == [(), (), (), ("a",), ()]
    assert refs[4].location is None and refs[4].id is None and refs[4].domain is None
    parse_batch({"format": FORMAT, "events": sink.events})
    keys = {(e["id"], e["event"]) for e in sink.events}
    assert keys == expected_keys(wf.id, [first.id, deps.id, array.id, bad.id, odd.id])
    begins = {e["id"]: e for e in sink.events if e["event"] == "begin"}
    assert begins[deps.id]["dependencies"] == [first.id]  # what was read before the error
    assert "used" not in begins[array.id]  # not a mapping: ignored, logged
    assert not {"dependencies", "index", "parent"} & set(begins[bad.id])
    ends = {e["id"]: e for e in sink.events if e["event"] == "end"}
    assert ends[odd.id]["status"] == "failed" and "message" in ends[odd.id]
    assert begins[wf.id]["workflow"] == "unnamed"
    assert "generator boom" in caplog.text


# -- a real `provkg serve`: live splitting of a refused batch, and `provkg replay` -----------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """A real server whose request bodies are limited to 200 kB (so that 413 happens)."""
    folder = tmp_path_factory.mktemp("limits-server")
    with ApiServer(folder, env={"PROVKG_MAX_BODY_BYTES": "200000"}) as running:
        yield running


def _accepted(server: ApiServer) -> int:
    return server.wait_applied()["accepted_events"]


def _rejected_lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
            for line in path.read_bytes().splitlines() if line.strip()]


def test_a_batch_the_server_refuses_for_one_event_loses_only_that_event(
        server: ApiServer, tmp_path: Path) -> None:
    """HTTP 422 for a batch: the sink sends it in halves; the 61 good events are stored, the bad
    one (as an older client or a foreign producer would send it) is kept in rejected/."""
    before = _accepted(server)
    spool = tmp_path / "sp"
    with capture.workflow("one-bad", sink=f"{server.url}?compression=none", spool=spool,
                          batch_size=100, linger=5) as wf:
        ids = []
        for i in range(30):
            with wf.task("step", index=i) as t:
                t.generate(x=i)
            ids.append(t.id)
            if i == 14:  # an event the client would never build itself
                wf.emitter.emit({"type": "task", "event": "begin", "id": f"{wf.id}.bad",
                                 "time": 1.0, "workflow_id": wf.id, "transformation": "step",
                                 "parent": "p" * 2000})
    assert _accepted(server) - before == 2 + 2 * 30
    refused = _rejected_lines(spool / "rejected")
    assert [e["id"] for e in refused] == [f"{wf.id}.bad"]
    assert "1024" in "".join(p.read_text() for p in (spool / "rejected").glob("*.txt"))
    assert spool_segments(spool) == []


def test_replay_sends_halves_on_413_and_422_and_sets_aside_only_the_refused_event(
        server: ApiServer, tmp_path: Path) -> None:
    spool = tmp_path / "sp"
    rng = random.Random(3)
    dead = HttpReceiver().url  # nothing listens there: everything is spooled
    with capture.workflow("replay-big", sink=dead, spool=spool, flush_timeout=0.5) as wf:
        for i in range(12):
            with wf.task("step", index=i) as t:  # ~40 kB each: 12 of them are over 200 kB
                t.generate(blob="".join(rng.choice("abcdefghij") for _ in range(40_000)))
    segment = max(spool_segments(spool), key=lambda p: p.stat().st_size)
    bad = json.dumps({"type": "task", "event": "end", "id": f"{wf.id}.old", "time": 2.0,
                      "workflow_id": wf.id, "transformation": "step", "status": "finished"})
    bad = bad[:-1] + ', "generated": [{"name": "n", "value": ' + "7" * 4100 + "}]}"
    lines = segment.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 6  # the bad event goes among good ones, in a batch over 200 kB
    segment.write_bytes(b"".join(lines[:5]) + bad.encode() + b"\n" + b"".join(lines[5:]))
    before = _accepted(server)
    report = replay(spool, f"{server.url}?compression=none")
    assert (report.events, report.rejected) == (2 + 2 * 12, 1)
    assert _accepted(server) - before == 2 + 2 * 12
    assert spool_segments(spool) == []
    assert [e["id"] for e in _rejected_lines(spool / "rejected")] == [f"{wf.id}.old"]
    # replaying the rejected folder (the cause not fixed): what is refused again stays there,
    # once, and no rejected/rejected appears
    again = replay(spool / "rejected", f"{server.url}?compression=none")
    assert (again.events, again.rejected) == (0, 1)
    assert not (spool / "rejected" / "rejected").exists()
    assert [e["id"] for e in _rejected_lines(spool / "rejected")] == [f"{wf.id}.old"]
    assert len(list((spool / "rejected").glob("*.txt"))) == 1


def test_mqtt_batches_hold_only_values_the_listener_accepts(tmp_path: Path) -> None:
    """The MQTT path has no answer per batch: the client must never publish a refused value."""
    with MosquittoBroker(tmp_path / "broker") as broker:
        subscriber = MqttSubscriber(broker.host, broker.port, "odd")
        try:
            with capture.workflow("mqtt-odd", sink=f"{broker.url}/odd",
                                  spool=tmp_path / "sp") as wf:
                ids = []
                for i in range(100):
                    with wf.task("t", index=i, parent="p" * 2000 if i == 50 else None) as t:
                        t.generate(n=10 ** 4100 if i == 60 else i)
                    ids.append(t.id)
            expected = expected_keys(wf.id, ids)
            assert subscriber.recorder.wait_for(len(expected), timeout=10)
            assert subscriber.recorder.unique == expected
            assert subscriber.invalid == []
        finally:
            subscriber.close()


def test_a_list_too_large_for_one_literal_is_left_out_and_its_event_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Found by black-box testing: 10,000 strings of 1.8 kB (18 MB, well compressed) passed
    every client limit and the server's door (202); the store then refused the literal and
    the queue set the whole batch aside, the run's other events with it."""
    out = tmp_path / "out"
    tokens = ["sample: " + "the quick brown fox " * 90 for _ in range(10_000)]
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("big-list", sink=f"file:{out}", spool=tmp_path / "sp") as wf:
            with wf.task("fit") as t:
                t.generate(loss=0.25, grad_norm=tokens)
    events = {(e.id, e.event): e for e in _file_events(out)}
    assert len(events) == 4
    assert {v.name: v.value for v in events[(t.id, "end")].generated} == {"loss": 0.25}
    assert "'grad_norm' not captured: a list of 18," in caplog.text


def test_an_oversized_string_is_left_out_and_its_event_kept(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    # found by black-box testing: a 24 MB string made the server refuse the batch (413) and
    # the whole begin event (start time, other hyperparameters) went to rejected/
    out = tmp_path / "out"
    big = "x" * (client.MAX_STRING + 1)
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("big-string", sink=f"file:{out}", spool=tmp_path / "sp") as wf:
            wf.use(config_dump=big, seed=7)
            with wf.task("fit", used={"config_dump": big, "learning_rate": 0.1,
                                      "note": "y" * client.MAX_STRING}) as t:
                t.generate(listed=["a", big])
    events = _file_events(out)
    assert len(events) == 4
    by_key = {(e.id, e.event): e for e in events}
    used = {v.name: v.value for v in by_key[(t.id, "begin")].used}
    assert used == {"learning_rate": 0.1, "note": "y" * client.MAX_STRING}
    assert {v.name: v.value for e in ("begin", "end") for v in by_key[(wf.id, e)].used} == {"seed": 7}
    assert [v.name for v in by_key[(t.id, "end")].generated] == []
    assert "'config_dump' not captured: a string of 1,000,001 characters" in caplog.text
