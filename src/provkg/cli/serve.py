"""``provkg serve | listen | schema``: the long-running processes, and the public
formats' schemas."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading

__all__ = ["cmd_listen", "cmd_schema", "cmd_serve"]

log = logging.getLogger("provkg.listener")


def _log_at_info() -> None:
    """provkg's own records at INFO; the HTTP client's per-request lines (httpx, httpcore)
    only from WARNING: a remote store would log every query it is sent."""
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)

_LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP API (:mod:`provkg.api.server`) until interrupted. Settings: flags, then
    ``PROVKG_*``, then defaults.

    Raises:
        BadSetting, CannotListen, StoreUnavailable, QueueUnavailable, BadParameter: before
            anything is served (``error: ...`` and exit 1).
    """
    from provkg.api.server import check_mqtt_url, listen_socket, run_server
    from provkg.api.service import open_service
    from provkg.config import get_settings

    settings = get_settings(store=getattr(args, "store", None), host=getattr(args, "host", None),
                            port=getattr(args, "port", None))
    check_mqtt_url(settings)
    _log_at_info()
    sock = listen_socket(settings.host, settings.port)
    try:
        service = open_service(settings)
    except BaseException:
        sock.close()
        raise
    run_server(settings, service, sock, announce=lambda line: print(line, flush=True))
    return 0


def cmd_listen(args: argparse.Namespace) -> int:
    """Consume capture batches from an MQTT broker (:mod:`provkg.api.listener`) into this
    process's own queue and store: no HTTP API, and no FastAPI loaded.

    To listen next to a running ``provkg serve`` on the same store, set
    ``PROVKG_MQTT_URL`` for the server instead: an embedded store and a queue
    folder have one owner process.
    """
    from provkg.api.listener import MqttListener
    from provkg.api.specs import SpecRegistry
    from provkg.config import get_settings
    from provkg.service.ingest import register_spec, spec_document
    from provkg.service.queued_ingest import open_queued_ingest
    from provkg.spec import load_spec
    from provkg.store import display_url

    _log_at_info()
    settings = get_settings(store=getattr(args, "store", None), mqtt_url=args.url)
    specs = [load_spec(path) for path in getattr(args, "spec", [])]  # bad specs fail first
    ingest = open_queued_ingest(settings.store, SpecRegistry(settings.queue_dir),
                                queue_dir=settings.queue_dir, schema=settings.ingest_schema,
                                fsync=settings.queue_fsync,
                                apply_events=settings.queue_apply_events)
    listener: MqttListener | None = None
    try:
        for spec in specs:
            ingest.specs.put(spec, spec_document(spec))
            register_spec(ingest.store, spec, schema=settings.ingest_schema)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        listener = MqttListener(args.url, ingest.queue, client_id=settings.mqtt_client,
                                max_bytes=settings.max_decompressed_bytes).start()
        print(f"provkg listening to {listener.host}:{listener.port} topic {listener.topic} "
              f"into {display_url(settings.store)}", flush=True)
        # a broker that cannot be reached at start is retried in the background: say so
        if not stop.wait(10) and not listener.subscribed.is_set():
            log.warning("not subscribed after 10 s: is the MQTT broker at %s:%s running? "
                        "(retrying)", listener.host, listener.port)
        stop.wait()
    finally:
        if listener is not None:
            listener.close()
        ingest.close()
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """The JSON Schema of a public format (``events``: the wire format v1 batch envelope)."""
    from provkg.events import batch_schema

    print(json.dumps(batch_schema(), indent=2))
    return 0
