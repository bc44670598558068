"""`provkg export` formats and names, and `GET /v1/export` serving the same as the CLI."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import prov
import pyoxigraph as ox
import pytest
from api_support import ApiServer
from test_export_prov import document_counts, golden_store

from provkg.cli import main
from provkg.service.export import export_format
from provkg.vocab import DEFAULT_BASE


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return golden_store(f"oxigraph:{tmp_path_factory.mktemp('formats') / 'db'}", "typed")


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["export", *argv])
    return rc, out.getvalue()


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.nq", "nq"), ("a.NQ.gz", "nq"), ("a.trig", "trig"), ("a.ttl", "ttl"), ("a.json", "prov-json"),
    ("a.provn", "prov-n"), ("a.provx", "prov-xml"), ("a.xml", "prov-xml"), ("a.jsonld", "prov-jsonld"),
    ("a.zip", "ro-crate"), ("crate/", "ro-crate"), ("crate", "ro-crate"), ("-", "nq")])
def test_the_format_comes_from_the_name(name: str, fmt: str) -> None:
    assert export_format(name) == fmt


@pytest.mark.parametrize("argv, said", [
    (["x.csv"], "the name says no export format"),
    (["x.json", "--run", "no-such-run"], "the store has no run 'no-such-run' (runs it holds include: run-1)"),
    (["x.json", "--lineage", "no-such-value"], "the store has no value 'no-such-value'"),
    (["x.json.gz", "--format", "prov-json"], "only a whole-store N-Quads export is compressed"),
    (["x.nt", "--graph", "https://example.org/g", "--run", "run-1"], "--graph exports one named graph"),
])
def test_bad_names_and_scopes_are_said_plainly(url: str, tmp_path: Path, capsys, argv: list[str],
                                               said: str) -> None:
    rc = main(["export", str(tmp_path / argv[0]), *argv[1:], "--store", url])
    assert rc == 1 and said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a partial file


def test_run_and_lineage_exclude_each_other(url: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["export", str(tmp_path / "x.json"), "--run", "run-1", "--lineage", "model-0", "--store", url])
    assert stopped.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_a_run_as_rdf_is_the_triples_about_its_nodes(url: str, tmp_path: Path) -> None:
    for name, fmt in (("run.trig", ox.RdfFormat.TRIG), ("run.ttl", ox.RdfFormat.TURTLE), ("run.nq", ox.RdfFormat.N_QUADS)):
        rc, said = _run(str(tmp_path / name), "--run", "run-1", "--store", url)
        assert rc == 0 and "run run-1" in said
        quads = list(ox.parse(path=str(tmp_path / name), format=fmt))
        subjects = {q.subject.value for q in quads}
        assert f"{DEFAULT_BASE}task/run-1/training-0/epoch-0/batch-1" in subjects
        assert f"{DEFAULT_BASE}value/model-0" in subjects
        assert not any("owl#Ontology" in q.object.value for q in quads if isinstance(q.object, ox.NamedNode))


def test_the_whole_store_as_nq_is_still_the_backup(url: str, tmp_path: Path) -> None:
    rc, _ = _run(str(tmp_path / "all.nq.gz"), "--store", url)
    quads = list(ox.parse(gzip.decompress((tmp_path / "all.nq.gz").read_bytes()), format=ox.RdfFormat.N_QUADS))
    assert rc == 0 and any(q.graph_name != ox.DefaultGraph() for q in quads)  # the ontologies' graphs kept
    rc, _ = _run(str(tmp_path / "all.trig"), "--store", url)
    assert rc == 0 and len(list(ox.parse(path=str(tmp_path / "all.trig"), format=ox.RdfFormat.TRIG))) == len(quads)


@pytest.fixture(scope="module")
def server(url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("export-api")
    with ApiServer(folder, store=url) as srv:
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def test_the_api_serves_what_the_cli_writes(server: ApiServer, url: str, tmp_path: Path) -> None:
    got = server.http.get("/v1/export", params={"format": "prov-json", "run": "run-1"})
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
    assert 'filename="export.json"' in got.headers["content-disposition"]
    (tmp_path / "api.json").write_bytes(got.content)
    served = document_counts(prov.read(str(tmp_path / "api.json"), format="json"))
    assert served["activities"] == 9 and served["usages"] == 12
    provn = server.http.get("/v1/export", params={"format": "prov-n", "lineage": "model-0"})
    assert provn.status_code == 200 and provn.headers["content-type"].startswith("text/provenance-notation")
    assert provn.text.startswith("document")
    crate = server.http.get("/v1/export", params={"format": "ro-crate"})
    assert crate.status_code == 200 and crate.headers["content-type"] == "application/zip"
    graph = json.loads(zipfile.ZipFile(io.BytesIO(crate.content)).read("ro-crate-metadata.json"))["@graph"]
    assert any(e.get("@type") == "CreateAction" and e["@id"] == f"{DEFAULT_BASE}run/run-1" for e in graph)


@pytest.mark.parametrize("params, status, error", [
    ({"format": "csv"}, 400, "bad_parameter"),
    ({"run": "nope"}, 404, "not_found"),
    ({"lineage": "nope"}, 404, "not_found"),
    ({"run": "run-1", "lineage": "model-0"}, 400, "bad_parameter"),
])
def test_the_api_refuses_by_name(server: ApiServer, params: dict[str, str], status: int, error: str) -> None:
    got = server.http.get("/v1/export", params=params)
    assert got.status_code == status and got.json()["error"] == error, got.text
