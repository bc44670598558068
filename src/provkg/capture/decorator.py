"""``@capture.track``: each call of a function becomes a task (arguments -> used, result -> generated)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from provkg.capture.report import report_once

if TYPE_CHECKING:
    from provkg.capture.workflow import Task, Workflow

__all__ = ["track"]

F = TypeVar("F", bound=Callable[..., Any])


def track(transformation: str | Callable[..., Any] | None = None, *,
          generated: str | tuple[str, ...] | None = None, parent: Task | str | None = None,
          workflow: Workflow | None = None) -> Any:
    """Decorate a function so that each call is captured as a task.

    Args:
        transformation: the transformation name (default: the function's name).
        generated: how to name the return value: a name (default ``"result"``), or a tuple of
            names for a returned tuple; a returned dict gives one value per key.
        parent: the enclosing task (default: the task whose ``with`` block is active).
        workflow: the run to record into (default: the active one; without an active run the
            function simply runs).

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
    if callable(transformation):  # used bare: @track
        return track()(transformation)

    def decorate(fn: F) -> F:
        name = transformation or getattr(fn, "__name__", "function")
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            task = _start(name, signature, args, kwargs, parent, workflow)
            if task is None:
                return fn(*args, **kwargs)
            with task:  # marks the task failed and re-raises when fn raises
                result = fn(*args, **kwargs)
                _record_result(task, result, generated)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


def _start(name: str, signature: inspect.Signature | None, args: tuple[Any, ...],
           kwargs: dict[str, Any], parent: Any, workflow: Any) -> Task | None:
    from provkg.capture.workflow import current_task, current_workflow

    try:
        wf = workflow or current_workflow()
        if wf is None or wf._ended:
            return None
        used = _bind(signature, args, kwargs)
        return wf.task(name, parent=parent if parent is not None else current_task(), used=used)
    except Exception as exc:
        report_once(("track-start", name, type(exc)), f"@track {name}: capture failed: {exc!r}")
        return None


def _bind(signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if signature is None:
        return {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}
    bound = signature.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    used: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        kind = signature.parameters[key].kind
        if key in ("self", "cls"):
            continue
        if kind is inspect.Parameter.VAR_KEYWORD:
            used.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            used.update({f"{key}{i}": v for i, v in enumerate(value)})
        else:
            used[key] = value
    return used


def _record_result(task: Task, result: Any, generated: str | tuple[str, ...] | None) -> None:
    try:
        if result is None and generated is None:
            return
        if isinstance(generated, tuple):
            if isinstance(result, (tuple, list)) and len(result) == len(generated):
                task.generate(**dict(zip(generated, result)))
                return
            report_once(("track-names", task.transformation), f"@track {task.transformation}: "
                        f"generated={generated} but the function returned {type(result).__name__}"
                        " of another length; captured as 'result'")
            task.generate(result=result)
        elif generated is None and isinstance(result, dict):
            task.generate(**{str(k): v for k, v in result.items()})
        else:
            task.generate(**{generated or "result": result})
    except Exception as exc:
        report_once(("track-result", task.transformation, type(exc)),
                    f"@track {task.transformation}: capturing the result failed: {exc!r}")
