"""kill -9 the server five times while a capture client streams 100,000 task events: after restart
and a replay of the client's spool, every event is in the store exactly once."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from api_support import ApiServer

from provkg import capture
from provkg.capture.replay import replay
from provkg.vocab import PROV, PROVLAKE

TASKS = 50_000  # a begin and an end each: 100,000 task events
KILLS = 5


@pytest.mark.slow
def test_kill_9_five_times_during_a_100k_event_stream(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = ApiServer(tmp_path / "server").start()
    spool = tmp_path / "spool"
    rng = random.Random(7)
    restarts: list[threading.Thread] = []

    def crash_and_restart() -> None:
        server.kill()
        restart = threading.Thread(target=lambda: (time.sleep(rng.uniform(0.1, 0.5)), server.start()))
        restart.start()
        restarts.append(restart)

    chunk = TASKS // 50
    kill_after = {8, 17, 26, 35, 44}  # chunks of 1,000 tasks: the kills land mid-stream
    try:
        wf = capture.workflow("fault-stream", sink=server.url, run_id="fault-run", spool=spool,
                              batch_size=1000, linger=0.05, flush_timeout=60, max_queue=200_000)
        with wf:
            for c in range(50):
                for i in range(c * chunk, (c + 1) * chunk):
                    wf.task("step", index=i).begin().end()
                if c in kill_after:
                    if restarts:
                        restarts[-1].join()  # the previous restart is up before the next kill
                    crash_and_restart()
                time.sleep(0.15)
        for restart in restarts:
            restart.join()
        assert len(restarts) == KILLS
        # what the client could not deliver waits in its spool: replay it (provkg replay)
        report = replay(spool, server.url)
        print(f"replayed from the client spool: {report.events} events")
        queue = server.wait_applied(timeout=120)
        assert queue["backlog_events"] == 0 and queue["rejected_batches"] == 0
        # the counters add up after restarts too (what the last start found on disk included)
        assert queue["accepted_events"] + queue["found_at_start_events"] == queue["applied_events"]
        rows = server.http.get("/v1/sparql", params={"query": f"""
            SELECT (COUNT(?b) AS ?begins) (COUNT(DISTINCT ?t) AS ?tasks)
            WHERE {{ ?t <{PROVLAKE.isPartOf}> ?run ; <{PROV.startedAtTime}> ?b }}"""},
            headers={"Accept": "application/vnd.provkg.rows+json"}).json()["rows"]
        ends = server.http.get("/v1/sparql", params={"query": f"""
            SELECT (COUNT(?e) AS ?ends) WHERE {{ ?t <{PROVLAKE.isPartOf}> ?run ; <{PROV.endedAtTime}> ?e }}"""
        }, headers={"Accept": "application/vnd.provkg.rows+json"}).json()["rows"]
        assert rows == [[TASKS, TASKS]], "each task's begin exactly once"
        assert ends == [[TASKS]], "each task's end exactly once"
        # the kills were felt: the server replayed its on-disk queue, or the client spooled (and
        # re-sent the spool itself once the server was back, or left it to the replay above)
        client_spooled = "spooling to" in caplog.text
        assert server.log().count("replaying") >= 1 or report.events > 0 or client_spooled
        assert "Traceback" not in server.log()
    finally:
        for restart in restarts:
            restart.join()
        server.stop()
        server.http.close()
