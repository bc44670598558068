"""Capture across processes: forked children (os.fork, multiprocessing ``fork``, Pool workers)
continue the parent's run with ids of their own and lose nothing even when they leave through
``os._exit`` or are terminated; a ``spawn`` child records into the run once it received ``wf``."""

from __future__ import annotations

import gzip
import json
import multiprocessing as mp
import os
import pickle
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from capture_receivers import HttpReceiver, wait_until

from provkg import capture
from provkg.capture.spool import spool_segments

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def read_events(directory: Path) -> list[dict]:
    events = []
    for path in sorted(directory.glob("*.jsonl*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        events += [json.loads(line) for line in data.splitlines() if line.strip()]
    return events


def check_run(events: list[dict], run_id: str) -> None:
    """One begin and one end per id (the run's only from its owner), every task ended."""
    counts = Counter((e["id"], e["event"]) for e in events)
    assert all(n == 1 for n in counts.values()), [k for k, n in counts.items() if n > 1]
    assert counts[(run_id, "begin")] == counts[(run_id, "end")] == 1
    begun = {e["id"] for e in events if e["type"] == "task" and e["event"] == "begin"}
    ended = {e["id"] for e in events if e["type"] == "task" and e["event"] == "end"}
    assert begun == ended


@capture.track(generated="square")
def square(i: int) -> int:
    return i * i


def explicit_child(i: int) -> str:
    wf = capture.current_workflow()
    with wf.task("child", index=i) as task:
        task.generate(value=i)
    square(i)
    return task.id


def test_a_forked_process_records_into_the_run_with_task_ids_of_its_own(tmp_path):
    ctx = mp.get_context("fork")
    with capture.workflow("forks", sink=f"file:{tmp_path / 'out'}", run_id="r",
                          spool=tmp_path / "spool") as wf:
        with wf.task("training") as training:
            child = ctx.Process(target=explicit_child, args=(7,))
            child.start()  # multiprocessing children leave through os._exit: no atexit there
            child.join()
            with wf.task("after") as after:
                pass
    assert child.exitcode == 0
    events = read_events(tmp_path / "out")
    check_run(events, "r")
    by_name = {e["transformation"]: e for e in events
               if e["type"] == "task" and e["event"] == "end"}
    assert set(by_name) == {"training", "child", "square", "after"}
    child_id, square_id = by_name["child"]["id"], by_name["square"]["id"]
    assert after.id == "r.2" and training.id == "r.1"  # the parent's counter is its own
    tag = child_id.split(".")[1]
    assert tag.startswith(f"{child.pid}-")
    assert child_id == f"r.{tag}.1" and square_id == f"r.{tag}.2"
    begins = {e["id"]: e for e in events if e["event"] == "begin"}
    assert "parent" not in begins[child_id]
    assert begins[square_id]["parent"] == training.id  # the task open in the parent at fork
    assert by_name["square"]["generated"] == [{"name": "square", "value": 49}]


def test_pool_workers_terminated_by_the_pool_lose_no_event(tmp_path):
    """``with Pool()`` terminates its workers (SIGTERM) right after the last result."""
    ctx = mp.get_context("fork")
    with capture.workflow("pool", sink=f"file:{tmp_path / 'out'}", run_id="p",
                          spool=tmp_path / "spool") as wf:
        with ctx.Pool(3) as pool:
            ids = pool.map(explicit_child, range(12))
        with wf.task("after"):
            pass
    events = read_events(tmp_path / "out")
    check_run(events, "p")
    ended = Counter(e["transformation"] for e in events
                    if e["type"] == "task" and e["event"] == "end")
    assert ended == {"child": 12, "square": 12, "after": 1}
    assert len(set(ids)) == 12 and all(i.startswith("p.") and i.count(".") == 2 for i in ids)


def test_a_forked_child_that_ends_the_inherited_run_and_tasks_records_nothing_of_them(tmp_path):
    """A bare os.fork() child leaving the parent's ``with`` blocks must not end the parent's
    run or tasks; its own task is recorded."""
    with capture.workflow("bare", sink=f"file:{tmp_path / 'out'}", run_id="b",
                          spool=tmp_path / "spool") as wf:
        with wf.task("training") as training:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                try:
                    with wf.task("in-child"):
                        pass
                    training.end("failed", "child")
                    wf.end("failed", "child")
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    events = read_events(tmp_path / "out")
    check_run(events, "b")
    ends = {e["id"]: e for e in events if e["event"] == "end"}
    assert ends["b"]["status"] == "finished" and ends[training.id]["status"] == "finished"
    assert [e["transformation"] for e in events if e["event"] == "end" and e["type"] == "task"
            and e["id"].startswith(f"b.{pid}-")] == ["in-child"]


def test_a_compressed_file_sink_of_the_parent_stays_intact_after_a_fork(tmp_path):
    with capture.workflow("gz", sink=f"file:{tmp_path / 'out'}?compression=gzip", run_id="g",
                          spool=tmp_path / "spool", linger=0.01) as wf:
        for i in range(50):
            with wf.task("before", index=i):
                pass
        assert wf.flush(60)  # the parent's gzip segment is open, mid-stream, at the fork
        child = mp.get_context("fork").Process(target=explicit_child, args=(1,))
        child.start()
        child.join()
        for i in range(50):
            with wf.task("after", index=i):
                pass
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert sum(n.endswith(".jsonl.gz") for n in names) == 1  # the parent's, readable to the end
    assert sum(n.endswith(".jsonl") for n in names) == 1  # the child's: uncompressed, durable
    events = read_events(tmp_path / "out")
    check_run(events, "g")
    assert Counter(e.get("transformation") for e in events if e["event"] == "end") == \
        {"before": 50, "after": 50, "child": 1, "square": 1, None: 1}


def quick_child(i: int) -> None:
    with capture.current_workflow().task("child", index=i) as task:
        task.generate(value=i)
    os._exit(0)  # long before its sender's linger: the events are in its spool


def test_a_forked_child_with_an_http_sink_spools_and_the_owner_delivers_at_end(tmp_path):
    receiver = HttpReceiver().start()
    try:
        with capture.workflow("http-fork", sink=receiver.url, run_id="h",
                              spool=tmp_path / "spool", linger=5.0, flush_timeout=60):
            fork = mp.get_context("fork")
            children = [fork.Process(target=quick_child, args=(i,)) for i in range(3)]
            for child in children:
                child.start()
            for child in children:
                child.join()
        keys = receiver.recorder.unique
    finally:
        receiver.kill()
    child_ids = {k for k, kind in keys if k != "h"}
    assert len(child_ids) == 3
    assert {(i, kind) for i in child_ids for kind in ("begin", "end")} <= keys
    assert {("h", "begin"), ("h", "end")} <= keys
    assert not receiver.invalid
    assert spool_segments(tmp_path / "spool") == []  # the owner re-sent what the children left
    # and left no emptied run folder behind (black-box testing: one per run in a job's folder)
    assert not (tmp_path / "spool" / "h").exists()


class KeepsSocket:
    """A sink of the user's without ``forked()``: a child must not use the parent's object."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.events: list[dict] = []

    def send(self, events):
        self.pids.add(os.getpid())
        self.events += events

    def close(self):
        pass


def test_a_sink_object_without_forked_is_not_used_by_a_child_whose_events_are_spooled(tmp_path):
    sink = KeepsSocket()
    with capture.workflow("custom", sink=sink, run_id="c", spool=tmp_path / "spool") as wf:
        child = mp.get_context("fork").Process(target=quick_child, args=(0,))
        child.start()
        child.join()
        with wf.task("after"):
            pass
    assert sink.pids == {os.getpid()}
    # the owner adopted the child's spooled events at end and delivered them to its sink
    assert Counter(e["event"] for e in sink.events if e.get("transformation") == "child") == \
        {"begin": 1, "end": 1}


def test_a_workflow_unpickled_in_its_own_process_is_the_same_object(tmp_path):
    with capture.workflow("same", sink=f"file:{tmp_path / 'out'}") as wf:
        assert pickle.loads(pickle.dumps(wf)) is wf


# -- spawn: the child receives ``wf`` -----------------------------------------------------


def spawned_child(wf: capture.Workflow, n: int) -> None:
    for i in range(n):
        with wf.task("spawned", index=i) as task:
            task.generate(value=i)
    square(n)  # @capture.track: the process's only active workflow is the one it received


def init_worker(wf: capture.Workflow) -> None:
    """Pool initializer: receiving ``wf`` is all it takes."""


def test_spawn_recipe_pass_the_workflow_to_the_child(tmp_path):
    ctx = mp.get_context("spawn")
    with capture.workflow("spawn", sink=f"file:{tmp_path / 'out'}", run_id="s",
                          spool=tmp_path / "spool") as wf:
        child = ctx.Process(target=spawned_child, args=(wf, 3))
        child.start()
        child.join(120)
        with ctx.Pool(2, initializer=init_worker, initargs=(wf,)) as pool:
            assert pool.map(square, range(6)) == [i * i for i in range(6)]
        with wf.task("after") as after:
            pass
    assert child.exitcode == 0
    events = read_events(tmp_path / "out")
    check_run(events, "s")
    ended = Counter(e["transformation"] for e in events
                    if e["type"] == "task" and e["event"] == "end")
    assert ended == {"spawned": 3, "square": 7, "after": 1}
    assert after.id == "s.1"
    assert [e for e in events if e["type"] == "workflow"][0]["environment"]["pid"] == os.getpid()
    squares = sorted(v["value"] for e in events if e.get("transformation") == "square"
                     and e["event"] == "end" for v in e["generated"])
    assert squares == sorted([9] + [i * i for i in range(6)])


def test_a_child_sent_sigterm_as_it_is_forked_dies_of_it(tmp_path):
    """Found by the suite hanging in Pool.terminate(): a SIGTERM reaching a child before the
    fork hook reset the inherited handler was lost (140 of 200 children lived on)."""
    with capture.workflow("forks", sink=f"file:{tmp_path / 'out'}", spool=tmp_path / "spool"):
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # ours: the run is open
        outcomes = []
        for _ in range(50):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                time.sleep(600)  # only the signal ends it
                os._exit(0)
            os.kill(pid, signal.SIGTERM)
            status = _ended(pid)
            if status is None:  # it lived on: the SIGTERM was lost
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcomes.append("lived on")
                break
            outcomes.append(os.WTERMSIG(status) if os.WIFSIGNALED(status) else "lived on")
    assert outcomes == [signal.SIGTERM] * 50


def _ended(pid: int, timeout: float = 60.0) -> int | None:
    """The wait status of the child ``pid`` once it ended, or None if it still runs after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_children_that_exited_unreaped_have_their_spool_sent_when_the_run_ends(tmp_path):
    """black-box testing: a zombie (exited, not yet waited for) passed `kill(pid, 0)`, so the
    owner left its segments in the spool, unsent and unsaid, when the run ended first."""
    receiver = HttpReceiver().start()
    pids = []
    try:
        with capture.workflow("zombies", sink=receiver.url, run_id="z",
                              spool=tmp_path / "spool", linger=5.0, flush_timeout=60):
            for i in range(3):
                pid = os.fork()
                if pid == 0:
                    quick_child(i)
                pids.append(pid)
            assert wait_until(lambda: all(_state(p) == "Z" for p in pids))
        keys = receiver.recorder.unique
    finally:
        for pid in pids:
            os.waitpid(pid, 0)
        receiver.kill()
    assert len({k for k, kind in keys if k != "z"}) == 3
    assert spool_segments(tmp_path / "spool") == []


def test_a_pool_reused_in_a_later_run_records_nothing_into_the_ended_one(tmp_path):
    """black-box testing: a sweep's Pool, forked in its first run and reused in the second,
    recorded the second run's work into the first, after that run's end."""
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        pass  # (a pool forked before any run records nothing: no run to continue)
    with capture.workflow("sweep", sink=f"file:{tmp_path / 'one'}", run_id="one",
                          spool=tmp_path / "spool"):
        pool = ctx.Pool(2)
        first = pool.map(square, range(4))
    try:
        with capture.workflow("sweep", sink=f"file:{tmp_path / 'two'}", run_id="two",
                              spool=tmp_path / "spool"):
            second = pool.map(square, range(4, 8))
        pool.close()
        pool.join()
    finally:
        pool.terminate()
    assert first == [0, 1, 4, 9] and second == [16, 25, 36, 49]
    events = read_events(tmp_path / "one")
    check_run(events, "one")
    squares = [e["generated"][0]["value"] for e in events
               if e["type"] == "task" and e["event"] == "end"]
    assert sorted(squares) == [0, 1, 4, 9]  # none of the second run's work


def test_the_owner_says_when_running_children_still_hold_spooled_events(tmp_path, caplog):
    """black-box testing: a SIGTERM to a process group ended the run while Pool workers were
    dying; 84 of their events stayed in the spool and nothing said so."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: every event is spooled
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    read, write = os.pipe()
    with capture.workflow("held", sink=url, run_id="held", spool=tmp_path / "spool",
                          flush_timeout=0.5):
        pid = os.fork()
        if pid == 0:
            with capture.current_workflow().task("child"):
                pass
            os.write(write, b"x")
            time.sleep(600)  # running while the owner ends the run (killed below)
            os._exit(0)
        assert os.read(read, 1) == b"x"
    try:
        assert "1 spool segment(s) of this run's other processes (running or ending" in caplog.text
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_segments_of_processes_that_died_after_the_orphan_search_are_counted(tmp_path):
    """black-box testing: with a process-group SIGTERM, Pool workers were alive when the owner
    looked for orphans and dead when it counted the living's segments: neither sent nor said."""
    from provkg.capture.spool import Spool

    spool = Spool(tmp_path / "spool", "r")
    spool.directory.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (spool.directory / f"{1:020d}-{dead}-00000001.jsonl").write_text('{"x": 1}\n')
    assert spool.others_segments() == 1  # not taken over: counted whoever wrote it
    assert spool.adopt_orphans() == 1 and spool.others_segments() == 0


def test_a_worker_s_task_begin_says_which_process_ran_it(tmp_path):
    """black-box testing: S-PROV put every invocation at the run's process, whichever worker
    ran it: the workers' events named no process."""
    ctx = mp.get_context("fork")
    with capture.workflow("where", sink=f"file:{tmp_path / 'out'}", run_id="w",
                          spool=tmp_path / "spool") as wf:
        child = ctx.Process(target=explicit_child, args=(1,))
        child.start()
        child.join()
        with wf.task("own"):
            pass
    begins = {e["transformation"]: e for e in read_events(tmp_path / "out")
              if e["type"] == "task" and e["event"] == "begin"}
    assert begins["child"]["environment"]["pid"] == child.pid
    assert begins["square"]["environment"] == begins["child"]["environment"]
    assert "environment" not in begins["own"]  # the run's own environment names the owner's
