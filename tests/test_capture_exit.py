"""A process that leaves with a workflow still open: at interpreter exit, and on SIGTERM (how
SLURM and Kubernetes stop jobs), the open tasks and the run end ``failed`` with a message, and
every queued event reaches the sink. Each test runs a child Python and reads its file sink."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provkg import capture

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

PRELUDE = """
import os, signal, sys, time
from provkg import capture
out, spool = sys.argv[1], sys.argv[2]
"""


def run_child(code: str, tmp_path: Path, *, terminate: bool = False,
              sig: int = signal.SIGTERM) -> tuple[int, str, list[dict]]:
    """Run ``code`` in a child Python; with ``terminate``, send it ``sig`` once it printed
    "ready". Returns its exit code, its stderr and the events in its file sink."""
    out, spool = tmp_path / "out", tmp_path / "spool"
    argv = [sys.executable, "-c", PRELUDE + textwrap.dedent(code), str(out), str(spool)]
    # the default action for SIGHUP in the child, whatever this process has: run under nohup
    # (SIGHUP ignored, inherited) the library rightly leaves an ignored SIGHUP alone, and the
    # SIGHUP case waited 60 s for nothing
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        if terminate:
            assert child.stdout.readline().strip() == "ready"
            child.send_signal(sig)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    events = [json.loads(line) for path in sorted(out.glob("*.jsonl"))
              for line in path.read_text().splitlines() if line.strip()]
    return child.returncode, stderr, events


def ends(events: list[dict]) -> dict[str, tuple[str, str | None]]:
    """id -> (status, message) of every end event (exactly one per id)."""
    found = [e for e in events if e["event"] == "end"]
    assert len({e["id"] for e in found}) == len(found)
    return {e["id"]: (e["status"], e.get("message")) for e in found}


OPEN_RUN = """
wf = capture.workflow("w", sink=f"file:{out}", spool=spool, run_id="r", linger=60).begin()
training = wf.task("training").begin()
for i in range(3):
    with wf.task("epoch", parent=training, index=i) as epoch:
        epoch.generate(loss=1.0 / (i + 1))
"""


@pytest.mark.parametrize(("ending", "code", "suffix"), [
    ("falls off the end", "", ""),
    ("sys.exit(0)", "sys.exit(0)", ""),
    ("uncaught exception", "raise RuntimeError('crash')", ": uncaught RuntimeError: crash"),
])
def test_exit_with_the_run_open_ends_its_open_tasks_and_the_run_failed(tmp_path, ending, code,
                                                                       suffix):
    returncode, stderr, events = run_child(OPEN_RUN + code, tmp_path)
    assert returncode == (1 if suffix else 0), stderr
    message = "the process exited before end() was called" + suffix
    assert ends(events) == {
        "r.2": ("finished", None), "r.3": ("finished", None), "r.4": ("finished", None),
        "r.1": ("failed", message),  # training, begun and never ended
        "r": ("failed", message),
    }
    assert [e["event"] for e in events if e["type"] == "workflow"] == ["begin", "end"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_ends_the_open_tasks_and_the_run_flushes_and_still_dies_of_sigterm(tmp_path, sig):
    # SIGHUP too (a closed terminal or ssh session): it lost the last events and left the run
    # open (black-box testing)
    code = """
    with capture.workflow("w", sink=f"file:{out}", spool=spool, run_id="r", linger=60) as wf:
        with wf.task("training") as training:
            for i in range(3):
                with wf.task("epoch", parent=training, index=i) as epoch:
                    epoch.generate(loss=1.0 / (i + 1))
            with wf.task("epoch", parent=training, index=3):
                print("ready", flush=True)
                time.sleep(60)
    """
    returncode, stderr, events = run_child(code, tmp_path, terminate=True, sig=sig)
    assert returncode == -sig, stderr  # a shell reports 143 / 129
    stopped = ("failed", f"terminated by {signal.Signals(sig).name}")
    assert ends(events) == {"r.2": ("finished", None), "r.3": ("finished", None),
                            "r.4": ("finished", None), "r.5": stopped, "r.1": stopped, "r": stopped}


def test_a_forked_worker_dies_of_sigterm_at_once_with_its_events_on_disk(tmp_path):
    """A process that does not own the run keeps the default SIGTERM (a Python-level handler
    could keep an idle Pool worker from dying: Pool.terminate() would hang); what it recorded
    is on disk already, and the owner's run ends as usual."""
    code = """
    import multiprocessing as mp
    import pathlib

    def slow(i, queue):
        with capture.current_workflow().task("slow", index=i):
            # what SIGTERM does in this worker, in the middle of its task
            queue.put(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
            time.sleep(600)  # far past the join below: only the signal ends it in time

    def handler_in_child(queue):
        queue.put(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)

    if __name__ == "__main__":
        with capture.workflow("w", sink=f"file:{out}", spool=spool, run_id="r") as wf:
            assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # the owner's: ours
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            ctx.Process(target=handler_in_child, args=(queue,)).start()
            print("default in a forked child:", queue.get(timeout=60), flush=True)
            worker = ctx.Process(target=slow, args=(0, queue))
            worker.start()
            print("default in the worker's task:", queue.get(timeout=60), flush=True)
            deadline = time.monotonic() + 60
            while not any("slow" in p.read_text() for p in pathlib.Path(out).glob("*")):
                if time.monotonic() > deadline:
                    worker.kill()
                    sys.exit("the worker's task begin never reached the sink")
                time.sleep(0.02)
            worker.terminate()  # SIGTERM, in the middle of its task
            worker.join(60)
            print("worker exit", worker.exitcode, flush=True)
            if worker.exitcode is None:
                worker.kill()
    """
    code = textwrap.dedent(code)
    out, spool = tmp_path / "out", tmp_path / "spool"
    child = subprocess.run([sys.executable, "-c", PRELUDE + code, str(out), str(spool)],
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[0] == "default in a forked child: True"
    # the worker has no Python-level SIGTERM handler: the signal's default action kills it
    # where it is, without running any code of its own
    assert lines[1] == "default in the worker's task: True"
    assert lines[2].split() == ["worker", "exit", str(-signal.SIGTERM)]
    events = [json.loads(line) for path in sorted(out.glob("*.jsonl"))
              for line in path.read_text().splitlines() if line.strip()]
    (slow,) = [e["id"] for e in events if e.get("transformation") == "slow"]  # its begin, on disk
    assert slow.startswith("r.") and ends(events) == {"r": ("finished", None)}


def test_the_sigterm_handler_is_ours_only_while_a_run_is_open_and_never_replaces_yours(tmp_path):
    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        pytest.skip("this test process has a SIGTERM handler of its own")
    with capture.workflow("w", sink=f"file:{tmp_path / 'a'}", spool=tmp_path / "spool"):
        ours = signal.getsignal(signal.SIGTERM)
        assert ours != signal.SIG_DFL and callable(ours)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def users(signum, frame):
        pass

    signal.signal(signal.SIGTERM, users)
    try:
        with capture.workflow("w", sink=f"file:{tmp_path / 'b'}", spool=tmp_path / "spool"):
            assert signal.getsignal(signal.SIGTERM) is users
        assert signal.getsignal(signal.SIGTERM) is users
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # a handler of the user's, set before the run, decides what SIGTERM does
    code = """
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(3))
    with capture.workflow("w", sink=f"file:{out}", spool=spool, run_id="r") as wf:
        with wf.task("training"):
            print("ready", flush=True)
            time.sleep(60)
    """
    returncode, stderr, events = run_child(code, tmp_path, terminate=True)
    assert returncode == 3, stderr
    assert ends(events) == {"r.1": ("failed", "SystemExit: 3"), "r": ("failed", "SystemExit: 3")}
