"""The callbacks' batch log: batches recorded in bulk keep their own times, values, order and
the status of a batch a failure interrupted; a logged value is read only when recorded."""

from __future__ import annotations

from typing import Any

from provkg import capture
from provkg.integrations._common import FLUSH_EVERY, BatchLog


class _Tensor:
    """A 0-d tensor stand-in that counts its reads (a device sync each, on a GPU)."""

    reads = 0

    def __init__(self, value: float) -> None:
        self.value, self.ndim = value, 0

    def item(self) -> float:
        _Tensor.reads += 1
        return self.value


def _run(body: Any) -> list[dict[str, Any]]:
    sink = capture.MemorySink()
    with capture.workflow("wf", sink=sink, run_id="r") as wf, wf.task("training", kind="training") as training:
        epoch = wf.task("epoch", kind="section", parent=training, index=0).begin()
        body(wf, epoch)
        epoch.end()
    return sink.events


def _generated(event: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in event.get("generated") or []}


def _batches(events: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for e in events:
        if e.get("transformation") == "batch":
            out.setdefault(e["id"], {})[e["event"]] = e
    return out


def test_batches_recorded_at_once_keep_their_own_times_index_and_values() -> None:
    log = BatchLog()
    seen: list[tuple[float, float]] = []

    def body(wf: capture.Workflow, epoch: capture.Task) -> None:
        for i in range(FLUSH_EVERY + 5):
            log.begin(i)
            if log.end({"loss": _Tensor(1.0 / (i + 1)), "acc": 0.5}):
                log.flush(wf, epoch)
        log.stop(wf, epoch, "finished", None)

    _Tensor.reads = 0
    batches = _batches(_run(body))
    assert len(batches) == FLUSH_EVERY + 5
    for pair in batches.values():
        begin, end = pair["begin"], pair["end"]
        assert begin["parent"].endswith(".2") and begin["kind"] == "section"
        assert begin["time"] <= end["time"] and end["status"] == "finished"
        i = begin["index"]
        assert _generated(end)["loss"]["value"] == 1.0 / (i + 1)
        assert _generated(end)["loss"]["role"] == "evaluation_measure"
        seen.append((begin["time"], end["time"]))
    seen.sort()
    assert all(a[1] <= b[0] for a, b in zip(seen, seen[1:]))  # one after the other, as run
    assert _Tensor.reads == FLUSH_EVERY + 5


def test_a_value_is_read_when_the_batch_is_recorded_not_when_it_ends() -> None:
    log = BatchLog()
    _Tensor.reads = 0
    log.begin(0)
    assert log.end({"loss": _Tensor(0.25)}) is False
    assert _Tensor.reads == 0  # nothing read (no sync) while the loop runs

    def body(wf: capture.Workflow, epoch: capture.Task) -> None:
        log.flush(wf, epoch)

    _run(body)
    assert _Tensor.reads == 1


def test_a_failure_records_the_ended_batches_and_the_running_one_failed() -> None:
    log = BatchLog()

    def body(wf: capture.Workflow, epoch: capture.Task) -> None:
        for i in range(3):
            log.begin(i)
            log.end({"loss": 0.1})
        log.begin(3)  # raises inside the user's step
        log.stop(wf, epoch, "failed", "RuntimeError: out of memory")

    ends = {pair["begin"]["index"]: pair["end"] for pair in _batches(_run(body)).values()}
    assert sorted(ends) == [0, 1, 2, 3]
    assert [ends[i]["status"] for i in range(3)] == ["finished"] * 3
    assert ends[3]["status"] == "failed" and "out of memory" in ends[3]["message"]


def test_a_batch_never_ended_before_the_next_begins_is_kept_with_no_values() -> None:
    log = BatchLog("step")

    def body(wf: capture.Workflow, epoch: capture.Task) -> None:
        log.begin(0)
        log.begin(1)
        log.end([capture.measures(loss=0.5), capture.hyperparameters(learning_rate=0.1)])
        log.flush(wf, epoch)

    events = _run(body)
    steps = {e["index"]: e for e in events if e.get("transformation") == "step" and e["event"] == "begin"}
    assert sorted(steps) == [0, 1]
    end = next(e for e in events if e.get("id") == steps[1]["id"] and e["event"] == "end")
    assert _generated(end)["learning_rate"]["role"] == "hyperparameter"
    assert _generated(end)["loss"]["value"] == 0.5


def test_a_task_time_given_is_the_events_time_and_a_bad_one_is_now() -> None:
    sink = capture.MemorySink()
    with capture.workflow("wf", sink=sink, run_id="t") as wf:
        wf.task("load").begin(at=1_700_000_000.5).end(at=1_700_000_002)
        wf.task("bad").begin(at=float("nan"))  # type: ignore[func-returns-value]
    load = {e["event"]: e["time"] for e in sink.events if e.get("transformation") == "load"}
    assert load == {"begin": 1_700_000_000.5, "end": 1_700_000_002.0}
    bad = next(e for e in sink.events if e.get("transformation") == "bad" and e["event"] == "begin")
    assert bad["time"] > 1_700_000_002
