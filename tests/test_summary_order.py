"""Section summaries (rollups: ``granularity: summary`` or ``both``) are exact whatever the order, the chunking into
ingest sessions and the re-deliveries of the events (docs/reference/wire-format.md, docs/reference/graph.md "Section summaries").

The lifecycle is the query tests' one (``tests/lifecycle.py``: captured with the capture library,
so a section's ``end`` names no parent; seismic lineage, so Q5 applies), with the training and
validation batches kept as summaries. The reference answers come from the same events ingested
once, in order, at ``granularity: full``. Sessions are what ``provkg ingest`` runs (``ingest_paths``
over event files, one call per file, on one on-disk store) and what the server runs (one
``Ingestor`` per queue chunk)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lifecycle import Lifecycle, build_lifecycle
from mapper_support import SPEC_YAML, lifecycle_events, lifecycle_spec
from test_queries import expected
from test_queries_summary import _summary_spec

from provkg.service.ingest import Ingestor, ingest_events, ingest_paths, register_spec
from provkg.service.querying import run_query
from provkg.spec import Spec, parse_spec
from provkg.store import Store, open_store
from provkg.term import mint_iri
from provkg.vocab import PREFIXES

PREFIX = "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in PREFIXES.items())
QUERIES = ("q4", "q5", "q7", "d3")
PENDING = PREFIX + "ASK { { ?s provkg:pendingParent ?p } UNION { ?s provkg:pendingEvent ?e } }"


@pytest.fixture(scope="module")
def lc() -> Lifecycle:
    return build_lifecycle()


@pytest.fixture(scope="module", params=["summary", "both"])
def summary_specs(lc: Lifecycle, request) -> list[Spec]:
    """The lifecycle's specs with the batches kept as rollups only, or beside the batches."""
    from lifecycle import SPECS

    specs = [parse_spec(_summary_spec(text, request.param)) for text in SPECS.values()]
    assert sum(t.granularity == request.param for s in specs for t in s.transformations) == 2
    return specs


def _open(tmp: Path, name: str, lc: Lifecycle) -> Store:
    store = open_store(f"oxigraph:{tmp / name}")
    store.add(lc.kg)
    return store


def _answers(store: Store, lc: Lifecycle) -> dict[str, list[list[Any]]]:
    want = expected(lc)
    return {q: run_query(store, q, want[q][0]).rows for q in QUERIES}


def _same(got: dict[str, list[list[Any]]], want: dict[str, list[list[Any]]]) -> None:
    for q in QUERIES:
        a, b = got[q], want[q]
        assert len(a) == len(b), f"{q}: {len(a)} rows, want {len(b)}\n{a}\n{b}"
        for ra, rb in zip(a, b):
            assert len(ra) == len(rb)
            for x, y in zip(ra, rb):
                if isinstance(x, float) or isinstance(y, float):
                    assert isinstance(x, (int, float)) and isinstance(y, (int, float)), (q, ra, rb)
                    assert abs(x - y) <= 1e-9, (q, ra, rb)
                else:
                    assert x == y, (q, ra, rb)


def everything(store: Store) -> set[tuple[str, str, str]]:
    return set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))


def _cli_sessions(store: Store, tmp: Path, chunks: list[list[dict[str, Any]]], specs: list[Spec]) -> None:
    """One ``provkg ingest FILE`` per chunk: each file its own session (pipelined writer)."""
    for i, chunk in enumerate(chunks):
        path = tmp / f"session-{i}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in chunk), encoding="utf-8")
        ingest_paths(store, [path], specs=specs, progress=False)


def _api_sessions(store: Store, chunks: list[list[dict[str, Any]]], specs: list[Spec]) -> None:
    """Like the server's queue worker: one unpipelined ``Ingestor`` session per chunk (the
    specs were registered when they were posted)."""
    for spec in specs:
        register_spec(store, spec)
    for chunk in chunks:
        session = Ingestor(store, specs=specs, register=False)
        session.ingest(chunk)
        session.finish()


def _split(events: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    size = -(-len(events) // n)
    return [events[i:i + size] for i in range(0, len(events), size)]


def _ends_first(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every epoch's end moved before its first batch (and so before all its batches)."""
    out = list(events)
    epochs = {e["id"] for e in events if e.get("transformation") == "epoch"}
    for epoch in sorted(epochs):
        end = next(e for e in out if e["id"] == epoch and e["event"] == "end")
        first = min(i for i, e in enumerate(out) if e.get("parent") == epoch)
        out.remove(end)
        out.insert(first, end)
    return out


@pytest.fixture(scope="module")
def reference(lc: Lifecycle, summary_specs: list[Spec], tmp_path_factory: pytest.TempPathFactory):
    """(answers at granularity full, the graph of one in-order session with summaries)."""
    tmp = tmp_path_factory.mktemp("reference")
    from lifecycle import SPECS

    full = _open(tmp, "full", lc)
    ingest_events(full, lc.events, specs=[parse_spec(_summary_spec(t, "full")) for t in SPECS.values()])
    answers = _answers(full, lc)
    full.close()
    # the reference answers are the plan's
    _same(answers, {q: expected(lc)[q][1] for q in QUERIES})
    assert all(answers[q] for q in QUERIES)
    summarised = _open(tmp, "summary", lc)
    report = ingest_events(summarised, lc.events, specs=summary_specs)
    assert report.warnings == []
    _same(_answers(summarised, lc), answers)
    graph = everything(summarised)
    summarised.close()
    # the batches are summarised: with granularity summary, no execution of theirs is stored;
    # with both, every one is; their parents' summaries are
    batch = "<" + mint_iri("spec", "flower-training", "batch") + ">"
    kept = sum(o == batch and s.startswith("<" + mint_iri("task", "")) for s, _, o in graph)
    spec = next(s for s in summary_specs if s.transformation("batch"))
    assert (kept > 0) == (spec.granularity("batch") == "both")
    assert sum(o == batch and s.startswith("<" + mint_iri("summary", "")) for s, _, o in graph) == \
        sum(len(t.epochs) for t in lc.trainings)
    return answers, graph


def _check(store: Store, lc: Lifecycle, reference) -> None:
    answers, graph = reference
    assert not store.ask(PENDING), "pending records left"
    _same(_answers(store, lc), answers)
    got = everything(store)
    assert got == graph, (f"{len(got - graph)} extra: {sorted(got - graph)[:6]}\n"
                          f"{len(graph - got)} missing: {sorted(graph - got)[:6]}")


# (b) one session, in order; (c) 2 and 5 sessions as `provkg ingest` and as the server runs them
@pytest.mark.parametrize("sessions", [1, 2, 5])
def test_in_order_in_any_number_of_cli_sessions(lc, summary_specs, reference, tmp_path, sessions):
    store = _open(tmp_path, "db", lc)
    _cli_sessions(store, tmp_path, _split(lc.events, sessions), summary_specs)
    _check(store, lc, reference)


def test_in_order_in_small_server_sessions(lc, summary_specs, reference, tmp_path):
    store = _open(tmp_path, "db", lc)
    _api_sessions(store, _split(lc.events, 13), summary_specs)
    _check(store, lc, reference)


# (d) shuffled, in one session and in several
@pytest.mark.parametrize(("seed", "sessions"), [(1, 1), (2, 1), (3, 3), (4, 7), (5, 20)])
def test_shuffled(lc, summary_specs, reference, tmp_path, seed, sessions):
    events = list(lc.events)
    random.Random(seed).shuffle(events)
    store = _open(tmp_path, "db", lc)
    _cli_sessions(store, tmp_path, _split(events, sessions), summary_specs)
    _check(store, lc, reference)


def test_shuffled_server_sessions(lc, summary_specs, reference, tmp_path):
    events = list(lc.events)
    random.Random(11).shuffle(events)
    store = _open(tmp_path, "db", lc)
    _api_sessions(store, _split(events, 30), summary_specs)
    _check(store, lc, reference)


# (e) an epoch's end before its batches: in one session, and in a session before theirs
def test_epoch_end_before_its_batches_in_one_session(lc, summary_specs, reference, tmp_path):
    store = _open(tmp_path, "db", lc)
    report = ingest_events(store, _ends_first(lc.events), specs=summary_specs)
    assert not any("had not ended" in w for w in report.warnings), report.warnings
    _check(store, lc, reference)


@pytest.mark.parametrize("sessions", [1, 3])
def test_batches_in_sessions_after_their_epoch_ended(lc, summary_specs, reference, tmp_path, sessions):
    batches = [e for e in lc.events if e.get("transformation") in ("batch", "val_batch")]
    rest = [e for e in lc.events if e not in batches]
    store = _open(tmp_path, "db", lc)
    _cli_sessions(store, tmp_path, [rest, *_split(batches, sessions)], summary_specs)
    _check(store, lc, reference)


# (f) every event delivered again, and a subset delivered again: no triple added
def test_redelivery_adds_no_triple(lc, summary_specs, reference, tmp_path):
    store = _open(tmp_path, "db", lc)
    ingest_events(store, lc.events, specs=summary_specs)
    n = store.count()
    _check(store, lc, reference)
    ingest_events(store, lc.events, specs=summary_specs)  # all again, one session
    assert store.count() == n
    rnd = random.Random(5)
    subset = rnd.sample(lc.events, 30)
    _cli_sessions(store, tmp_path, _split(subset, 3), summary_specs)  # some again, 3 sessions
    assert store.count() == n
    batch_ends = [e for e in lc.events if e.get("transformation") == "batch" and e["event"] == "end"]
    epoch_end = next(e for e in lc.events if e.get("transformation") == "epoch" and e["event"] == "end")
    _api_sessions(store, [[epoch_end, *batch_ends[:3]], batch_ends[3:6]], summary_specs)
    assert store.count() == n
    _check(store, lc, reference)


def test_redelivery_after_a_split_ingest_adds_no_triple(lc, summary_specs, reference, tmp_path):
    events = list(lc.events)
    random.Random(8).shuffle(events)
    store = _open(tmp_path, "db", lc)
    _api_sessions(store, _split(events, 9), summary_specs)
    n = store.count()
    _cli_sessions(store, tmp_path, _split(lc.events + random.Random(9).sample(lc.events, 20), 4),
                  summary_specs)
    assert store.count() == n
    _check(store, lc, reference)


def test_a_late_new_batch_is_counted_in_a_later_session(lc, summary_specs, reference, tmp_path):
    # one batch held back until after the whole run was ingested and summarised
    batch = next(e["id"] for e in lc.events if e.get("transformation") == "batch")
    late = [e for e in lc.events if e["id"] == batch]
    store = _open(tmp_path, "db", lc)
    ingest_events(store, [e for e in lc.events if e["id"] != batch], specs=summary_specs)
    assert everything(store) != reference[1]
    _api_sessions(store, [late[:1], late[1:]], summary_specs)  # its begin and end apart, too
    _check(store, lc, reference)


def test_events_that_name_their_parent_on_both_ends(lc, summary_specs, tmp_path):
    # generators other than the capture library name the parent on end events too
    parents = {e["id"]: e["parent"] for e in lc.events if e.get("parent")}
    events = [dict(e, parent=parents[e["id"]]) if e["id"] in parents else e for e in lc.events]
    one = _open(tmp_path, "one", lc)
    ingest_events(one, events, specs=summary_specs)
    want = everything(one)
    shuffled = events + events[:15]
    random.Random(12).shuffle(shuffled)
    many = _open(tmp_path, "many", lc)
    _api_sessions(many, _split(shuffled, 11), summary_specs)
    assert not many.ask(PENDING)
    assert everything(many) == want


# -- random orders, chunkings and re-deliveries of a tiny lifecycle ---------------------------

_TINY_SPEC = lifecycle_spec(SPEC_YAML.replace("    of: epoch\n", "    of: epoch\n    granularity: summary\n"))
_TINY = lifecycle_events(trainings=1, epochs=2, batches=3)
_TINY_NO_END_PARENT = [{k: v for k, v in e.items() if not (k == "parent" and e["event"] == "end")}
                       for e in _TINY]


def _tiny_graph(sessions: list[list[dict[str, Any]]], *, pipeline: bool) -> set:
    store = open_store("memory:")
    try:
        for chunk in sessions:
            session = Ingestor(store, specs=[_TINY_SPEC], pipeline=pipeline)
            try:
                for i in range(0, len(chunk), 4):  # several batches per session
                    session.ingest(chunk[i:i + 4])
                session.finish()
            finally:
                session.close()
        return everything(store)
    finally:
        store.close()


_TINY_WANT = {name: _tiny_graph([events], pipeline=False)
              for name, events in (("both", _TINY), ("begin", _TINY_NO_END_PARENT))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["both", "begin"]), st.randoms(use_true_random=False),
       st.integers(1, 8), st.booleans())
def test_any_order_chunking_and_duplication_gives_the_same_graph(parents, rnd, sessions, pipeline):
    events = _TINY if parents == "both" else _TINY_NO_END_PARENT
    stream = events + [rnd.choice(events) for _ in range(rnd.randint(0, len(events)))]
    rnd.shuffle(stream)
    cuts = sorted(rnd.sample(range(1, len(stream)), sessions - 1))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    assert _tiny_graph(chunks, pipeline=pipeline) == _TINY_WANT[parents]
