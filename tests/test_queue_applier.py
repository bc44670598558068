"""The queue's applier keeps one ingest session from one cursor move to the next: the graph is
the one a single session of the same events gives, after a failed chunk too, and a spec
registered meanwhile maps the later events (provkg.service.queued_ingest.QueueApplier)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from mapper_support import SPEC_YAML, lifecycle_events, lifecycle_spec

from provkg.errors import BadEvent, StoreError
from provkg.service.ingest import Ingestor
from provkg.service.queue import IngestQueue
from provkg.service.queued_ingest import QueueApplier
from provkg.spec import Spec
from provkg.store import open_store
from provkg.store.oxigraph_store import OxigraphStore

SPEC = lifecycle_spec(SPEC_YAML)
#: batches directly under the training: a parent that runs across many chunks
LONG = lifecycle_spec(SPEC_YAML.replace("of: epoch", "of: training"))


class Specs:
    """The saved specs as the server's registry hands them (``SavedSpecs``)."""

    def __init__(self, *specs: Spec):
        self._specs = {s.workflow: s for s in specs}

    def load(self) -> list[Spec]:
        return list(self._specs.values())

    def specs(self) -> dict[str, Spec]:
        return dict(self._specs)

    def put(self, spec: Spec, text: str) -> None:
        self._specs[spec.workflow] = spec


class FailingOnce(OxigraphStore):
    """An embedded store whose ``fail_at``-th write fails once, as a full disk would."""

    def __init__(self, fail_at: int):
        super().__init__(None)
        self.writes, self.fail_at = 0, fail_at

    def add(self, triples: Any, **kw: Any) -> int:
        self.writes += 1
        if self.writes == self.fail_at:
            raise StoreError("no space left on device")
        return super().add(triples, **kw)


def _long_events() -> list[dict[str, Any]]:
    events = [e for e in lifecycle_events(trainings=2, epochs=3, batches=4) if e.get("transformation") != "epoch"]
    return [{**e, "parent": e["parent"].rsplit("/", 1)[0]}
            if e.get("transformation") == "batch" and e.get("parent") else e for e in events]


def _payloads(events: list[dict[str, Any]], size: int) -> list[bytes]:
    return [orjson.dumps({"format": "provkg.events/1", "events": events[i:i + size]})
            for i in range(0, len(events), size)]


def _graph(store: Any) -> list[list[Any]]:
    return sorted(store.select("SELECT ?s ?p ?o WHERE { ?s ?p ?o }").rows)


def _one_session(spec: Spec, events: list[dict[str, Any]]) -> list[list[Any]]:
    store = open_store("memory:")
    session = Ingestor(store, specs=[spec])
    session.ingest(events)
    session.finish()
    return _graph(store)


def _registered(store: Any, spec: Spec) -> Any:
    Ingestor(store, specs=[spec]).finish()  # its prospective triples, as the server's POST does
    return store


def test_chunks_settled_now_and_then_give_the_graph_of_one_session() -> None:
    events = _long_events()
    store = _registered(open_store("memory:"), LONG)
    applier = QueueApplier(store, Specs(LONG), schema="typed")
    for n, payload in enumerate(_payloads(events, 5)):
        applier.apply([payload])
        if n % 4 == 3:
            applier.settle()
    applier.settle()
    assert _graph(store) == _one_session(LONG, events)


def test_a_failed_chunk_maps_the_unsettled_ones_again_and_loses_nothing() -> None:
    events = _long_events()
    payloads = _payloads(events, 5)
    for fail_at in (2, 5, 9):
        store = _registered(FailingOnce(fail_at=10**9), LONG)
        store.fail_at = store.writes + fail_at
        applier = QueueApplier(store, Specs(LONG), schema="typed")
        failed = 0
        for payload in payloads:
            while True:  # as the queue does: the same chunk again after a store error
                try:
                    applier.apply([payload])
                    break
                except StoreError:
                    failed += 1
        applier.settle()
        assert failed == 1
        assert _graph(store) == _one_session(LONG, events), f"write {fail_at} failed"


def test_a_spec_registered_between_chunks_maps_the_events_after_it() -> None:
    events = lifecycle_events(trainings=1, epochs=2, batches=2)
    half = len(events) // 2
    graphs = []
    for through_applier in (True, False):
        store = open_store("memory:")
        specs = Specs()
        if through_applier:
            applier = QueueApplier(store, specs, schema="typed")
            applier.apply(_payloads(events[:half], 1000))
        else:  # the reference: a session before the spec, one after
            first = Ingestor(store, register=False)
            first.ingest(events[:half])
            first.finish()
        specs.put(SPEC, SPEC_YAML)
        _registered(store, SPEC)
        if through_applier:
            applier.apply(_payloads(events[half:], 1000))
            applier.settle()
        else:
            session = Ingestor(store, specs=[SPEC], register=False)
            session.ingest(events[half:])
            session.finish()
        graphs.append(_graph(store))
    assert graphs[0] == graphs[1]


def test_through_the_queue_waiting_for_idle_means_settled(tmp_path: Path) -> None:
    events = _long_events()
    store = _registered(open_store("memory:"), LONG)
    applier = QueueApplier(store, Specs(LONG), schema="typed")
    with IngestQueue(tmp_path, applier.apply, settle=applier.settle) as queue:
        for payload in _payloads(events, 3):
            queue.put(payload, events=3)
        assert queue.wait_idle(60)
        assert _graph(store) == _one_session(LONG, events)
        queue.put(_payloads(events[:3], 3)[0], events=3)  # a re-delivery: nothing new
        assert queue.wait_idle(60) and _graph(store) == _one_session(LONG, events)


class RefusingOnce(OxigraphStore):
    """An embedded store that, once armed, refuses one write as content (a ProvkgError that is
    not a store error), then takes writes again."""

    def __init__(self) -> None:
        super().__init__(None)
        self.armed = False

    def add(self, triples: Any, **kw: Any) -> int:
        if self.armed:
            self.armed = False
            raise BadEvent("refused as content")
        return super().add(triples, **kw)


def test_content_refused_when_settling_maps_each_batch_alone_and_loses_nothing() -> None:
    events = _long_events()[:12]  # the training still runs: its state is written at settle
    store = _registered(RefusingOnce(), LONG)
    applier = QueueApplier(store, Specs(LONG), schema="typed")
    rejected: list[tuple[bytes, str]] = []
    applier.reject = lambda payload, reason: rejected.append((payload, reason))
    for payload in _payloads(events, 5):
        applier.apply([payload])
    store.armed = True  # the session's finish is refused once: each batch again on its own
    applier.settle()
    assert not store.armed and rejected == []
    assert _graph(store) == _one_session(LONG, events)
