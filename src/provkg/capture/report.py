"""Failures inside provenance code: logged once per cause, never raised into user code."""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable

__all__ = ["logger", "report_once", "reported_causes"]

logger = logging.getLogger("provkg.capture")

_seen: set[Hashable] = set()
_lock = threading.Lock()
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


def reported_causes() -> frozenset[Hashable]:
    """The causes logged so far (for tests and diagnostics)."""
    with _lock:
        return frozenset(_seen)
