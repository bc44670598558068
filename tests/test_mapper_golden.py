"""Golden files: events + spec -> the N-Quads each schema must give (compared as sets)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pyoxigraph as ox
import pytest

from provkg.mapper import map_events, map_spec
from provkg.spec import load_spec

GOLDEN = Path(__file__).parent / "golden"


def _mapped(schema: str) -> set[str]:
    spec = load_spec(GOLDEN / "lifecycle.spec.yaml")
    events = [orjson.loads(line) for line in (GOLDEN / "lifecycle.events.jsonl").read_bytes().splitlines()]
    triples = set(map_spec(spec, schema=schema)) | set(map_events(events, {spec.workflow: spec}, schema=schema))
    return {f"{s} {p} {o} .\n" for s, p, o in triples}


@pytest.mark.parametrize("schema", ["typed", "tagged", "sprov"])
def test_the_mapper_gives_the_golden_graph(schema: str) -> None:
    path = GOLDEN / f"{schema}.nq"
    got = _mapped(schema)
    if os.environ.get("PROVKG_REGENERATE_GOLDEN"):
        path.write_text("".join(sorted(got)))
    expected = set(path.read_text(encoding="utf-8").splitlines(keepends=True))
    assert got - expected == set(), "lines the golden file does not have"
    assert expected - got == set(), "golden lines the mapper no longer writes"


@pytest.mark.parametrize("schema", ["typed", "tagged", "sprov"])
def test_golden_files_are_valid_nquads_without_blank_nodes(schema: str) -> None:
    data = (GOLDEN / f"{schema}.nq").read_bytes()
    quads = list(ox.parse(data, format=ox.RdfFormat.N_QUADS))
    assert len(quads) == data.count(b"\n") > 100
    assert not any(isinstance(t, ox.BlankNode) for q in quads for t in (q.subject, q.object))
