"""Running a function's calls as tasks: the machinery of ``@capture.track`` and ``Workflow.track``.

Plain functions, ``async def`` functions, generators and async generators are all tracked for
as long as they run: a coroutine's task begins when it starts running and ends when it returns
or raises (``await``-ed to the end); a generator's task spans the whole iteration (it begins at
the first ``next`` and ends at exhaustion, or when it is closed or collected: ``break``). A task
is ``failed`` when the body raises (``CancelledError`` included), with the exception unchanged.
The rules (which run, which parent, how the result is named) are ``provkg.capture.track``'s.
"""

from __future__ import annotations

import functools
import inspect
import logging
import types
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, TypeVar

from provkg.capture.context import Run, _current_workflow, active_workflows, sole_active_workflow
from provkg.capture.exits import describe, is_clean_exit
from provkg.capture.report import report_once
from provkg.capture.task import Task, _current_task

__all__ = ["tracker"]

F = TypeVar("F", bound=Callable[..., Any])
#: results of a plain ``def`` that still have to run (a wrapped coroutine function, say)
_DEFERRED = (types.CoroutineType, types.GeneratorType, types.AsyncGeneratorType)


def tracker(transformation: str | Callable[..., Any] | None = None, *,
            generated: str | tuple[str, ...] | None = None, parent: Task | str | None = None,
            workflow: Run | None = None) -> Any:
    """``track(...)``: a decorator recording each call as a task (or, used bare, the decorated
    function)."""
    if callable(transformation):  # used bare: @track
        return tracker(workflow=workflow)(transformation)

    def decorate(fn: F) -> F:
        name: str = transformation if transformation else getattr(fn, "__name__", "function")
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
           kwargs: dict[str, Any], parent: Any, workflow: Run | None) -> Task | None:
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
    token, task._token = task._token, None  # no longer the current task out here
    if token is not None:
        _reset(_current_task, token)
    if type(pending) is types.CoroutineType:
        return _await(task, pending, generated)
    if type(pending) is types.GeneratorType:
        return _drive(task, pending, generated)
    return _drive_async(task, pending)


async def _await(task: Task, coroutine: Any, generated: Any) -> Any:
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
    if is_clean_exit(exc):
        task.end()
    else:
        task.end("failed", describe(exc))


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
