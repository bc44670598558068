"""``@capture.track``: each call of a function is a task (arguments -> used, result -> generated).

Plain functions, ``async def`` functions, generators and async generators are all tracked for
as long as they run: a coroutine's task begins when it starts running and ends when it returns
or raises (``await``-ed to the end); a generator's task spans the whole iteration (it begins at
the first ``next`` and ends at exhaustion, or when it is closed or collected: ``break``). A task
is ``failed`` when the body raises (``CancelledError`` included), with the exception unchanged.
"""

from __future__ import annotations

import functools
import inspect
import logging
import types
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from provkg.capture.report import report_once

if TYPE_CHECKING:
    from provkg.capture.workflow import Task, Workflow

__all__ = ["track"]

F = TypeVar("F", bound=Callable[..., Any])
#: results of a plain ``def`` that still have to run (a wrapped coroutine function, say)
_DEFERRED = (types.CoroutineType, types.GeneratorType, types.AsyncGeneratorType)


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
    if callable(transformation):  # used bare: @track
        return track()(transformation)

    def decorate(fn: F) -> F:
        name = transformation or getattr(fn, "__name__", "function")
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                task = _start(name, signature, args, kwargs, parent, workflow)
                if task is None:
                    return await fn(*args, **kwargs)
                with task:  # marks the task failed and re-raises when fn raises
                    result = await fn(*args, **kwargs)
                    _record_result(task, result, generated)
                return result

            return async_wrapper  # type: ignore[return-value]

        if inspect.isasyncgenfunction(fn):
            @functools.wraps(fn)
            async def async_gen_wrapper(*args: Any, **kwargs: Any) -> Any:
                task = _start(name, signature, args, kwargs, parent, workflow)
                inner = _drive_async(task, fn(*args, **kwargs))
                # ``async for`` would not pass asend / athrow on: relay by hand
                send: Any = None
                throw: BaseException | None = None
                try:
                    while True:
                        if throw is not None:
                            exc, throw = throw, None
                            item = await inner.athrow(exc)
                        else:
                            item = await inner.asend(send)
                        try:
                            send = yield item
                        except GeneratorExit:
                            raise
                        except BaseException as exc:  # noqa: BLE001 - the consumer's athrow
                            throw = exc
                except StopAsyncIteration:
                    return
                except GeneratorExit:
                    await inner.aclose()
                    raise

            return async_gen_wrapper  # type: ignore[return-value]

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
                task = _start(name, signature, args, kwargs, parent, workflow)
                if task is None:
                    return (yield from fn(*args, **kwargs))
                return (yield from _drive(task, fn(*args, **kwargs), generated))

            return gen_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            task = _start(name, signature, args, kwargs, parent, workflow)
            if task is None:
                return fn(*args, **kwargs)
            task.__enter__()
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                task.__exit__(type(exc), exc, exc.__traceback__)  # failed; exc propagates
                raise
            if type(result) in _DEFERRED:  # e.g. a coroutine function under another decorator
                return _continue(task, result, generated)
            _record_result(task, result, generated)
            task.__exit__(None, None, None)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


def _start(name: str, signature: inspect.Signature | None, args: tuple[Any, ...],
           kwargs: dict[str, Any], parent: Any, workflow: Any) -> Task | None:
    from provkg.capture.workflow import (
        _current_task,
        _current_workflow,
        active_workflows,
        sole_active_workflow,
    )

    try:
        wf = workflow or _current_workflow.get()
        if wf is None or (workflow is None and wf._ended):
            wf = sole_active_workflow()
            if wf is None:
                if active_workflows() > 1:
                    report_once(("track-ambiguous", name), f"@track {name}: called where no "
                                "workflow is active (a new thread?) while several are active in "
                                "this process: not captured; pass workflow= (or use "
                                "wf.track) to say which", level=logging.INFO)
                return None
        if wf._ended:
            return None
        used = _bind(signature, args, kwargs)
        if parent is None:
            current = _current_task.get()
            parent = current if current is not None and current.workflow is wf else None
        return wf.task(name, parent=parent, used=used)
    except Exception as exc:
        report_once(("track-start", name, type(exc)), f"@track {name}: capture failed: {exc!r}")
        return None


def _continue(task: Task, pending: Any, generated: Any) -> Any:
    """A plain ``def`` returned a coroutine or a generator: the task lasts until it is done."""
    from provkg.capture.workflow import _current_task

    token, task._token = task._token, None  # no longer the current task out here
    if token is not None:
        _reset(_current_task, token)
    if type(pending) is types.CoroutineType:
        return _await(task, pending, generated)
    if type(pending) is types.GeneratorType:
        return _drive(task, pending, generated)
    return _drive_async(task, pending)


async def _await(task: Task, coroutine: Any, generated: Any) -> Any:
    from provkg.capture.workflow import _current_task

    token = _current_task.set(task)
    try:
        result = await coroutine
    except BaseException as exc:
        _end_failed(task, exc)
        raise
    finally:
        _reset(_current_task, token)
    _record_result(task, result, generated)
    task.end()
    return result


def _drive(task: Task, gen: Generator[Any, Any, Any], generated: Any) -> Generator[Any, Any, Any]:
    """Run ``gen`` as ``task``: the current task while its body runs (not while the consumer
    runs between items), ended at exhaustion, close or failure."""
    from provkg.capture.workflow import _current_task

    task.begin()
    send: Any = None
    throw: BaseException | None = None
    try:
        while True:
            token = _current_task.set(task)
            try:
                if throw is not None:
                    exc, throw = throw, None
                    item = gen.throw(exc)
                else:
                    item = gen.send(send)
            finally:
                _reset(_current_task, token)
            try:
                send = yield item
            except GeneratorExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - the consumer's gen.throw(): pass it on
                throw = exc
    except StopIteration as stop:
        _record_result(task, stop.value, generated)
        task.end()
        return stop.value
    except GeneratorExit:  # closed (break, collected): the iteration simply stopped
        try:
            gen.close()
        except BaseException as exc:
            _end_failed(task, exc)
            raise
        task.end()
        raise
    except BaseException as exc:
        _end_failed(task, exc)
        raise


async def _drive_async(task: Task | None, agen: Any) -> AsyncGenerator[Any, Any]:
    """``_drive`` for an async generator (which returns no value); ``task`` None: relay only."""
    from provkg.capture.workflow import _current_task

    if task is not None:
        task.begin()
    send: Any = None
    throw: BaseException | None = None
    try:
        while True:
            token = _current_task.set(task) if task is not None else None
            try:
                if throw is not None:
                    exc, throw = throw, None
                    item = await agen.athrow(exc)
                else:
                    item = await agen.asend(send)
            finally:
                if token is not None:
                    _reset(_current_task, token)
            try:
                send = yield item
            except GeneratorExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - the consumer's athrow: pass it on
                throw = exc
    except StopAsyncIteration:
        if task is not None:
            task.end()
        return
    except GeneratorExit:
        try:
            await agen.aclose()
        except BaseException as exc:
            if task is not None:
                _end_failed(task, exc)
            raise
        if task is not None:
            task.end()
        raise
    except BaseException as exc:
        if task is not None:
            _end_failed(task, exc)
        raise


def _end_failed(task: Task, exc: BaseException) -> None:
    from provkg.capture.workflow import _describe, _is_clean_exit

    if _is_clean_exit(exc):
        task.end()
    else:
        task.end("failed", _describe(exc))


def _reset(var: Any, token: Any) -> None:
    try:
        var.reset(token)
    except ValueError:  # set in another context: leave it
        pass


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
