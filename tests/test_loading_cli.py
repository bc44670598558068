"""``provkg init`` and ``provkg load`` through ``provkg.cli.main``, on embedded stores and real servers."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyoxigraph
import pytest

from provkg.cli import main
from provkg.ontology import all_ontology_paths, import_graphs, ontology_iri, ontology_names
from provkg.store import open_store
from provkg.testing import OxigraphServer, VirtuosoServer


def _triples_in(path: Path) -> int:
    return sum(1 for _ in pyoxigraph.parse(path=str(path)))


def _expected_ontologies() -> dict[str, int]:
    """provkg's ontologies and the ones they import (PROV-O, ML Schema), each in its graph."""
    ours = {ontology_iri(n): _triples_in(p) for n, p in zip(ontology_names(), all_ontology_paths())}
    return {**ours, **{graph: _triples_in(p) for graph, p in import_graphs().items()}}


def _check_init_output(out: str) -> None:
    for path in [*all_ontology_paths(), *import_graphs().values()]:
        assert path.name in out
    for graph, n in _expected_ontologies().items():
        assert graph in out and f"{n:,} triples" in out
    assert f"{sum(_expected_ontologies().values()):,} triples" in out


def test_init_in_memory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--store", "memory:"]) == 0
    _check_init_output(capsys.readouterr().out)


def test_init_on_disk_is_repeatable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["init", "--store", url]) == 0
    assert main(["init", "--store", url]) == 0  # refreshes, never duplicates blank nodes
    _check_init_output(capsys.readouterr().out)
    with open_store(url) as store:
        assert {g: store.count(graph=g) for g in store.graphs()} == _expected_ontologies()


def test_init_uses_the_environment_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROVKG_STORE", f"oxigraph:{tmp_path / 'env-db'}")
    assert main(["init"]) == 0
    assert (tmp_path / "env-db").is_dir()
    # set but empty (`PROVKG_STORE= provkg ...`) means unset: the default store, not an error
    monkeypatch.setenv("PROVKG_STORE", "")
    assert main(["init"]) == 0
    assert (tmp_path / "provkg-data").is_dir()


@pytest.mark.parametrize("server_fixture", ["oxigraph_server", "virtuoso_server"])
def test_init_and_load_against_servers(server_fixture: str, request: pytest.FixtureRequest,
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server: OxigraphServer | VirtuosoServer = request.getfixturevalue(server_fixture)
    url = server.store_url
    with open_store(url) as store:
        store.clear()
    try:
        assert main(["init", "--store", url]) == 0
        _check_init_output(capsys.readouterr().out)
        data = tmp_path / "kg.nt.gz"
        data.write_bytes(gzip.compress(b"<http://example.org/a> <http://example.org/p> \"\xc3\xa9t\xc3\xa9\" .\n"))
        assert main(["load", str(data), "--graph", "http://example.org/kg", "--store", url]) == 0
        assert "1 new triple  -> http://example.org/kg" in capsys.readouterr().out
        with open_store(url) as store:
            assert store.graphs() == sorted([*_expected_ontologies(), "http://example.org/kg"])
            assert store.select("SELECT ?o WHERE { <http://example.org/a> ?p ?o }").rows == [["été"]]
    finally:
        with open_store(url) as store:
            store.clear()


def test_load_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ttl = tmp_path / "a.ttl"
    ttl.write_text("@prefix ex: <http://example.org/> . ex:a ex:p 1, 2 .\n", encoding="utf-8")
    nq = tmp_path / "b.nq"
    nq.write_text("<http://example.org/b> <http://example.org/p> \"x\" <http://example.org/g> .\n")
    rdf = tmp_path / "c.rdf"
    rdf.write_text('<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
                   'xmlns:ex="http://example.org/"><rdf:Description rdf:about="http://example.org/c">'
                   '<ex:p>y</ex:p></rdf:Description></rdf:RDF>')
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["load", str(ttl), str(nq), str(rdf), "--store", url]) == 0
    out = capsys.readouterr().out
    assert "2 new triples" in out and "4 new triples" in out  # a.ttl and the total
    with open_store(url) as store:
        assert store.count() == 4
        assert store.graphs() == ["http://example.org/g"]


def test_load_errors_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", str(tmp_path / "nope.ttl"), "--store", "memory:"]) == 1
    assert "error: no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.ttl"
    bad.write_text("@prefix ex: <http://example.org/> .\nex:a ex:p .\n", encoding="utf-8")
    assert main(["load", str(bad), "--store", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "bad.ttl" in err and "line 2" in err
    good = tmp_path / "good.nt"
    good.write_text("<http://example.org/a> <http://example.org/p> <http://example.org/b> .\n")
    assert main(["load", str(good), "--graph", "not an iri", "--store", "memory:"]) == 1
    err = capsys.readouterr().err
    assert "absolute IRI" in err and "(--graph)" in err  # which argument (black-box finding)
    assert main(["load", str(good), str(bad), "--store", "memory:"]) == 1
    assert "the other 1 file was loaded" in capsys.readouterr().err
    assert main(["init", "--store", "nosuch:thing"]) == 1
    assert "unknown store URL" in capsys.readouterr().err


def test_a_bad_file_among_several_is_named_and_the_others_are_loaded(tmp_path: Path, capsys) -> None:
    # found by black-box testing: `load a.nt bad.ttl c.nt` stored a.nt, not c.nt, and said neither
    files = []
    for name, text in (("a.nt", "<http://example.org/a> <http://example.org/p> \"a\" .\n"),
                       ("b.ttl", '@prefix ex: <http://example.org/> .\nex:b ex:p "unterminated .\n'),
                       ("c.nt", "<http://example.org/c> <http://example.org/p> \"c\" .\n"),
                       ("d.ttl", "@prefix ex: <http://example.org/> .\nex:d ex:p .\n")):
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    db = f"oxigraph:{tmp_path / 'db'}"
    assert main(["load", *files, "--store", db]) == 1
    out, err = capsys.readouterr()
    assert "a.nt" in out and "c.nt" in out and "b.ttl" not in out  # what was loaded
    assert err.startswith("error: 2 files were not loaded (nothing of each); the other 2 files were loaded")
    assert "b.ttl" in err and "d.ttl" in err and "line 2" in err
    with open_store(db) as store:
        assert store.count() == 2


def test_load_shows_progress_for_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from provkg.cli.output import progress_bar
    from provkg.service import loading

    monkeypatch.setattr(loading, "PROGRESS_MIN_BYTES", 100)
    data = tmp_path / "big.nt"
    data.write_text("".join(f"<http://example.org/s{i}> <http://example.org/p> \"{i}\" .\n"
                            for i in range(2000)))
    with open_store("memory:") as store:
        report = loading.load_files(store, [data], progress=progress_bar)
    assert report.triples == 2000
    assert "big.nt" in capsys.readouterr().err  # the bar's label


def test_load_compacts_the_store_after_a_large_bulk_load(tmp_path: Path, capsys) -> None:
    data = tmp_path / "big.nt"
    data.write_text("".join(f"<http://example.org/s{i}> <http://example.org/p> \"{i}\" .\n"
                            for i in range(60_000)))
    url = f"oxigraph:{tmp_path / 'db'}"
    small = tmp_path / "small.nt"
    small.write_text("<http://example.org/a> <http://example.org/p> \"1\" .\n")
    assert main(["load", str(small), "--store", url]) == 0  # nothing worth compacting
    assert "compacted" not in capsys.readouterr().err
    assert main(["load", str(data), "--store", url]) == 0
    assert "compacted the store's files for queries in" in capsys.readouterr().err
    assert main(["load", str(data), "--store", url]) == 0  # loaded before: nothing new
    out = capsys.readouterr()
    assert "compacted" not in out.err
    assert "0 new triples" in out.out  # not "0 triples", as if the file were empty
    with open_store(url) as store:
        assert store.count() == 60_001


def test_ingest_compacts_the_store_after_a_large_bulk_load(tmp_path: Path, capsys) -> None:
    import orjson

    from provkg.bench import synthetic

    shape = synthetic.shape_for_scale(2 / 300)  # two epochs: ~68,000 triples
    events = tmp_path / "events.jsonl"
    with events.open("wb") as out:
        for group in synthetic.iter_event_groups(shape):
            out.write(b"".join(orjson.dumps(e) + b"\n" for e in group.events))
    specs = []
    for name, text in synthetic.spec_texts(shape).items():
        (tmp_path / f"{name}.yaml").write_text(text)
        specs += ["--spec", str(tmp_path / f"{name}.yaml")]
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["ingest", str(events), *specs, "--store", url]) == 0
    assert "compacted the store's files for queries in" in capsys.readouterr().err
    with open_store(url) as store:
        count = store.count()
        assert count > 50_000
    # again: nothing new, but the bulk loads wrote (duplicate) table files all the same
    assert main(["ingest", str(events), *specs, "--store", url]) == 0
    assert "compacted the store's files" in capsys.readouterr().err
    with open_store(url) as store:
        assert store.count() == count


def test_replace_swaps_a_graph_all_or_nothing(store, tmp_path: Path, capsys) -> None:
    # black-box finding: a corrected domain KG could not replace the old one (loads only add,
    # and its blank-node geometry was copied again on every reload)
    from provkg.errors import StoreError
    from provkg.service.loading import load_files, replace_graph

    g = "https://kg.example.org/wells"
    v1, v2, bad = tmp_path / "v1.ttl", tmp_path / "v2.ttl", tmp_path / "bad.ttl"
    geo = "@prefix geo: <http://www.opengis.net/ont/geosparql#> .\n"
    v1.write_text(geo + '<https://kg.example.org/w1> geo:hasGeometry [ geo:asWKT "POINT(0 0)" ] .\n')
    v2.write_text(geo + '<https://kg.example.org/w1> geo:hasGeometry [ geo:asWKT "POINT(5 5)" ] .\n')
    bad.write_text("<https://kg.example.org/a> <https://kg.example.org/b")
    store.add([("<https://kg.example.org/run>", "<https://kg.example.org/p>", '"provenance"')])
    load_files(store, [v1], graph=g, progress=False)
    load_files(store, [v1], graph=g, progress=False)  # loading again adds a second geometry
    wkt = ("SELECT ?w WHERE { GRAPH <" + g + "> { ?x <http://www.opengis.net/ont/geosparql#asWKT> ?w } }")
    assert sorted(r[0] for r in store.select(wkt, hide_system_graphs=False).rows) == ["POINT(0 0)", "POINT(0 0)"]
    with pytest.raises(StoreError, match="nothing was replaced"):
        replace_graph(store, [v2, bad], g)
    assert sorted(r[0] for r in store.select(wkt, hide_system_graphs=False).rows) == ["POINT(0 0)", "POINT(0 0)"]
    report = replace_graph(store, [v2], g)
    assert report.triples == 2 and [r[0] for r in store.select(wkt, hide_system_graphs=False).rows] == ["POINT(5 5)"]
    assert store.count() == 3  # the default graph's provenance untouched, no staging left
    assert main(["load", str(v2), "--replace", "--store", "memory:"]) == 1
    assert "--replace needs --graph" in capsys.readouterr().err


def test_quads_are_refused_with_a_graph_before_anything_is_loaded(tmp_path: Path, capsys) -> None:
    # found by black-box testing: "2 triples -> urn:g:other" while the quad that names its
    # graph went to that graph, and --replace kept that graph's old triples
    store_dir = tmp_path / "st"
    ttl, nq = tmp_path / "a.ttl", tmp_path / "q.nq"
    ttl.write_text("<http://example.org/a> <http://example.org/p> \"in a\" .\n")
    nq.write_text("<http://example.org/b> <http://example.org/p> \"in g\" <urn:g:q> .\n")
    for extra in ([], ["--replace"]):
        assert main(["load", str(ttl), str(nq), "--graph", "urn:g:other", *extra,
                     "--store", f"oxigraph:{store_dir}"]) == 1
        err = capsys.readouterr().err
        assert "q.nq: N-Quads and TriG name the graph of each quad" in err and "a.ttl" not in err
    with open_store(f"oxigraph:{store_dir}") as store:
        assert store.select("SELECT * WHERE { ?s ?p ?o }").rows == []
        assert store.select("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", hide_system_graphs=False).rows == []
