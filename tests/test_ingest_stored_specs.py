"""A spec registered once is used by every later session on the same store: `provkg ingest`
without `--spec` (found by black-box testing: its events were stored as plain PROVLake) and a
server started on a store the command line filled."""

from __future__ import annotations

import json
from pathlib import Path

import pyoxigraph as ox
import pytest
from api_support import ApiServer

from provkg.cli import main
from provkg.errors import BadSpec
from provkg.service.ingest import register_spec, spec_document, stored_specs
from provkg.spec import load_spec, parse_spec, parse_stored_spec
from provkg.store import open_store

GOLDEN = Path(__file__).parent / "golden"
SPEC = GOLDEN / "lifecycle.spec.yaml"
EVENTS = (GOLDEN / "lifecycle.events.jsonl").read_text().splitlines(keepends=True)


def _triples(directory: Path) -> set[str]:
    store = ox.Store.read_only(str(directory))
    return {str(q.triple) for q in store}


def test_a_later_ingest_without_spec_uses_the_stored_one(tmp_path: Path, capsys) -> None:
    day1, day2 = tmp_path / "day1.jsonl", tmp_path / "day2.jsonl"
    day1.write_text("".join(EVENTS[:9]))
    day2.write_text("".join(EVENTS[9:]))
    split, whole = tmp_path / "split", tmp_path / "whole"
    assert main(["ingest", str(day1), "--spec", str(SPEC), "--store", f"oxigraph:{split}"]) == 0
    assert main(["ingest", str(day2), "--store", f"oxigraph:{split}"]) == 0
    assert "has no spec" not in capsys.readouterr().err
    both = tmp_path / "both.jsonl"
    both.write_text("".join(EVENTS))
    assert main(["ingest", str(both), "--spec", str(SPEC), "--store", f"oxigraph:{whole}"]) == 0
    assert _triples(split) == _triples(whole)


def test_a_changed_spec_replaces_the_stored_document() -> None:
    spec = load_spec(SPEC)
    changed = parse_spec(SPEC.read_text().replace("phase: learning", "phase: preparation"))
    with open_store("memory:") as store:
        register_spec(store, spec)
        register_spec(store, spec)  # idempotent
        assert [spec_document(s) for s in stored_specs(store)] == [spec_document(spec)]
        register_spec(store, changed)
        assert [spec_document(s) for s in stored_specs(store)] == [spec_document(changed)]


def test_a_server_on_a_store_the_cli_filled_knows_its_specs(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text("".join(EVENTS[:3]))
    assert main(["ingest", str(events), "--spec", str(SPEC),
                 "--store", f"oxigraph:{tmp_path / 'srv' / 'store'}"]) == 0
    with ApiServer(tmp_path / "srv") as server:
        listed = server.http.get("/v1/specs").json()
        names = [s["workflow"] for s in (listed["specs"] if isinstance(listed, dict) else listed)]
        assert names == [load_spec(SPEC).workflow]


CHANGED = """\
workflow: w
phase: learning
transformations:
  - name: fit
    kind: training
    used:
      - {name: learning_rate, role: hyperparameter}
      - {name: seed, role: ROLE}
    generated:
      - {name: accuracy, role: evaluation_measure}
"""


def _run(run: str, t0: float) -> list[dict]:
    return [{"type": "workflow", "event": "begin", "id": run, "time": t0, "workflow": "w"},
            {"type": "task", "event": "begin", "id": f"{run}/fit", "time": t0, "workflow_id": run,
             "transformation": "fit", "used": [{"name": "learning_rate", "value": 0.1},
                                               {"name": "seed", "value": 7}]},
            {"type": "task", "event": "end", "id": f"{run}/fit", "time": t0 + 1, "workflow_id": run,
             "transformation": "fit", "status": "finished",
             "generated": [{"name": "accuracy", "value": 0.9}]}]


def test_a_changed_spec_replaces_what_the_old_one_said(embedded_store) -> None:
    # found by black-box testing: a role fixed in the spec (seed: hyperparameter -> plain) left
    # the old class and tag, so typed and tagged answered differently from a fresh store
    v1, v2 = (parse_spec(CHANGED.replace("ROLE", r)) for r in ("hyperparameter", "plain"))
    _assert_changed_is_fresh(embedded_store, v1, v2, _run)


def _assert_changed_is_fresh(store, v1, v2, run) -> None:
    """Run r1 under spec v1 then r2 under v2 gives the graph both runs under v2 give."""
    from provkg.service.ingest import ingest_events

    for schema in ("typed", "tagged"):
        store.clear()
        ingest_events(store, run("r1", 1.0e9), specs=[v1], schema=schema)
        ingest_events(store, run("r2", 1.1e9), specs=[v2], schema=schema)
        changed = set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))
        store.clear()
        ingest_events(store, run("r1", 1.0e9) + run("r2", 1.1e9), specs=[v2], schema=schema)
        fresh = set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))
        assert changed == fresh, (schema, changed ^ fresh)


SECTIONED = """\
workflow: w
phase: learning
transformations:
  - {name: fit, kind: training}
  - {name: epoch, kind: section, of: fit, generated: [{name: loss, role: evaluation_measure}]}
"""


def _sectioned_run(run: str, t0: float) -> list[dict]:
    task = {"type": "task", "workflow_id": run}
    return [{"type": "workflow", "event": "begin", "id": run, "time": t0, "workflow": "w"},
            {**task, "event": "begin", "id": f"{run}/fit", "time": t0, "transformation": "fit"},
            *[e for i in range(2) for e in (
                {**task, "event": "begin", "id": f"{run}/e{i}", "time": t0 + i,
                 "transformation": "epoch", "parent": f"{run}/fit", "index": i},
                {**task, "event": "end", "id": f"{run}/e{i}", "time": t0 + i + 0.5,
                 "transformation": "epoch", "status": "finished",
                 "generated": [{"name": "loss", "value": 1.0 / (i + 1)}]})],
            {**task, "event": "end", "id": f"{run}/fit", "time": t0 + 3, "transformation": "fit",
             "status": "finished"}]


def test_a_section_the_changed_spec_drops_leaves_the_graph_a_fresh_ingest_gives(embedded_store) -> None:
    # black-box testing: the dropped section's executions, mapped as sections before, were left
    # in no run (a fresh ingest makes them the run's own tasks: provlake:isPartOf the run)
    v1 = parse_spec(SECTIONED)
    v2 = parse_spec(SECTIONED.replace("  - {name: epoch, kind: section", "  # "))
    assert [t.name for t in v2.transformations] == ["fit"]
    _assert_changed_is_fresh(embedded_store, v1, v2, _sectioned_run)


SHARED = """\
workflow: WF
phase: learning
transformations:
  - name: training
    kind: training
    used: [{name: lr, role: hyperparameter}, {name: arch, role: ROLE}, {name: data, role: DATA}]
"""


def _shared_run(run: str, workflow: str) -> list[dict]:
    used = [{"name": "lr", "value": 0.1}, {"name": "arch", "value": "resnet", "location": "file:///cfg/arch.yaml"},
            {"name": "data", "location": "s3://bucket/shared.csv"}]
    return [{"type": "workflow", "event": "begin", "id": run, "time": 1.0e9, "workflow": workflow},
            {"type": "task", "event": "begin", "id": f"{run}/t", "time": 1.0e9 + 1, "workflow_id": run,
             "transformation": "training", "used": used},
            {"type": "task", "event": "end", "id": f"{run}/t", "time": 1.0e9 + 2, "workflow_id": run,
             "transformation": "training", "status": "finished"},
            {"type": "workflow", "event": "end", "id": run, "time": 1.0e9 + 3, "workflow": workflow,
             "status": "finished"}]


def test_a_changed_spec_leaves_the_classes_another_workflow_gives_a_shared_value(store) -> None:
    # found by black-box testing: two workflows read the same files; changing one spec took
    # away the classes the other spec gives them, so d5 lost wfB's arch hyperparameter
    from provkg.service.ingest import ingest_events

    def spec(workflow: str, role: str, data: str):
        return parse_spec(SHARED.replace("WF", workflow).replace("ROLE", role).replace("DATA", data))

    a1 = spec("wfA", "model_hyperparameter", "dataset")
    a2 = spec("wfA", "plain", "feature_set")
    b = spec("wfB", "model_hyperparameter", "dataset_characteristic")
    events = _shared_run("ra", "wfA") + _shared_run("rb", "wfB")
    ingest_events(store, events, specs=[a1, b])
    ingest_events(store, [], specs=[a2])
    changed = set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))
    store.clear()
    ingest_events(store, events, specs=[a2, b])
    fresh = set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))
    assert changed == fresh


def test_a_spec_registered_before_in_this_schema_is_not_registered_again() -> None:
    # black-box finding: every `provkg ingest` re-ran the spec's re-typing updates over the
    # workflow's whole history, so an ingest cost time in proportion to the store
    from provkg.mapper import map_spec

    spec = load_spec(SPEC)
    with open_store("memory:") as store:
        assert register_spec(store, spec) > 0
        assert register_spec(store, spec) == 0  # nothing to do
        # the same document in another schema still needs that schema's prospective triples
        assert register_spec(store, spec, schema="tagged") > 0
        tagged = list(map_spec(spec, schema="tagged"))
        assert store.ask("ASK { " + " ".join(f"{s} {p} {o} ." for s, p, o in tagged) + " }")
        assert register_spec(store, spec, schema="tagged") == 0


def test_a_large_spec_that_validated_is_read_back_from_the_store() -> None:
    # its stored copy spells out the defaults: past the size check, it was skipped on the
    # next ingest ("expands to more than 100,000 values") and the runs went in untyped
    big = "workflow: big\nphase: learning\ntransformations:\n" + "".join(
        f"  - name: t{i}\n    kind: training\n    used: [{{name: a{i}, role: hyperparameter}}]\n"
        for i in range(7000))
    spec = parse_spec(big)
    store = open_store("memory:")
    register_spec(store, spec)
    assert [s.workflow for s in stored_specs(store)] == ["big"]
    assert spec_document(stored_specs(store)[0]) == spec_document(spec) and len(spec_document(spec)) > 0


STORED = """\
workflow: WF
phase: preparation
data_stores:
  - {name: disk, kind: file system, location: LOCATION}
transformations:
  - name: cut
    used: [{name: volume, store: disk}]
"""


def test_data_stores_are_each_workflow_s_own_and_a_changed_location_replaces_the_old(store) -> None:
    # found in review: stores were minted per name, so two workflows' `disk` were one node
    # with both locations, and a spec registered again with a new location kept the old one
    from provkg.service.ingest import ingest_events

    def spec(workflow: str, location: str):
        return parse_spec(STORED.replace("WF", workflow).replace("LOCATION", location))

    ingest_events(store, [], specs=[spec("wfA", "file:///mnt/a"), spec("wfB", "s3://bucket/b")])
    ingest_events(store, [], specs=[spec("wfA", "file:///mnt/a2")])
    rows = store.select("""PREFIX provlake: <https://w3id.org/provkg/provlake#>
        PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
        SELECT ?wf ?loc ?kind WHERE {
          ?w a provlake:Workflow ; rdfs:label ?wf . ?t provlake:isPartOf ?w ; provlake:hasInput ?a .
          ?a provlake:storedIn ?s . ?s provlake:location ?l ; provlake:tag ?kind .
          BIND(STR(?l) AS ?loc) } ORDER BY ?wf ?loc""").rows
    assert [[str(x) for x in r] for r in rows] == [
        ["wfA", "file:///mnt/a2", "file system"], ["wfB", "s3://bucket/b", "file system"]]


def test_a_stored_document_that_no_longer_validates_names_field_and_line() -> None:
    """Stored documents are read as JSON; one that fails goes the YAML way for its lines."""
    good = parse_spec("workflow: w\nphase: learning\ntransformations:\n  - {name: fit, kind: training}\n")
    assert spec_document(parse_stored_spec(spec_document(good), source="stored")) == spec_document(good)
    doc = json.loads(spec_document(good))
    doc["transformations"][0]["kind"] = "juggling"
    text = json.dumps(doc, indent=1)  # one field per line: the line names the field's
    with pytest.raises(BadSpec) as caught:
        parse_stored_spec(text, source="stored")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "juggling" in t)
    assert f"stored:{line}: transformations[0].kind" in str(caught.value)


def test_a_restarted_server_keeps_the_spec_the_cli_registered_while_it_was_down(tmp_path: Path) -> None:
    # found by black-box testing: the server re-registered its own saved (older) spec over the
    # store's on start, so a spec given to `provkg ingest --spec` meanwhile was silently undone
    old = SPEC.read_text()
    new = tmp_path / "new.yaml"
    new.write_text(old.replace("phase: learning", "phase: preparation"))
    with ApiServer(tmp_path / "srv") as server:
        assert server.http.post("/v1/specs", content=old,
                                headers={"content-type": "application/yaml"}).status_code == 201
    events = tmp_path / "e.jsonl"
    events.write_text("".join(EVENTS[:3]))
    store_url = f"oxigraph:{tmp_path / 'srv' / 'store'}"
    assert main(["ingest", str(events), "--spec", str(new), "--store", store_url]) == 0
    with ApiServer(tmp_path / "srv") as server:
        listed = server.http.get("/v1/specs").json()
    specs = listed["specs"] if isinstance(listed, dict) else listed
    assert [s["phase"] for s in specs] == ["preparation"]
    with open_store(store_url, existing=True, read_only=True) as store:
        assert [s.phase for s in stored_specs(store)] == ["preparation"]


def test_a_server_starts_on_a_store_holding_a_large_spec(tmp_path: Path) -> None:
    # found by black-box testing: the store's copy of a 3,400-transformation spec (every default
    # spelled out) went through the size check again on start, and `provkg serve` exited 1
    big = tmp_path / "big.yaml"
    big.write_text("workflow: big\nphase: preparation\ntransformations:\n" + "".join(
        f"  - name: t{i}\n    kind: feature_extraction\n"
        f"    used: [{{name: in{i}, role: dataset}}, {{name: p{i}, role: hyperparameter}}]\n"
        f"    generated: [{{name: out{i}, role: feature_set}}, {{name: m{i}, role: evaluation_measure}}]\n"
        for i in range(3400)))
    events = tmp_path / "e.jsonl"
    events.write_text("")
    assert main(["ingest", str(events), "--spec", str(big),
                 "--store", f"oxigraph:{tmp_path / 'srv' / 'store'}"]) == 0
    with ApiServer(tmp_path / "srv") as server:
        listed = server.http.get("/v1/specs").json()
    specs = listed["specs"] if isinstance(listed, dict) else listed
    assert [(s["workflow"], len(s["transformations"])) for s in specs] == [("big", 3400)]


def test_ingest_says_when_its_spec_replaces_a_different_stored_one(tmp_path: Path, capsys) -> None:
    # black-box testing: the stored runs were re-typed without a word
    events = tmp_path / "e.jsonl"
    events.write_text("".join(EVENTS[:3]))
    changed = tmp_path / "changed.yaml"
    changed.write_text(SPEC.read_text().replace("phase: learning", "phase: preparation"))
    url = f"oxigraph:{tmp_path / 'store'}"
    assert main(["ingest", str(events), "--spec", str(SPEC), "--store", url]) == 0
    assert main(["ingest", str(events), "--spec", str(SPEC), "--store", url]) == 0
    assert "replaces" not in capsys.readouterr().err  # the same spec again: nothing to say
    assert main(["ingest", str(events), "--spec", str(changed), "--store", url]) == 0
    workflow = load_spec(SPEC).workflow
    assert (f"note: the spec of workflow {workflow!r} given here replaces the different one the "
            "store held") in capsys.readouterr().err


class _Crash(Exception):
    """The process dies here (kill -9): nothing after this write happens."""


class _CrashingStore:
    """A store whose ``at``-th write never happens: the process died before it."""

    def __init__(self, store, at: int) -> None:
        self.store, self.at, self.writes = store, at, 0

    def __getattr__(self, name):
        return getattr(self.store, name)

    def _write(self) -> None:
        self.writes += 1
        if self.writes == self.at:
            raise _Crash

    def add(self, *args, **kwargs):
        self._write()
        return self.store.add(*args, **kwargs)

    def update(self, *args, **kwargs):
        self._write()
        return self.store.update(*args, **kwargs)


@pytest.mark.parametrize("schema", ["typed", "tagged", "sprov"])
def test_a_spec_registration_cut_at_any_write_is_completed_by_the_next_process(store, schema) -> None:
    """Found by black-box testing: kill -9 during POST /v1/specs left the old spec's triples
    gone (eight canned queries empty) or parts of both specs, for good; a restart did not
    repair it. Now the next writer completes the registration: the graph is the one an
    uncut registration gives."""
    from provkg.service.ingest import finish_registrations, ingest_events

    v1 = parse_spec(CHANGED.replace("ROLE", "hyperparameter"))
    v2 = parse_spec(CHANGED.replace("ROLE", "plain").replace(
        "      - {name: accuracy", "      - {name: momentum, role: hyperparameter}\n      - {name: accuracy"))

    def before() -> None:
        store.clear()
        ingest_events(store, _run("r1", 1.0e9), specs=[v1], schema=schema)

    def graph() -> set:
        return set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))

    before()
    counting = _CrashingStore(store, at=0)
    register_spec(counting, v2, schema=schema)
    whole, writes = graph(), counting.writes
    assert writes >= 4 and not any("registering" in t[1] for t in whole)
    before()
    untouched = graph()
    for at in range(1, writes + 1):
        before()
        with pytest.raises(_Crash):
            register_spec(_CrashingStore(store, at), v2, schema=schema)
        completed = finish_registrations(store)
        # cut before its marker was written, nothing had changed yet; after, it is completed
        assert completed == (["w"] if at > 2 else []), at
        assert graph() == (whole if completed else untouched), (at, graph() ^ whole)
        assert [spec_document(s) for s in stored_specs(store)] == [spec_document(v2 if completed else v1)]
