"""Failures inside provenance code: logged once per cause, never raised into user code."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Hashable

__all__ = ["logger", "report_once", "reported_causes", "shown_url"]

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


_USERINFO = re.compile(r"(//[^/@\s:]*):[^/@\s]*@")
_SECRET_OPTION = re.compile(r"((?:password|passwd|token|secret|key)=)[^&#\s]*", re.IGNORECASE)


def shown_url(url: str) -> str:
    """``url`` as messages show it: a password in ``user:password@`` or in a ``password=`` /
    ``token=`` option masked (job logs keep warnings; the store side does the same).

    >>> shown_url("mqtt://alice:s3cr3t@broker:1883/pk?token=abc&x=1")
    'mqtt://alice:***@broker:1883/pk?token=***&x=1'
    """
    return _SECRET_OPTION.sub(r"\1***", _USERINFO.sub(r"\1:***@", url))
