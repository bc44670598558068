"""``@capture.track``: each call of a function is a task (arguments -> used, result -> generated).

Plain functions, ``async def`` functions, generators and async generators are all tracked for
as long as they run (see :mod:`provkg.capture.tracking`, which ``Workflow.track`` shares).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provkg.capture.task import Task
from provkg.capture.tracking import tracker
from provkg.capture.workflow import Workflow

__all__ = ["track"]


def track(transformation: str | Callable[..., Any] | None = None, *,
          generated: str | tuple[str, ...] | None = None, parent: Task | str | None = None,
          workflow: Workflow | None = None) -> Any:
    """Decorate a function so that each call is captured as a task.

    Args:
        transformation: the transformation name (default: the function's name).
        generated: how to name the return value: a name (default ``"result"``), or a tuple of
            names for a returned tuple; a returned dict gives one value per key. For a generator,
            its ``return`` value (not the items it yields).
        parent: the enclosing task (default: the task whose ``with`` block, or
            ``Workflow.sections`` loop body, is running; not one begun by ``begin()``).
        workflow: the run to record into (default: the active one; without an active run the
            function simply runs).

    Which run: ``workflow=`` (or ``Workflow.track``), else the run whose ``with`` block is
    active in this context, else -- in a thread that did not inherit that context (a
    ``ThreadPoolExecutor`` worker, a ``threading.Thread``) or a worker process that received the
    workflow -- the only run active in the process. With several runs active and none in this
    context the function runs uncaptured (logged once at INFO): pass ``workflow=``. A call in
    such a thread has no parent task unless ``parent=`` says so (or the thread runs it in a copy
    of the submitting context: ``executor.submit(contextvars.copy_context().run, f, x)``).

    Arguments are bound to parameter names (``self`` / ``cls`` left out). An exception from the
    function marks the task failed and propagates unchanged; failures of the capture itself are
    logged and never raised.

    >>> from provkg import capture
    >>> @capture.track(generated="area")
    ... def area(width, height=2.0):
    ...     return width * height
    >>> sink = capture.MemorySink()
    >>> with capture.workflow("shapes", sink=sink):
    ...     area(3.0)
    6.0
    >>> [e.get("generated") for e in sink.events if e["type"] == "task"]
    [None, [{'name': 'area', 'value': 6.0}]]
    """
    return tracker(transformation, generated=generated, parent=parent, workflow=workflow)
