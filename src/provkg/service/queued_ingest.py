"""Queued ingest: a store, its saved specs and the durable ingest queue whose applier maps
queued batches into the store; what ``provkg serve`` and ``provkg listen`` both run.

:func:`open_queued_ingest` opens the store, reconciles the specs saved next to the queue with
the store's, and starts the queue (which applies again whatever a crash left on disk). A
remote store that gives no answer at the start does not stop it: batches are queued durably
and :class:`StoreWait` reaches the store in the background.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from provkg.errors import ProvkgError, StoreError, StoreUnavailable, StoreUnreachable
from provkg.service.queue import IngestQueue, QueueUnavailable
from provkg.spec import Spec
from provkg.store.base import Store, display_url

__all__ = ["QueuedIngest", "open_queued_ingest", "SavedSpecs", "StoreWait", "QueueApplier",
           "check_writes"]

# the server's log: these lines tell how its store and queue are doing
log = logging.getLogger("provkg.api")

#: runs whose workflow the queue applier remembers between chunks
_KNOWN_RUNS = 100_000
#: the applier waits up to _GATHER_S for _GATHER_EVENTS before it maps a small backlog: the
#: embedded store takes ~10,000 triples in one bulk load (no write-ahead log, so nothing for
#: the SPARQL views to replay) for far less than in 20 small transactions
#: (benchmarks/results/service-rates.md)
_GATHER_EVENTS = 2_000
_GATHER_S = 0.25
#: seconds between attempts to reach a remote store that did not answer at the start
_STORE_RETRY_S = 5.0


class SavedSpecs(Protocol):
    """The specs kept next to the queue (``provkg.api.specs.SpecRegistry``): what the
    applier maps with, reconciled with the store's at the start."""

    def load(self) -> list[Spec]: ...

    def specs(self) -> dict[str, Spec]: ...

    def put(self, spec: Spec, text: str) -> None: ...


@dataclass
class QueuedIngest:
    """What :func:`open_queued_ingest` opened; :meth:`close` stops it (once)."""

    store: Store
    queue: IngestQueue
    specs: SavedSpecs
    #: set while a remote store that did not answer at the start has not been reached yet
    store_wait: StoreWait | None = None
    #: one spec registration at a time: two replacing one workflow's spec at once
    #: interleaved their forget / add / re-type steps into a graph of neither version
    spec_lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def close(self, *, before_store: Callable[[], None] | None = None) -> None:
        """Stop reaching the store, close the queue (what is not applied stays on disk),
        call ``before_store`` (what else reads the store), then close the store."""
        if self.closed:
            return
        self.closed = True
        if self.store_wait is not None:
            self.store_wait.close()
        self.queue.close()
        if before_store is not None:
            before_store()
        self.store.close()


class QueueApplier:
    """The queue's ``apply`` and ``settle``: queued batches mapped into the store in one ingest
    session from one cursor move to the next (:class:`IngestQueue` settles at most every half
    second while busy, and at once when idle and someone waits).

    A session writes each chunk's triples as it maps it (queries see them at once); what it
    holds in memory is the state of parents still running (rollups, pending records), which
    :meth:`settle` writes (``finish``) before the cursor moves past those chunks. One session
    per chunk wrote that state after every chunk, each time in full: a training with 50,000
    batches directly under it made every chunk cost more than the one before. A failed chunk
    drops the session, and the next apply maps the chunks applied since the last settle again
    (set semantics: the same triples), so nothing acknowledged is lost.

    The payloads were validated when they were accepted: here they are only decoded (no
    second validation). Which workflow each run belongs to is remembered from session to
    session (a run's workflow never changes, so the remembered answer is the store's answer).
    A spec registered meanwhile settles the session first: later events map with it.
    """

    def __init__(self, store: Store, specs: SavedSpecs, *, schema: str):
        from provkg.mapper.summary_cache import SummaryCache

        self._store, self._specs, self._schema = store, specs, schema
        self._known_runs: dict[str, str] = {}
        #: the summary states written here: the next session takes their facts unparsed
        self._cache = SummaryCache()
        self._session: Any = None
        #: sets aside a batch whose content cannot be ingested (the queue's dead letters)
        self.reject: Callable[[bytes, str], object] = lambda payload, reason: log.error(
            "ingest: a queued batch cannot be ingested (%s)", reason)
        self._session_specs: dict[str, Spec] = {}
        #: payloads applied since the last settle: mapped again after a failure
        self._unsettled: list[bytes] = []

    def apply(self, payloads: list[bytes]) -> None:
        specs = self._specs.specs()
        if self._session is not None and (specs.keys() != self._session_specs.keys() or any(
                specs[w] is not s for w, s in self._session_specs.items())):
            self.settle()
        try:
            if self._session is None:
                session = self._open(specs)
                if self._unsettled:  # a failure dropped the session: its chunks again
                    session.ingest(_decode(self._unsettled))
            self._session.ingest(_decode(payloads))
        except BaseException:
            self._drop()
            raise
        self._unsettled.extend(payloads)

    def settle(self) -> None:
        """Write what the session holds (then everything applied is in the store)."""
        if self._session is None and self._unsettled:
            try:
                self._open(self._specs.specs()).ingest(_decode(self._unsettled))
            except BaseException:
                self._drop()
                raise
        if self._session is None:
            return
        session = self._session
        try:
            report = session.finish()
        except (StoreError, StoreUnavailable):
            self._drop()
            raise
        except ProvkgError:
            # content one of the unsettled batches holds: as the queue does with a chunk,
            # each batch again in a session of its own, the one refused set aside
            self._drop()
            self._settle_one_by_one()
            return
        except BaseException:
            self._drop()
            raise
        self._session = None
        self._unsettled = []
        self._remember(session, report)

    def _settle_one_by_one(self) -> None:
        while self._unsettled:
            payload = self._unsettled[0]
            session = self._open(self._specs.specs())
            try:
                session.ingest(_decode([payload]))
                report = session.finish()
            except (StoreError, StoreUnavailable):
                self._drop()
                raise  # retried from this batch on
            except ProvkgError as exc:
                self._drop()
                self.reject(payload, f"ingest refused it: {exc}")
            else:
                self._session = None
                self._remember(session, report)
            self._unsettled.pop(0)

    def _remember(self, session: Any, report: Any) -> None:
        if len(self._known_runs) > _KNOWN_RUNS:  # bounded: forgotten runs are looked up again
            self._known_runs.clear()
        self._known_runs.update(session.state.runs)
        for warning in report.warnings[:5]:
            log.info("ingest: %s", warning)

    def _open(self, specs: dict[str, Spec]) -> Any:
        from provkg.service.ingest import Ingestor

        session = self._session = Ingestor(self._store, specs=specs, schema=self._schema, register=False)
        self._session_specs = dict(specs)
        session.state.runs.update(self._known_runs)
        session.state.summary_cache = self._cache
        return session

    def _drop(self) -> None:
        self._cache.clear()  # it may hold facts the dropped session did not write
        if self._session is not None:
            self._session.close()
        self._session = None


def _decode(payloads: list[bytes]) -> list[dict[str, Any]]:
    from provkg.events import load_json

    events: list[dict[str, Any]] = []
    for payload in payloads:  # the accept path's own decoder: integers stay exact
        events.extend(load_json(payload)["events"])
    return events


def open_queued_ingest(store_url: str, specs: SavedSpecs, *, queue_dir: str | os.PathLike[str],
                       schema: str, fsync: bool = True, apply_events: int = 20_000) -> QueuedIngest:
    """Open the store at ``store_url``, load ``specs`` and start the queue in ``queue_dir``.

    Raises:
        StoreUnavailable: the store cannot be opened (e.g. another process holds it), or a
            remote one answered and refuses writes.
        QueueUnavailable: the queue folder is another process's, or cannot be created or read.
        BadParameter: the store URL is not one provkg knows.
    """
    from provkg.store import open_store

    folder = Path(queue_dir)
    if folder.exists() and not folder.is_dir():
        raise QueueUnavailable(f"the queue folder {queue_dir} (PROVKG_QUEUE_DIR) is a "
                               "file, not a folder")
    store = open_store(store_url)
    try:
        waiting: StoreWait | None = None
        if getattr(store, "endpoint", None) is not None:
            try:
                check_writes(store, store_url)
            except StoreUnreachable as exc:
                # down or still starting (a compose file starts both at once): serve anyway,
                # queueing batches durably, and reach it in the background
                log.warning("%s; serving anyway: batches are queued and applied once it answers "
                            "(tried every %.0f s)", exc, _STORE_RETRY_S)
                waiting = StoreWait(str(exc))
        try:
            return _start_queue(store, store_url, specs, waiting, queue_dir=folder, schema=schema,
                                fsync=fsync, apply_events=apply_events)
        except OSError as exc:  # the queue folder: not a folder, not writable, ...
            raise QueueUnavailable(f"cannot use the queue folder {queue_dir} "
                                   f"(PROVKG_QUEUE_DIR): {exc.strerror or exc}") from exc
    except BaseException:
        store.close()
        raise


def check_writes(store: Store, store_url: str) -> None:
    """A remote store's account is checked with a write that writes nothing: else wrong
    credentials show only as 401s of the queue applier, after a "ready" server has
    acknowledged batches.

    Raises:
        StoreUnreachable: no answer at all (retried by the caller).
        StoreUnavailable: the store answered and refused (a wrong account, no endpoint)."""
    try:
        store.update("INSERT DATA { }")
    except StoreUnreachable:
        raise
    except ProvkgError as exc:
        raise StoreUnavailable(f"the store {display_url(store_url)} (--store / "
                               f"PROVKG_STORE) does not take writes: {exc}") from None


def _sync_specs(store: Store, specs: SavedSpecs, *, schema: str) -> None:
    """What the store must hold before queued batches are applied: a spec registration the
    server was killed in, completed; the specs saved here and the store's, reconciled."""
    from provkg.service.ingest import (
        finish_registrations,
        register_spec,
        spec_document,
        stored_specs,
    )

    finish_registrations(store)  # a spec POST the server was killed in: the store holds it whole
    in_store = {spec.workflow: spec for spec in stored_specs(store)}
    for spec in specs.specs().values():
        held = in_store.get(spec.workflow)
        if held is None or spec_document(held) == spec_document(spec):
            register_spec(store, spec, schema=schema)  # idempotent; a new store
    for workflow, spec in in_store.items():
        # the store's spec wins: `provkg ingest --spec` may have registered it (or replaced the
        # one saved here) while the server was down, and the store's data are mapped with it
        saved = specs.specs().get(workflow)
        if saved is None or spec_document(saved) != spec_document(spec):
            specs.put(spec, spec_document(spec))


class StoreWait:
    """A remote store that gave no answer when the server started. Until the thread of
    :meth:`start` has reached it (and done what the start would have done), the queue keeps
    batches on disk, spec posts are refused (503) and ``/health/ready`` says why."""

    def __init__(self, problem: str):
        self.reached = threading.Event()
        self.problem = problem
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def gate(self, apply: Callable[[list[bytes]], None]) -> Callable[[list[bytes]], None]:
        """``apply`` once the store was reached; before, the queue's retry of a store error."""
        def apply_when_reached(payloads: list[bytes]) -> None:
            if not self.reached.is_set():
                raise StoreUnreachable(f"waiting for the store: {self.problem}")
            apply(payloads)

        return apply_when_reached

    def start(self, reach: Callable[[], None]) -> None:
        def run() -> None:
            while not self._stop.wait(_STORE_RETRY_S):
                try:
                    reach()
                except Exception as exc:  # never let the thread die: the queue waits on it
                    problem = str(exc) if isinstance(exc, ProvkgError) else f"{type(exc).__name__}: {exc}"
                    if problem != self.problem:  # each new problem once, not every 5 s
                        log.warning("the store is still not usable: %s", problem,
                                    exc_info=not isinstance(exc, ProvkgError))
                    self.problem = problem
                    continue
                self.reached.set()
                log.info("the store answers now: queued batches are being applied")
                return

        self._thread = threading.Thread(target=run, name="provkg-store-wait", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _queued(store: Store, write: Callable[..., Any]) -> Callable[..., Any]:
    """``write`` with its writes marked as the queue's (:meth:`Store.queued_writes`)."""
    def queued(*args: Any) -> Any:
        with store.queued_writes():
            return write(*args)
    return queued


def _start_queue(store: Store, store_url: str, specs: SavedSpecs, waiting: StoreWait | None, *,
                 queue_dir: Path, schema: str, fsync: bool, apply_events: int) -> QueuedIngest:
    specs.load()
    if waiting is None:
        _sync_specs(store, specs, schema=schema)
    applier = QueueApplier(store, specs, schema=schema)
    apply = waiting.gate(applier.apply) if waiting else applier.apply
    queue = IngestQueue(queue_dir, _queued(store, apply), fsync=fsync, apply_events=apply_events,
                        settle=_queued(store, applier.settle),
                        gather_events=_GATHER_EVENTS, gather_s=_GATHER_S)
    applier.reject = queue.dead_letter
    queue.start()
    ingest = QueuedIngest(store=store, queue=queue, specs=specs, store_wait=waiting)
    if waiting is not None:
        def reach() -> None:
            with ingest.spec_lock:  # no spec post meanwhile (they are refused until then anyway)
                check_writes(store, store_url)
                _sync_specs(store, specs, schema=schema)

        waiting.start(reach)
    return ingest
