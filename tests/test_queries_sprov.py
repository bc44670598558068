"""S-PROV canned queries (s1, s2, s3) on the captured lifecycle mapped with ``schema="sprov"``.

Expected rows are computed from the captured events in plain Python.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import pytest
from lifecycle import Lifecycle, build_lifecycle, load_lifecycle

from provkg.errors import BadParameter
from provkg.events import default_value_id
from provkg.queries import canned_queries
from provkg.queries.pairs import format_value
from provkg.service.querying import run_query
from provkg.spec import parse_spec
from provkg.term import mint_iri


@pytest.fixture(scope="module")
def lc() -> Lifecycle:
    return build_lifecycle()


@pytest.fixture
def sprov_store(store, lc):
    load_lifecycle(store, lc, schema="sprov")
    return store


def _value_id(v: dict, owner: str, *, used: bool) -> str:
    return v.get("id") or v.get("location") or default_value_id(owner, v["name"], used=used)


def _tasks(lc: Lifecycle) -> list[dict]:
    return [e for e in lc.events if "workflow_id" in e]


def _edges(lc: Lifecycle) -> dict[str, set[tuple[str, str | None]]]:
    """value id -> {(input value id, invocation id or None)}."""
    used, generated_by = defaultdict(set), defaultdict(set)
    edges: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for e in _tasks(lc):
        for v in e.get("used") or ():
            used[e["id"]].add(_value_id(v, e["id"], used=True))
        for v in e.get("generated") or ():
            generated_by[_value_id(v, e["id"], used=False)].add(e["id"])
        for side in ("used", "generated"):
            for v in e.get(side) or ():
                for src in v.get("derived_from") or ():
                    edges[_value_id(v, e["id"], used=side == "used")].add((src, None))
    for value, tasks in generated_by.items():
        for t in tasks:
            edges[value] |= {(u, t) for u in used[t]}
    return edges


def _lineage(lc: Lifecycle, start: str, depth: int) -> set[tuple]:
    edges, level, seen, out = _edges(lc), {start}, set(), set()
    for k in range(1, depth + 1):
        nxt = set()
        for a in level:
            for b, t in edges.get(a, ()):
                edge = (mint_iri("value", a), mint_iri("value", b), mint_iri("task", t) if t else None)
                if edge not in seen:  # each edge once, at its shortest distance
                    seen.add(edge)
                    out.add((*edge, k))
                nxt.add(b)
        level = nxt
    return out


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_listed_in_catalog():
    names = {q.name: q for q in canned_queries()}
    assert [names[n].columns for n in ("s1", "s2", "s3")] == [
        ("data", "derived_from", "invocation", "depth"),
        ("instance", "change", "parameters", "time"),
        ("component", "invocations", "last_event_time")]
    assert all(names[n].schemas == ("sprov",) for n in ("s1", "s2", "s3"))


def _check_s1(store, lc, depth):
    model = lc.trainings[0].model
    expected = _lineage(lc, model, depth)
    assert any(row[3] == 2 for row in expected) or depth == 1  # reaches the SEG-Y inputs
    rows = run_query(store, "s1", {"data": model, "depth": depth}, schema="sprov").rows
    assert len(rows) == len(expected)
    assert {tuple(r) for r in rows} == expected
    assert [r[3] for r in rows] == sorted(r[3] for r in rows)


def test_s1_lineage_of_a_model_one_step(sprov_store, lc):
    _check_s1(sprov_store, lc, 1)


@pytest.mark.parametrize("depth", [2, 5])
def test_s1_lineage_of_a_model(store, lc, depth):
    # every backend, Virtuoso too (its own rendering: see sprov._s1_virtuoso)
    load_lifecycle(store, lc, schema="sprov")
    _check_s1(store, lc, depth)


def test_s1_rejects_other_schema_and_huge_depth(lc):
    from provkg.queries import render

    with pytest.raises(BadParameter, match="sprov"):
        render("s1", {"data": lc.trainings[0].model}, schema="typed")
    with pytest.raises(BadParameter, match="depth"):
        render("s1", {"data": lc.trainings[0].model, "depth": 99}, schema="sprov")


def test_s2_runtime_changes(sprov_store, lc):
    expected = []
    for e in _tasks(lc):
        if e.get("transformation") == "adaptation" and e["event"] == "end":
            params = "; ".join(f"{v['name']}={format_value(v['value'])}"
                               for v in sorted(e["generated"], key=lambda v: v["name"]))
            expected.append((mint_iri("instance", e["workflow_id"], "training"),
                             mint_iri("change", e["id"]), params, _utc(e["time"])))
    expected.sort(key=lambda r: r[3])
    assert len(expected) >= 2
    rows = run_query(sprov_store, "s2", {"workflow": "flower-training"}, schema="sprov").rows
    assert [(r[0], r[1], r[2], _parse(r[3])) for r in rows] == expected
    none = run_query(sprov_store, "s2", {"workflow": "seismic-curation"}, schema="sprov").rows
    assert none == []


@pytest.mark.parametrize("workflow", ["flower-training", "seismic-curation"])
def test_s3_invocations_per_component(sprov_store, lc, workflow):
    runs = {e["id"] for e in lc.events if e.get("workflow") == workflow}
    tasks, last = defaultdict(set), {}
    for e in _tasks(lc):
        if e["workflow_id"] in runs:
            tr = e["transformation"]
            tasks[tr].add(e["id"])
            if e["event"] == "end":
                last[tr] = max(last.get(tr, e["time"]), e["time"])
    expected = sorted((mint_iri("spec", workflow, tr), len(ids), _utc(last[tr]))
                      for tr, ids in tasks.items())
    rows = run_query(sprov_store, "s3", {"workflow": workflow}, schema="sprov").rows
    assert [(r[0], r[1], _parse(r[2])) for r in rows] == expected


GRAPH_SPEC = """\
workflow: graph-prep
phase: preparation
transformations:
  - name: step
    used: [{name: src, role: data_reference}]
    generated: [{name: out, role: data_reference}]
"""


T0 = 1_700_000_000.0


def _graph_events() -> list[dict]:
    """A diamond (top <- left, right <- base), a cycle (c1 <- c2 <- c1) hanging off base, and
    an edge stated twice: "top" is derived_from "left" and generated by the task that used it."""
    def task(tid: str, used: list[str], out: str, derived: list[str] | None = None) -> list[dict]:
        gen = {"name": "out", "id": out, **({"derived_from": derived} if derived else {})}
        common = {"type": "task", "id": tid, "workflow_id": "g-run", "transformation": "step"}
        return [{**common, "event": "begin", "time": T0, "used": [{"name": "src", "id": u} for u in used]},
                {**common, "event": "end", "time": T0 + 1, "status": "finished", "generated": [gen]}]

    return [{"type": "workflow", "event": "begin", "id": "g-run", "time": T0, "workflow": "graph-prep"},
            *task("t-left", ["base"], "left"), *task("t-right", ["base"], "right"),
            *task("t-top", ["left", "right"], "top", derived=["left"]),
            *task("t-c1", ["c2"], "c1"), *task("t-c2", ["c1"], "c2"), *task("t-base", ["c1"], "base"),
            {"type": "workflow", "event": "end", "id": "g-run", "time": T0 + 9, "workflow": "graph-prep",
             "status": "finished"}]


def test_s1_lists_each_edge_once_at_its_shortest_distance(store):
    # diamonds and cycles reach an edge by several chains; a derivation that is also the
    # invocation's used -> generated pair is one edge, with its invocation
    from provkg.mapper import map_events, map_spec

    spec = parse_spec(GRAPH_SPEC)
    store.add([*map_spec(spec, schema="sprov"),
               *map_events(_graph_events(), {"graph-prep": spec}, schema="sprov")])
    rows = run_query(store, "s1", {"data": "top", "depth": 8}, schema="sprov").rows
    v, t = (lambda x: mint_iri("value", x)), (lambda x: mint_iri("task", x))
    assert {tuple(r) for r in rows} == {
        (v("top"), v("left"), t("t-top"), 1), (v("top"), v("right"), t("t-top"), 1),
        (v("left"), v("base"), t("t-left"), 2), (v("right"), v("base"), t("t-right"), 2),
        (v("base"), v("c1"), t("t-base"), 3), (v("c1"), v("c2"), t("t-c1"), 4),
        (v("c2"), v("c1"), t("t-c2"), 5)}
    assert len(rows) == 7


def test_s3_counts_a_running_invocation_and_its_begin_as_the_last_event(store):
    """Found by black-box testing: one invocation still running made s3's last_event_time
    null on Oxigraph (MAX over an unbound value) and the last end on rdflib; S-PROV's
    lastEventTime is the latest event of any kind, here the running invocation's begin."""
    from provkg.mapper import map_events, map_spec

    spec = parse_spec(GRAPH_SPEC)
    events = [e for e in _graph_events() if e["id"] in ("t-left", "t-right")]
    common = {"type": "task", "id": "t-run", "workflow_id": "g-run", "transformation": "step"}
    events += [{**common, "event": "begin", "time": T0 + 5},
               {"type": "workflow", "id": "g-run", "workflow": "graph-prep", "event": "begin",
                "time": T0}]
    store.add([*map_spec(spec, schema="sprov"),
               *map_events(events, {"graph-prep": spec}, schema="sprov")])
    rows = run_query(store, "s3", {"workflow": "graph-prep"}, schema="sprov").rows
    assert [(r[0], r[1], _parse(r[2])) for r in rows] == [
        (mint_iri("spec", "graph-prep", "step"), 3, _utc(T0 + 5))]


SPLIT_SPEC = """\
workflow: s2b
phase: learning
transformations:
  - name: step
    used: [{name: threshold, role: hyperparameter}]
  - name: training
    kind: training
    used: [{name: learning_rate, role: hyperparameter}]
  - name: adaptation
    kind: adaptation
    used: [{name: technique}]
    generated: [{name: learning_rate, role: hyperparameter}, {name: threshold, role: hyperparameter}]
"""


def _split_events() -> list[dict]:
    def task(tid: str, tr: str, begin: float, end: float, used=(), generated=(), **kw) -> list[dict]:
        common = {"type": "task", "id": tid, "workflow_id": "R", "transformation": tr, **kw}
        return [{**common, "event": "begin", "time": begin, "used": list(used)},
                {**common, "event": "end", "time": end, "status": "finished",
                 "generated": list(generated)}]
    return [{"type": "workflow", "id": "R", "workflow": "s2b", "event": "begin", "time": T0},
            *task("tr", "training", T0 + 1, T0 + 90, used=[{"name": "learning_rate", "value": 0.1}]),
            *task("a1", "adaptation", T0 + 10, T0 + 11, parent="tr",
                  generated=[{"name": "learning_rate", "value": 0.05},
                             {"name": "threshold", "value": 0.7}]),
            *task("a2", "adaptation", T0 + 20, T0 + 21, parent="tr",
                  generated=[{"name": "threshold", "value": 0.9}]),
            # found by black-box testing: a new value by reference only was no change in s2
            *task("a3", "adaptation", T0 + 30, T0 + 31, parent="tr",
                  generated=[{"name": "threshold", "location": "file:///cfg/threshold-v2.json"}])]


@pytest.mark.parametrize("spec_first", [True, False])
def test_s2_puts_each_adapted_value_on_the_component_that_uses_it(embedded_store, spec_first):
    """Found by black-box testing: an adaptation of the training's learning rate and of a
    step's threshold was put on the adaptation's own instance. Each value now changes the
    stage that uses it (a change per component); the same whether the spec came first."""
    from provkg.service.ingest import ingest_events, register_spec

    spec = parse_spec(SPLIT_SPEC)
    if spec_first:
        ingest_events(embedded_store, _split_events(), specs=[spec], schema="sprov")
    else:
        ingest_events(embedded_store, _split_events(), schema="sprov")
        register_spec(embedded_store, spec, schema="sprov")
    rows = run_query(embedded_store, "s2", {"workflow": "s2b"}, schema="sprov").rows
    got = sorted((r[0].rsplit("/", 1)[-1], r[1].split("/change/", 1)[1], r[2]) for r in rows)
    assert got == [("step", "a1/step", "threshold=0.7"), ("step", "a2", "threshold=0.9"),
                   ("step", "a3", "threshold=" + mint_iri("value", "file:///cfg/threshold-v2.json")),
                   ("training", "a1/training", "learning_rate=0.05")]


@pytest.mark.parametrize("hosts", [False, True])
@pytest.mark.parametrize("split", [1, 2, 3])
def test_the_spec_between_a_task_s_end_and_its_later_begin_gives_the_graph_one_session_gives(
        store, split, hosts):
    """Found by black-box testing: an adaptation whose end was stored (no spec yet) before
    its begin came, in a later session that also registered the spec, never got its
    s-prov:Change, and its new value stayed s-prov:Data: the registration could not tell
    which component the ended invocation ran, and the begin alone never asked again."""
    from provkg.service.ingest import ingest_events

    spec = parse_spec(SPLIT_SPEC)
    events = _split_events()
    if hosts:  # each begin names its own process (a forked worker): the change went to the
        # adaptation's process when the spec came late, to the run's in one session
        for k, e in enumerate(events):
            if e["type"] == "task" and e["event"] == "begin":
                e["environment"] = {"host": f"h{k}", "pid": 100 + k}
    ends = [e for e in events if e.get("event") == "end" and e["type"] == "task"]
    begins = [e for e in events if e not in ends]
    ingest_events(store, events, specs=[spec], schema="sprov")
    whole = set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))
    store.clear()
    # ends first, without the spec; then the spec (alone, or with the begins) and the begins
    ingest_events(store, [events[0], *ends[:split]], schema="sprov")
    ingest_events(store, [], specs=[spec], schema="sprov")
    ingest_events(store, [*begins, *ends[split:]], specs=[spec], schema="sprov")
    late = set(store.construct("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"))
    assert late == whole, late ^ whole


def test_without_a_spec_or_a_host_the_graph_still_says_what_it_is():
    # found by black-box testing: the warning said "stored as plain PROVLake" for S-PROV
    # triples, and an instance without a host sat at a process of no type
    from provkg.mapper import MapState, finish, map_batch

    st = MapState({}, schema="sprov")
    out = [*map_batch(_split_events(), st), *finish(st)]
    assert st.warnings() == ["workflow 's2b' has no spec: 9 events stored with generic S-PROV terms"]
    located = {o for s, p, o in out if p == "<http://www.w3.org/ns/prov#atLocation>"}
    typed = {s for s, p, o in out if o.endswith("#SystemProcess>")}
    assert located and located <= typed


def test_an_invocation_is_at_the_instance_its_begin_names():
    """black-box testing: a begin with its worker's environment and an end without one put the
    invocation at two instances (the worker's and the run's process)."""
    from provkg.mapper import map_events
    from provkg.spec import parse_spec

    spec = parse_spec("workflow: w\nphase: learning\ntransformations:\n  - {name: fit, kind: training}\n")
    events = [{"type": "workflow", "event": "begin", "id": "r", "time": 1.0, "workflow": "w",
               "environment": {"host": "a", "pid": 1}},
              {"type": "task", "event": "begin", "id": "t", "time": 2.0, "workflow_id": "r",
               "transformation": "fit", "environment": {"host": "b", "pid": 2}},
              {"type": "task", "event": "end", "id": "t", "time": 3.0, "workflow_id": "r",
               "transformation": "fit", "status": "finished"}]
    for order in (events, events[::-1]):
        triples = set(map_events(order, {"w": spec}, schema="sprov"))
        instances = {o for s, p, o in triples
                     if s.endswith("/task/t>") and p.endswith("#wasAssociatedWith>")}
        assert len(instances) == 1 and instances.pop().endswith("/fit/b/2>")
