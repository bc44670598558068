"""Workflow runs and tasks: the user-facing capture API.

Every public method here is guarded: a failure inside provenance code is logged once per cause
and never reaches user code, while an exception raised by user code inside ``with`` blocks marks
the task and the workflow ``failed`` (with the message) and propagates unchanged.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from time import time as _now
from types import TracebackType
from typing import Any, TypeVar

from provkg.capture.emitter import Emitter
from provkg.capture.environment import capture_environment, default_agent
from provkg.capture.report import report_once
from provkg.capture.sink import Sink, open_sink
from provkg.capture.spool import DEFAULT_SPOOL, DEFAULT_SPOOL_BYTES, Spool
from provkg.capture.values import _PLAIN, snapshot_values

__all__ = ["workflow", "Workflow", "Task", "current_workflow", "current_task"]

T = TypeVar("T")
_MAX_MESSAGE = 4096
_current_workflow: ContextVar[Workflow | None] = ContextVar("provkg_workflow", default=None)
_current_task: ContextVar[Task | None] = ContextVar("provkg_task", default=None)


def current_workflow() -> Workflow | None:
    """The workflow whose ``with`` block (or ``begin()``) is active in this context."""
    return _current_workflow.get()


def current_task() -> Task | None:
    """The task whose ``with`` block is active in this context (decorated functions nest under it)."""
    return _current_task.get()


def workflow(name: str, *, sink: str | Sink, run_id: str | None = None, agent: str | None = None,
             flush_timeout: float = 5.0, spool: str | os.PathLike[str] | None = None,
             batch_size: int = 50, linger: float = 1.0, max_queue: int = 20_000,
             max_spool_bytes: int = DEFAULT_SPOOL_BYTES) -> Workflow:
    """Start capturing a workflow run.

    Args:
        name: the prospective workflow name (the ``workflow:`` of its spec).
        sink: ``file:DIR``, ``http(s)://HOST:PORT``, ``mqtt://HOST:PORT/TOPIC``, ``memory:``, or
            an object with ``send(events)`` and ``close()``.
        run_id: this run's id (default: a random 32-hex-digit id).
        agent: who runs it (default: ``$PROVKG_AGENT``, else the login name).
        flush_timeout: seconds ``end()`` (and interpreter exit) wait for delivery before
            spooling what is left.
        spool: the spool root for undeliverable batches (default ``$PROVKG_SPOOL`` or
            ``./provkg-spool``); created only when needed.
        batch_size, linger: a batch is sent at ``batch_size`` events or after ``linger`` s.
        max_queue: events kept in memory before spilling to the spool.
        max_spool_bytes: the spool's size limit (beyond it events are dropped and logged).

    Returns:
        A ``Workflow``; use it as a context manager or call ``begin()`` / ``end()``.

    >>> from provkg.capture import MemorySink
    >>> out = MemorySink()
    >>> with workflow("demo", sink=out) as wf:
    ...     with wf.task("train", used={"lr": 0.1}) as t:
    ...         t.generate(loss=0.5)
    >>> [(e["type"], e["event"]) for e in out.events]
    [('workflow', 'begin'), ('task', 'begin'), ('task', 'end'), ('workflow', 'end')]
    """
    return Workflow(name, sink=sink, run_id=run_id, agent=agent, flush_timeout=flush_timeout,
                    spool=spool, batch_size=batch_size, linger=linger, max_queue=max_queue,
                    max_spool_bytes=max_spool_bytes)


class _UnavailableSink:
    """Stands in for a sink that could not be opened: every batch goes to the spool."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def send(self, events: list[dict[str, Any]]) -> None:
        raise ConnectionError(self.reason)

    def close(self) -> None:
        pass


class Workflow:
    """One run of a prospective workflow. Create it with ``capture.workflow(...)``."""

    def __init__(self, name: str, *, sink: str | Sink, run_id: str | None = None,
                 agent: str | None = None, flush_timeout: float = 5.0,
                 spool: str | os.PathLike[str] | None = None, batch_size: int = 50,
                 linger: float = 1.0, max_queue: int = 20_000,
                 max_spool_bytes: int = DEFAULT_SPOOL_BYTES) -> None:
        self.name = _name(name, "workflow name")
        self.id = run_id if isinstance(run_id, str) and 0 < len(run_id) <= 900 else uuid.uuid4().hex
        if run_id is not None and self.id != run_id:
            report_once(("run_id", type(run_id)), "workflow run_id must be a non-empty string of at "
                        "most 900 characters; a random id is used instead")
        self.agent = agent if isinstance(agent, str) and agent else default_agent()
        self.status: str | None = None
        self._counter = itertools.count(1)
        self._used: dict[str, Any] = {}
        self._generated: dict[str, Any] = {}
        self._began = False
        self._ended = False
        self._sections: list[Task] = []
        self._token: Any = None
        try:
            opened: Sink = open_sink(sink)
        except Exception as exc:
            report_once(("sink-open", str(sink)[:80]), f"cannot open the sink {sink!r}: {exc}; "
                        "events are spooled for `provkg replay`")
            opened = _UnavailableSink(f"sink {sink!r} could not be opened: {exc}")
        root = Path(spool if spool is not None else os.environ.get("PROVKG_SPOOL", DEFAULT_SPOOL))
        self.emitter = Emitter(opened, Spool(root, _safe_dirname(self.id), max_bytes=max_spool_bytes),
                               batch_size=batch_size, linger=linger, max_queue=max_queue,
                               flush_timeout=flush_timeout, run_id=self.id)
        self._emit = self.emitter.emit

    @property
    def sink(self) -> Sink:
        """The sink events are delivered to."""
        return self.emitter.sink

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r} id={self.id}>"

    # -- lifecycle ------------------------------------------------------------------

    def begin(self) -> Workflow:
        """Record the start of the run (with agent and environment); idempotent."""
        if self._began:
            return self
        self._began = True
        try:
            event: dict[str, Any] = {"type": "workflow", "event": "begin", "id": self.id,
                                     "time": time.time(), "workflow": self.name,
                                     "environment": capture_environment()}
            if self.agent:
                event["agent"] = self.agent
            event["used"], self._used = self._used, {}
            self._emit(event)
            if _current_workflow.get() is None:
                self._token = _current_workflow.set(self)
        except Exception as exc:
            report_once(("wf-begin", type(exc)), f"recording the workflow begin failed: {exc!r}")
        return self

    def end(self, status: str = "finished", message: str | None = None) -> None:
        """Record the end of the run, deliver what is queued (at most ``flush_timeout`` s) and
        spool the rest; idempotent. ``status`` is ``"finished"`` or ``"failed"``."""
        if self._ended:
            return
        self._ended = True
        try:
            if not self._began:
                self.begin()
            if self._sections:  # sections whose loop was left by an exception or a break
                self._close_sections(None, status, message)
            self.status = status if status in ("finished", "failed") else "finished"
            event: dict[str, Any] = {"type": "workflow", "event": "end", "id": self.id,
                                     "time": time.time(), "workflow": self.name,
                                     "status": self.status}
            if message is not None:
                event["message"] = str(message)[:_MAX_MESSAGE]
            event["used"], event["generated"] = self._used, self._generated
            self._emit(event)
            if self._token is not None:
                try:
                    _current_workflow.reset(self._token)
                except ValueError:  # ended in another context than it began
                    _current_workflow.set(None)
                self._token = None
            self.emitter.close()
        except Exception as exc:
            report_once(("wf-end", type(exc)), f"recording the workflow end failed: {exc!r}")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued events are delivered (or spooled); True when none is left in memory."""
        try:
            return self.emitter.flush(timeout)
        except Exception as exc:
            report_once(("flush", type(exc)), f"flush failed: {exc!r}")
            return False

    def __enter__(self) -> Workflow:
        return self.begin()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None or _is_clean_exit(exc):
            self.end()
        else:
            self.end("failed", _describe(exc))

    # -- values of the run itself -----------------------------------------------------

    def use(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> Workflow:
        """Values the whole run used (e.g. its configuration): by name, or a mapping."""
        try:
            for part in (values or {}, named):
                snapshot_values(part, into=self._used, where=f"workflow {self.name!r}")
        except Exception as exc:
            report_once(("wf-use", type(exc)), f"workflow.use failed: {exc!r}")
        return self

    def generate(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> Workflow:
        """Values the whole run produced (by name, or a mapping); sent with its end event."""
        try:
            for part in (values or {}, named):
                snapshot_values(part, into=self._generated, where=f"workflow {self.name!r}")
        except Exception as exc:
            report_once(("wf-generate", type(exc)), f"workflow.generate failed: {exc!r}")
        return self

    # -- tasks ----------------------------------------------------------------------

    def task(self, transformation: str, *, parent: Task | str | None = None,
             index: int | None = None, used: Mapping[str, Any] | None = None,
             dependencies: Iterable[Task | str] | None = None) -> Task:
        """A task: one execution of ``transformation``; begins on ``with`` or ``begin()``.

        Args:
            transformation: the transformation's name in the workflow's spec.
            parent: the enclosing task (an epoch's training, a batch's epoch) or its id.
            index: the position of a section within its parent (epoch / batch number).
            used: input values by attribute name (scalars, lists, ``capture.ref(...)``).
            dependencies: tasks (or ids) this one waited for.
        """
        return Task(self, transformation, parent, index, used, dependencies)

    def sections(self, transformation: str, items: Iterable[T], *, parent: Task | str | None = None,
                 start: int = 0) -> Iterator[tuple[T, Task]]:
        """Loop over ``items`` with one section task per item (``index`` = its position).

        >>> from provkg.capture import MemorySink
        >>> with workflow("demo", sink=MemorySink()) as wf, wf.task("training") as training:
        ...     for epoch, section in wf.sections("epoch", range(2), parent=training):
        ...         section.generate(loss=1.0 / (epoch + 1))
        """
        for position, item in enumerate(items, start):
            section = self.task(transformation, parent=parent, index=position).begin()
            self._sections.append(section)
            try:
                yield item, section
            except GeneratorExit:
                # the loop was left (break or an exception): we cannot tell which from here, so
                # the section stays open until its parent (or the run) ends, and takes its status
                section._left_at = time.time()
                raise
            section.end()
            self._forget_section(section)

    def _forget_section(self, section: Task) -> None:
        try:
            self._sections.remove(section)
        except ValueError:
            pass

    def _close_sections(self, parent: Task | None, status: str, message: str | None) -> None:
        for section in [s for s in self._sections if parent is None or s.parent is parent
                        or s.parent == parent.id]:
            section.end(status, message)
            self._forget_section(section)

    def track(self, transformation: str | None = None, *, generated: str | tuple[str, ...] | None = None,
              parent: Task | str | None = None) -> Any:
        """Decorator: each call is a task; arguments -> used, the return value -> generated.

        See ``provkg.capture.track`` for the rules.
        """
        from provkg.capture.decorator import track

        return track(transformation, generated=generated, parent=parent, workflow=self)


class Task:
    """One execution of a transformation. Create it with ``Workflow.task(...)``."""

    __slots__ = ("workflow", "id", "transformation", "parent", "index", "dependencies", "status",
                 "_used", "_generated", "_state", "_token", "_left_at")

    def __init__(self, workflow: Workflow, transformation: str, parent: Task | str | None,
                 index: int | None, used: Mapping[str, Any] | None,
                 dependencies: Iterable[Task | str] | None) -> None:
        self.workflow = workflow
        self.id = f"{workflow.id}.{next(workflow._counter)}"
        self.transformation = transformation
        self.parent = parent
        self.index = index
        self.dependencies = dependencies
        self.status: str | None = None
        self._used: dict[str, Any] = {}
        self._generated: dict[str, Any] = {}
        self._state = 0  # 0 created, 1 begun, 2 ended
        self._token: Any = None
        self._left_at: float | None = None
        if used:
            # one C-level pass over the types: immutable scalars need only a shallow copy
            if type(used) is dict and _PLAIN.issuperset(map(type, used.values())):
                self._used = used.copy()
            else:
                self._use_mapping(used)

    def __repr__(self) -> str:
        return f"<Task {self.transformation!r} id={self.id}>"

    def begin(self) -> Task:
        """Record the task's start and the values used so far; idempotent."""
        if self._state:
            return self
        self._state = 1
        try:
            wf = self.workflow
            if not wf._began:
                wf.begin()
            event: dict[str, Any] = {"type": "task", "event": "begin", "id": self.id,
                                     "time": _now(), "workflow_id": wf.id,
                                     "transformation": self.transformation}
            if type(self.transformation) is not str or not self.transformation:
                event["transformation"] = self.transformation = _name(self.transformation,
                                                                      "transformation")
            # keep ids, not Task objects: a chain of dependencies must not keep every task alive
            if self.parent is not None:
                self.parent = self.parent if type(self.parent) is str else _task_id(self.parent)
                if self.parent:
                    event["parent"] = self.parent
            if self.index is not None:
                if type(self.index) is int:
                    event["index"] = self.index
                else:
                    report_once(("index", type(self.index)), "task index must be an int; ignored")
            if self.dependencies is not None:
                dependencies = [d if type(d) is str else d.id if type(d) is Task else _task_id(d)
                                for d in self.dependencies]
                if None in dependencies:
                    dependencies = [d for d in dependencies if d]
                self.dependencies = dependencies
                if dependencies:
                    event["dependencies"] = dependencies
            event["used"], self._used = self._used, {}
            wf._emit(event)
        except Exception as exc:
            report_once(("task-begin", type(exc)), f"recording a task begin failed: {exc!r}")
        return self

    def end(self, status: str = "finished", message: str | None = None) -> None:
        """Record the task's end with the values generated (and used after ``begin``); idempotent."""
        if self._state == 2:
            return
        try:
            if self._state == 0:
                self.begin()
            self._state = 2
            wf = self.workflow
            if wf._sections:
                wf._close_sections(self, status, message)
            self.status = status if status == "finished" or status == "failed" else "finished"
            event: dict[str, Any] = {"type": "task", "event": "end", "id": self.id,
                                     "time": self._left_at or _now(), "workflow_id": wf.id,
                                     "transformation": self.transformation, "status": self.status,
                                     "used": self._used, "generated": self._generated}
            if message is not None:
                event["message"] = str(message)[:_MAX_MESSAGE]
            self._used, self._generated = {}, {}
            wf._emit(event)
        except Exception as exc:
            report_once(("task-end", type(exc)), f"recording a task end failed: {exc!r}")

    def use(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> None:
        """Input values by attribute name (sent with ``begin``, or with ``end`` once begun):
        ``use(lr=0.1)``, or a mapping ``use(config)`` (copied now: later changes to it are
        not recorded)."""
        try:
            self._used = self._merge(self._used, values, named)
        except Exception as exc:
            report_once(("task-use", type(exc)), f"task.use failed: {exc!r}")

    def generate(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> None:
        """Output values by attribute name (sent with ``end``): ``generate(loss=0.3)``, or a
        mapping ``generate(metrics)`` (copied now)."""
        try:
            self._generated = self._merge(self._generated, values, named)
        except Exception as exc:
            report_once(("task-generate", type(exc)), f"task.generate failed: {exc!r}")

    def _merge(self, current: dict[str, Any], values: Mapping[str, Any] | None,
               named: dict[str, Any]) -> dict[str, Any]:
        """``current`` with ``values`` and ``named`` added as a snapshot (the dict to keep)."""
        if values is not None:
            if not current and not named and type(values) is dict and \
                    _PLAIN.issuperset(map(type, values.values())):
                return values.copy()  # immutable scalars: a shallow copy is a snapshot
            snapshot_values(values, into=current, where=f"task {self.transformation!r}")
        if not current and _PLAIN.issuperset(map(type, named.values())):
            return named  # a fresh dict of immutable scalars: nothing to copy
        if named:
            snapshot_values(named, into=current, where=f"task {self.transformation!r}")
        return current

    def _use_mapping(self, values: Mapping[Any, Any]) -> None:
        try:
            snapshot_values(values, into=self._used, where=f"task {self.transformation!r}")
        except Exception as exc:
            report_once(("task-used", type(exc)), f"task used= must be a mapping of attribute "
                        f"names to values; ignored ({exc!r})")

    def __enter__(self) -> Task:
        self.begin()
        try:
            self._token = _current_task.set(self)
        except Exception:
            self._token = None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            try:
                _current_task.reset(self._token)
            except ValueError:
                pass
            self._token = None
        if exc is None or _is_clean_exit(exc):
            self.end()
        else:
            self.end("failed", _describe(exc))


# -- small helpers --------------------------------------------------------------------


def _task_id(task: object) -> str | None:
    task_id = getattr(task, "id", None)
    if isinstance(task_id, str) and task_id:
        return task_id
    report_once(("task-ref", type(task)), f"parent / dependencies take Tasks or task ids (str), "
                f"not {type(task).__name__}; ignored")
    return None



def _name(value: object, what: str) -> str:
    if isinstance(value, str) and 0 < len(value) <= 256:
        return value
    text = str(value)[:256] if value not in (None, "") else "unnamed"
    report_once(("name", what), f"{what} must be a non-empty string of at most 256 characters; "
                f"using {text!r}")
    return text


def _safe_dirname(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)[:200] or "run"


def _is_clean_exit(exc: BaseException) -> bool:
    return isinstance(exc, (SystemExit, GeneratorExit)) and getattr(exc, "code", None) in (0, None)


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails must not replace the user's exception
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
