"""`provkg export`: a store written out as N-Quads and loaded back elsewhere answers the same,
keeps each graph and the specs it holds (found by black-box testing: a CONSTRUCT dump merged
the domain KG into the default graph, and a later `load --graph --replace` left old facts)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from lifecycle import build_lifecycle
from test_queries import expected

from provkg.cli import main
from provkg.service.ingest import ingest_events, stored_specs
from provkg.service.querying import run_query
from provkg.store import open_store

KG_GRAPH = "https://example.org/graph/seismic-kg"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[str, object]:
    lc = build_lifecycle()
    url = f"oxigraph:{tmp_path_factory.mktemp('export') / 'db'}"
    with open_store(url) as store:
        ingest_events(store, lc.events, specs=list(lc.specs.values()))
        store.add(lc.kg, graph=KG_GRAPH)
    return url, lc


@pytest.mark.parametrize("target", ["oxigraph", "rdflib:"])
def test_an_exported_store_loaded_elsewhere_answers_the_same(source, tmp_path: Path, capsys,
                                                              target: str) -> None:
    url, lc = source
    dump = tmp_path / "backup.nq.gz"
    assert main(["export", str(dump), "--store", url]) == 0
    assert "exported" in capsys.readouterr().out
    with open_store(url) as before:
        lines = gzip.decompress(dump.read_bytes()).decode().splitlines()
        assert len(lines) == before.count()
        graphs, per_graph = before.graphs(), {g: before.count(graph=g) for g in before.graphs()}
        specs = sorted(s.workflow for s in stored_specs(before))
    into = f"oxigraph:{tmp_path / 'moved'}" if target == "oxigraph" else target
    with open_store(into) as after:
        from provkg.service.loading import load_files

        load_files(after, [dump], progress=False)
        assert after.graphs() == graphs == [KG_GRAPH]
        assert {g: after.count(graph=g) for g in graphs} == per_graph
        assert sorted(s.workflow for s in stored_specs(after)) == specs
        for name, (params, rows) in expected(lc).items():
            if name in ("q1", "q4", "q6", "q7", "d3", "d5"):
                assert run_query(after, name, params).rows == rows, name


def test_export_of_one_graph_and_wrong_names(source, tmp_path: Path, capsys) -> None:
    url, lc = source
    kg = tmp_path / "kg.nt"
    assert main(["export", str(kg), "--graph", KG_GRAPH, "--store", url]) == 0
    assert len(kg.read_text().splitlines()) == len(set(lc.kg))
    assert main(["export", str(tmp_path / "all.csv"), "--store", url]) == 1
    assert "the name says no export format" in capsys.readouterr().err
    assert not (tmp_path / "all.csv").exists()
    assert main(["export", str(tmp_path / "x.nq"), "--store", f"oxigraph:{tmp_path / 'none'}"]) == 1
    assert "no store in" in capsys.readouterr().err


def test_export_and_load_refuse_what_would_lose_data(source, tmp_path: Path, capsys) -> None:
    """Found by black-box testing: EXP.NQ.GZ was written uncompressed (unreadable back), a
    mistyped --graph wrote an empty backup with exit 0, a remote store's export and a cut-off
    .gz load were tracebacks (the load's other files not loaded)."""
    url, lc = source
    upper = tmp_path / "EXP.NQ.GZ"
    assert main(["export", str(upper), "--store", url]) == 0
    assert gzip.decompress(upper.read_bytes())  # compressed: loadable
    capsys.readouterr()
    assert main(["export", str(tmp_path / "g.nt"), "--graph", "https://example.org/nope",
                 "--store", url]) == 1
    assert "the store has no graph https://example.org/nope" in capsys.readouterr().err
    assert not (tmp_path / "g.nt").exists()
    assert main(["export", str(tmp_path / "r.nq"), "--store", "oxigraph+http://127.0.0.1:9"]) == 1
    assert "cannot be exported by provkg" in capsys.readouterr().err
    cut = tmp_path / "cut.nq.gz"
    cut.write_bytes(upper.read_bytes()[:2000])
    fine = tmp_path / "fine.nt"
    fine.write_text('<http://example.org/a> <http://example.org/p> "1" .\n')
    into = f"oxigraph:{tmp_path / 'into'}"
    assert main(["load", str(cut), str(fine), "--store", into]) == 1
    assert "cut.nq.gz is cut short or damaged" in capsys.readouterr().err
    with open_store(into) as store:
        assert store.count() == 1  # the other file, and nothing of the cut one
