"""``provkg serve | listen | demo | schema``: the long-running processes, and the public
formats' schemas."""

from __future__ import annotations

import argparse
import json

__all__ = ["cmd_demo", "cmd_listen", "cmd_schema", "cmd_serve"]


def cmd_serve(args: argparse.Namespace) -> int:
    """The HTTP API (:mod:`provkg.api.server`) until interrupted."""
    from provkg.api import server

    return server.cmd_serve(args)


def cmd_listen(args: argparse.Namespace) -> int:
    """Capture batches from an MQTT broker into the store (:mod:`provkg.api.listener`)."""
    from provkg.api import listener

    return listener.cmd_listen(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """The seismic lifecycle end to end (:mod:`provkg.demo`, which draws its own display)."""
    from provkg import demo

    return demo.run(args)


def cmd_schema(args: argparse.Namespace) -> int:
    """The JSON Schema of a public format (``events``: the wire format v1 batch envelope)."""
    from provkg.events import batch_schema

    print(json.dumps(batch_schema(), indent=2))
    return 0
