"""Rollups beside the detail (granularity ``both``, an innermost section's default): each ended
epoch's rollup equals the one computed here in Python from the events ingested, whatever their
order, chunking into sessions, re-deliveries, or how much of the run has arrived (the online
case: epochs still running have none and are answered from their batches); q4 answers what the
batches say either way (docs/reference/graph.md "Rollups")."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mapper_support import SPEC_YAML, SPEC_YAML_FULL, WORKFLOW, lifecycle_events, lifecycle_spec

from provkg.mapper.summary_cache import SummaryCache
from provkg.service.ingest import Ingestor
from provkg.service.querying import run_query
from provkg.store import Store, open_store
from provkg.term import mint_iri
from provkg.vocab import PREFIXES

SPEC = lifecycle_spec(SPEC_YAML)  # no granularity written: the batches get rollups
EVENTS = lifecycle_events(trainings=2, epochs=3, batches=4)
TRAIN_SET = "file:///lake/train.h5"
#: the spec's innermost sections (rolled up) -> their parents' transformation
INNERMOST = {"batch": "epoch", "val_epoch": "validation"}
PREFIX = "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in PREFIXES.items())

ROLLUPS = PREFIX + """
SELECT ?epoch ?count ?timed ?min ?avg ?max ?values ?vmin ?vavg ?vmax WHERE {
  ?epoch provkg:hasSectionSummary ?s . ?s prov:wasInfluencedBy ?section . ?section provkg:innermost true .
  ?s provkg:executionCount ?count ; provkg:timedCount ?timed .
  OPTIONAL { ?s provkg:minSeconds ?min ; provkg:avgSeconds ?avg ; provkg:maxSeconds ?max }
  OPTIONAL { ?s provkg:hasMeasureSummary ?m . ?m provkg:valueCount ?values ; provkg:minValue ?vmin ;
             provkg:avgValue ?vavg ; provkg:maxValue ?vmax }
}"""


#: a training's rollup of its epochs (a section that is not innermost)
OF_EPOCHS = "?training provkg:hasSectionSummary ?s . ?s prov:wasInfluencedBy ?section . " \
    "FILTER NOT EXISTS { ?section provkg:innermost true }"
#: the latest epoch each training's rollup of its epochs names
LATEST = PREFIX + "SELECT ?training ?epoch WHERE { " + OF_EPOCHS + " ?s provkg:latestExecution ?epoch }"


def _edge_events() -> list[dict[str, Any]]:
    """EVENTS with training-0's last epoch failed (no loss) and training-1's last epoch run
    again under its index after a resume (a later end, another loss)."""
    out: list[dict[str, Any]] = []
    for e in EVENTS:
        if e["id"] == "run-1/training-0/epoch-2" and e["event"] == "end":
            e = {**e, "status": "failed", "generated": []}
        if e["id"] == "run-1/training-1" and e["event"] == "end":
            again = {"type": "task", "id": "run-1/training-1/epoch-2-again", "workflow_id": "run-1",
                     "transformation": "epoch", "parent": "run-1/training-1", "index": 2}
            out += [{**again, "event": "begin", "time": e["time"] - 0.2},
                    {**again, "event": "end", "time": e["time"] - 0.1, "status": "finished",
                     "generated": [{"name": "loss", "value": 0.0625}]}]
        out.append(e)
    return out


EDGE_EVENTS = _edge_events()


def test_an_innermost_section_keeps_its_detail_and_gets_rollups_by_default():
    assert SPEC.granularity("batch") == "both" and SPEC.granularity("epoch") == "full"
    assert SPEC.granularity("training") == "full" and SPEC.granularity("val_epoch") == "both"
    # every innermost section is rolled up, so the epochs are too (per training), not the stages
    assert [SPEC.rolled_up(t) for t in ("batch", "epoch", "training", "val_epoch")] == [True] * 2 + [False, True]
    assert not lifecycle_spec(SPEC_YAML_FULL).rolled_up("epoch")


def _batches(events: list[dict[str, Any]], kinds=tuple(INNERMOST)) -> dict[str, dict[str, Any]]:
    """Innermost section id -> its parent, begin / end time and losses, from whatever events
    arrived."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"losses": set()})
    for e in events:
        if e.get("transformation") not in kinds:
            continue
        b = out[e["id"]]
        if e.get("parent"):
            b["parent"] = e["parent"]
        b[e["event"]] = e["time"]
        b["losses"].update(v["value"] for v in e.get("generated") or () if v["name"] == "loss")
    return out


def python_rollups(events: list[dict[str, Any]]) -> dict[str, tuple]:
    """Parent IRI -> (count, timed, min / avg / max seconds, losses count / min / avg / max) of
    its innermost sections, for every parent whose end arrived."""
    parents = set(INNERMOST.values())
    ended = {e["id"] for e in events if e.get("transformation") in parents and e["event"] == "end"}
    by_epoch: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for b in _batches(events).values():
        by_epoch[b["parent"]].append(b)
    out = {}
    for epoch in ended:
        bs = by_epoch.get(epoch, [])
        if not bs:
            continue  # an epoch without batches has nothing to roll up
        secs = [b["end"] - b["begin"] for b in bs if "begin" in b and "end" in b]
        losses = [x for b in bs for x in b["losses"]]
        out[mint_iri("task", epoch)] = (
            len(bs), len(secs), *((min(secs), sum(secs) / len(secs), max(secs)) if secs else (None,) * 3),
            *((len(losses), min(losses), sum(losses) / len(losses), max(losses)) if losses else (None,) * 4))
    return out


def _epochs(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Epoch id -> its parent, index, begin / end time, whether it failed and its losses."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"losses": set(), "failed": False})
    for e in events:
        if e.get("transformation") != "epoch":
            continue
        x = out[e["id"]]
        x.update({k: e[k] for k in ("parent", "index") if e.get(k) is not None})
        x[e["event"]] = e["time"]
        x["failed"] |= e["event"] == "end" and e.get("status") == "failed"
        x["losses"].update(v["value"] for v in e.get("generated") or () if v["name"] == "loss")
    return out


def _done_epochs(events: list[dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Training id -> its epochs that ended, have an index and did not fail."""
    by: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for eid, x in _epochs(events).items():
        if "parent" in x and "end" in x and "index" in x and not x["failed"]:
            by[x["parent"]].append((eid, x))
    return by


def python_latest(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(training, epoch) IRIs: for each training whose end arrived, its epochs of the greatest
    (index, end) among those that ended and did not fail."""
    ended = {e["id"] for e in events if e.get("transformation") == "training" and e["event"] == "end"}
    out = set()
    for tr, xs in _done_epochs(events).items():
        if tr in ended:
            top = max((x["index"], x["end"]) for _, x in xs)
            out |= {(mint_iri("task", tr), mint_iri("task", eid)) for eid, x in xs
                    if (x["index"], x["end"]) == top}
    return out


def python_p1(events: list[dict[str, Any]]) -> list[list[Any]]:
    """p1's (training, epoch, seconds, loss) from the events: each training's latest epoch that
    ended and did not fail (of its index, the later run), whether the training ended or not."""
    rows = []
    for tr, xs in _done_epochs(events).items():
        top = max(x["index"] for _, x in xs)
        began = [x for _, x in xs if x["index"] == top and "begin" in x]
        last = max((x["end"] for x in began), default=None)
        rows += [[mint_iri("task", tr), top, x["end"] - x["begin"], min(x["losses"], default=None)]
                 for x in began if x["end"] == last]
    return sorted(rows, key=lambda r: r[0])


def stored_rollups(store: Store) -> dict[str, tuple]:
    return {row[0]: tuple(row[1:]) for row in store.select(ROLLUPS).rows}


def python_q4(events: list[dict[str, Any]]) -> list[list[Any]]:
    """q4's rows from the events: per training that began on the train set and epoch, its
    batches that began and ended."""
    trainings = {e["id"] for e in events if e.get("transformation") == "training" and e["event"] == "begin"}
    index = {e["id"]: e["index"] for e in events if e.get("transformation") == "epoch"}
    parent = {e["id"]: e["parent"] for e in events if e.get("transformation") == "epoch" and e.get("parent")}
    per: dict[tuple[str, int], list[float]] = defaultdict(list)
    for b in _batches(events, ("batch",)).values():
        epoch = b["parent"]
        if "begin" in b and "end" in b and parent.get(epoch) in trainings:
            per[(mint_iri("task", parent[epoch]), index[epoch])].append(b["end"] - b["begin"])
    return [[t, i, len(s), sum(s) / len(s), min(s), max(s)] for (t, i), s in sorted(per.items())]


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) <= 1e-6
    return a == b


def _same(got: dict[str, tuple] | list[list[Any]], want: dict[str, tuple] | list[list[Any]]) -> bool:
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same([list(got[k])], [list(want[k])]) for k in got)
    return len(got) == len(want) and all(
        len(g) == len(w) and all(_close(x, y) for x, y in zip(g, w)) for g, w in zip(got, want))


def _ingest(store: Store, sessions: list[list[dict[str, Any]]], *, pipeline: bool,
            cache: SummaryCache | None = None, foreign: bool = False, spec: Any = SPEC) -> None:
    """Each chunk in a session of its own; with ``cache`` the sessions share it as a service's
    applier does, and with ``foreign`` every other session is another process's (no cache)."""
    for n, chunk in enumerate(sessions):
        session = Ingestor(store, specs=[spec], pipeline=pipeline)
        if not (foreign and n % 2):
            session.state.summary_cache = cache
        try:
            for i in range(0, len(chunk), 5):  # several batches per session, as the server's
                session.ingest(chunk[i:i + 5])
            session.finish()
        finally:
            session.close()


def _check(store: Store, events: list[dict[str, Any]]) -> None:
    got, want = stored_rollups(store), python_rollups(events)
    assert _same(got, want), f"rollups\n got {got}\nwant {want}"
    latest = {(str(t), str(e)) for t, e in store.select(LATEST).rows}
    assert latest == python_latest(events), f"latest\n got {latest}\nwant {python_latest(events)}"
    p1 = [[r[0], r[2], r[3], r[4]] for r in run_query(store, "p1", {"workflow": WORKFLOW}).rows]
    assert _same(p1, python_p1(events)), f"p1\n got {p1}\nwant {python_p1(events)}"
    q4 = run_query(store, "q4", {"dataset": TRAIN_SET}).rows
    assert _same(q4, python_q4(events)), f"q4\n got {q4}\nwant {python_q4(events)}"
    # a rollup holds one state; no pending record is left beside it
    states = store.select(PREFIX + "SELECT ?s (COUNT(?x) AS ?n) (COUNT(?p) AS ?pending) WHERE { "
                          "?s a provkg:SectionSummary ; provkg:summaryState ?x "
                          "OPTIONAL { ?s provkg:pendingParent ?p } } GROUP BY ?s").rows
    assert all((int(n), int(pending)) == (1, 0) for _, n, pending in states), states


def test_a_whole_run_in_one_session_has_a_rollup_per_epoch_and_every_batch(tmp_path):
    store = open_store(f"oxigraph:{tmp_path / 'store'}")
    _ingest(store, [EVENTS], pipeline=True)
    assert len(stored_rollups(store)) == 2 * 3 + 2  # epochs, and validations of their val_epochs
    batches = store.select(PREFIX + "SELECT (COUNT(?b) AS ?n) WHERE { ?b prov:wasInfluencedBy ?t . "
                                    "?t rdfs:label \"batch\" . ?b prov:startedAtTime ?x }").rows[0][0]
    assert int(batches) == 2 * 3 * 4
    _check(store, EVENTS)


@pytest.mark.parametrize("upto", [0.3, 0.55, 0.8])
def test_while_the_run_streams_in_ended_epochs_have_rollups_and_the_running_one_its_batches(tmp_path, upto):
    store = open_store(f"oxigraph:{tmp_path / 'store'}")
    arrived = EVENTS[:int(len(EVENTS) * upto)]
    _ingest(store, [arrived[i:i + 7] for i in range(0, len(arrived), 7)], pipeline=False)
    assert 0 < len(stored_rollups(store)) < 8
    _check(store, arrived)
    _ingest(store, [EVENTS[len(arrived):]], pipeline=False)  # the rest of the run
    _check(store, EVENTS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.floats(0.05, 1.0), st.integers(1, 6), st.booleans(),
       st.sampled_from(["none", "shared", "foreign"]), st.sampled_from(["plain", "edges"]))
def test_any_order_chunking_duplication_and_prefix_gives_the_python_rollups(rnd, part, sessions, pipeline,
                                                                            cached, kind):
    events = EVENTS if kind == "plain" else EDGE_EVENTS
    arrived = events[:max(1, int(len(events) * part))]
    stream = arrived + [rnd.choice(arrived) for _ in range(rnd.randint(0, len(arrived) // 2))]
    rnd.shuffle(stream)
    cuts = sorted(rnd.sample(range(1, len(stream)), min(sessions, len(stream)) - 1)) if len(stream) > 1 else []
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    store = open_store("memory:")
    try:
        _ingest(store, chunks, pipeline=pipeline, cache=None if cached == "none" else SummaryCache(),
                foreign=cached == "foreign")
        _check(store, arrived)
    finally:
        store.close()


@pytest.mark.parametrize("upto", [0.5, 0.9, 1.0])
def test_p1_reads_the_latest_epoch_a_rollup_names_as_the_full_detail_chooses_it(tmp_path, upto):
    # a failed last epoch, an epoch run again after a resume, a training still running (upto < 1)
    arrived = EDGE_EVENTS[:int(len(EDGE_EVENTS) * upto)]
    store = open_store(f"oxigraph:{tmp_path / 'store'}")
    _ingest(store, [arrived[i:i + 9] for i in range(0, len(arrived), 9)], pipeline=False)
    _check(store, arrived)
    p1 = run_query(store, "p1", {"workflow": WORKFLOW}).rows
    named = len(store.select(LATEST).rows)
    assert named == 2 if upto == 1.0 else named < 2  # a running training has none yet
    # the trainings' rollups taken away: the full branch gives the same rows
    store.update(PREFIX + "DELETE { ?training provkg:hasSectionSummary ?s } WHERE { " + OF_EPOCHS + " }")
    assert run_query(store, "p1", {"workflow": WORKFLOW}).rows == p1
    if upto == 1.0:
        assert [r[2:5:2] for r in p1] == [[1, 0.25], [2, 0.0625]]  # not the failed, the later run


def test_a_service_takes_back_the_state_it_wrote_without_parsing_and_answers_the_same(tmp_path):
    # batches directly under a long training: every session ends with the training open, so
    # each writes the whole state and the next one reads it back
    spec = lifecycle_spec(SPEC_YAML.replace("of: epoch", "of: training"))
    events = [e for e in EVENTS if e.get("transformation") != "epoch"]
    events = [{**e, "parent": e["parent"].rsplit("/", 1)[0]}
              if e.get("transformation") == "batch" and e.get("parent") else e for e in events]
    ends = [e for e in events if e.get("transformation") == "training" and e["event"] == "end"]
    body = [e for e in events if e not in ends]
    chunks = [body[i:i + 6] for i in range(0, len(body), 6)] + [ends]
    graphs = []
    for cache in (None, SummaryCache()):
        store = open_store("memory:")
        for chunk in chunks:
            session = Ingestor(store, specs=[spec])
            session.state.summary_cache = cache
            session.ingest(chunk)
            session.finish()
        graphs.append(sorted(store.select("SELECT ?s ?p ?o WHERE { ?s ?p ?o }").rows))
        if cache is not None:
            # every session after the first training began found its last state unparsed
            assert cache.hits >= len(chunks) - 3
    assert graphs[0] == graphs[1]
    counts = [int(r[2]) for r in graphs[1] if str(r[1]).endswith("executionCount")]
    assert counts.count(12) == 2  # each training's rollup: 3 epochs' worth of 4 batches


def test_the_queries_read_an_ended_epochs_rollup_not_its_batches(tmp_path):
    store = open_store(f"oxigraph:{tmp_path / 'store'}")
    _ingest(store, [EVENTS], pipeline=True)
    q7 = run_query(store, "q7", {"dataset": TRAIN_SET}).rows
    assert q7 and q7[0][1] == min(b["losses"].pop() for b in _batches(EVENTS, ("batch",)).values())
    # every batch's times and measures taken away: the answers stay, read from the rollups
    store.update(PREFIX + """DELETE { ?b prov:startedAtTime ?x . ?v prov:wasGeneratedBy ?b } WHERE {
        ?b prov:wasInfluencedBy ?t . ?t rdfs:label "batch" . ?b prov:startedAtTime ?x .
        OPTIONAL { ?v prov:wasGeneratedBy ?b } }""")
    assert run_query(store, "q7", {"dataset": TRAIN_SET}).rows == q7
    assert _same(run_query(store, "q4", {"dataset": TRAIN_SET}).rows, python_q4(EVENTS))
    # and without the rollups, the batches that are left are all the queries have
    store.update(PREFIX + "DELETE WHERE { ?e provkg:hasSectionSummary ?s }")
    assert run_query(store, "q4", {"dataset": TRAIN_SET}).rows == []


def test_a_pending_record_another_process_turned_into_a_rollup_is_replaced_not_kept_beside():
    # this process writes an epoch's pending record (a batch begun); another ends the epoch
    # (the same facts: the same state text, now its rollup); this one then brings the batch's
    # end: the rollup it writes replaces the other process's, none of whose triples stay
    epoch = [e for e in EVENTS if e["id"].startswith("run-1/training-0/epoch-0")]
    begin = [e for e in epoch if e["event"] == "begin"]
    epoch_end = [e for e in epoch if e["event"] == "end" and e["transformation"] == "epoch"]
    batch_ends = [e for e in epoch if e["event"] == "end" and e["transformation"] == "batch"]
    store = open_store("memory:")
    cache = SummaryCache()
    _ingest(store, [EVENTS[:2] + begin], pipeline=False, cache=cache)
    _ingest(store, [epoch_end], pipeline=False)  # another process: no cache
    _ingest(store, [batch_ends], pipeline=False, cache=cache)
    assert cache.hits == 0  # what it kept was a pending record's: not taken for the rollup
    arrived = EVENTS[:2] + begin + epoch_end + batch_ends
    _check(store, arrived)
    counts = store.select(PREFIX + "SELECT ?n WHERE { ?e provkg:hasSectionSummary ?s . ?s provkg:timedCount ?n }").rows
    assert [int(n) for (n,) in counts] == [4]


def test_a_spec_that_keeps_the_batches_in_full_drops_every_level_of_rollups_and_answers_the_same(tmp_path):
    # the batches set to `full`: their rollups and the epochs' (per training) would be read
    # before the executions, and no later event keeps them up to date
    from provkg.service.registration import register_spec

    store = open_store(f"oxigraph:{tmp_path / 'store'}")
    _ingest(store, [EDGE_EVENTS], pipeline=False)
    before = {q: run_query(store, q, params).rows for q, params in
              (("p1", {"workflow": WORKFLOW}), ("q4", {"dataset": TRAIN_SET}))}
    assert store.select(LATEST).rows
    register_spec(store, lifecycle_spec(SPEC_YAML_FULL))
    left = store.select(PREFIX + "SELECT ?s WHERE { ?s a provkg:SectionSummary }").rows
    assert left == []
    assert {q: run_query(store, q, params).rows for q, params in
            (("p1", {"workflow": WORKFLOW}), ("q4", {"dataset": TRAIN_SET}))} == before


def test_a_running_parent_s_pending_record_grows_by_parts_and_another_process_reads_them_all(tmp_path):
    # a service's applier settles every half second while a long training runs: each settle
    # writes only what changed as a part of the pending record (a few parts, merged as a
    # binary counter), never the whole state again; a process that did not write them reads
    # them all, and the rollup written at the end is the one computed here
    spec = lifecycle_spec(SPEC_YAML.replace("of: epoch", "of: training"))
    events = [e for e in EVENTS if e.get("transformation") != "epoch"]
    events = [{**e, "parent": e["parent"].rsplit("/", 1)[0]}
              if e.get("transformation") == "batch" and e.get("parent") else e for e in events]
    training = "run-1/training-0"
    mine = [e for e in events if e["id"].startswith(training + "/")]
    rest = [e for e in events if e not in mine and not (e["id"] == training and e["event"] == "end")]
    store = open_store("memory:")
    cache = SummaryCache()
    _ingest(store, [rest[:4]] + [mine[i:i + 2] for i in range(0, len(mine), 2)], pipeline=False, cache=cache,
            spec=spec)
    parent = mint_iri("task", training)
    parts = store.select(PREFIX + f"SELECT (STR(?x) AS ?t) WHERE {{ ?s provkg:pendingParent <{parent}> ; "
                                  "provkg:summaryState ?x }").rows
    assert 1 < len(parts) <= 5, parts  # 12 settles of 2 batch events: log2-many parts
    assert cache.hits >= 10
    held = set()
    for (text,) in parts:
        held |= set(__import__("json").loads(str(text))["under"])
    assert held == {e["id"][len(training):] for e in mine if e["transformation"] == "batch"}
    _ingest(store, [rest[4:], [e for e in events if e["id"] == training and e["event"] == "end"]],
            pipeline=False, spec=spec)  # another process (no cache) ends the training
    reference = open_store("memory:")
    _ingest(reference, [events], pipeline=False, spec=spec)
    graph = "SELECT ?s ?p ?o WHERE { ?s ?p ?o }"
    assert sorted(store.select(graph).rows) == sorted(reference.select(graph).rows)
    assert not store.ask(PREFIX + "ASK { ?s provkg:pendingParent ?p }")


_JSON_SCALARS = (st.none() | st.booleans() | st.integers(-(2 ** 80), 2 ** 80)
                 | st.floats(allow_nan=True, allow_infinity=True)
                 | st.floats(-1e-3, 1e-3) | st.text(st.characters(codec=None, exclude_categories=())))


@settings(max_examples=400, deadline=None)
@given(st.recursive(_JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(st.characters(codec=None, exclude_categories=()),
                                              max_size=6), inner, max_size=4), max_leaves=20))
def test_a_state_s_text_is_json_dumps_canonical_text_whatever_it_holds(value):
    """Stored states compare as text across provkg versions: the fast writer must give
    json.dumps' canonical text exactly (small and non-finite doubles, huge integers and
    lone surrogates included)."""
    import json

    from provkg.mapper.summary_section import state_json

    doc = {"section": "batch", "under": {"/1": [1, None, 2, {"loss": [value]}]}, "other": value}
    assert state_json(doc) == json.dumps(doc, sort_keys=True, separators=(",", ":"),
                                         ensure_ascii=False)
