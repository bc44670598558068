"""Which runs are current: the run of this context, and the runs this process records into.

The modules below :mod:`provkg.capture.workflow` (tasks, ``@track``'s machinery, exits, domains)
need the current run but must not import ``Workflow``: they see it through :class:`Run`, the
shape they use of it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["Run", "current_workflow", "sole_active_workflow", "active_workflows"]


class Run(Protocol):
    """What the modules below ``workflow`` use of a ``Workflow``."""

    id: str
    name: str
    owner: bool
    _began: bool
    _ended: bool
    _id_prefix: str
    _counter: Iterator[int]
    _emit: Callable[[dict[str, Any]], None]
    _open_tasks: dict[Any, None]  # Task -> None: begun, not ended
    _sections: list[Any]  # Tasks

    def begin(self) -> Any: ...

    def end(self, status: str = "finished", message: str | None = None) -> None: ...

    def task(self, transformation: str, *, parent: Any = None, index: int | None = None,
             used: Any = None, dependencies: Any = None) -> Any: ...

    def _close_sections(self, parent: Any, status: str, message: str | None) -> None: ...

    def _continue_in_child(self) -> None: ...


#: the run whose ``with`` block (or ``begin()``) is active in this context
_current_workflow: ContextVar[Run | None] = ContextVar("provkg_workflow", default=None)
#: every run of this process that may still record (to continue them in a forked child)
_workflows: weakref.WeakSet[Run] = weakref.WeakSet()
#: the runs this process records into now: begun (or received) and not ended
_active: dict[Run, None] = {}


def current_workflow() -> Run | None:
    """The workflow whose ``with`` block (or ``begin()``) is active in this context; failing
    that (a thread of a pool, a worker process), the only workflow active in this process.
    With several active and none in this context, None: pass the workflow explicitly."""
    wf = _current_workflow.get()
    if wf is None or wf._ended:  # (an outer run ended while an inner block was active)
        return sole_active_workflow()
    return wf


def sole_active_workflow() -> Run | None:
    """The workflow active in this process when there is exactly one, else None."""
    try:
        (wf,) = _active
    except (ValueError, RuntimeError):
        return None
    return wf


def active_workflows() -> int:
    """How many workflows this process records into now."""
    return len(_active)
