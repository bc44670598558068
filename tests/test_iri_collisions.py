"""Names with '/' (TensorBoard-style ``train/loss``) never merge two things into one IRI:
found by black-box testing, where a value, a spec attribute and a workflow each collided."""

from __future__ import annotations

from provkg.mapper import map_events, map_spec
from provkg.service.ingest import ingest_events
from provkg.spec import parse_spec
from provkg.term import mint_iri

T0 = 1_700_000_000.0

SPEC = """\
workflow: w
phase: learning
transformations:
  - name: train
    kind: training
    generated:
      - {name: lr, role: evaluation_measure}
  - name: train/lr
    kind: training
"""


def _task(tid: str, name: str, generated: list[dict], run: str = "r") -> list[dict]:
    return [{"type": "task", "event": "begin", "id": tid, "time": T0, "workflow_id": run,
             "transformation": name},
            {"type": "task", "event": "end", "id": tid, "time": T0 + 1, "workflow_id": run,
             "transformation": name, "status": "finished", "generated": generated}]


def _subjects_with(triples, predicate_end: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s, p, o in triples:
        if p.endswith(predicate_end + ">"):
            out.setdefault(s, set()).add(o)
    return out


def test_generated_values_of_nested_task_ids_stay_apart():
    spec = parse_spec(SPEC.replace("name: train/lr", "name: other"))
    events = [{"type": "workflow", "event": "begin", "id": "r", "time": T0, "workflow": "w"},
              *_task("job", "train", [{"name": "train/loss", "value": 0.5}]),
              *_task("job/train", "train", [{"name": "loss", "value": 0.9}])]
    values = _subjects_with(map_events(events, {"w": spec}), "#value")
    # two values, each with its one literal
    assert len(values) == 2 and all(len(v) == 1 for v in values.values())
    assert f"<{mint_iri('value', 'job/train/loss')}>" in values


def _used_task(tid: str, name: str, used: list[dict], run: str = "r") -> list[dict]:
    return [{"type": "task", "event": "begin", "id": tid, "time": T0, "workflow_id": run,
             "transformation": name, "used": used},
            {"type": "task", "event": "end", "id": tid, "time": T0 + 1, "workflow_id": run,
             "transformation": name, "status": "finished"}]


def test_a_task_id_ending_in_used_does_not_merge_its_values_with_its_parents_inputs():
    spec = parse_spec(SPEC.replace("name: train/lr", "name: other"))
    events = [{"type": "workflow", "event": "begin", "id": "r", "time": T0, "workflow": "w"},
              *_used_task("job", "train", [{"name": "lr", "value": 0.1}]),
              *_task("job/used", "train", [{"name": "lr", "value": 0.9}]),
              *_task("%75sed", "train", [{"name": "lr", "value": 0.7}]),
              *_task("used", "train", [{"name": "lr", "value": 0.3}])]
    for schema in ("typed", "sprov"):
        values = _subjects_with(map_events(events, {"w": spec}, schema=schema), "#value")
        assert len(values) == 4 and all(len(v) == 1 for v in values.values()), (schema, values)


def test_a_run_s_own_values_stay_apart_from_a_task_of_the_same_id():
    """black-box testing: run ``exp.1``'s own learning_rate and loss merged with those of task
    ``exp.1`` (the capture library's first task of run ``exp``), so d4 paired wrong values."""
    spec = parse_spec(SPEC.replace("name: train/lr", "name: other"))
    events = [{"type": "workflow", "event": "begin", "id": "exp", "time": T0, "workflow": "w"},
              *_used_task("exp.1", "train", [{"name": "lr", "value": 0.1}], run="exp"),
              *_task("run/exp.1", "train", [{"name": "lr", "value": 0.2}], run="exp"),
              {"type": "workflow", "event": "begin", "id": "exp.1", "time": T0, "workflow": "w",
               "used": [{"name": "lr", "value": 0.5}]},
              {"type": "workflow", "event": "end", "id": "exp.1", "time": T0 + 2, "workflow": "w",
               "status": "finished", "generated": [{"name": "lr", "value": 0.3}]}]
    for schema in ("typed", "tagged", "sprov"):
        values = _subjects_with(map_events(events, {"w": spec}, schema=schema), "#value")
        assert len(values) == 4 and all(len(v) == 1 for v in values.values()), (schema, values)


def test_spec_elements_with_slashes_stay_apart():
    spec = parse_spec(SPEC)
    labels = _subjects_with(map_spec(spec), "#label")
    attr, transformation = mint_iri("spec", "w", "train", "lr"), mint_iri("spec", "w", "train/lr")
    assert attr != transformation
    assert labels[f"<{attr}>"] != labels[f"<{transformation}>"]
    assert all(len(v) == 1 for v in labels.values())


def test_a_workflow_named_with_a_slash_is_found_again_by_a_later_session(embedded_store):
    spec = parse_spec("workflow: team/fit\nphase: learning\ntransformations:\n"
                      "  - {name: train, kind: training}\n")
    begin = {"type": "workflow", "event": "begin", "id": "r", "time": T0, "workflow": "team/fit"}
    ingest_events(embedded_store, [begin], specs=[spec])
    report = ingest_events(embedded_store, _task("t", "train", []), specs=[spec])
    assert report.warnings == []
    assert embedded_store.ask(
        f"ASK {{ <{mint_iri('task', 't')}> a <https://w3id.org/provkg/provml#TrainingExecution> }}")


def test_no_minted_iri_has_a_dot_segment():
    """Found by black-box testing: values named "." and ".." (and ids such as "run/../x") gave
    IRIs ending in /. and /.., which RFC 3986 resolution turns into other resources."""
    from urllib.parse import urlsplit

    from provkg.term import id_from_iri

    for kind, ident in [("value", "wf-nw/."), ("value", "wf-nw/.."), ("task", "run/../x"),
                        ("task", ".."), ("task", "./a"), ("run", ".")]:
        minted = mint_iri(kind, ident)
        assert not {".", ".."} & set(urlsplit(minted).path.split("/")), minted
        assert id_from_iri(minted, kind) == ident
    assert mint_iri("spec", "w", "..") != mint_iri("spec", "w")
    # the mapper's fast path gives the same IRIs
    events = [{"type": "task", "event": "end", "id": "t/..", "time": 1.7e9, "workflow_id": "r",
               "transformation": "x", "generated": [{"name": ".", "value": 1}]}]
    subjects = {s for s, _, _ in map_events(events, {})}
    assert f"<{mint_iri('task', 't/..')}>" in subjects
    assert all("/./" not in s and not s.endswith(("/.>", "/..>")) for s in subjects)


SPROV_SPEC = """\
workflow: stream
phase: curation
transformations:
  - name: detect
    kind: transformation
    used:
      - {name: threshold, role: hyperparameter}
  - name: filter
    kind: transformation
    used:
      - {name: cutoff, role: hyperparameter}
  - name: tune
    kind: adaptation
    generated:
      - {name: threshold, role: hyperparameter}
      - {name: cutoff, role: hyperparameter}
"""


def test_sprov_changes_and_processes_with_slashes_stay_apart():
    # found by black-box testing: change/T/<component> (an adaptation changing several
    # components) met the change of an adaptation whose id is "T/<component>", and
    # process/R/HOST/PID met the process of a run whose id is "R/HOST/PID"
    spec = parse_spec(SPROV_SPEC)
    events = [{"type": "workflow", "event": "begin", "id": "lab", "time": T0, "workflow": "stream"},
              {"type": "workflow", "event": "begin", "id": "lab/n1/7", "time": T0, "workflow": "stream",
               "environment": {"host": "gw", "pid": 1}}]
    both = [{"name": "threshold", "value": 6.0}, {"name": "cutoff", "value": 0.5}]
    for tid, generated in (("tune", both), ("tune/detect", [{"name": "threshold", "value": 7.0}])):
        for e in _task(tid, "tune", generated, run="lab"):
            events.append({**e, "environment": {"host": "n1", "pid": 7}})
    triples = list(map_events(events, {"stream": spec}, schema="sprov"))
    changes = {s for s, p, o in triples if o.endswith("#Change>")}
    assert len(changes) == 3, changes
    labels = _subjects_with(triples, "#label")
    processes = {s: o for s, o in labels.items() if "/process/" in s}
    assert len(processes) == 2 and all(len(o) == 1 for o in processes.values()), processes


def test_a_task_s_environment_is_kept():
    """black-box testing: a task event's environment (host, pid, cluster, job) was dropped."""
    spec = parse_spec(SPEC.replace("name: train/lr", "name: other"))
    begin, end = _task("t", "train", [])
    begin["environment"] = {"host": "gpu-7", "job": "12345"}
    for schema in ("typed", "tagged"):
        run = {"type": "workflow", "event": "begin", "id": "r", "time": T0, "workflow": "w"}
        kept = _subjects_with(map_events([run, begin, end], {"w": spec}, schema=schema),
                              "#environment")
        assert list(kept) == [f"<{mint_iri('task', 't')}>"], schema
        assert next(iter(kept.values())) == {
            '"{\\"host\\":\\"gpu-7\\",\\"job\\":\\"12345\\"}"'
            '^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON>'}, schema


def test_a_base_inside_a_vocabulary_namespace_is_refused():
    import pytest

    from provkg.errors import MappingError

    spec = parse_spec(SPEC.replace("name: train/lr", "name: other"))
    with pytest.raises(MappingError, match="inside the vocabulary namespace"):
        list(map_events(_task("t", "train", []), {"w": spec},
                        base="https://w3id.org/provkg/provml#"))


def test_a_section_that_names_no_parent_is_warned_about():
    """black-box testing: epochs made with wf.sections() without parent= were stored under the
    run, and d3 / p1 answered nothing, unsaid."""
    from provkg.mapper.common import MapState

    spec = parse_spec("workflow: w\nphase: learning\ntransformations:\n  - {name: fit, kind: training}\n"
                      "  - {name: epoch, kind: section, of: fit}\n")
    run = {"type": "workflow", "event": "begin", "id": "r", "time": T0, "workflow": "w"}
    orphans = _task("r/e0", "epoch", []) + _task("r/e1", "epoch", [])
    for schema in ("typed", "tagged", "sprov"):
        st = MapState({"w": spec}, schema=schema)
        list(map_events([run, *orphans], {"w": spec}, schema=schema, state=st))
        assert [w for w in st.warnings() if "named no parent" in w] == [
            "section 'epoch' of 'w' is `of:` another transformation, but 2 executions named no "
            "parent: stored under their run, out of reach of the queries that walk from a stage "
            "to its sections (give parent=, e.g. wf.sections(..., parent=training))"], schema
