"""`provkg export --format ro-crate`: a Workflow Run Crate that roc-validator accepts at the
`workflow-run-crate` profile (no REQUIRED issue), offline.

roc-validator resolves the crate's JSON-LD context over HTTP, through its own HTTP cache; here
it runs offline (nothing is fetched) on a cache holding the RO-Crate 1.1 context of
`tests/data/ro-crate-1.1-context.jsonld` (from the `rocrate` 0.9.0 wheel on PyPI)."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
import zipfile
from pathlib import Path

import pytest
from test_export_prov import golden_store

from provkg.cli import main
from provkg.store import open_store
from provkg.vocab import DEFAULT_BASE

CONTEXT = Path(__file__).parent / "data" / "ro-crate-1.1-context.jsonld"
CONTEXT_URL = "https://w3id.org/ro/crate/1.1/context"


def _offline_cache(folder: Path) -> Path:
    """A roc-validator HTTP cache (requests-cache, SQLite) holding the RO-Crate 1.1 context."""
    import requests
    import urllib3
    from requests_cache import CachedSession

    path = folder / "http_cache"
    body = CONTEXT.read_bytes()
    session = CachedSession(cache_name=str(path), backend="sqlite", allowable_methods=("GET",), expire_after=-1)
    response = requests.Response()
    response.status_code, response._content, response.url = 200, body, CONTEXT_URL
    response.request = requests.Request("GET", CONTEXT_URL).prepare()
    response.raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers={"Content-Type": "application/ld+json"},
                                        status=200, preload_content=False, request_url=CONTEXT_URL)
    response.headers["Content-Type"] = "application/ld+json"
    session.cache.save_response(response)
    session.close()
    return path


def required_issues(crate: Path, cache: Path) -> list[str]:
    """roc-validator's REQUIRED-level issues for ``crate`` at the Workflow Run Crate profile."""
    from rocrate_validator import services

    settings = services.ValidationSettings(rocrate_uri=str(crate), profile_identifier="workflow-run-crate",
                                           requirement_severity="REQUIRED", offline=True, cache_path=cache)
    with warnings.catch_warnings():  # rdflib's deprecations, raised inside pyshacl
        warnings.simplefilter("ignore", DeprecationWarning)
        result = services.validate(settings)
    issues = [f"{i.check.identifier}: {i.message}" for i in result.get_issues()]
    assert result.passed() == (not issues)
    return issues


def _export(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["export", *argv]) == 0


def _graph(crate: Path) -> dict[str, dict]:
    if crate.suffix == ".zip":
        data = zipfile.ZipFile(crate).read("ro-crate-metadata.json")
    else:
        data = (crate / "ro-crate-metadata.json").read_bytes()
    return {e["@id"]: e for e in json.loads(data)["@graph"]}


def _ids(value: object) -> list[str]:
    return [v["@id"] for v in (value if isinstance(value, list) else [value])]  # type: ignore[index]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _offline_cache(tmp_path_factory.mktemp("roc-cache"))


@pytest.fixture(scope="module", params=["typed", "tagged", "sprov"])
def golden(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    url = f"oxigraph:{tmp_path_factory.mktemp('crate-' + request.param) / 'db'}"
    return golden_store(url, request.param), request.param


def test_roc_validator_accepts_the_workflow_run_crate(golden: tuple[str, str], cache: Path, tmp_path: Path) -> None:
    url, _ = golden
    _export(str(tmp_path / "crate"), "--store", url)
    _export(str(tmp_path / "crate.zip"), "--store", url)
    assert required_issues(tmp_path / "crate", cache) == []
    assert required_issues(tmp_path / "crate.zip", cache) == []


def test_the_crate_holds_the_run_as_a_create_action_with_its_inputs_and_outputs(golden: tuple[str, str],
                                                                               tmp_path: Path) -> None:
    url, schema = golden
    _export(str(tmp_path / "crate.zip"), "--run", "run-1", "--store", url)
    graph = _graph(tmp_path / "crate.zip")
    root = graph["./"]
    assert WORKFLOW_RUN in _ids(root["conformsTo"])
    workflow = graph[root["mainEntity"]["@id"]]
    assert set(workflow["@type"]) == {"File", "SoftwareSourceCode", "ComputationalWorkflow"}
    action = graph[f"{DEFAULT_BASE}run/run-1"]
    assert action["@type"] == "CreateAction" and action["instrument"]["@id"] == workflow["@id"]
    assert action["startTime"].startswith("2023-11-14T22:13:20") and action["endTime"].startswith("2023-11-14T22:13:23")
    inputs, outputs = _ids(action["object"]), _ids(action["result"])
    assert "file:///lake/train.h5" in inputs and graph["file:///lake/train.h5"]["@type"] == "File"
    assert "file:///lake/model-0.pt" in outputs  # the model, by its location
    assert f"{DEFAULT_BASE}value/run-1/training-0/epoch-0/batch-0/loss" not in outputs  # a batch's, not the run's
    learning_rate = graph[f"{DEFAULT_BASE}value/run-1/training-0/used/learning_rate"]
    assert learning_rate["@type"] == "PropertyValue" and learning_rate["value"] == 0.01
    parameter = graph[learning_rate["exampleOfWork"]["@id"]]
    assert parameter["@type"] == "FormalParameter" and parameter["additionalType"] == "Float"
    assert parameter["@id"] in _ids(workflow["input"])
    if schema != "sprov":  # the prospective attribute itself
        assert parameter["@id"] == f"{DEFAULT_BASE}spec/flower-training/training/learning_rate"
    agents = _ids(action["agent"])
    assert f"{DEFAULT_BASE}agent/alice" in agents and graph[f"{DEFAULT_BASE}agent/alice"]["@type"] == "Person"
    assert "provenance.json" in _ids(root["hasPart"])
    assert json.loads(zipfile.ZipFile(tmp_path / "crate.zip").read("provenance.json"))["activity"]


def test_data_is_referenced_unless_with_data_copies_the_local_files(tmp_path: Path, cache: Path) -> None:
    from provkg import capture

    data = tmp_path / "lake" / "train.csv"
    data.parent.mkdir()
    data.write_text("a,b\n1,2\n")
    events = tmp_path / "events"
    with capture.workflow("tiny", sink=f"file:{events}", run_id="tiny-1") as wf:
        with wf.task("training", used={"train_set": capture.ref(str(data)), "lr": 0.1}) as training:
            training.generate(loss=0.5)
    url = f"oxigraph:{tmp_path / 'db'}"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", str(events), "--store", url]) in (0, 1)  # no spec: warnings only
    _export(str(tmp_path / "referenced"), "--store", url)
    _export(str(tmp_path / "copied"), "--with-data", "--store", url)
    location = data.resolve().as_uri()
    assert location in _graph(tmp_path / "referenced") and not (tmp_path / "referenced" / "data").exists()
    copied = _graph(tmp_path / "copied")
    assert copied["data/train.csv"]["url"] == location
    assert (tmp_path / "copied" / "data" / "train.csv").read_text() == "a,b\n1,2\n"
    for crate in ("referenced", "copied"):
        assert required_issues(tmp_path / crate, cache) == [], crate
    with open_store(url, read_only=True) as store:  # the export wrote nothing into the store
        assert store.count() > 0


WORKFLOW_RUN = "https://w3id.org/ro/wfrun/workflow/0.5"
