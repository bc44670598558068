"""Prospective specs: parsing, and errors that name file, line and field."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from mapper_support import SPEC_YAML, lifecycle_spec

from provkg.cli import main
from provkg.errors import BadSpec, NotFound
from provkg.spec import expand_curie, load_spec, parse_spec


def test_the_lifecycle_spec_parses_with_its_structure() -> None:
    spec = lifecycle_spec()
    assert spec.workflow == "flower-training" and spec.phase == "learning"
    assert [t.name for t in spec.transformations][:3] == ["training", "epoch", "batch"]
    assert spec.transformation("batch").of == "epoch"
    assert spec.stage_kind("batch") == "training"
    assert spec.stage_kind("val_epoch") == "validation"
    assert spec.transformation("nope") is None
    slices = spec.transformation("training").attribute("slices")
    assert slices.role == "dataset_characteristic"
    assert slices.concept_iri == "https://w3id.org/provkg/seismic#numberOfSlices"
    assert spec.transformation("epoch").granularity is None  # unset: resolved by the spec
    assert spec.granularity("epoch") == "full" and spec.granularity("batch") == "both"


def test_a_json_spec_reads_like_yaml(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "spec.json"
    path.write_text(json.dumps(yaml.safe_load(SPEC_YAML), indent=2))
    assert load_spec(path) == lifecycle_spec()


def test_curies_expand_and_bad_ones_are_refused() -> None:
    assert expand_curie("prov:Entity") == "http://www.w3.org/ns/prov#Entity"
    assert expand_curie("https://example.org/c") == "https://example.org/c"
    for bad in ("nope:thing", "seis:has space", "plainword"):
        with pytest.raises(BadSpec, match="CURIE"):
            expand_curie(bad)


BAD = """\
workflow: w
phase: learning
data_stores: [{name: fs}, {name: fs}]
transformations:
  - name: training
    kind: trainig
    used:
      - {name: lr, role: hyperparam}
  - name: epoch
    kind: section
  - name: batch
    kind: section
    of: nowhere
    generated:
      - {name: loss, concept: "nope:x", store: s3}
  - name: a
    kind: section
    of: b
  - name: b
    kind: section
    of: a
  - name: training
    colour: blue
"""


def _problems(text: str, source: str = "bad.yaml") -> list[str]:
    with pytest.raises(BadSpec) as info:
        parse_spec(text, source=source)
    return info.value.problems  # type: ignore[attr-defined]


def test_pydantic_errors_name_file_line_and_field() -> None:
    problems = _problems(BAD)
    text = "\n".join(problems)
    assert "bad.yaml:6: transformations[0].kind: must be one of 'transformation', 'training'" in text
    assert "bad.yaml:8: transformations[0].used[0].role:" in text
    # the fields allowed there, not a pointer to a document that is not shipped
    assert ("bad.yaml:23: transformations[5].colour: unknown field; expected one of: name, kind, "
            "of, used, generated, granularity, description") in text
    # cross-field problems are reported in the same run as the type errors
    assert "bad.yaml:9: transformations[1].of: a section needs `of`" in text
    assert "bad.yaml:13: transformations[2].of: no transformation named 'nowhere'" in text
    assert "bad.yaml:15: transformations[2].generated[0].concept:" in text


def test_without_echo_an_unknown_field_is_named_by_its_parent_at_its_own_line() -> None:
    # the API does not quote the key back; it gave the line of the enclosing block (1, 4)
    # instead of the key's (black-box testing)
    text = ("workflow: w\nphase: learning\ntransformations:\n  - name: t\n    kind: training\n"
            "    used:\n      - name: lr\n        role: hyperparameter\n        unit: s\n"
            "    retries: 3\nnotes: x\n")
    with pytest.raises(BadSpec) as info:
        parse_spec(text, source="request body", echo=False)
    assert info.value.problems == [  # type: ignore[attr-defined]
        "request body:9: transformations[0].used[0]: unknown field; expected one of: name, "
        "role, concept, store, description",
        "request body:10: transformations[0]: unknown field; expected one of: name, kind, of, "
        "used, generated, granularity, description",
        "request body:11: (top level): unknown field; expected one of: workflow, phase, "
        "transformations, data_stores, description"]


def test_cross_field_errors_each_name_their_line() -> None:
    fixed = BAD.replace("trainig", "training").replace("hyperparam}", "hyperparameter}").replace(
        "    colour: blue\n", "")
    text = "\n".join(_problems(fixed))
    assert "bad.yaml:3: data_stores[1].name: duplicate data store name 'fs'" in text
    assert "bad.yaml:9: transformations[1].of: a section needs `of`" in text
    assert "bad.yaml:13: transformations[2].of: no transformation named 'nowhere'" in text
    assert "bad.yaml:15: transformations[2].generated[0].concept: expected an absolute IRI" in text
    assert "bad.yaml:15: transformations[2].generated[0].store: no data store named 's3'" in text
    assert "bad.yaml:18: transformations[3].of: sections form a cycle" in text
    assert "bad.yaml:21: transformations[4].of: sections form a cycle" in text
    assert "bad.yaml:22: transformations[5].name: duplicate transformation name 'training'" in text


@pytest.mark.parametrize(("text", "expected"), [
    ("workflow: w\nphase: learning\ntransformations: []\n", "3: transformations: must not be empty"),
    ("workflow: w\ntransformations: [{name: t}]\n", "1: phase: required field is missing"),
    ("workflow: w\nphase: mining\ntransformations: [{name: t}]\n", "2: phase: must be one of 'curation'"),
    ("- just\n- a list\n", "(top level): a spec is a mapping"),
    ("workflow: [unclosed\n", "not valid YAML or JSON"),
    ("workflow: w\nworkflow: v\nphase: learning\ntransformations: [{name: t}]\n", "2: workflow: duplicate key"),
    ("workflow: w\nphase: learning\ntransformations:\n  - {name: t, granularity: summary}\n",
     "4: transformations[0].granularity: only sections have a granularity"),
    ("workflow: w\nphase: learning\ntransformations:\n  - {name: t, of: t}\n",
     "4: transformations[0].of: only sections have `of`"),
    ("workflow: w\nphase: learning\ntransformations:\n  - {name: t, used: [{name: a, role: model}],"
     " generated: [{name: a, role: dataset}]}\n", "also used with another role"),
])
def test_each_kind_of_mistake_is_named(text: str, expected: str) -> None:
    assert expected in "\n".join(_problems(text, source="s.yaml"))


def test_load_spec_of_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        load_spec(tmp_path / "nope.yaml")


def test_cli_validate_prints_every_problem_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(SPEC_YAML)
    bad.write_text(BAD)
    assert main(["spec", "validate", str(good)]) == 0
    assert "ok (workflow 'flower-training'" in capsys.readouterr().out
    assert main(["spec", "validate", str(good), str(bad)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == len(_problems(BAD, source=str(bad))) and len(err) >= 6
    assert all(line.startswith(f"error: {bad}:") for line in err)


def test_cmd_validate_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from provkg.cli.specs import cmd_validate

    assert cmd_validate(argparse.Namespace(files=[str(tmp_path / "x.yaml")])) == 1
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_deeply_nested_spec_is_refused_not_crashed(tmp_path: Path, suffix: str) -> None:
    # 40,000 levels segfaulted the CLI (and a server taking the spec); 1,000 raised RecursionError
    deep = tmp_path / f"deep{suffix}"
    deep.write_text('{"workflow": "w",\n "x": ' + "[" * 40_000 + "]" * 40_000 + "}")
    with pytest.raises(BadSpec, match=rf"deep{suffix}:2: nested deeper than 64 levels"):
        load_spec(deep)


def test_aliases_that_expand_past_the_limit_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(BadSpec, match=r"bomb:5: more than 100,000 values"):
        parse_spec("\n".join(lines), source="bomb")


def test_yaml_merge_keys_within_a_spec_still_work() -> None:
    spec = parse_spec("workflow: w\nphase: learning\ntransformations:\n"
                      "  - &fit {name: fit, kind: training}\n  - <<: *fit\n    name: refit\n")
    assert [(t.name, t.kind) for t in spec.transformations] == [("fit", "training"), ("refit", "training")]


def test_duplicates_and_cycles_are_named_with_the_field_errors_not_after_them() -> None:
    # found by black-box testing: a duplicate name and an `of` cycle showed only once the
    # missing phase and the bad role were fixed (one more run per problem)
    text = """\
workflow: w
transformations:
  - name: a
    kind: training
  - name: a
    kind: validation
  - name: s1
    kind: section
    of: s2
  - name: s2
    kind: section
    of: s1
  - name: b
    kind: evaluation
    used:
      - {name: x, role: bogus_role}
"""
    problems = _problems(text)
    assert problems[0] == "bad.yaml:1: phase: required field is missing"
    assert "bad.yaml:5: transformations[1].name: duplicate transformation name 'a' (first at transformations[0])" in problems
    assert any(p.startswith("bad.yaml:9: transformations[2].of: sections form a cycle") for p in problems)
    assert any(p.startswith("bad.yaml:16: transformations[4].used[0].role:") for p in problems)


def test_a_name_yaml_reads_as_a_boolean_or_a_number_says_to_quote_it() -> None:
    """`workflow: no` is a bool to YAML: the message says to quote it."""
    with pytest.raises(BadSpec) as caught:
        parse_spec("workflow: no\nphase: learning\ntransformations:\n  - {name: 1.10}\n")
    text = str(caught.value)
    assert "workflow: must be text; quote it" in text
    assert "transformations[0].name: must be text; quote it" in text


def test_a_data_store_location_is_a_uri_in_the_spelling_values_have() -> None:
    # found by black-box testing: "/mnt/data lake/raw files" was written as it was, an
    # xsd:anyURI the reasoner refused; a relative name passed unchecked
    spec = parse_spec("""
workflow: w
phase: preparation
data_stores:
  - {name: lake, location: /mnt/data lake/raw files}
  - {name: bucket, location: "s3://bucket/é"}
  - {name: local, location: "file://localhost/srv/x"}
transformations:
  - name: cut
""")
    assert [s.location for s in spec.data_stores] == [
        "file:///mnt/data%20lake/raw%20files", "s3://bucket/%C3%A9", "file:///srv/x"]
    with pytest.raises(BadSpec, match=r":5: data_stores\[0\]\.location: expected a URI"):
        parse_spec("workflow: w\nphase: preparation\ntransformations: [{name: cut}]\n"
                   "data_stores:\n  - {name: lake, location: data lake}\n")
    # found by black-box testing: a Windows path became the URI "c:%5Cdata..." (scheme c), a
    # relative file: URI passed, and ~ was the home of whichever process read the spec
    def location(text: str) -> str:
        return parse_spec("workflow: w\nphase: preparation\ntransformations: [{name: cut}]\n"
                          f"data_stores:\n  - {{name: lake, location: '{text}'}}\n").data_stores[0].location

    assert location("C:\\data\\lake") == location("C:/data/lake") == "file:///C:/data/lake"
    assert location("\\\\Server\\share\\lake") == "file://server/share/lake"
    for bad, why in (("file:relative", "relative file: URI"), ("~/data", "where ~ is another"),
                     ("C:data", "relative to a drive")):
        with pytest.raises(BadSpec, match=why):
            location(bad)


def test_only_an_innermost_section_may_be_a_summary() -> None:
    # found by black-box testing: epochs summarised with their batches kept in full lost
    # every batch from q4, q5 and q7
    text = """
workflow: w
phase: learning
transformations:
  - {name: training, kind: training}
  - {name: epoch, kind: section, of: training, granularity: summary}
  - {name: batch, kind: section, of: epoch}
"""
    with pytest.raises(BadSpec, match=r":6: transformations\[1\]\.granularity: only an innermost section"):
        parse_spec(text)
    assert parse_spec(text.replace("granularity: summary}", "}").replace(
        "of: epoch}", "of: epoch, granularity: summary}")).transformations[2].granularity == "summary"


def test_json_specs_are_read_by_json_rules() -> None:
    # black-box testing: JSON went the YAML way only, which refused the surrogate-pair escapes
    # Python's json.dumps writes for any emoji and read {"name": 1e5} as the name "1e5"
    doc = {"workflow": "emoji-\U0001F600", "phase": "learning",
           "transformations": [{"name": "fit-\U0001F680", "kind": "training"}]}
    spec = parse_spec(json.dumps(doc, indent=2))  # ensure_ascii: \ud83d\ude00
    assert spec.workflow == "emoji-\U0001F600" and spec.transformations[0].name == "fit-\U0001F680"
    assert parse_spec(json.dumps(doc, indent="\t")).workflow == spec.workflow  # tabs: not YAML
    numbers = '{"workflow": "w", "phase": "learning",\n "transformations": [{"name": 1e5}]}'
    assert _problems(numbers, "n.json")[0].startswith(
        "n.json:2: transformations[0].name: must be text")
    lone = '{"workflow": "w-\\ud83d",\n "phase": "learning", "transformations": []}'
    assert _problems(lone, "lone.json")[0].startswith(
        "lone.json:1: not valid JSON: a \\u escape of half a surrogate pair")
    assert _problems(numbers, "n.json")[0].endswith('write it as a JSON string ("...")')
    twice = '{"workflow": "w", "phase": "learning",\n "phase": "curation", "transformations": []}'
    assert any(p.startswith("t.json:2: phase:") for p in _problems(twice, "t.json"))


def test_every_problem_of_a_spec_given_to_a_command_is_an_error_line(tmp_path: Path, capsys) -> None:
    # black-box testing: `provkg ingest --spec` put `error:` before the first problem only
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    events = tmp_path / "e.jsonl"
    events.write_text("")
    assert main(["ingest", str(events), "--spec", str(bad), "--store", "memory:"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 3 and all(line.startswith(f"error: {bad}:") for line in lines)


def test_a_key_yaml_reads_as_a_number_or_boolean_is_named_at_its_own_line() -> None:
    # black-box testing: `1: x` read as the list index [1], at the line of its block
    text = "workflow: w\nphase: learning\ntransformations:\n  - name: t\n    used:\n      - name: a\n        true: x\n    1: y\n"
    assert _problems(text, "k.yaml") == [
        'k.yaml:7: transformations[0].used[0]: the key true is a number or true/false, not a '
        'name: quote it ("...")',
        'k.yaml:8: transformations[0]: the key 1 is a number or true/false, not a name: quote '
        'it ("...")']
