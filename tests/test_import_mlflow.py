"""``provkg import mlflow``: a real MLflow store (sqlite, filled with the mlflow package
itself) imported into provkg; every expected answer is read back from MLflow, not from provkg."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

mlflow = pytest.importorskip("mlflow")
np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

from mlflow.tracking import MlflowClient  # noqa: E402

from provkg.cli import main  # noqa: E402
from provkg.queries.pairs import format_value  # noqa: E402
from provkg.service.importing import import_mlflow  # noqa: E402
from provkg.service.querying import run_query, run_sparql  # noqa: E402
from provkg.store import Store, open_store  # noqa: E402
from provkg.term import mint_iri  # noqa: E402
from provkg.vocab import PROV, PROVKG, PROVLAKE, XSD  # noqa: E402

# MLflow's own use of SQLAlchemy and its other packages warns of their future; not provkg's
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]

SOURCE = "s3://bucket/flowers.npy"
PREFIXES = " ".join(f"PREFIX {v.prefix}: <{v.namespace}>" for v in (PROV, PROVLAKE, PROVKG, XSD))
T0 = 1_790_000_000_000  # ms, as MLflow keeps times


@dataclass
class Tracking:
    uri: str
    client: Any
    runs: dict[str, str]  # run name -> run id
    models: dict[str, Any]  # run name -> its logged model


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tracking]:
    """Three finished runs, one killed and one still running of experiment ``flowers``, and
    one run of ``sweep`` whose metric ``lr`` shares its name with a param."""
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as env:
        # nothing leaves the machine: an explicit tracking URI, no telemetry
        env.setenv("MLFLOW_TRACKING_URI", uri)
        env.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        env.setenv("DO_NOT_TRACK", "true")
        mlflow.set_tracking_uri(uri)
        client = MlflowClient(tracking_uri=uri)
        flowers = client.create_experiment("flowers", artifact_location=(root / "art").as_uri())
        sweep = client.create_experiment("sweep", artifact_location=(root / "art2").as_uri())
        notes = root / "notes.txt"
        notes.write_text("trained on flowers\n")
        legacy = root / "legacy"
        legacy.mkdir()
        (legacy / "MLmodel").write_text("flavors: {}\n")
        arr = np.arange(20, dtype=float).reshape(10, 2)
        runs: dict[str, str] = {}
        models: dict[str, Any] = {}
        plan = [("r1", 0.01, 32, [0.9, 0.6, 0.4], 0.81, "FINISHED"),
                ("r2", 0.1, 64, [0.8, 0.3, 0.2], 0.93, "FINISHED"),
                ("r3", 0.05, 32, [1.0, 0.7], 0.70, "KILLED"),
                ("r4", 0.2, 16, [0.95, 0.9], None, None)]  # still running
        for n, (name, lr, bs, losses, acc, status) in enumerate(plan):
            start = T0 + n * 100_000
            run = client.create_run(flowers, start_time=start, run_name=name, tags={"team": "vision"})
            rid = runs[name] = run.info.run_id
            client.log_param(rid, "lr", lr)
            client.log_param(rid, "batch_size", bs)
            client.log_param(rid, "optimizer", "adam")
            for step, loss in enumerate(losses):
                client.log_metric(rid, "loss", loss, timestamp=start + 1_000 * (step + 1) * (n + 2), step=step)
            with mlflow.start_run(run_id=rid):
                if name == "r3":  # a dataset without a URI source
                    df = pd.DataFrame({"x": [1.0, 2.0], "y": [0, 1]})
                    mlflow.log_input(mlflow.data.from_pandas(df, name="flowers-small"), context="training")
                else:
                    mlflow.log_input(mlflow.data.from_numpy(arr, name="flowers", source=SOURCE),
                                     context="training")
                models[name] = mlflow.create_external_model(name="clf")
                mlflow.log_artifact(str(notes))
                if name == "r1":
                    mlflow.log_artifacts(str(legacy), artifact_path="legacy_model")
            if acc is not None:
                client.log_metric(rid, "accuracy", acc, timestamp=start + 50_000)
            if status is not None:
                client.set_terminated(rid, status, end_time=start + 60_000)
            else:  # the fluent run ended it; back to running
                client.update_run(rid, status="RUNNING")
        run = client.create_run(sweep, start_time=T0, run_name="s1")
        runs["s1"] = run.info.run_id
        client.log_param(run.info.run_id, "lr", 0.1)
        for step in range(3):
            client.log_metric(run.info.run_id, "lr", 0.1 / (step + 1), timestamp=T0 + step * 1000, step=step)
        client.set_terminated(run.info.run_id, "FINISHED", end_time=T0 + 10_000)
        yield Tracking(uri, client, runs, models)
        mlflow.set_tracking_uri(None)


@pytest.fixture(scope="module")
def imported(tracking: Tracking) -> Iterator[tuple[Store, Any]]:
    with open_store("memory:") as store:
        yield store, import_mlflow(store, tracking.uri)


def _training(tracking: Tracking, name: str) -> str:
    return mint_iri("task", f"mlflow-{tracking.runs[name]}/training")


def _rows(store: Store, name: str, params: dict[str, object]) -> list[list[object]]:
    return [list(r) for r in run_query(store, name, params).rows]


def test_the_report_counts_the_runs(imported: tuple[Store, Any]) -> None:
    _, report = imported
    assert report.experiments == ["flowers", "sweep"]
    assert (report.runs, report.unfinished) == (5, 1)
    assert report.ingest.triples > 0 and not report.ingest.warnings


def test_d3_gives_each_step_as_an_epoch_with_mlflows_loss_and_times(
        tracking: Tracking, imported: tuple[Store, Any]) -> None:
    store, _ = imported
    for name in ("r1", "r2", "r4"):
        run = tracking.client.get_run(tracking.runs[name])
        history = sorted(tracking.client.get_metric_history(run.info.run_id, "loss"), key=lambda m: m.step)
        before = run.info.start_time
        expected = []
        for m in history:
            expected.append([m.step, pytest.approx((m.timestamp - before) / 1000), m.value])
            before = m.timestamp
        assert _rows(store, "d3", {"training": _training(tracking, name)}) == expected


def _pairs(params: dict[str, str]) -> str:
    def number(text: str) -> object:
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text
    return "; ".join(f"{k}={format_value(number(v))}" for k, v in sorted(params.items()))


def test_d5_ranks_the_trainings_by_mlflows_final_metric(tracking: Tracking, imported: tuple[Store, Any]) -> None:
    store, _ = imported
    runs = [tracking.client.get_run(tracking.runs[n]) for n in ("r1", "r2", "r3", "r4")]
    ranked = sorted((r for r in runs if "accuracy" in r.data.metrics),
                    key=lambda r: -r.data.metrics["accuracy"])
    expected = [[_training(tracking, r.info.run_name), r.data.metrics["accuracy"], _pairs(r.data.params)]
                for r in ranked[:2]]
    assert _rows(store, "d5", {"workflow": "flowers", "k": 2, "measure": "accuracy"}) == expected


def test_q3_and_the_lineage_lead_from_the_dataset_to_the_logged_model(
        tracking: Tracking, imported: tuple[Store, Any]) -> None:
    store, _ = imported
    on_source = [tracking.client.get_run(tracking.runs[n]) for n in ("r1", "r2")]
    best = min(on_source, key=lambda r: r.data.metrics["loss"])
    model = tracking.models[best.info.run_name]
    model_iri = mint_iri("value", f"mlflow-model/{model.model_id}")
    rows = _rows(store, "q3", {"dataset": SOURCE, "measure": "loss"})
    assert {tuple(r[:3]) for r in rows} == (
        {(model_iri, "evaluation", k) for k in best.data.metrics}
        | {(model_iri, "hyperparameter", k) for k in best.data.params})
    assert {r[2]: r[3] for r in rows if r[1] == "evaluation"} == best.data.metrics
    # the model was generated by the training that used the dataset, and is at its artifact URI
    answer = run_sparql(store, f"""{PREFIXES}
        SELECT ?training (STR(?at) AS ?location) WHERE {{
          <{model_iri}> prov:wasGeneratedBy ?training ; provlake:location ?at .
          ?training prov:used ?dataset . ?dataset provlake:location "{SOURCE}"^^xsd:anyURI .
        }}""")
    assert [list(r) for r in answer.rows] == [[_training(tracking, best.info.run_name),  # type: ignore[union-attr]
                                               model.artifact_location]]


def test_runs_keep_status_tags_artifacts_and_a_dataset_without_source(
        tracking: Tracking, imported: tuple[Store, Any]) -> None:
    store, _ = imported

    def ask(body: str) -> bool:
        return bool(run_sparql(store, f"{PREFIXES} ASK {{ {body} }}"))

    r1, r3, r4 = (mint_iri("run", f"mlflow-{tracking.runs[n]}") for n in ("r1", "r3", "r4"))
    assert ask(f'<{r3}> provkg:status "failed"')
    assert not ask(f"<{r4}> prov:endedAtTime ?t")  # still running
    assert ask(f'<{r1}> prov:used ?tag . ?tag prov:value "r1"')  # mlflow.runName
    assert ask(f'<{r1}> prov:used ?tag . ?tag prov:value "vision"')
    artifact_uri = tracking.client.get_run(tracking.runs["r1"]).info.artifact_uri
    for path in ("notes.txt", "legacy_model"):
        assert ask(f'?v prov:wasGeneratedBy <{_training(tracking, "r1")}> ; '
                   f'provlake:location ?l . FILTER(STR(?l) = "{artifact_uri}/{path}")')
    assert ask(f'<{_training(tracking, "r3")}> prov:used ?d . '
               'FILTER(STRSTARTS(STR(?d), "https://w3id.org/provkg/id/value/mlflow-dataset/"))')


def test_a_param_named_like_a_metric_becomes_params_dot_name(
        tracking: Tracking, imported: tuple[Store, Any]) -> None:
    store, _ = imported
    rows = _rows(store, "p1", {"workflow": "sweep"})
    assert [r[:2] for r in rows] == [[_training(tracking, "s1"), "params.lr=0.1"]]


def test_importing_again_adds_no_triple(tracking: Tracking, imported: tuple[Store, Any]) -> None:
    store, _ = imported
    before = store.count()
    again = import_mlflow(store, tracking.uri)
    assert store.count() == before
    assert again.notes == []  # the same runs give the same spec


def test_the_command_imports_one_experiment(tracking: Tracking, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = f"oxigraph:{tmp_path / 'kg'}"
    args = ["import", "mlflow", "--tracking-uri", tracking.uri, "--experiment", "sweep", "--store", store]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("imported 1 run of 1 experiment (sweep): ")
    assert main([*args[:-4], "--experiment", "nope", "--store", store]) == 1
    assert "no MLflow experiment named 'nope'" in capsys.readouterr().err


def test_without_mlflow_the_command_says_which_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow: ModuleNotFoundError
    code = main(["import", "mlflow", "--tracking-uri", "sqlite:///x.db", "--store", "memory:"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and 'pip install "provkg[mlflow]"' in err
