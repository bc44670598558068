"""Capture edge cases found by black-box testing: odd text, odd sinks, odd call orders.

Each test is a case where events used to be lost or recorded wrongly while the user's code
ran on unaware: the contract is that provenance never raises into user code *and* that no
event is lost (docs/explanation/capture.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from api_support import ApiServer

from provkg import capture
from provkg.capture.sink import MemorySink
from provkg.capture.spool import spool_segments
from provkg.cli import main
from provkg.events import parse_batch


def _file_events(folder: Path) -> list[dict]:
    """Every event the file sink wrote, each line read by the strict JSON rule of ingest."""
    out = []
    for path in sorted(folder.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            out.append(json.loads(line))
    return out


def test_a_lone_surrogate_is_escaped_and_the_file_still_ingests(tmp_path: Path) -> None:
    # what os.listdir gives for a non-UTF-8 file name
    name = b"data_\xff.h5".decode("utf-8", "surrogateescape")
    with capture.workflow("odd-text", sink=f"file:{tmp_path / 'out'}", spool=tmp_path / "sp") as wf:
        with wf.task("load", used={"file": name, "lr": 0.1}) as t:
            t.generate(rows=3)
    events = _file_events(tmp_path / "out")
    assert len(events) == 4
    parse_batch({"format": "provkg.events/1", "events": events})  # valid wire format
    used = {v["name"]: v["value"] for e in events if e.get("used") for v in e["used"]}
    assert used == {"file": "data_\\xff.h5", "lr": 0.1}
    store = tmp_path / "store"
    assert main(["ingest", str(tmp_path / "out"), "--store", f"oxigraph:{store}"]) == 0
    query = tmp_path / "q.rq"
    query.write_text('SELECT ?v WHERE { ?x <http://www.w3.org/ns/prov#value> ?v '
                     'FILTER(CONTAINS(STR(?v), "data_")) }', encoding="utf-8")
    rows = json.loads(_run(["sparql", str(query), "--store", f"oxigraph:{store}",
                            "--format", "json"]))["rows"]
    assert rows == [["data_\\xff.h5"]]


def test_a_path_with_a_byte_no_utf_8_is_a_location_with_that_byte_escaped(tmp_path: Path) -> None:
    # it was dropped ("not a URI"), so queries by dataset could not find the run
    name = b"/data/caf\xe9.h5".decode("utf-8", "surrogateescape")  # a Latin-1 file name
    sink = MemorySink()
    with capture.workflow("odd-path", sink=sink) as wf, wf.task("load") as t:
        t.use(train_set=capture.ref(name), raw=capture.ref("file://" + name))
    used = {v["name"]: v.get("location") for e in sink.events for v in e.get("used", [])}
    assert used == {"train_set": "file:///data/caf%E9.h5", "raw": "file:///data/caf%E9.h5"}
    parse_batch({"format": "provkg.events/1", "events": sink.events})  # valid wire format


def _run(argv: list[str]) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


class _CancelsOnce(MemorySink):
    """A custom sink wrapping an async client: its first send is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def send(self, events: list[dict]) -> None:
        self.calls += 1
        if self.calls == 1:
            raise asyncio.CancelledError()
        super().send(events)


@pytest.mark.parametrize("error", [asyncio.CancelledError, SystemExit, KeyboardInterrupt])
def test_a_sink_raising_a_base_exception_is_a_failure_like_any_other(tmp_path: Path, error) -> None:
    sink = _CancelsOnce()
    if error is not asyncio.CancelledError:
        def send(events: list[dict], _send=MemorySink.send) -> None:
            sink.calls += 1
            if sink.calls == 1:
                raise error()
            _send(sink, events)
        sink.send = send  # type: ignore[method-assign]
    with capture.workflow("flaky", sink=sink, spool=tmp_path / "sp", linger=0.05) as wf:
        for i in range(20):
            with wf.task("step", index=i) as t:
                t.generate(x=i)
    delivered = {(e["id"], e["event"]) for e in sink.events}
    spooled = {(e["id"], e["event"]) for path in spool_segments(tmp_path / "sp")
               for e in map(json.loads, path.read_text().splitlines())}
    assert len(delivered | spooled) == 42  # every begin and end, none lost
    assert sink.calls >= 2  # the thread lived on after the failure


def test_a_batch_too_big_for_the_server_is_split_not_rejected(tmp_path: Path) -> None:
    """HTTP 413 for a batch whose events each fit: the sink sends halves; only an event too big
    on its own is refused (kept in rejected/)."""
    with ApiServer(tmp_path / "srv", env={"PROVKG_MAX_BODY_BYTES": "200000"}) as server:
        big = "x" * 80_000  # gzip would shrink it: random-looking text does not compress
        import random
        rng = random.Random(7)
        with capture.workflow("big", sink=f"{server.url}?compression=none", spool=tmp_path / "sp",
                              batch_size=10, linger=0.2) as wf:
            for i in range(4):
                with wf.task("step", index=i) as t:
                    t.generate(blob="".join(rng.choice("abcdefghij") for _ in range(80_000)))
            with wf.task("huge") as t:
                t.generate(blob=big * 4)  # 320 KB: too big even alone
        queue = server.wait_applied()
        assert queue["applied_events"] == queue["accepted_events"] == 11  # all but the huge end
        rejected = list((tmp_path / "sp").rglob("rejected/*"))
        assert rejected and "413" in "".join(p.read_text(errors="replace") for p in rejected)


def test_events_after_the_workflow_ended_are_spooled_with_a_warning(tmp_path: Path, caplog) -> None:
    out, sp = tmp_path / "out", tmp_path / "sp"
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        wf = capture.workflow("late", sink=f"file:{out}", spool=sp)
        wf.end()  # cleanup code ran first
        wf.begin()
        t = wf.task("t")
        t.begin()
        t.generate(x=1)
        t.end()
        wf.end()
    assert {(e["type"], e["event"]) for e in _file_events(out)} == {("workflow", "begin"),
                                                                    ("workflow", "end")}
    assert "after its workflow ended" in caplog.text
    late = [e for path in spool_segments(sp) for e in map(json.loads, path.read_text().splitlines())]
    assert [(e["event"], e["id"]) for e in late] == [("begin", t.id), ("end", t.id)]
    assert late[1]["generated"] == [{"name": "x", "value": 1}]
    assert main(["replay", str(sp), "--to", f"file:{out}"]) == 0
    assert len(_file_events(out)) == 4


def test_run_values_after_the_run_ended_are_named_not_lost_silently(caplog) -> None:
    sink = MemorySink()
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("late-values", sink=sink) as wf:
            wf.generate(report="file:///r.html")
        wf.generate(model=capture.ref("file:///m.pt"))  # cleanup code after the with block
        wf.use(config={"a": 1})
    assert "generate() after the run ended is not captured" in caplog.text
    assert "use() after the run ended is not captured" in caplog.text
    ended = [e for e in sink.events if e["type"] == "workflow" and e["event"] == "end"]
    assert [v["name"] for v in ended[0]["generated"]] == ["report"]


def test_numpy_integer_index_is_kept(tmp_path: Path) -> None:
    sink = MemorySink()
    with capture.workflow("np", sink=sink, spool=tmp_path / "sp") as wf:
        with wf.task("training") as tr:
            for e in np.arange(3):
                with wf.task("epoch", parent=tr, index=e):
                    pass
            with wf.task("epoch", parent=tr, index=2.5):  # not an integer: dropped, logged
                pass
    indexes = [e.get("index") for e in sink.events if e.get("transformation") == "epoch"
               and e["event"] == "begin"]
    assert indexes == [0, 1, 2, None]
    assert all(type(i) is int for i in indexes[:3])


@pytest.mark.parametrize(("said", "recorded"), [
    ("finished", "finished"), ("failed", "failed"), ("Failed", "failed"), ("FAILED", "failed"),
    ("error", "failed"), ("killed", "failed"), ("partial", "failed"), ("success", "finished"),
    ("OK", "finished"), ("done", "finished")])
def test_end_status_words_are_mapped_to_the_wire_statuses(tmp_path: Path, said, recorded) -> None:
    sink = MemorySink()
    with capture.workflow("st", sink=sink, spool=tmp_path / "sp") as wf:
        t = wf.task("t").begin()
        t.end(said)
    end = next(e for e in sink.events if e["id"] == t.id and e["event"] == "end")
    assert end["status"] == recorded
    if said not in ("finished", "failed"):
        assert said in end["message"]  # the caller's own word is kept
    parse_batch({"format": "provkg.events/1", "events": sink.events})


def test_a_long_agent_falls_back_to_the_default_and_the_batch_stays_valid(tmp_path: Path) -> None:
    sink = MemorySink()
    with capture.workflow("ag", sink=sink, spool=tmp_path / "sp", agent="a" * 300) as wf:
        with wf.task("t"):
            pass
    begin = sink.events[0]
    assert begin["type"] == "workflow" and 0 < len(begin["agent"]) <= 256
    parse_batch({"format": "provkg.events/1", "events": sink.events})


def test_ending_the_workflow_ends_its_open_tasks_as_failed(tmp_path: Path) -> None:
    sink = MemorySink()
    wf = capture.workflow("open", sink=sink, spool=tmp_path / "sp").begin()
    t = wf.task("forgotten").begin()
    wf.end()
    end = [e for e in sink.events if e["id"] == t.id and e["event"] == "end"]
    assert len(end) == 1 and end[0]["status"] == "failed"
    assert sink.events[-1]["type"] == "workflow" and sink.events[-1]["event"] == "end"


@pytest.mark.parametrize(("given", "location"), [
    ("file:///data/my file.h5", "file:///data/my%20file.h5"),
    ("/data/x y.h5", "file:///data/x%20y.h5"),
    (Path("/data/p.h5"), "file:///data/p.h5"),
    ("s3://bucket/key", "s3://bucket/key"),
    ("C:\\data\\x.h5", "file:///C:/data/x.h5"),
])
def test_ref_turns_paths_and_spaces_into_uris(given, location) -> None:
    assert capture.ref(given).location == location


def test_ref_of_a_relative_path_is_a_file_uri_under_the_working_directory(tmp_path: Path,
                                                                         monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert capture.ref("runs/x.h5").location == (tmp_path / "runs" / "x.h5").as_uri()
    assert capture.ref("runs/x.h5", domain="not a uri").domain is None


@pytest.mark.parametrize("run_id", ["..", ".", "rejected", "../x", ""])
def test_every_run_id_spools_inside_the_spool_where_replay_finds_it(tmp_path: Path, run_id, capsys) -> None:
    """Found by black-box testing: run_id=".." spooled into the spool's parent folder (and a
    run called "rejected" into the folder replay skips), so `provkg replay` found nothing."""
    spool, out = tmp_path / "spool", tmp_path / "out"
    with capture.workflow("w", sink="http://127.0.0.1:9", run_id=run_id or None, spool=spool,
                          flush_timeout=0.5) as wf:
        wf.task("step").begin().end()
    assert {p.parent.parent for p in spool_segments(spool)} == {spool}
    assert main(["replay", str(spool), "--to", f"file:{out}"]) == 0
    assert len(_file_events(out)) == 4


def test_a_used_value_changed_after_begin_is_warned_about(caplog) -> None:
    """Found by black-box testing: used={"lr": 0.1} then use(lr=0.05) stored two values under
    one id without a word; the same value again, or a new name, says nothing."""
    sink = MemorySink()
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("w", sink=sink) as wf:
            with wf.task("same", used={"lr": 0.1}) as t:
                t.use(lr=0.1, momentum=0.9)
            assert "recorded as used at its begin" not in caplog.text
            with wf.task("changed", used={"lr": 0.1}) as t:
                t.use(lr=0.05)
    assert "'changed': 'lr' was recorded as used at its begin with another value" in caplog.text


def test_two_runs_with_one_run_id_in_one_process_are_warned_about(caplog) -> None:
    """Found by black-box testing: two workflow(run_id="DUP") at once both numbered their tasks
    DUP.1, ... and the store merged them without a word."""
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("a", sink=MemorySink(), run_id="DUP-a"), \
                capture.workflow("b", sink=MemorySink(), run_id="DUP-b"):
            pass
        assert "already used by another workflow" not in caplog.text
        with capture.workflow("a", sink=MemorySink(), run_id="DUP"), \
                capture.workflow("b", sink=MemorySink(), run_id="DUP"):
            pass
    assert "run id 'DUP' is already used by another workflow running in this process" in caplog.text


def test_decimals_keep_their_value_or_say_what_changed(caplog) -> None:
    # a finite Decimal became "Infinity" and a long one the nearest double, silently
    from decimal import Decimal

    sink = MemorySink()
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("decimals", sink=sink) as wf, wf.task("fit") as t:
            t.generate(whole=Decimal("1E+400"), short=Decimal("0.1"), half=Decimal("2.50"))
        assert "Decimal" not in caplog.text  # these are exact
        with capture.workflow("decimals", sink=sink) as wf, wf.task("fit") as t:
            t.generate(huge=Decimal("1" + "0" * 400 + ".5"),
                       long=Decimal("12345678901234567890.123456789"))
    values = {v["name"]: v["value"] for e in sink.events for v in e.get("generated", [])}
    assert values["whole"] == 10**400 and values["short"] == 0.1 and values["half"] == 2.5
    assert values["huge"] == "1" + "0" * 400 + ".5"  # its text, never an infinity
    assert values["long"] == 1.2345678901234567e19
    assert "beyond the range of doubles" in caplog.text and "nearest double" in caplog.text


def test_an_unknown_end_status_is_quoted_as_the_caller_wrote_it(caplog) -> None:
    sink = MemorySink()
    with caplog.at_level(logging.WARNING, logger="provkg.capture"):
        with capture.workflow("statuses", sink=sink) as wf:
            wf.task("t").begin().end("crashed: OOM")
    assert "end status 'crashed: OOM' is neither" in caplog.text  # it said 'crashed: oom'
    ends = [e for e in sink.events if e["type"] == "task" and e["event"] == "end"]
    assert ends[0]["status"] == "failed" and "crashed: OOM" in ends[0]["message"]
