"""Hypothesis: the mapper never raises on a valid event, writes only well-formed N-Triples
terms, and any order or repetition of the same events gives the identical graph."""

from __future__ import annotations

import pyoxigraph as ox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mapper_support import WORKFLOW, lifecycle_spec

from provkg.events import parse_event
from provkg.mapper import MapState, finish, map_events, map_spec
from provkg.term import is_valid_iri

SPEC = lifecycle_spec()
SPECS = {WORKFLOW: SPEC}
KNOWN = [t.name for t in SPEC.transformations]
NAMES = ["learning_rate", "loss", "model", "train_set", "accuracy", "technique", "note", "other name", "é"]

ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
small_ids = st.sampled_from(["a", "b/c", "d e", "f%20", "g#h", "ü", "x:y", "t-1"])
uris = st.builds(lambda scheme, path: f"{scheme}:{path}",
                 st.sampled_from(["file", "https", "s3", "urn"]),
                 st.text(alphabet="abc/-_.~:%é09", min_size=1, max_size=15))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
values = st.builds(
    lambda name, value, vid, loc, dom, der: {k: v for k, v in dict(
        name=name, value=value, id=vid, location=loc, domain=dom, derived_from=der).items() if v is not None},
    st.sampled_from(NAMES), json_values, st.none() | small_ids, st.none() | uris,
    st.none() | uris.filter(is_valid_iri),  # events.py refuses a domain RDF stores would refuse
    st.none() | st.lists(small_ids, max_size=2))
def _name(value: dict) -> str:  # the values of one list have names of their own (events.py)
    return value["name"]


times = st.one_of(st.floats(0, 4e9), st.integers(0, 253402300799), st.just(1.7e9))
environments = st.none() | st.fixed_dictionaries(
    {"host": st.text(max_size=8), "pid": st.integers(0, 99999)},
    optional={"versions": st.dictionaries(st.sampled_from(["numpy", "torch"]), st.text(max_size=5))})


@st.composite
def task_events(draw: st.DrawFn, run: str) -> dict:
    e = {"type": "task", "event": draw(st.sampled_from(["begin", "end"])), "id": draw(small_ids),
         "time": draw(times), "workflow_id": run,
         "transformation": draw(st.sampled_from([*KNOWN, "unknown step"]))}
    for key, strat in (("parent", small_ids), ("index", st.integers(-3, 10**6)),
                       ("dependencies", st.lists(small_ids, max_size=2)), ("agent", st.text(min_size=1, max_size=6)),
                       ("used", st.lists(values, max_size=3, unique_by=_name)), ("generated", st.lists(values, max_size=3, unique_by=_name)),
                       ("environment", environments)):
        v = draw(st.none() | strat)
        if v is not None:
            e[key] = v
    if e["event"] == "end":
        e["status"] = draw(st.sampled_from(["finished", "failed"]))
        if draw(st.booleans()):
            e["message"] = draw(st.text(max_size=10))
    return e


@st.composite
def event_streams(draw: st.DrawFn) -> list[dict]:
    run = draw(small_ids)
    wf = {"type": "workflow", "id": run, "workflow": draw(st.sampled_from([WORKFLOW, "no-spec"])),
          "agent": draw(st.none() | st.text(min_size=1, max_size=6))}
    wf = {k: v for k, v in wf.items() if v is not None}
    stream = [dict(wf, event="begin", time=draw(times)), dict(wf, event="end", time=draw(times),
                                                              status="finished")]
    stream += draw(st.lists(task_events(run), max_size=12))
    kinds: dict[str, str] = {}
    for e in stream[2:]:  # a task id names one execution of one transformation
        e["transformation"] = kinds.setdefault(e["id"], e["transformation"])
    for e in stream:
        parse_event(e)  # every generated event is valid wire format v1
    return stream


def _graph(events: list[dict], schema: str, *, max_pending: int = 100_000) -> set:
    state = MapState(SPECS, schema=schema, max_pending=max_pending)
    state.summary_close_on_end = False
    return set(map_events(events, state=state)) | set(finish(state))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_streams(), st.sampled_from(["typed", "tagged", "sprov"]))
def test_valid_events_map_to_well_formed_triples(events: list[dict], schema: str) -> None:
    triples = _graph(events, schema)
    text = "".join(f"{s} {p} {o} .\n" for s, p, o in triples)
    parsed = list(ox.parse(text.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES))
    assert len(parsed) == len(triples)
    assert not any(isinstance(t, ox.BlankNode) for q in parsed for t in (q.subject, q.object))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_streams(), st.randoms(use_true_random=False), st.sampled_from(["typed", "tagged", "sprov"]))
def test_shuffled_and_duplicated_streams_give_the_identical_graph(events: list[dict], rnd, schema: str) -> None:
    expected = _graph(events, schema)
    again = events + [rnd.choice(events) for _ in range(len(events) // 2)]
    rnd.shuffle(again)
    assert _graph(again, schema) == expected


@settings(max_examples=30, deadline=None)
@given(event_streams())
def test_typed_and_tagged_have_the_same_number_of_triples(events: list[dict]) -> None:
    # a class triple replaces a class triple, as long as one value node has one role: values
    # here get their id from their task and name (a reused id or location may fill two roles)
    for e in events:
        for v in e.get("used", []) + e.get("generated", []):
            v.pop("location", None)
            v.pop("id", None)
    typed, tagged = _graph(events, "typed"), _graph(events, "tagged")
    # but an agent: provml:Persona and prov:Agent typed, where tagged's own class is prov:Agent
    agents = {s for s, p, o in tagged if o == "<http://www.w3.org/ns/prov#Agent>" and "/agent/" in s}
    assert len(typed) == len(tagged) + len(agents)
    assert map_spec(SPEC, schema="typed")  # and both prospective parts map


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.floats(0, 253402300799, allow_nan=False), st.integers(0, 253402300799),
                 st.integers(0, 2**33).map(lambda n: n / 8), st.integers(0, 2**40).map(lambda n: n / 2e6)))
def test_the_mappers_fast_times_equal_term_datetime_literal(seconds: float) -> None:
    from provkg.mapper.common import _fast_datetime_literal
    from provkg.term import datetime_literal

    assert _fast_datetime_literal(seconds, {}) == datetime_literal(seconds)


@settings(max_examples=300, deadline=None)
@given(ids)
def test_the_mappers_fast_iris_equal_mint_iri(ident: str) -> None:
    from provkg.mapper.common import Minter
    from provkg.term import mint_iri

    m = Minter("https://example.org/base/")
    assert m.task(ident) == "<" + mint_iri("task", ident, base="https://example.org/base/") + ">"
    assert m.value(ident) == "<" + mint_iri("value", ident, base="https://example.org/base/") + ">"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_any_text_written_as_a_literal_reads_back_as_the_same_text(text):
    from provkg.term import literal

    line = f"<http://e.org/s> <http://e.org/p> {literal(text)} .\n"
    [quad] = list(ox.parse(line.encode(), format=ox.RdfFormat.N_TRIPLES))
    assert quad.object.value == text
