"""The API under uvicorn (``provkg serve``, :mod:`provkg.cli.serve`), on 127.0.0.1 unless told
otherwise.

Everything that can stop the server from working is checked before it says it is serving
(docs/reference/cli.md: ``error: ...`` and exit 1, never a traceback): the settings, the MQTT URL, the
address and port (bound here, then handed to uvicorn), the store and the queue folder. A
remote store that does not answer at all (down, or still starting) is the exception: the
server starts, queues batches durably and reaches the store in the background.
"""

from __future__ import annotations

import gc
import socket
import sys
from collections.abc import Callable

import uvicorn

from provkg.api.app import create_app
from provkg.api.service import Service
from provkg.config import BadSetting, Settings
from provkg.errors import ProvkgError
from provkg.service.ingest import rare_collections
from provkg.store import display_url

__all__ = ["CannotListen", "listen_socket", "check_mqtt_url", "run_server"]

_SWITCH_INTERVAL_S = 0.0005


class CannotListen(ProvkgError):
    """The server cannot listen on the address and port it was given."""

    code = "cannot_listen"


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not listening yet: uvicorn does that), as uvicorn
    binds one (``SO_REUSEADDR``, inheritable). Port 0 takes any free port.

    Raises:
        CannotListen: the host does not resolve, or the address cannot be bound (a port in
            use, an address of no interface here, a port below 1024 without privileges).
    """
    # IPv6 only for an IPv6 address, as uvicorn does: "localhost" is 127.0.0.1, not ::1
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, family=family, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise CannotListen(f"cannot listen on host {host!r} (--host / PROVKG_HOST): "
                           f"{reason}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        hint = (" (another server uses it? give another --port, or PROVKG_PORT)"
                if exc.errno in (98, 48) else "")  # EADDRINUSE on Linux, macOS
        raise CannotListen(f"cannot listen on {_url(host, port)}: {exc.strerror or exc}"
                           f"{hint}") from None
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def check_mqtt_url(settings: Settings) -> None:
    """Refuse a malformed ``PROVKG_MQTT_URL`` before the start (the listener starts later).

    Raises:
        BadSetting: naming the setting.
    """
    if settings.mqtt_url:
        from provkg.api.listener import parse_mqtt_url

        try:
            parse_mqtt_url(settings.mqtt_url)
        except ProvkgError as exc:
            raise BadSetting(f"PROVKG_MQTT_URL: {exc}") from None


def run_server(settings: Settings, service: Service, sock: socket.socket, *,
               announce: Callable[[str], None]) -> None:
    """Serve the API on ``sock`` (from :func:`listen_socket`) until interrupted;
    ``announce`` gets the one line saying where, once everything is open. Closes
    ``service`` and ``sock`` in the end.

    Raises:
        ProvkgError: the app did not start (uvicorn logged why).
    """
    port = sock.getsockname()[1]
    try:
        # The queue applier maps events in Python while requests are served: with the default
        # 5 ms GIL switch interval each hand-off on a request's path (event loop -> queue
        # writer -> event loop) can wait 5 ms behind it. 0.5 ms measured ~1.5x the accepted
        # events/s and half the p50 latency in benchmarks/service.py.
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        app = create_app(settings, service=service)
        gc.freeze()  # what start-up made (modules, the app) stays out of every collection
        # uvloop and httptools (dependencies) when importable, else asyncio and h11: about
        # 20% more requests per CPU second in benchmarks/service.py
        config = uvicorn.Config(app, host=settings.host, port=port, log_level="warning",
                                access_log=False, timeout_graceful_shutdown=10,
                                loop="auto", http="auto")
        server = uvicorn.Server(config)
        waiting = service.store_wait
        later = (" (the store does not answer yet: batches are queued and applied once it "
                 "does; /health/ready says when)") if waiting is not None else ""
        announce(f"provkg serving {display_url(settings.store)} on {_url(settings.host, port)} "
                 f"(web UI: /, API docs: /docs){later}")
        with rare_collections():
            server.run(sockets=[sock])
    finally:
        service.close()  # after a normal stop the app closed it already: a no-op then
        sock.close()
    if not server.started:  # uvicorn logged why (the app's startup failed)
        raise ProvkgError("the server could not start (see the log above)")
