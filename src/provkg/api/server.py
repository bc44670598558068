"""``provkg serve``: the API under uvicorn, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from provkg.api.app import create_app
from provkg.config import get_settings

__all__ = ["cmd_serve"]

_SWITCH_INTERVAL_S = 0.0005


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the API until interrupted. Settings: flags, then ``PROVKG_*``, then defaults."""
    settings = get_settings(store=getattr(args, "store", None), host=getattr(args, "host", None),
                            port=getattr(args, "port", None))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # The queue applier maps events in Python while requests are served: with the default
    # 5 ms GIL switch interval each hand-off on a request's path (event loop -> queue
    # writer -> event loop) can wait 5 ms behind it. 0.5 ms measured ~1.5x the accepted
    # events/s and half the p50 latency in benchmarks/service.py.
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    app = create_app(settings)
    # uvloop and httptools (dependencies) when importable, else asyncio and h11: about
    # 20% more requests per CPU second in benchmarks/service.py
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            access_log=False, timeout_graceful_shutdown=10,
                            loop="auto", http="auto")
    server = uvicorn.Server(config)
    print(f"provkg serving {settings.store} on http://{settings.host}:{settings.port} "
          f"(docs: /docs)", flush=True)
    server.run()
    return 0
