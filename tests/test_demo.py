"""``provkg demo`` end to end (``--small``): the graph's answers against the lifecycle's own artifacts.

Expected values are read from what the lifecycle's Python code left on disk — the SEG-Y file
(reopened with segyio), the HDF5 sets (h5py attributes), the trained models (joblib, their
``loss_curve_``) — and from the domain KG's Turtle file (rdflib), never from the SPARQL
answers themselves.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import struct
from pathlib import Path
from urllib.parse import unquote, urlparse

import h5py
import joblib
import pytest
import rdflib
import segyio

from provkg.cli import main
from provkg.demo.example import KG_FILE, example_dir, parse_footprint
from provkg.service.querying import run_query
from provkg.store import open_store

SEIS = rdflib.Namespace("https://w3id.org/provkg/seismic#")
GEO = rdflib.Namespace("http://www.opengis.net/ont/geosparql#")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _demo(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["demo", *argv])
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("demo")
    args = ("--small", "--store", f"oxigraph:{root / 'store'}", "--out", str(root / "out"))
    rc, text = _demo(*args)
    with open_store(f"oxigraph:{root / 'store'}") as store:
        triples = store.count()
    return {"rc": rc, "text": text, "args": args, "out": root / "out",
            "store": f"oxigraph:{root / 'store'}", "triples": triples}


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _summary(demo: dict[str, object]) -> dict[str, object]:
    return json.loads((Path(demo["out"]) / "run.json").read_text())  # type: ignore[arg-type]


def _rows(demo: dict[str, object], name: str, **params: object) -> list[dict[str, object]]:
    with open_store(str(demo["store"])) as store:
        return run_query(store, name, params).as_dicts()


def _kg() -> rdflib.Graph:
    g = rdflib.Graph()
    g.parse(example_dir() / "kg" / "seismic-kg.ttl", format="turtle")
    return g


def _models(demo: dict[str, object]) -> dict[str, dict[str, object]]:
    """Per configuration: its model file, batch losses (from the model itself) and batch size."""
    out = {}
    for t in _summary(demo)["trainings"]:  # type: ignore[union-attr]
        model = joblib.load(_path(t["model"]))
        losses = [float(x) for x in model.loss_curve_]  # one entry per partial_fit call
        batches = math.ceil(_tiles(demo, "train") / t["hyperparameters"]["batch_size"])
        out[t["config"]] = {"model": t["model"], "batch_losses": losses, "batches": batches,
                            "final_loss": sum(losses[-batches:]) / batches,
                            "training": t["training_id"]}
    return out


def _tiles(demo: dict[str, object], split: str) -> int:
    with h5py.File(Path(demo["out"]) / "prepared" / f"{split}.h5", "r") as h5:  # type: ignore[operator]
        return len(h5["labels"])


def test_demo_exits_0_and_every_answer_checks_out(demo: dict[str, object]) -> None:
    assert demo["rc"] == 0, demo["text"]
    text = str(demo["text"])
    assert "✗" not in text
    assert text.count("✓") >= 10  # Q1-Q7, d6, d7 and d8 each checked


def test_segy_reopens_and_matches_the_kg(demo: dict[str, object]) -> None:
    kg, file = _kg(), rdflib.URIRef(KG_FILE)
    name = str(kg.value(file, SEIS.fileName))
    path = Path(demo["out"]) / "raw" / name  # type: ignore[operator]
    with segyio.open(str(path), "r", iline=189, xline=193) as f:
        assert (int(f.ilines[0]), int(f.ilines[-1])) == (kg.value(file, SEIS.inlineStart).toPython(),
                                                         kg.value(file, SEIS.inlineEnd).toPython())
        assert (int(f.xlines[0]), int(f.xlines[-1])) == (kg.value(file, SEIS.crosslineStart).toPython(),
                                                         kg.value(file, SEIS.crosslineEnd).toPython())
        assert len(f.ilines) == kg.value(file, SEIS.numberOfSlices).toPython()
        assert segyio.tools.dt(f) / 1000 == float(kg.value(file, SEIS.sampleInterval).toPython())
        scalar = f.header[0][segyio.TraceField.SourceGroupScalar]
        assert scalar < 0
        xs = [v / -scalar for v in f.attributes(segyio.TraceField.CDP_X)[:]]
        ys = [v / -scalar for v in f.attributes(segyio.TraceField.CDP_Y)[:]]
    geometry = kg.value(file, GEO.hasGeometry)
    _, ring = parse_footprint(str(kg.value(geometry, GEO.asWKT)))
    assert (min(xs), max(xs), min(ys), max(ys)) == (min(p[0] for p in ring), max(p[0] for p in ring),
                                                   min(p[1] for p in ring), max(p[1] for p in ring))


def test_q1_and_q6_name_the_segy_file_its_basin_field_and_slices(demo: dict[str, object]) -> None:
    raw = next((Path(demo["out"]) / "raw").glob("*.sgy"))  # type: ignore[operator]
    with segyio.open(str(raw), "r", iline=189, xline=193) as f:
        slices = len(f.ilines)
    kg, file = _kg(), rdflib.URIRef(KG_FILE)
    survey = kg.value(file, SEIS.survey)
    basin = str(kg.value(kg.value(survey, SEIS.basin), rdflib.RDFS.label))
    field = str(kg.value(kg.value(survey, SEIS.field), rdflib.RDFS.label))
    models = _models(demo)
    some_model = next(iter(models.values()))["model"]
    (q1,) = _rows(demo, "q1", model=some_model)
    assert unquote(str(q1["seismic_file"])).endswith(raw.resolve().as_uri())
    assert (q1["basin"], q1["field"], q1["slices"]) == (basin, field, slices)
    assert "POLYGON" in str(q1["coordinates"])
    (q6,) = _rows(demo, "q6", dataset=(Path(demo["out"]) / "prepared" / "train.h5").resolve().as_uri())  # type: ignore[operator]
    assert (q6["basin"], q6["field"], q6["slices"]) == (basin, field, slices)


def test_q2_gives_the_preparation_parameters(demo: dict[str, object]) -> None:
    with h5py.File(Path(demo["out"]) / "prepared" / "train.h5", "r") as h5:  # type: ignore[operator]
        expected = {k: h5.attrs[k].item() for k in ("tile_size", "noise_threshold", "slice_start", "slice_end")}
    for m in _models(demo).values():
        (row,) = _rows(demo, "q2", model=m["model"])
        assert row == pytest.approx(expected)


def test_q3_finds_the_model_with_the_least_loss(demo: dict[str, object]) -> None:
    models = _models(demo)
    best = min(models.values(), key=lambda m: m["final_loss"])  # type: ignore[arg-type, return-value]
    train = (Path(demo["out"]) / "prepared" / "train.h5").resolve().as_uri()  # type: ignore[operator]
    rows = _rows(demo, "q3", dataset=train, measure="loss")
    assert {unquote(str(r["model"])).split("/value/")[-1] for r in rows} == {best["model"]}
    loss = [r["value"] for r in rows if r["role"] == "evaluation" and r["name"] == "loss"]
    assert loss == [pytest.approx(best["final_loss"])]


def test_q4_counts_the_batches_of_every_epoch(demo: dict[str, object]) -> None:
    models = _models(demo)
    train = (Path(demo["out"]) / "prepared" / "train.h5").resolve().as_uri()  # type: ignore[operator]
    rows = _rows(demo, "q4", dataset=train)
    epochs = _summary(demo)["settings"]["sizes"]["epochs"]  # type: ignore[index]
    by_training = {str(m["training"]): m["batches"] for m in models.values()}
    assert len(rows) == len(models) * epochs
    for r in rows:
        training = unquote(str(r["training"])).split("/task/")[-1]
        assert r["batches"] == by_training[training]
        assert 0 <= r["min_seconds"] <= r["avg_seconds"] <= r["max_seconds"]  # type: ignore[operator]


def test_q5_lists_every_model_of_the_slice_range(demo: dict[str, object]) -> None:
    with h5py.File(Path(demo["out"]) / "prepared" / "train.h5", "r") as h5:  # type: ignore[operator]
        start, end = int(h5.attrs["slice_start"]), int(h5.attrs["slice_end"])
    rows = _rows(demo, "q5", slice_start=start, slice_end=end)
    found = {unquote(str(r["model"])).split("/value/")[-1] for r in rows}
    assert found == {m["model"] for m in _models(demo).values()}
    assert _rows(demo, "q5", slice_start=start + 1, slice_end=end) == []


def test_q7_orders_models_by_their_minimum_batch_loss(demo: dict[str, object]) -> None:
    models = sorted(_models(demo).values(), key=lambda m: min(m["batch_losses"]))  # type: ignore[arg-type, return-value]
    train = (Path(demo["out"]) / "prepared" / "train.h5").resolve().as_uri()  # type: ignore[operator]
    rows = _rows(demo, "q7", dataset=train, measure="loss")
    assert [unquote(str(r["model"])).split("/value/")[-1] for r in rows] == [m["model"] for m in models]
    assert [r["training_min_batch_loss"] for r in rows] == pytest.approx(
        [min(m["batch_losses"]) for m in models])  # type: ignore[arg-type]
    assert all(r["validation_min_batch_loss"] is not None for r in rows)


def test_the_adaptation_is_in_the_graph(demo: dict[str, object]) -> None:
    adapted = [t for t in _summary(demo)["trainings"] if t["adaptations"]]  # type: ignore[union-attr]
    assert len(adapted) == 1
    (epoch, _old, new), = adapted[0]["adaptations"]
    model = joblib.load(_path(adapted[0]["model"]))
    assert model.learning_rate_init == pytest.approx(new)  # the optimizer was really changed
    with open_store(str(demo["store"])) as store:
        rows = store.select(
            "SELECT ?epoch ?lr WHERE { ?a <http://www.w3.org/ns/prov#wasInformedBy> ?t ; "
            "a <https://w3id.org/provkg/ns#AdaptationExecution> ; <https://w3id.org/provkg/ns#index> ?epoch . "
            "?v <http://www.w3.org/ns/prov#wasGeneratedBy> ?a ; <http://www.w3.org/ns/prov#value> ?lr }").rows
    assert rows == [[epoch, pytest.approx(new)]]


def test_report_files_and_plots(demo: dict[str, object]) -> None:
    out = Path(demo["out"])  # type: ignore[arg-type]
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    for name in ("q1", "q2", "q3", "q4", "q5", "q6", "q7"):
        assert f"provkg query {name} --store" in md and f"provkg query {name} --store" in html
    pngs = sorted((out / "figures").glob("*.png"))
    assert {p.name for p in pngs} >= {"lineage.png"} and len(pngs) == 1 + len(_models(demo))
    for png in pngs:
        data = png.read_bytes()
        assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 400 and height >= 300 and len(data) > 10_000
        assert png.name in md


def test_rerun_reuses_and_online_starts_over_without_duplicates(demo: dict[str, object]) -> None:
    args = demo["args"]
    rc, text = _demo(*args)  # type: ignore[misc]
    assert rc == 0 and "reusing" in text
    rc, text = _demo(*args, "--online")  # type: ignore[misc]
    assert rc == 0, text
    online = [line for line in text.splitlines() if "online" in line and "epoch" in line]
    epochs = _summary(demo)["settings"]["sizes"]["epochs"]  # type: ignore[index]
    assert len(online) == len(_models(demo)) * epochs
    assert all("read from the store" in line for line in online)
    with open_store(str(demo["store"])) as store:
        assert store.count() == demo["triples"]  # started over: same graph, nothing twice


def test_demo_with_a_sink_refuses_a_store_the_server_cannot_share(tmp_path: Path, capsys) -> None:
    # found by black-box testing: with the default store the demo trained, then waited 60 s
    # for events the server wrote elsewhere; the store must be an endpoint both reach
    from provkg.cli import main

    assert main(["demo", "--small", "--sink", "http://127.0.0.1:1", "--store",
                 f"oxigraph:{tmp_path / 'db'}", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "--store must be the store that server writes to" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "db").exists()  # nothing started


def test_demo_deletes_only_its_own_files_in_out(tmp_path: Path, capsys) -> None:
    """Found by black-box testing: starting over deleted the whole --out folder, a user's
    files with it (--out . emptied the working folder)."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("important")
    (out / "figures-of-mine").mkdir()
    for _ in range(2):  # memory: holds nothing the second time, so the demo starts over
        assert main(["demo", "--small", "--store", "memory:", "--out", str(out)]) == 0
        assert (out / "thesis.txt").read_text() == "important" and (out / "figures-of-mine").is_dir()
        assert (out / "run.json").is_file() and (out / "report.md").is_file()
    capsys.readouterr()
    afile = tmp_path / "afile"
    afile.write_text("x")
    for bad in (afile, afile / "x"):
        assert main(["demo", "--small", "--store", "memory:", "--out", str(bad)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: --out") and "Traceback" not in err
    assert afile.read_text() == "x"


def test_an_unreachable_sink_leaves_the_previous_run_in_place(tmp_path: Path, oxigraph_server,
                                                             capsys) -> None:
    """Found by black-box testing: a bad --sink deleted the previous run's provenance and
    folder, then failed on the sink."""
    store, out = oxigraph_server.store_url, tmp_path / "out"
    with open_store(store) as s:
        s.clear()
    assert main(["demo", "--small", "--store", store, "--out", str(out)]) == 0
    with open_store(store) as s:
        before = s.count()
    capsys.readouterr()
    assert main(["demo", "--small", "--sink", "http://127.0.0.1:1", "--store", store,
                 "--out", str(out)]) == 1
    assert "cannot reach the provkg server" in capsys.readouterr().err
    assert (out / "run.json").is_file()
    with open_store(store) as s:
        assert s.count() == before
        s.clear()


# -- the report for people: plots, rounding, what "most accurate" means ------------------------


def _figures(demo: dict[str, object]) -> dict[str, object]:
    """Per configuration: the numbers its figure plots (read from the store) and the figure
    drawn from them with the loss range shared by all configurations."""
    from provkg.demo.curves import loss_limits, training_curves
    from provkg.demo.plots import draw_training
    from provkg.demo.summary import read_summary

    summary = read_summary(Path(demo["out"]))  # type: ignore[arg-type]
    assert summary is not None
    with open_store(str(demo["store"])) as store:
        curves = [training_curves(store, t) for t in summary.trainings]
    shared = loss_limits(curves)
    return {c.config: (c, draw_training(c, loss_range=shared)) for c in curves}


def test_every_training_figure_has_the_same_loss_scale(demo: dict[str, object]) -> None:
    import matplotlib.pyplot as plt

    figures = _figures(demo)
    limits = {tuple(fig.axes[0].get_ylim()) for _, fig in figures.values()}  # type: ignore[attr-defined]
    assert len(limits) == 1
    low, high = limits.pop()
    for curves, _ in figures.values():  # nothing drawn is cut off by the shared range
        assert all(low < v < high for v in curves.losses())  # type: ignore[attr-defined]
    for _, fig in figures.values():
        plt.close(fig)  # type: ignore[arg-type]


def test_the_adaptation_mark_stands_at_the_epoch_the_report_names(demo: dict[str, object]) -> None:
    import re

    import matplotlib.pyplot as plt

    from provkg.demo.plots import ADAPTATION_GID

    (adapted,) = [t for t in _summary(demo)["trainings"] if t["adaptations"]]  # type: ignore[union-attr]
    (epoch, _old, new), = adapted["adaptations"]
    md = (Path(demo["out"]) / "report.md").read_text()  # type: ignore[operator]
    row = next(line for line in md.splitlines() if line.startswith(f"| {adapted['config']} |"))
    assert re.search(rf"→ {new:.4g} at epoch (\d+)", row).group(1) == str(epoch)  # type: ignore[union-attr]
    d6 = md.split("## D6 ", 1)[1].split("\n## ", 1)[0]  # names the epoch too, when it has rows
    assert all(line.split(" | ")[1] == str(epoch) for line in d6.splitlines()
               if line.startswith(f"| {adapted['training_id']} |"))
    curves, fig = _figures(demo)[adapted["config"]]
    assert [(a.epoch, a.new_rate) for a in curves.adaptations] == [(epoch, pytest.approx(new))]  # type: ignore[attr-defined]
    for ax in fig.axes:  # type: ignore[attr-defined]
        marks = [line for line in ax.get_lines() if line.get_gid() == ADAPTATION_GID]
        assert [list(m.get_xdata()) for m in marks] == [[epoch, epoch]]
        # epoch `epoch`'s own mean is drawn at the same x: the mark is on that epoch, not before
        (mean,) = [line for line in ax.get_lines() if line.get_label().startswith("training, ")
                   and "batch" not in line.get_label()]
        assert epoch in list(mean.get_xdata())
    plt.close(fig)  # type: ignore[arg-type]
    for t in _summary(demo)["trainings"]:  # type: ignore[union-attr]
        if not t["adaptations"]:
            assert _figures(demo)[t["config"]][0].adaptations == []  # type: ignore[attr-defined]


def test_validation_and_test_are_drawn_beside_training(demo: dict[str, object]) -> None:
    import matplotlib.pyplot as plt

    by_config = {t["config"]: t for t in _summary(demo)["trainings"]}  # type: ignore[union-attr]
    for config, (curves, fig) in _figures(demo).items():
        t = by_config[config]
        assert curves.epochs == list(range(1, len(t["epoch_losses"]) + 1))  # type: ignore[attr-defined]
        assert curves.epoch_loss == pytest.approx(t["epoch_losses"])  # type: ignore[attr-defined]
        loss_ax, acc_ax = fig.axes  # type: ignore[attr-defined]
        drawn = {(ax_name, line.get_label()): list(line.get_ydata())
                 for ax_name, ax in (("loss", loss_ax), ("accuracy", acc_ax))
                 for line in ax.get_lines()}
        assert drawn[("loss", "validation (final model)")] == [pytest.approx(t["validation"]["loss"])]
        assert drawn[("loss", "test (final model)")] == [pytest.approx(t["evaluation"]["loss"])]
        assert drawn[("accuracy", "validation (final model)")] == [
            pytest.approx(t["validation"]["accuracy"])]
        assert drawn[("accuracy", "test (final model)")] == [pytest.approx(t["evaluation"]["accuracy"])]
        assert len(drawn[("accuracy", "training, per epoch")]) == len(t["epoch_losses"])
        plt.close(fig)  # type: ignore[arg-type]


def test_report_rounds_numbers_and_run_json_keeps_every_digit(demo: dict[str, object]) -> None:
    out = Path(demo["out"])  # type: ignore[arg-type]
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    t = _summary(demo)["trainings"][0]  # type: ignore[index]
    full = t["evaluation"]["accuracy"]
    assert len(repr(full)) > 8  # a measured ratio: more digits than anyone reads
    assert f"{full:.4g}" in md and repr(full) not in md
    assert f"title='{full!r}'" in page  # the full value is one hover away in the HTML
    q4 = md.split("## Q4", 1)[1].split("## Q5", 1)[0]
    assert " ms |" in q4 or " s |" in q4  # durations in ms / s, not 0.0123456 seconds


def test_report_says_which_measure_most_accurate_ranks_by(demo: dict[str, object]) -> None:
    md = (Path(demo["out"]) / "report.md").read_text()  # type: ignore[operator]
    trainings = _summary(demo)["trainings"]  # type: ignore[index]
    on_test = max(trainings, key=lambda t: t["evaluation"]["accuracy"])  # type: ignore[index]
    assert f"Most accurate on the held-out test set: {on_test['config']}" in md
    assert "by training accuracy" in md
    for name in ("D6", "D8"):
        section = md.split(f"## {name} ", 1)[1].split("\n## ", 1)[0]
        assert "Ranked by" in section and "training accuracy" in section


def test_run_demo_takes_keywords_and_returns_a_typed_result(tmp_path: Path, capsys) -> None:
    from provkg.demo import DemoResult, run_demo

    result = run_demo(store="memory:", out=tmp_path / "out", small=True, epochs=1)
    assert isinstance(result, DemoResult)
    assert result.failed == [] and not result.reused
    assert result.report_html == (tmp_path / "out" / "report.html").resolve()
    assert result.report_html.is_file() and result.report_md.is_file()
    assert result.triples > 0 and result.store_url == "memory:"
    assert {a.name for a in result.answers} >= {"q1", "q7", "d6", "d8"}
    assert capsys.readouterr().out == ""  # the use case prints nothing: the CLI does


def test_readable_numbers() -> None:
    from provkg.demo.readable import cell, duration, rounded_text, significant

    assert significant(0.6931471805599453) == "0.6931" and significant(1234.5678) == "1235"
    assert duration(0.000012) == "12 µs" and duration(0.0123456) == "12.3 ms"
    assert duration(2.34567) == "2.35 s" and duration(0) == "0 s"
    assert rounded_text("accuracy=0.711864406779661; loss=0.6245619058609009; tag=\"0.123456\"") \
        == "accuracy=0.7119; loss=0.6246; tag=\"0.123456\""
    assert rounded_text("learning_rate=0.1; batch_size=32; hidden_layers=[128,32]") \
        == "learning_rate=0.1; batch_size=32; hidden_layers=[128,32]"
    assert cell("avg_seconds", 0.0123456) == "12.3 ms" and cell("value", 0.0123456) == "0.01235"
    assert cell("epoch", 3) == "3"
