"""The capture library's HTTP and MQTT sinks end to end into a real server (real Mosquitto, real
embedded Oxigraph), then canned queries over the API give the lifecycle's known answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_support import ApiServer, store_fingerprint
from lifecycle import SPECS, Lifecycle, build_lifecycle, load_lifecycle

from provkg.capture.broker import MosquittoBroker
from provkg.capture.http_sink import HttpSink
from provkg.capture.mqtt_sink import MqttSink
from provkg.service.querying import run_query
from provkg.store import open_store

TOKEN = "e2e-token"


@pytest.fixture(scope="module")
def lc() -> Lifecycle:
    return build_lifecycle()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, lc: Lifecycle) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("e2e")
    (folder / "server").mkdir()
    with open_store(f"oxigraph:{folder / 'server' / 'store'}") as seed:  # provkg load, in effect
        seed.add(lc.kg)
    with MosquittoBroker(folder / "mqtt") as broker:
        env = {"PROVKG_TOKEN": TOKEN, "PROVKG_MQTT_URL": f"{broker.url}/provkg/#",
               "PROVKG_MQTT_CLIENT_ID": "e2e-listener"}
        with ApiServer(folder / "server", env=env) as server:
            _wait_ready(server)  # the listener's subscription exists before anything is published
            for text in SPECS.values():
                response = server.http.post("/v1/specs", content=text, headers={
                    "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/yaml"})
                assert response.status_code == 201, response.text
            half = len(lc.events) // 2
            mqtt = MqttSink.from_url(f"{broker.url}/provkg?compression=zstd")
            http = HttpSink(server.url, token=TOKEN, compression="gzip")
            try:
                for i in range(0, half, 40):  # the first half over MQTT ...
                    mqtt.send(lc.events[i:min(i + 40, half)])
                for i in range(half, len(lc.events), 40):  # ... the rest over HTTP
                    http.send(lc.events[i:i + 40])
            finally:
                mqtt.close()
                http.close()
            _wait_for(server, len(lc.events))
            yield server
        assert "Traceback" not in server.log(), server.log()


def _wait_ready(server: ApiServer, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while server.http.get("/health/ready").status_code != 200:
        assert time.monotonic() < deadline, server.http.get("/health/ready").json()
        time.sleep(0.05)


def _wait_for(server: ApiServer, n_events: int, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue = server.http.get("/health/ready").json()["queue"]
        if queue["applied_events"] >= n_events and queue["backlog_events"] == 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"only {queue} of {n_events} events applied")


@pytest.fixture(scope="module")
def reference(lc: Lifecycle) -> Iterator[object]:
    """The same lifecycle mapped in process, for queries whose answers the plan cannot spell."""
    with open_store("memory:") as store:
        load_lifecycle(store, lc)
        yield store


def api_rows(server: ApiServer, name: str, **params: object) -> list[list[object]]:
    response = server.http.get(f"/v1/queries/{name}", params=params)
    assert response.status_code == 200, response.text
    return response.json()["rows"]


def test_every_event_arrived_through_both_transports(deployment: ApiServer, lc: Lifecycle) -> None:
    queue = deployment.http.get("/health/ready").json()["queue"]
    assert queue["applied_events"] == len(lc.events) and queue["rejected_batches"] == 0


def test_d3_epoch_times_and_losses_match_the_plan(deployment: ApiServer, lc: Lifecycle) -> None:
    plan = lc.trainings[0]
    rows = api_rows(deployment, "d3", training=plan.id)
    expected = [[e.index, e.seconds, plan.epoch_measures[e.index]["loss"]] for e in plan.epochs]
    assert [[r[0], pytest.approx(r[1]), pytest.approx(r[2])] for r in rows] == expected


def test_q3_names_the_model_with_the_least_loss(deployment: ApiServer, lc: Lifecycle) -> None:
    dataset = lc.trainings[0].dataset
    candidates = [t for t in lc.trainings if t.dataset == dataset]
    best = min(candidates, key=lambda t: t.measures["loss"])
    rows = api_rows(deployment, "q3", dataset=dataset)
    assert rows and {r[0] for r in rows} == {next(r[0] for r in rows if best.model in str(r[0]))}
    hyper = {r[2]: r[3] for r in rows if r[1] == "hyperparameter"}
    assert hyper["learning_rate"] == best.hyperparameters["learning_rate"]


@pytest.mark.parametrize("name", ["q1", "q2", "q3", "q4", "q6", "q7", "d2", "d3", "d5", "p1"])
def test_canned_queries_over_the_api_equal_in_process_answers(deployment: ApiServer, lc: Lifecycle,
                                                              reference: object, name: str) -> None:
    plan = lc.trainings[0]
    params = {"q1": {"model": plan.model}, "q2": {"model": plan.model},
              "q3": {"dataset": plan.dataset}, "q4": {"dataset": plan.dataset},
              "q6": {"dataset": plan.dataset}, "q7": {"dataset": plan.dataset},
              "d3": {"training": plan.id}, "d5": {"workflow": "flower-training"},
              "p1": {"workflow": "flower-training"}, "d2": {"model": plan.model}}[name]
    expected = run_query(reference, name, params).rows  # type: ignore[arg-type]
    assert expected, f"{name} has an answer on this lifecycle"
    assert api_rows(deployment, name, **params) == [list(r) for r in expected]


def test_csv_on_request(deployment: ApiServer, lc: Lifecycle) -> None:
    response = deployment.http.get("/v1/queries/q4", params={"dataset": lc.trainings[0].dataset},
                                   headers={"Accept": "text/csv"})
    assert response.headers["content-type"].startswith("text/csv")
    assert response.text.splitlines()[0] == "training,epoch,batches,avg_seconds,min_seconds,max_seconds"
    # RFC 4180 line ends, as /v1/sparql's CSV (found by black-box testing: LF here, CRLF there)
    assert response.text.count("\r\n") == len(response.text.splitlines())


def test_resending_everything_changes_nothing(deployment: ApiServer, lc: Lifecycle) -> None:
    before = store_fingerprint(deployment.store_dir)
    http = HttpSink(deployment.url, token=TOKEN, compression="zstd")
    try:
        for i in range(0, len(lc.events), 500):
            http.send(lc.events[i:i + 500])
    finally:
        http.close()
    _wait_for(deployment, 2 * len(lc.events))
    assert store_fingerprint(deployment.store_dir) == before
