"""A tiny-scale run of ``provkg bench schemas`` on every server-backed and embedded store,
so the benchmark never rots: typed and tagged answers identical, answers right, files written."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from provkg.bench import answers, synthetic
from provkg.bench.schemas import _restart_dead, compare_answers, run_experiment
from provkg.bench.servers import open_stores
from provkg.errors import QueryTimeout
from provkg.store import Rows
from provkg.term import literal

#: one epoch: about 35,000 triples per dataset
TINY = 1 / 300


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("results")
    doc = run_experiment(scale=TINY, stores=["oxigraph", "memory", "oxigraph-server", "virtuoso"],
                         out=out, work=tmp_path_factory.mktemp("work"),
                         queries=["q1", "q5", "q7", "q2", "q6"], timeout=120, budget=0.1,
                         progress=False)
    return doc, out


@pytest.mark.slow
def test_typed_and_tagged_answers_are_identical_on_every_store(tiny_run: tuple[dict, Path]) -> None:
    doc, _ = tiny_run
    assert doc["problems"] == []
    assert set(doc["stores"]) == {"oxigraph", "memory", "oxigraph-server", "virtuoso"}
    for store, section in doc["stores"].items():
        assert "error" not in section, (store, section.get("error"))
        for q in ("q1", "q5", "q7", "q2", "q6"):
            r = section["results"][q]
            assert r["identical"] and "cross_store" not in r, (store, q, r)
            assert r["rows"] > 0, (store, q)
            assert r["typed"]["repetitions"] >= 5 and r["tagged"]["repetitions"] >= 5


@pytest.mark.slow
def test_answers_match_what_the_generator_made(tiny_run: tuple[dict, Path]) -> None:
    doc, _ = tiny_run
    truth = answers.ground_truth(synthetic.shape_for_scale(TINY))
    q7 = {row[0]: (row[1], row[4]) for row in doc["answers"]["q7"]["rows"]}
    expected = {answers.value_iri(loc): mins for loc, mins in truth.min_batch_loss.items()}
    assert q7 == expected
    (file, coordinates, basin, field, slices), = doc["answers"]["q1"]["rows"]
    assert file == answers.value_iri(truth.seismic_file)
    assert (basin, field, slices) == (truth.basin, truth.field, truth.slices)
    assert coordinates.startswith("POLYGON")


@pytest.mark.slow
def test_every_store_holds_every_triple_and_results_are_written(tiny_run: tuple[dict, Path]) -> None:
    doc, out = tiny_run
    for schema, d in doc["datasets"].items():
        lines = Path(d["path"]).read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(set(lines)) == d["triples"], schema
        for store, section in doc["stores"].items():
            assert section["load"] == {} or section["load"][schema]["store_count"] in (None, d["triples"]), store
    for suffix in (".json", ".md", ".png"):
        assert (out / f"schemas-{TINY:g}{suffix}").stat().st_size > 1000
    saved = json.loads((out / f"schemas-{TINY:g}.json").read_text(encoding="utf-8"))
    assert saved["datasets"]["typed"]["triples"] == doc["datasets"]["typed"]["triples"]
    md = (out / f"schemas-{TINY:g}.md").read_text(encoding="utf-8")
    assert "| Q7 |" in md and "AllegroGraph" in md


def test_the_rollup_backed_forms_answer_as_the_full_detail_on_every_store(tiny_run: tuple[dict, Path]) -> None:
    doc, out = tiny_run
    section = doc["rollups"]
    assert all(section["datasets"][s]["triples"] > doc["datasets"][s]["triples"] for s in ("typed", "tagged"))
    assert set(section["stores"]) == {"oxigraph", "memory", "oxigraph-server", "virtuoso"}
    for store, results in section["stores"].items():
        assert set(results) == {"q5", "q7"}, store
        assert all(r["same_as_full_detail"] and r["identical"] for r in results.values()), (store, results)
    md = next(out.glob("schemas-*.md")).read_text(encoding="utf-8")
    assert "## Rollup-backed canned forms" in md and "**differ**" not in md


def test_answers_that_differ_are_reported() -> None:
    a = Rows(["x", "y"], [[1, "a"], [2, "b"]])
    assert compare_answers(a, Rows(["x", "y"], [[2, "b"], [1, "a"]]), ordered=False) is None
    assert "order" in compare_answers(a, Rows(["x", "y"], [[2, "b"], [1, "a"]]), ordered=True)
    assert "rows differ" in compare_answers(a, Rows(["x", "y"], [[1, "a"], [2, "c"]]), ordered=False)
    assert "1 tagged rows" in compare_answers(a, Rows(["x", "y"], [[1, "a"]]), ordered=False)


def test_the_generator_is_deterministic() -> None:
    shape = synthetic.shape_for_scale(TINY)
    first = [json.dumps(e, sort_keys=True) for e in synthetic.iter_events(shape)]
    again = [json.dumps(e, sort_keys=True) for e in synthetic.iter_events(shape)]
    assert first == again
    assert len(first) == len(set(first))


@pytest.mark.parametrize("store", ["virtuoso", "oxigraph-server"])
def test_a_timed_out_query_does_not_slow_the_next_ones(store: str, tmp_path: Path) -> None:
    # a server goes on running a query its client gave up on; the benchmark restarts it on
    # its database, so the next query is answered at once and the data is still there
    data = tmp_path / "data" / "typed.nt"
    data.parent.mkdir()
    data.write_text("".join(f"<http://example.org/s{i}> <http://example.org/p> {literal(i)} .\n"
                            for i in range(2000)), encoding="utf-8")
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s <http://example.org/p> ?o }"
    endless = ("SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . "
               "FILTER(?c != ?f && ?f != ?i) }")  # 8e9 rows: minutes on any store
    with open_stores(store, {"typed": data}, tmp_path / "work") as run:
        server_pid = run.server_pids["typed"]
        with pytest.raises(QueryTimeout):
            run.workers["typed"].select(endless, timeout=1)
        _restart_dead(run)
        # the process that ran the abandoned query is gone: nothing of it competes with the
        # next queries (a fresh server on the same database answers them)
        assert run.server_pids["typed"] != server_pid
        try:
            assert psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass
        _, rows = run.workers["typed"].select(count, timeout=60)
        assert int(rows.rows[0][0]) == 2000


def test_a_speedup_counts_only_between_identical_answers_and_from_1_3x() -> None:
    # found by black-box testing: "typed faster: met" for a ratio between answers that
    # differed, for any ratio above 1 (#5 asks 1.3x), and no target at all for a timeout
    from provkg.bench.report import evaluate_targets

    def result(speedup=None, **extra):
        return {**({"typed_speedup": {"speedup": speedup}} if speedup else {}), **extra}

    doc = {"scale": 0.01, "stores": {
        "memory": {"results": {"q5": result(3.1, mismatch="rows differ"), "q7": result(1.2)}},
        "oxigraph": {"results": {"q1": {"typed": {"median_s": 0.004}, "tagged": {"median_s": 0.006}},
                                 "q5": result(error="no answer within 0.03 s"),
                                 "q7": result(1.5, typed={"median_s": 1.0}, tagged={"median_s": 1.5})}}}}
    targets = evaluate_targets(doc)
    assert targets["memory q5 typed >= 1.3x faster"] == {
        "met": False, "why": "typed and tagged answers differ"}
    assert targets["memory q7 typed >= 1.3x faster"]["met"] is False
    assert targets["oxigraph q7 typed >= 1.3x faster"]["met"] is True
    assert targets["oxigraph q5 typed >= 1.3x faster"] == {"met": False, "why": "no answer within 0.03 s"}
    assert targets["oxigraph q5 <= 1 s"] == {"met": False, "why": "no answer within 0.03 s"}
    assert targets["oxigraph q1 <= 0.01 s"]["met"] and targets["oxigraph q7 <= 2 s"]["met"]


def test_stores_this_machine_lacks_are_skipped_and_said_with_the_command_that_adds_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # a machine with the server extra only: no oxigraph server program, no Virtuoso
    import provkg.bench.servers as servers

    monkeypatch.setattr(servers, "_find_oxigraph", lambda: None)
    monkeypatch.setattr(servers.shutil, "which", lambda *a, **k: None)
    doc = run_experiment(scale=TINY, stores=["oxigraph", "oxigraph-server", "virtuoso"], out=tmp_path / "out",
                         work=tmp_path / "work", queries=["q5"], timeout=120, budget=0.1, progress=False)
    assert list(doc["stores"]) == ["oxigraph"] and "error" not in doc["stores"]["oxigraph"]
    said = capsys.readouterr().err
    assert "oxigraph-server: skipped" in said and "pip install 'oxigraph>=0.5,<0.6'" in said
    assert "virtuoso: skipped" in said and "apt-get install virtuoso-opensource" in said
    assert any(w.startswith("query plans left out") for w in doc["warnings"])
    assert all("virtuoso: skipped" in p.read_text() for p in (tmp_path / "out").glob("schemas-*.md"))
