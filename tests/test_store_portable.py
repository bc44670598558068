"""The defaults of :class:`provkg.store.base.Store` (portable SPARQL, ``provkg.store.portable``)
give the answers of each backend's own faster methods: a store implementing only the six
required methods, over each embedded backend, against that backend itself."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import pytest

from provkg.errors import StoreUnavailable
from provkg.store import Rows, Store, open_store
from provkg.term import Triple

EX = "http://example.org/"
DATA = [
    (f"<{EX}a>", f"<{EX}p>", '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'),
    (f"<{EX}a>", f"<{EX}q>", '"chat"@fr'),
    (f"<{EX}b>", f"<{EX}p>", '"0.5"^^<http://www.w3.org/2001/XMLSchema#double>'),
    (f"<{EX}b>", f"<{EX}r>", "_:x"),
    ("_:x", f"<{EX}p>", '"plain"'),
]


class Minimal(Store):
    """Only the six methods a backend must write, passed to ``inner``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.url = inner.url

    def add(self, triples: Iterable[Triple], *, graph: str | None = None,
            trusted: bool = False) -> int:
        return self.inner.add(triples, graph=graph, trusted=trusted)

    def select(self, query: str, *, timeout: float | None = None,
               hide_system_graphs: bool = True) -> Rows:
        return self.inner.select(query, timeout=timeout, hide_system_graphs=hide_system_graphs)

    def ask(self, query: str) -> bool:
        return self.inner.ask(query)

    def construct(self, query: str) -> list[Triple]:
        return self.inner.construct(query)

    def update(self, sparql: str) -> None:
        self.inner.update(sparql)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def pair(embedded_store: Store) -> tuple[Store, Store]:
    # the default graph holds no triple of a named graph (provkg writes each to one graph)
    embedded_store.add([(f"<{EX}d>", f"<{EX}p>", '"in the default graph"'),
                        (f"<{EX}d>", f"<{EX}q>", f"<{EX}a>")])
    embedded_store.add(DATA, graph=EX + "g1")
    embedded_store.add(DATA[2:3], graph=EX + "g2")
    return embedded_store, Minimal(embedded_store)


def test_count_and_graphs(pair: tuple[Store, Store]) -> None:
    own, portable = pair
    assert portable.count() == own.count() == 2 + len(DATA) + 1
    assert portable.count(graph=EX + "g1") == own.count(graph=EX + "g1") == len(DATA)
    assert portable.graphs() == own.graphs() == [EX + "g1", EX + "g2"]


def test_typed_terms(pair: tuple[Store, Store]) -> None:
    own, portable = pair
    query = ("PREFIX ex: <http://example.org/> SELECT ?s ?o ?none WHERE { GRAPH ex:g1 "
             "{ ?s ?p ?o } OPTIONAL { ?s ex:nothing ?none } } ORDER BY ?p ?o")
    mine, theirs = portable.select_terms(query), own.select_terms(query)
    assert mine.columns == theirs.columns == ["s", "o", "none"]

    def shape(rows: Rows) -> list[str]:  # blank node labels differ from one answer to the next
        return sorted(repr([{k: ("_" if t["type"] == "bnode" else v) for k, v in t.items()}
                            if t else t for t in row]) for row in rows.rows)

    assert shape(mine) == shape(theirs)


def test_dump_reads_back_as_the_same_store(pair: tuple[Store, Store], tmp_path: Path) -> None:
    own, portable = pair
    out = io.BytesIO()
    portable.dump(out)
    path = tmp_path / "all.nq"
    path.write_bytes(out.getvalue())
    with open_store("memory:") as again:
        again.load_file(path)
        assert again.count() == own.count()
        assert again.graphs() == own.graphs()
    one = io.BytesIO()
    portable.dump(one, graph=EX + "g2")
    assert one.getvalue().decode().count("\n") == 1


def test_load_file_and_clear(pair: tuple[Store, Store], tmp_path: Path) -> None:
    own, portable = pair
    path = tmp_path / "more.ttl"
    path.write_text("@prefix ex: <http://example.org/> .\nex:c ex:p [ ex:q 1 ], 2 .\n")
    assert portable.load_file(path, graph=EX + "g3") == 3
    assert own.count(graph=EX + "g3") == 3
    portable.clear(graph=EX + "g3")
    assert own.count(graph=EX + "g3") == 0
    portable.clear()
    assert own.count() == 0


def test_a_closed_minimal_store_refuses_work(pair: tuple[Store, Store]) -> None:
    _, portable = pair
    portable.close()
    for method in (portable.count, portable.graphs):
        with pytest.raises(StoreUnavailable):
            method()
