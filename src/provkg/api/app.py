"""The app factory: ``create_app(settings) -> FastAPI``; nothing is built at import.

The lifespan opens the service (:func:`provkg.api.service.open_service`: the store, the
saved specs, the durable ingest queue, replaying anything a crash left on disk, and the
SPARQL runner) and, when ``mqtt_url`` is set, the MQTT listener; shutdown stops them in
reverse order.
Run it with ``provkg serve`` or ``uvicorn --factory provkg.api.app:create_app``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI

from provkg import __version__
from provkg.api.error_handlers import install_error_handlers
from provkg.api.openapi import install_openapi
from provkg.api.service import Service, open_service
from provkg.config import Settings, get_settings

__all__ = ["create_app"]


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
    ['/v1/events', '/v1/export', '/v1/ontologies']
    """
    settings = settings or (service.settings if service is not None else get_settings())
    opened: list[Service] = [service] if service is not None else []  # used by the first start

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        running = opened.pop() if opened else open_service(settings)
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
        docs_url=None, redoc_url=None,  # served by routes.ui, with assets of provkg's own
    )
    from provkg.api.routes import events, export, health, ontologies, queries, resources, sparql, specs, ui, void

    for module in (events, specs, queries, sparql, void, export, ontologies, health, resources, ui):
        app.include_router(module.router)
    install_error_handlers(app)
    install_openapi(app)
    app.add_middleware(_HeadAsGet)
    if settings.cors_origins:  # off by default; preflights answered before any route
        from starlette.middleware.cors import CORSMiddleware

        from provkg.api.render import NOTE_HEADER

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "HEAD", "POST"],
                           allow_headers=["Authorization", "Content-Encoding"],
                           expose_headers=[NOTE_HEADER])
    if _is_loopback(settings.host):
        app.add_middleware(_LoopbackOnly)
    return app
