"""``provkg serve``: the API under uvicorn, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import argparse
import logging

import uvicorn

from provkg.api.app import create_app
from provkg.config import get_settings

__all__ = ["cmd_serve"]


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the API until interrupted. Settings: flags, then ``PROVKG_*``, then defaults."""
    settings = get_settings(store=getattr(args, "store", None), host=getattr(args, "host", None),
                            port=getattr(args, "port", None))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = create_app(settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            access_log=False, timeout_graceful_shutdown=10)
    server = uvicorn.Server(config)
    print(f"provkg serving {settings.store} on http://{settings.host}:{settings.port} "
          f"(docs: /docs)", flush=True)
    server.run()
    return 0
