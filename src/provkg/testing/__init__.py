"""Support for provkg's tests and benchmarks: real servers started on 127.0.0.1.

:class:`OxigraphServer` and :class:`VirtuosoServer` (in :mod:`provkg.testing.servers`) start a
private server process on free loopback ports and stop it by its PID. Nothing in provkg's
runtime (CLI, API, stores) imports this package.
"""

from __future__ import annotations

from provkg.testing.servers import OxigraphServer, VirtuosoServer, find_binary, free_port

__all__ = ["OxigraphServer", "VirtuosoServer", "free_port", "find_binary"]
