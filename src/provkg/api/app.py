"""The app factory: ``create_app(settings) -> FastAPI``; nothing is built at import.

The lifespan opens the store, loads the saved specs, starts the durable ingest
queue (replaying anything a crash left on disk), the SPARQL runner and, when
``mqtt_url`` is set, the MQTT listener; shutdown stops them in reverse order.
Run it with ``provkg serve`` or ``uvicorn --factory provkg.api.app:create_app``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI

from provkg import __version__
from provkg.api.errors import QueueUnavailable, install_error_handlers
from provkg.api.openapi import install_openapi
from provkg.api.queue import IngestQueue
from provkg.api.sparql import SparqlRunner
from provkg.api.sparql_guard import check_query
from provkg.api.specs import SpecRegistry
from provkg.config import Settings, get_settings
from provkg.errors import ProvkgError, StoreUnavailable, StoreUnreachable
from provkg.store.base import Store, display_url

__all__ = ["create_app", "Service", "open_service"]

log = logging.getLogger("provkg.api")

#: runs whose workflow the queue applier remembers between chunks
_KNOWN_RUNS = 100_000
#: seconds between attempts to reach a remote store that did not answer at the start
_STORE_RETRY_S = 5.0


@dataclass
class Service:
    """Everything a request needs, built once per app by :func:`open_service`."""

    settings: Settings
    store: Store
    queue: IngestQueue
    specs: SpecRegistry
    sparql: SparqlRunner
    extras: list[Any] = field(default_factory=list)  # e.g. the MQTT listener
    #: set while a remote store that did not answer at the start has not been reached yet
    store_wait: StoreWait | None = None
    #: one spec registration at a time: two replacing one workflow's spec at once
    #: interleaved their forget / add / re-type steps into a graph of neither version
    spec_lock: threading.Lock = field(default_factory=threading.Lock)

    closed: bool = False

    def close(self) -> None:
        """Stop everything, in reverse order of opening (once; later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        if self.store_wait is not None:
            self.store_wait.close()
        for extra in reversed(self.extras):
            extra.close()
        self.queue.close()
        self.sparql.close()
        self.store.close()


def make_applier(store: Store, specs: SpecRegistry, *, schema: str):
    """The queue's ``apply``: decode queued batches and ingest their events in one session.

    Each chunk is a complete ingest session (``finish`` writes whatever the mapper
    holds), so once ``apply`` returns the chunk is wholly in the store and the queue
    may move its cursor. Specs are registered when they are posted, not here.

    The payloads were validated when they were accepted: here they are only decoded
    (no second validation). Which workflow each run belongs to is remembered from chunk
    to chunk: a fresh session would otherwise look up in the store, with a SPARQL query
    per chunk, the runs of every task whose workflow event came in an earlier chunk (a
    run's workflow never changes, so the remembered answer is the store's answer).
    """
    known_runs: dict[str, str] = {}

    def apply(payloads: list[bytes]) -> None:
        from provkg.events import load_json
        from provkg.service.ingest import Ingestor

        events: list[dict[str, Any]] = []
        for payload in payloads:  # the accept path's own decoder: integers stay exact
            events.extend(load_json(payload)["events"])
        session = Ingestor(store, specs=specs.specs(), schema=schema, register=False)
        session.state.runs.update(known_runs)
        session.ingest(events)
        report = session.finish()
        if len(known_runs) > _KNOWN_RUNS:  # bounded: forgotten runs are looked up again
            known_runs.clear()
        known_runs.update(session.state.runs)
        for warning in report.warnings[:5]:
            log.info("ingest: %s", warning)

    return apply


def open_service(settings: Settings) -> Service:
    """Open the store, specs, queue and SPARQL runner the settings describe.

    Raises:
        StoreUnavailable: the store cannot be opened (e.g. another process holds it).
        QueueUnavailable: the queue folder is another process's, or cannot be created or read.
        BadParameter: the store URL is not one provkg knows.
    """
    from provkg.store import open_store

    queue_dir = Path(settings.queue_dir)
    if queue_dir.exists() and not queue_dir.is_dir():
        raise QueueUnavailable(f"the queue folder {settings.queue_dir} (PROVKG_QUEUE_DIR) is a "
                               "file, not a folder")
    store = open_store(settings.store)
    try:
        waiting: StoreWait | None = None
        if getattr(store, "endpoint", None) is not None:
            try:
                _check_writes(store, settings)
            except StoreUnreachable as exc:
                # down or still starting (a compose file starts both at once): serve anyway,
                # queueing batches durably, and reach it in the background
                log.warning("%s; serving anyway: batches are queued and applied once it answers "
                            "(tried every %.0f s)", exc, _STORE_RETRY_S)
                waiting = StoreWait(str(exc))
        try:
            return _open_rest(settings, store, waiting)
        except OSError as exc:  # the queue folder: not a folder, not writable, ...
            raise QueueUnavailable(f"cannot use the queue folder {settings.queue_dir} "
                                   f"(PROVKG_QUEUE_DIR): {exc.strerror or exc}") from exc
    except BaseException:
        store.close()
        raise


def _check_writes(store: Store, settings: Settings) -> None:
    """A remote store's account is checked with a write that writes nothing: else wrong
    credentials show only as 401s of the queue worker, after a "ready" server has
    acknowledged batches.

    Raises:
        StoreUnreachable: no answer at all (retried by the caller).
        StoreUnavailable: the store answered and refused (a wrong account, no endpoint)."""
    try:
        store.update("INSERT DATA { }")
    except StoreUnreachable:
        raise
    except ProvkgError as exc:
        raise StoreUnavailable(f"the store {display_url(settings.store)} (--store / "
                               f"PROVKG_STORE) does not take writes: {exc}") from None


def _sync_specs(store: Store, specs: SpecRegistry, *, schema: str) -> None:
    """What the store must hold before queued batches are applied: a spec registration the
    server was killed in, completed; the specs saved here and the store's, reconciled."""
    from provkg.service.ingest import (finish_registrations, register_spec, spec_document,
                                       stored_specs)

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

    def gate(self, apply: Any) -> Any:
        """``apply`` once the store was reached; before, the queue's retry of a store error."""
        def apply_when_reached(payloads: list[bytes]) -> None:
            if not self.reached.is_set():
                raise StoreUnreachable(f"waiting for the store: {self.problem}")
            apply(payloads)

        return apply_when_reached

    def start(self, reach: Any) -> None:
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


def _open_rest(settings: Settings, store: Store, waiting: StoreWait | None = None) -> Service:
    specs = SpecRegistry(settings.queue_dir)
    specs.load()
    if waiting is None:
        _sync_specs(store, specs, schema=settings.ingest_schema)
    apply = make_applier(store, specs, schema=settings.ingest_schema)
    queue = IngestQueue(settings.queue_dir, waiting.gate(apply) if waiting else apply,
                        fsync=settings.queue_fsync, apply_events=settings.queue_apply_events)
    try:
        queue.start()
        check_query("ASK {}")  # loads the SPARQL grammar now rather than on the first request
        sparql = SparqlRunner(store, settings.store, timeout=settings.query_timeout_s,
                              max_rows=settings.max_rows, workers=settings.sparql_workers)
    except BaseException:
        queue.close()  # releases the folder's lock
        raise
    service = Service(settings=settings, store=store, queue=queue, specs=specs, sparql=sparql,
                      store_wait=waiting)
    if waiting is not None:
        def reach() -> None:
            with service.spec_lock:  # no spec post meanwhile (they are refused until then anyway)
                _check_writes(store, settings)
                _sync_specs(store, specs, schema=settings.ingest_schema)

        waiting.start(reach)
    return service


class _HeadAsGet:
    """HEAD wherever GET is served (HTTP asks for it; uptime monitors use it): the status and
    headers of the GET, without its body. A route without GET still answers 405."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Any) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


def _is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1, localhost and *.localhost (RFC 6761); not 127.0.0.1.nip.io."""
    import ipaddress

    host = host.strip().lower().rstrip(".")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")


def _host_name(header: str) -> str:
    """The host name of a Host header: ``[::1]:8000`` -> ``::1``, ``a.b:80`` -> ``a.b``."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class _LoopbackOnly:
    """On a server bound to loopback, only requests for a loopback host name: a web page whose
    name an attacker re-points at 127.0.0.1 (DNS rebinding) sends its own name as Host, and
    would otherwise read /v1/sparql and the specs from the browser. 421, as for a request
    meant for another server."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
            if host and not _is_loopback(_host_name(host)):
                body = orjson.dumps({"error": "misdirected", "detail": (
                    "this server listens on a loopback address and answers requests for "
                    "127.0.0.1 or localhost only (another host name is what a DNS-rebinding "
                    "web page sends); to serve other machines, start it with --host")})
                await send({"type": "http.response.start", "status": 421, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def create_app(settings: Settings | None = None, *, service: Service | None = None) -> FastAPI:
    """Build the API. ``settings`` defaults to :func:`provkg.config.get_settings` (env ``PROVKG_*``).

    The service (store, queue, ...) is opened when the app starts, unless ``service`` is one
    opened already (``provkg serve`` opens it first, to report a store or queue it cannot
    use before it says it is serving); it is closed when the app stops.

    >>> app = create_app(get_settings(store="memory:", queue_dir="/tmp/provkg-doctest-queue"))
    >>> sorted(p for p in app.openapi()["paths"] if p.startswith("/v1/"))[:3]
    ['/v1/events', '/v1/ontologies', '/v1/ontologies/{name}']
    """
    settings = settings or (service.settings if service is not None else get_settings())
    opened = [service]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        running = opened.pop() if opened and opened[0] is not None else open_service(settings)
        app.state.service = running
        try:
            if settings.mqtt_url:
                from provkg.api.listener import MqttListener

                running.extras.append(MqttListener(settings.mqtt_url, running.queue,
                                                   client_id=settings.mqtt_client).start())
            yield
        finally:
            running.close()

    app = FastAPI(
        title="provkg",
        version=__version__,
        summary="Provenance knowledge graphs for the scientific-ML lifecycle: ingest capture "
                "events, ask canned lifecycle questions, run read-only SPARQL.",
        lifespan=lifespan,
    )
    from provkg.api.routes import events, health, ontologies, queries, sparql, specs

    for module in (events, specs, queries, sparql, ontologies, health):
        app.include_router(module.router)
    install_error_handlers(app)
    install_openapi(app)
    app.add_middleware(_HeadAsGet)
    if _is_loopback(settings.host):
        app.add_middleware(_LoopbackOnly)
    return app
