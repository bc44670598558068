"""The web UI in a real browser: Debian's Chromium driven by Playwright, against a real
``provkg serve`` on the demo's store and on a store holding a hostile lifecycle.

Every page load is fenced: a request to anything but the server under test is aborted and
fails the test (the UI and the API docs work offline), as does a script error, a console
error or a dialog. Screenshots of each view go to ``artifacts/ui/`` (``PROVKG_UI_ARTIFACTS``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode

import pytest
from api_support import ApiServer
from playwright.sync_api import Browser, Page, expect, sync_playwright

from provkg import capture

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("PROVKG_UI_ARTIFACTS", ROOT / "artifacts" / "ui"))
#: Debian's chromium (the README's test command installs it); Playwright's download is not used
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 30_000  # a ceiling for a broken page, not a pace: the waits are for content

HOSTILE = "<script>alert(1)</script>"
BATCHES = 3  # per epoch of a hostile training
HOSTILE_LABEL = "<img src=x onerror=alert(2)>"
HOSTILE_SPEC = """\
workflow: hostile
phase: learning
transformations:
  - name: training
    kind: training
    used:
      - {name: learning_rate, role: hyperparameter}
      - {name: optimizer, role: hyperparameter}
      - {name: train_set, role: dataset}
    generated:
      - {name: model, role: model}
      - {name: loss, role: evaluation_measure}
  - name: epoch
    kind: section
    of: training
    generated: [{name: loss, role: evaluation_measure}]
  - name: batch
    kind: section
    of: epoch
    generated: [{name: loss, role: evaluation_measure}]
  - name: adaptation
    kind: adaptation
    used: [{name: learning_rate, role: hyperparameter}]
    generated: [{name: learning_rate, role: hyperparameter}, {name: technique}]
"""


@dataclass
class Browsed:
    page: Page
    base: str
    problems: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    #: console errors a test expects (the browser logs a refused request as one)
    allowed: list[str] = field(default_factory=list)

    def goto(self, path: str) -> None:
        self.page.goto(self.base + path)

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _api(server: ApiServer, name: str, **params: Any) -> dict[str, Any]:
    response = server.http.get(f"/v1/queries/{name}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _records(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(answer["columns"], row, strict=True)) for row in answer["rows"]]


def _pairs(text: str | None) -> dict[str, str]:
    return dict(p.split("=", 1) for p in text.split("; ")) if text else {}


def _shown(value: Any) -> str:
    """A value as the UI's formatValue writes it (numbers to 4 decimals)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if float(value).is_integer() and isinstance(value, int):
        return str(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        mantissa, exp = f"{value:.3e}".split("e")
        return f"{mantissa}e{int(exp):+d}"
    return f"{value:.4f}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        # --no-sandbox: CI runs the suite as root, where Chromium's sandbox will not start
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _browse(browser: Browser, server: ApiServer) -> Iterator[Browsed]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    b = Browsed(page, server.url)

    def fence(route: Any) -> None:
        if route.request.url.startswith(server.url + "/") or route.request.url.startswith("blob:"):
            route.continue_()
        else:
            b.outside.append(route.request.url)
            route.abort()

    context.route("**/*", fence)
    page.on("pageerror", lambda e: b.problems.append(f"page error: {e}"))
    page.on("console", lambda m: b.problems.append(f"console: {m.text}") if m.type == "error" else None)

    def dialog(d: Any) -> None:
        b.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    yield b
    context.close()
    assert not b.outside, f"requests outside the server: {b.outside}"
    problems = [p for p in b.problems if not any(a in p for a in b.allowed)]
    assert not problems, problems
    assert not b.dialogs, f"a dialog opened: {b.dialogs}"


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    root = tmp_path_factory.mktemp("ui-demo")
    store = f"oxigraph:{root / 'store'}"
    done = subprocess.run([sys.executable, "-m", "provkg.cli", "demo", "--small", "--store", store,
                           "--out", str(root / "out")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    with ApiServer(root / "server", store=store) as server:
        server.store_url = store  # type: ignore[attr-defined]
        yield server


def _capture_training(server: ApiServer, run: str, *, lr: float, optimizer: str, losses: list[float]) -> None:
    """One training of the hostile workflow, captured with the HTTP sink as a user would."""
    with capture.workflow("hostile", sink=server.url, run_id=run, label=HOSTILE_LABEL) as wf:
        used = {"learning_rate": lr, "optimizer": optimizer,
                "train_set": capture.ref(f"file:///data/{HOSTILE_LABEL}.h5")}
        with wf.task("training", used=used) as training:
            for i, loss in enumerate(losses):
                with wf.task("epoch", parent=training, index=i) as epoch:
                    for b in range(BATCHES):
                        with wf.task("batch", parent=epoch, index=b) as batch:
                            batch.generate(loss=loss + 0.1 * b)
                    epoch.generate(loss=loss)
                if i == 1:
                    with wf.task("adaptation", parent=training, index=i, used={"learning_rate": lr}) as a:
                        a.generate(learning_rate=lr / 2, technique=HOSTILE)
            training.generate(model=capture.ref(f"file:///models/{run}-{HOSTILE}.pt"), loss=losses[-1])
    server.wait_applied()


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(tmp_path_factory.mktemp("ui-hostile")) as server:
        response = server.http.post("/v1/specs", content=HOSTILE_SPEC,
                                    headers={"Content-Type": "application/yaml"})
        assert response.status_code == 201, response.text
        _capture_training(server, "h1", lr=0.1, optimizer=HOSTILE, losses=[0.9, 0.5, 0.3])
        yield server


@pytest.fixture
def demo(browser: Browser, demo_server: ApiServer) -> Iterator[Browsed]:
    yield from _browse(browser, demo_server)


@pytest.fixture
def hostile(browser: Browser, hostile_server: ApiServer) -> Iterator[Browsed]:
    yield from _browse(browser, hostile_server)


def _trainings(server: ApiServer) -> list[dict[str, Any]]:
    out = []
    for w in _records(_api(server, "workflows")):
        if w["trainings"]:
            out += [{**r, "workflow": w["workflow"]} for r in _records(_api(server, "runs", workflow=w["workflow"]))]
    return out


def _table(page: Page, selector: str) -> tuple[list[str], list[list[str]]]:
    head = page.locator(f"{selector} thead th").all_inner_texts()
    rows = [row.locator("td").all_inner_texts() for row in page.locator(f"{selector} tbody tr").all()]
    return [h.strip() for h in head], [[c.strip() for c in r] for r in rows]


def test_the_runs_table_lists_every_training_with_its_figures(demo: Browsed, demo_server: ApiServer) -> None:
    trainings = _trainings(demo_server)
    assert len(trainings) >= 2
    demo.goto("/#/runs")
    expect(demo.page.locator("table.runs tbody tr")).to_have_count(len(trainings))
    # the epochs' figures come after the first table (a redraw): read the table once they are in
    expect(demo.page.locator("table.runs thead th", has_text="best training").first).to_be_visible()
    # every workflow of the store is listed, those without trainings too
    workflows = _records(_api(demo_server, "workflows"))
    assert any(w["trainings"] == 0 for w in workflows)
    expect(demo.page.locator("#workflow-list li")).to_have_count(len(workflows))
    head, rows = _table(demo.page, "table.runs")
    by_training = {r[head.index("training")]: dict(zip(head, r, strict=True)) for r in rows}
    for t in trainings:
        row = by_training[unquote(t["training"].split("/id/task/", 1)[1])]
        assert row["status"] == t["status"]
        for name, value in _pairs(t["hyperparameters"]).items():
            assert row[name] == value
        epochs = _records(_api(demo_server, "epochs", training=t["training"]))
        stage_measures = {(r["stage"], r["measure"]): r["value"] for r in epochs
                          if r["epoch"] is None and r["measure"]}
        # best over the epochs, in the direction the ranking queries use (lower loss, higher accuracy)
        losses = [r["value"] for r in epochs if r["stage"] == "training" and r["measure"] == "loss"
                  and r["epoch"] is not None]
        accuracies = [r["value"] for r in epochs if r["stage"] == "training" and r["measure"] == "accuracy"
                      and r["epoch"] is not None]
        assert row["best training loss"] == _shown(min(losses))
        assert row["best training accuracy"] == _shown(max(accuracies))
        assert stage_measures, "the demo's trainings have stage measures"
        for (stage, measure), value in stage_measures.items():
            assert row[f"{stage} {measure}"] == _shown(value)
    demo.shot("runs")


def test_a_filter_narrows_the_runs_and_is_kept_in_the_url(demo: Browsed, demo_server: ApiServer) -> None:
    trainings = _trainings(demo_server)
    rates = sorted(float(_pairs(t["hyperparameters"])["learning_rate"]) for t in trainings)
    cut = rates[len(rates) // 2]
    expected = sum(1 for r in rates if r >= cut)
    assert 0 < expected < len(trainings)
    demo.goto("/#/runs")
    expect(demo.page.locator("table.runs tbody tr")).to_have_count(len(trainings))
    demo.page.fill("#run-filter", f"learning_rate >= {cut} and status = finished")
    expect(demo.page.locator("table.runs tbody tr")).to_have_count(expected)
    demo.page.reload()  # the filter is in the URL: a deep link shows the same rows
    expect(demo.page.locator("table.runs tbody tr")).to_have_count(expected)
    demo.page.fill("#run-filter", "no_such_column > 1")
    expect(demo.page.locator(".msg.error")).to_contain_text("no_such_column")


def test_comparing_two_runs_draws_both_curves_and_marks_the_differences(demo: Browsed, demo_server: ApiServer) -> None:
    a, b = _trainings(demo_server)[:2]
    demo.goto("/#/compare?" + _query({"t": [a["training"], b["training"]]}))
    chart = demo.page.locator("figure.chart", has_text="training loss").first
    expect(chart.locator("polyline.series")).to_have_count(2)
    for t, line in zip((a, b), chart.locator("polyline.series").all(), strict=True):
        epochs = [r for r in _records(_api(demo_server, "epochs", training=t["training"]))
                  if r["stage"] == "training" and r["measure"] == "loss" and r["epoch"] is not None]
        assert len(line.get_attribute("points").split()) == len(epochs) > 1
    ha, hb = _pairs(a["hyperparameters"]), _pairs(b["hyperparameters"])
    differing = {k for k in ha.keys() | hb.keys() if ha.get(k) != hb.get(k)}
    assert differing
    shown = {t.strip() for t in demo.page.locator("table.compare tr.differs th").all_inner_texts()}
    assert shown == differing
    demo.shot("compare")


def test_the_lineage_of_the_best_model_reaches_the_segy_file_and_the_basin(demo: Browsed, demo_server: ApiServer) -> None:
    trainings = _trainings(demo_server)
    best = max(trainings, key=lambda t: float(_pairs(t["evaluations"])["accuracy"]))
    model = next(r["data"] for r in _records(_api(demo_server, "data", workflow=best["workflow"]))
                 if r["role"] == "model" and r["training"] == best["training"])
    q1 = _records(_api(demo_server, "q1", model=model))[0]
    demo.goto("/#/lineage?" + _query({"data": model, "depth": 6}))
    expect(demo.page.locator("#lineage-summary")).to_be_visible()
    expect(demo.page.locator(f'g.node[data-id="{q1["seismic_file"]}"]')).to_have_count(1)
    basin = demo.page.locator("g.node.kg", has_text=q1["basin"])
    expect(basin).to_have_count(1)
    basin.click()
    expect(demo.page.locator("#lineage-details h2")).to_have_text(q1["basin"])
    demo.shot("lineage")


def _query(params: dict[str, Any]) -> str:
    return urlencode(params, doseq=True)


def test_a_canned_query_from_the_form_gives_the_rows_of_provkg_query(demo: Browsed, demo_server: ApiServer) -> None:
    training = _trainings(demo_server)[0]["training"]
    cli = subprocess.run([sys.executable, "-m", "provkg.cli", "query", "d3", "--param", f"training={training}",
                          "--store", demo_server.store_url, "--format", "json"],  # type: ignore[attr-defined]
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    demo.goto("/#/queries?" + _query({"name": "d3", "training": training}))
    expect(demo.page.locator("#query-count")).to_contain_text(f"{len(expected['rows'])} rows")
    _, rows = _table(demo.page, "#query-result table")
    assert rows == [[_shown(v) for v in r] for r in expected["rows"]]
    with demo.page.expect_download() as download:
        demo.page.click("#download-json")
    assert json.loads(Path(download.value.path()).read_text())["rows"] == expected["rows"]
    assert demo.page.locator("#query-cli").inner_text() == f"provkg query d3 --param training={training}"
    demo.page.click("#show-sparql")
    expect(demo.page.locator("#query-sparql")).to_contain_text("SELECT")
    demo.shot("queries")


def test_the_sparql_editor_shows_the_guards_refusal_and_answers_a_query(demo: Browsed, demo_server: ApiServer) -> None:
    update = "DELETE WHERE { ?s ?p ?o }"
    refusal = demo_server.http.post("/v1/sparql", data={"query": update})
    assert refusal.status_code == 400
    demo.allowed.append("status of 400")
    demo.goto("/#/sparql")
    expect(demo.page.locator("#sparql-text")).not_to_have_value("")
    demo.page.fill("#sparql-text", update)
    demo.page.click("#sparql-run")
    expect(demo.page.locator("#sparql-result .msg.error")).to_contain_text(refusal.json()["detail"])
    demo.page.fill("#sparql-text", "ASK { ?s ?p ?o }")
    demo.page.click("#sparql-run")
    expect(demo.page.locator("#sparql-boolean")).to_contain_text("ASK: true")
    assert demo_server.http.post("/v1/sparql", data={"query": "ASK { ?s ?p ?o }"},
                                 headers={"Accept": "application/sparql-results+json"}).json()["boolean"] is True
    demo.shot("sparql")


def test_the_api_docs_render_with_the_network_fenced_off(demo: Browsed) -> None:
    demo.goto("/docs")
    expect(demo.page.locator(".opblock-summary-path", has_text="/v1/events").first).to_be_visible()
    assert demo.page.locator(".opblock").count() > 10
    demo.shot("docs")
    # ReDoc's "powered by" logo names its CDN: the page's CSP blocks it (a console error),
    # so no request leaves (the fence would see it)
    demo.allowed.append("https://cdn.redoc.ly/")
    demo.goto("/redoc")
    expect(demo.page.get_by_text("Run a canned query").first).to_be_attached()
    demo.shot("redoc")


def test_specs_and_ontologies_show_what_is_registered(demo: Browsed, demo_server: ApiServer) -> None:
    specs = demo_server.http.get("/v1/specs").json()
    demo.goto("/#/specs")
    expect(demo.page.locator("section.spec")).to_have_count(len(specs))
    first = specs[0]["transformations"][0]["name"]
    expect(demo.page.locator("section.spec").first).to_contain_text(first)
    demo.shot("specs")
    terms = demo_server.http.get("/v1/ontologies/prov-ml/terms").json()
    assert any(t["label"] for t in terms)
    demo.goto("/#/ontologies?name=prov-ml")
    expect(demo.page.locator("table.terms tbody tr")).to_have_count(len(terms))
    demo.shot("ontologies")


def test_hostile_values_render_as_text_and_run_nothing(hostile: Browsed, hostile_server: ApiServer) -> None:
    page_headers = hostile_server.http.get("/").headers
    csp = page_headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    hostile.goto("/#/runs")
    row = hostile.page.locator("table.runs tbody tr").first
    expect(row).to_contain_text(HOSTILE)
    expect(row).to_contain_text(HOSTILE_LABEL)
    assert hostile.page.locator("main script, main img").count() == 0
    training = _trainings(hostile_server)[0]["training"]
    model = next(r["data"] for r in _records(_api(hostile_server, "data", workflow="hostile")) if r["role"] == "model")
    hostile.goto("/#/lineage?" + _query({"data": model, "depth": 2}))
    expect(hostile.page.locator("#lineage-summary")).to_be_visible()
    hostile.goto("/#/compare?" + _query({"t": training}))
    expect(hostile.page.locator("table.compare")).to_contain_text(HOSTILE)
    # the batches as one band per epoch, and the adaptation (its technique hostile too) marked
    band = hostile.page.locator("figure.chart", has_text="batch loss").first
    epochs = _records(_api(hostile_server, "batches", training=training))
    expect(band).to_contain_text(f"({sum(e['batches'] for e in epochs)} batches)")
    expect(band.locator("polygon.band")).to_have_count(1)
    adaptations = _records(_api(hostile_server, "adaptations", training=training))
    assert [a["technique"] for a in adaptations] == [HOSTILE]
    expect(band.locator("line.mark")).to_have_count(len(adaptations))
    assert HOSTILE in band.locator("line.mark title").first.text_content()
    assert hostile.page.locator("main script, main img").count() == 0
    hostile.shot("hostile")


def test_a_run_ingested_while_the_page_is_open_appears_without_a_reload(hostile: Browsed,
                                                                         hostile_server: ApiServer) -> None:
    before = len(_trainings(hostile_server))
    hostile.goto("/#/runs")
    expect(hostile.page.locator("table.runs tbody tr")).to_have_count(before)
    hostile.page.evaluate("window.provkgStayed = true")  # gone if the page reloads
    _capture_training(hostile_server, f"live-{before}", lr=0.01, optimizer="adam", losses=[0.7, 0.4])
    expect(hostile.page.locator("table.runs tbody tr")).to_have_count(before + 1)
    expect(hostile.page.locator("table.runs")).to_contain_text(f"live-{before}")
    assert hostile.page.evaluate("window.provkgStayed") is True
