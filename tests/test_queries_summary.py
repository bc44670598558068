"""Canned queries over per-section summaries (rollups: spec ``granularity: summary``, or
``both``, an innermost section's default): the batch statistics of Q4, Q5 and Q7 read from the
epochs' rollups give the answers the full batches give, on every backend and in both schemas."""

from __future__ import annotations

import dataclasses

import pytest
from lifecycle import SPECS, build_lifecycle, load_lifecycle
from test_queries import _close, expected

from provkg.service.querying import run_query
from provkg.spec import parse_spec
from provkg.term import mint_iri

SUMMARISED = ("q4", "q5", "q7", "batches", "p1", "d3")


def _summary_spec(text: str, granularity: str = "summary") -> str:
    """The spec with the batch sections (training and validation) kept at ``granularity``."""
    for name, parent in (("batch", "epoch"), ("val_batch", "val_epoch")):
        head = f"  - name: {name}\n    kind: section\n    of: {parent}\n"
        text = text.replace(head, head + f"    granularity: {granularity}\n")
    return text


@pytest.fixture(scope="module", params=["summary", "both", "full"])
def lcs(request):
    full = build_lifecycle()
    specs = {name: parse_spec(_summary_spec(text, request.param)) for name, text in SPECS.items()}
    assert any(f"granularity: {request.param}" in _summary_spec(t, request.param) for t in SPECS.values())
    return full, dataclasses.replace(full, specs=specs), request.param


def _assert_full_answers(store, full, schema: str) -> None:
    """Q4, Q5 and Q7 on ``store`` answer what they answer on the full batches of ``full``."""
    want = expected(full)
    for name in SUMMARISED:
        params, rows = want[name]
        got = run_query(store, name, params, schema=schema).rows
        assert len(got) == len(rows) and all(
            len(g) == len(w) and all(_close(x, y) for x, y in zip(g, w))
            for g, w in zip(got, rows)), f"{name}: got {got}\n      want {rows}"


@pytest.mark.parametrize("schema", ["typed", "tagged"])
def test_batch_statistics_from_summaries_equal_the_full_batches(store, lcs, schema):
    full, summarised, granularity = lcs
    load_lifecycle(store, summarised, schema=schema)
    # summary: the batches really are gone, only their rollups hold the figures; both: the
    # two; full: the batches alone
    batches = store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { ?b <http://www.w3.org/ns/prov#wasInformedBy> ?e . "
        "?e <http://www.w3.org/ns/prov#wasInformedBy> ?t . "
        "?b <http://www.w3.org/ns/prov#startedAtTime> ?x }").rows[0][0]
    summaries = store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { ?s a <https://w3id.org/provkg/ns#SectionSummary> }"
    ).rows[0][0]
    # the epochs rolled up per training too (p1 reads the latest one there), not at full
    epochs_rolled_up = store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { ?s <https://w3id.org/provkg/ns#latestExecution> ?e ; "
        "<http://www.w3.org/ns/prov#wasInfluencedBy> ?section . "
        "FILTER NOT EXISTS { ?section <https://w3id.org/provkg/ns#innermost> true } }").rows[0][0]
    assert (int(batches) > 0) == (granularity != "summary")
    assert (int(summaries) > 0) == (granularity != "full")
    assert (int(epochs_rolled_up) > 0) == (granularity != "full")
    _assert_full_answers(store, full, schema)


@pytest.mark.parametrize("schema", ["typed", "tagged"])
def test_summaries_from_shuffled_sessions_with_redeliveries_answer_the_same(store, lcs, schema):
    # the ingest service's own reads and updates of summary state, on every backend: the
    # events shuffled, a third of them delivered twice, in small sessions like the server's
    import random

    from provkg.service.ingest import Ingestor, register_spec

    full, summarised, _ = lcs
    store.add(summarised.kg)
    for spec in summarised.specs.values():
        register_spec(store, spec, schema=schema)
    events = list(summarised.events) + random.Random(4).sample(summarised.events, len(summarised.events) // 3)
    random.Random(5).shuffle(events)
    for i in range(0, len(events), 12):
        session = Ingestor(store, specs=summarised.specs, schema=schema, register=False)
        session.ingest(events[i:i + 12])
        session.finish()
    assert not store.ask("ASK { { ?s <https://w3id.org/provkg/ns#pendingParent> ?p } UNION "
                         "{ ?s <https://w3id.org/provkg/ns#pendingEvent> ?e } }")
    _assert_full_answers(store, full, schema)


ROUNDING_SPEC = """\
workflow: lc
phase: learning
transformations:
  - name: training
    kind: training
    used: [{name: train_set, role: dataset}]
  - name: epoch
    kind: section
    of: training
  - name: batch
    kind: section
    of: epoch
    generated: [{name: loss, role: evaluation_measure}]
"""


def _q4_full_and_summary(store, events):
    """q4's rows with ROUNDING_SPEC's batches kept in full, then as summaries."""
    from provkg.mapper import map_events, map_spec

    answers = []
    for text in (ROUNDING_SPEC, _summary_spec(ROUNDING_SPEC)):
        store.clear()
        spec = parse_spec(text)
        store.add([*map_spec(spec), *map_events(events, {"lc": spec})])
        answers.append(run_query(store, "q4", {"dataset": "ds"}).rows)
    return answers


def test_summary_seconds_use_the_microseconds_of_the_stored_times(embedded_store):
    # found by black-box testing: 1795290130.8976774 s is .897677 in the batch's dateTime but
    # round(t * 1e6) gave .897678 in the summary, so q4 differed by 1 us between the forms

    begin, end = 1795290130.8976774, 1795290130.9000633
    events = [{"type": "workflow", "event": "begin", "id": "R", "time": begin - 1, "workflow": "lc"},
              {"type": "task", "event": "begin", "id": "T", "time": begin - 1, "workflow_id": "R",
               "transformation": "training", "used": [{"name": "train_set", "id": "ds"}]},
              {"type": "task", "event": "begin", "id": "E", "time": begin - 0.5, "workflow_id": "R",
               "transformation": "epoch", "parent": "T", "index": 0},
              {"type": "task", "event": "begin", "id": "B", "time": begin, "workflow_id": "R",
               "transformation": "batch", "parent": "E", "index": 0},
              {"type": "task", "event": "end", "id": "B", "time": end, "workflow_id": "R",
               "transformation": "batch", "generated": [{"name": "loss", "value": 0.5}]},
              {"type": "task", "event": "end", "id": "E", "time": end + 0.1, "workflow_id": "R",
               "transformation": "epoch"},
              {"type": "task", "event": "end", "id": "T", "time": end + 0.2, "workflow_id": "R",
               "transformation": "training"}]
    full, summary = _q4_full_and_summary(embedded_store, events)
    assert full == summary and full[0][3] == 0.002386  # .900063 - .897677


def test_a_value_a_summarised_section_does_not_declare_is_reported_not_silently_dropped():
    # found by black-box testing: with granularity: summary, an undeclared batch value
    # (grad_norm) vanished with no warning, while the full form stored it and said so
    from provkg.mapper import MapState, finish, map_events

    spec = parse_spec(_summary_spec(ROUNDING_SPEC))
    t0 = 1_700_000_000.0
    events = [{"type": "workflow", "event": "begin", "id": "R", "time": t0, "workflow": "lc"},
              {"type": "task", "event": "begin", "id": "E", "time": t0, "workflow_id": "R",
               "transformation": "epoch", "parent": "T", "index": 0}]
    for i in range(3):
        events += [{"type": "task", "event": "begin", "id": f"B{i}", "time": t0 + i, "workflow_id": "R",
                    "transformation": "batch", "parent": "E", "index": i},
                   {"type": "task", "event": "end", "id": f"B{i}", "time": t0 + i + 0.5, "workflow_id": "R",
                    "transformation": "batch", "generated": [{"name": "loss", "value": 0.5},
                                                             {"name": "grad_norm", "value": 7.25}]}]
    st = MapState({"lc": spec})
    list(map_events(events, state=st))
    finish(st)
    assert ("attribute 'grad_norm' is not in transformation 'batch' of 'lc', whose executions are "
            "kept only as summaries of their declared measures: 3 values not stored") in st.warnings()
    assert not any("'loss'" in w for w in st.warnings())


def test_q4_counts_the_same_batches_from_summaries_when_one_never_ended(embedded_store):
    # found by black-box testing: a batch with a begin and no end counted in the summary's
    # q4 `batches` (executionCount) but not in the full form's (it has no duration)

    t0 = 1_700_000_000.0
    events = [{"type": "workflow", "event": "begin", "id": "R", "time": t0, "workflow": "lc"},
              {"type": "task", "event": "begin", "id": "T", "time": t0, "workflow_id": "R",
               "transformation": "training", "used": [{"name": "train_set", "id": "ds"}]},
              {"type": "task", "event": "begin", "id": "E", "time": t0, "workflow_id": "R",
               "transformation": "epoch", "parent": "T", "index": 0},
              {"type": "task", "event": "begin", "id": "B1", "time": t0 + 1, "workflow_id": "R",
               "transformation": "batch", "parent": "E", "index": 0},
              {"type": "task", "event": "end", "id": "B1", "time": t0 + 1.5, "workflow_id": "R",
               "transformation": "batch"},
              {"type": "task", "event": "begin", "id": "B2", "time": t0 + 2, "workflow_id": "R",
               "transformation": "batch", "parent": "E", "index": 1},
              {"type": "task", "event": "end", "id": "E", "time": t0 + 3, "workflow_id": "R",
               "transformation": "epoch"}]
    full, summary = _q4_full_and_summary(embedded_store, events)
    assert full == summary == [[mint_iri("task", "T"), 0, 1, 0.5, 0.5, 0.5]]


def test_sprov_says_it_keeps_summarised_sections_in_full():
    # found by black-box testing: with --schema sprov, granularity: summary did nothing, silently
    from provkg.mapper import MapState, finish, map_events

    spec = parse_spec(_summary_spec(ROUNDING_SPEC))
    t0 = 1_700_000_000.0
    events = [{"type": "workflow", "event": "begin", "id": "R", "time": t0, "workflow": "lc"},
              {"type": "task", "event": "begin", "id": "B", "time": t0, "workflow_id": "R",
               "transformation": "batch", "parent": "E", "index": 0},
              {"type": "task", "event": "end", "id": "B", "time": t0 + 1, "workflow_id": "R",
               "transformation": "batch"}]
    st = MapState({"lc": spec}, schema="sprov")
    triples = list(map_events(events, state=st)) + finish(st)
    assert any(s.endswith("/task/B>") for s, _, _ in triples)
    assert ("transformation 'batch' of 'lc' has granularity: summary, which S-PROV does not use: "
            "2 events stored in full") in st.warnings()


@pytest.mark.parametrize("schema", ["typed", "tagged"])
def test_epochs_kept_in_full_and_later_summarised_count_once(embedded_store, lcs, schema):
    """Found by black-box testing: a spec switched to batch summaries, then old event files
    ingested again, gave q4 every epoch twice (its batches in full and its new summary)."""
    from provkg.service.ingest import ingest_events

    full, summarised, granularity = lcs
    embedded_store.add(full.kg)
    in_full = [parse_spec(_summary_spec(text, "full")) for text in SPECS.values()]
    ingest_events(embedded_store, full.events, specs=in_full, schema=schema)
    ingest_events(embedded_store, full.events, specs=list(summarised.specs.values()), schema=schema)
    assert embedded_store.ask("ASK { ?s a <https://w3id.org/provkg/ns#SectionSummary> }") == (
        granularity != "full")
    _assert_full_answers(embedded_store, full, schema)
