"""Failures inside provenance code: logged once per cause, never raised into user code."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Hashable

__all__ = ["logger", "report_once", "reported_causes"]

logger = logging.getLogger("provkg.capture")

_seen: set[Hashable] = set()
# reentrant: a SIGTERM handler may report while the main thread is in here
_lock = threading.RLock()
#: bounded so that a stream of distinct causes cannot grow memory without limit
_MAX_CAUSES = 10_000


def report_once(cause: Hashable, message: str, *, level: int = logging.WARNING) -> bool:
    """Log ``message`` the first time ``cause`` is seen; return whether it was logged."""
    with _lock:
        if cause in _seen:
            return False
        if len(_seen) >= _MAX_CAUSES:
            _seen.clear()
        _seen.add(cause)
    try:
        logger.log(level, "provkg.capture: %s", message)
    except Exception:  # a broken logging handler must not reach user code either
        pass
    return True


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # another thread of the parent may have held it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def reported_causes() -> frozenset[Hashable]:
    """The causes logged so far (for tests and diagnostics)."""
    with _lock:
        return frozenset(_seen)
