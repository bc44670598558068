"""Tasks: one execution of a transformation within a run, and the current task of a context.

A task records a ``task begin`` event (the values used so far) and a ``task end`` event (its
status, the values generated, and those used after its begin). Every public method is guarded:
a failure inside provenance code is logged once per cause and never reaches user code, while an
exception raised by user code inside a task's ``with`` block marks it ``failed`` (with the
message) and propagates unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from time import time as _now
from types import TracebackType
from typing import Any

from provkg.capture.arguments import fit_name, message_text, status_message, wire_status
from provkg.capture.context import Run
from provkg.capture.environment import process_environment
from provkg.capture.exits import describe, is_clean_exit
from provkg.capture.report import report_once
from provkg.capture.values import _INT_BOUND as _INDEX_BOUND
from provkg.capture.values import _PLAIN, MAX_ID, MAX_NAME, fit_id, fit_index, snapshot_values

__all__ = ["Task", "TaskState", "current_task", "set_current", "reset_current"]


class TaskState(enum.Enum):
    """Where a task is in its life; each step happens once (``begin`` / ``end`` are idempotent)."""

    CREATED = "created"
    BEGUN = "begun"
    ENDED = "ended"


# module-level names: a member looked up on the Enum class costs ten times more, twice a task
_CREATED, _BEGUN, _ENDED = TaskState.CREATED, TaskState.BEGUN, TaskState.ENDED

#: the task whose ``with`` block (or ``Workflow.sections`` loop body) runs in this context
_current_task: ContextVar[Task | None] = ContextVar("provkg_task", default=None)


def current_task() -> Task | None:
    """The task whose ``with`` block is active in this context (decorated functions nest under it)."""
    return _current_task.get()


def set_current(task: Task) -> Any:
    """Make ``task`` the current task (the default parent of tracked calls); a token for
    :func:`reset_current`, or None when that failed."""
    try:
        return _current_task.set(task)
    except Exception:
        return None


def reset_current(token: Any) -> None:
    """Undo :func:`set_current`; nothing when its token belongs to another context (a
    section loop closed elsewhere)."""
    if token is None:
        return
    try:
        _current_task.reset(token)
    except (ValueError, RuntimeError):
        pass


def _at(at: float | None) -> float:
    """``at`` when it is a finite time in seconds, else now (a bad one is logged, not raised)."""
    if at is None:
        return _now()
    if type(at) in (float, int) and 0 <= at < 1e11:
        return float(at)
    report_once(("task-at", type(at)), f"a task time must be seconds since the epoch, got {at!r}; now is used")
    return _now()


class Task:
    """One execution of a transformation. Create it with ``Workflow.task(...)``."""

    __slots__ = ("workflow", "id", "transformation", "parent", "index", "dependencies", "status",
                 "roles", "_used", "_generated", "_state", "_token", "_left_at", "_begun_used")

    def __init__(self, workflow: Run, transformation: str, parent: Task | str | None,
                 index: int | None, used: Mapping[str, Any] | None,
                 dependencies: Iterable[Task | str] | None) -> None:
        self.workflow = workflow
        self.id = f"{workflow._id_prefix}{next(workflow._counter)}"
        self.transformation = transformation
        self.parent = parent
        self.index = index
        self.dependencies = dependencies
        self.status: str | None = None
        #: the begin event's ``kind`` / ``granularity`` (``Workflow.task(kind=...)``), or None
        self.roles: dict[str, Any] | None = None
        self._used: dict[str, Any] = {}
        self._generated: dict[str, Any] = {}
        self._state = _CREATED
        self._token: Any = None
        self._left_at: float | None = None
        self._begun_used: dict[str, Any] | None = None  # what begin sent, while the task runs
        if used is not None:
            # one C-level pass over the types: immutable scalars need only a shallow copy
            if type(used) is dict and _PLAIN.issuperset(map(type, used.values())):
                self._used = used.copy()
            else:
                self._use_mapping(used)

    def __repr__(self) -> str:
        return f"<Task {self.transformation!r} id={self.id}>"

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """Pickled (e.g. as ``parent=`` for a spawned worker) also inside its ``with`` block:
        the context token of that block stays in this process."""
        state = {name: getattr(self, name) for name in self.__slots__ if hasattr(self, name)}
        state["_token"] = None
        return None, state

    def begin(self, *, at: float | None = None) -> Task:
        """Record the task's start and the values used so far; idempotent.

        ``at``: when it began (``time.time()`` seconds), for a task recorded after the fact
        (the callbacks record a run of batches at once); default now."""
        if self._state is not _CREATED:
            return self
        self._state = _BEGUN
        try:
            wf = self.workflow
            if not wf._began:
                wf.begin()
            event: dict[str, Any] = {"type": "task", "event": "begin", "id": self.id,
                                     "time": _at(at), "workflow_id": wf.id,
                                     "transformation": self.transformation}
            if type(self.transformation) is not str or not 0 < len(self.transformation) <= MAX_NAME:
                event["transformation"] = self.transformation = fit_name(self.transformation,
                                                                         "transformation")
            # keep ids, not Task objects: a chain of dependencies must not keep every task alive;
            # a bad parent, index or dependency is left out (logged), never the begin event
            parent = self.parent
            if parent is not None:
                if type(parent) is Task:
                    self.parent = parent.id  # a task's own id is always a valid one
                elif type(parent) is not str or not 0 < len(parent) <= MAX_ID:
                    self.parent = _task_id(parent, "parent")
                if self.parent:
                    event["parent"] = self.parent
            if self.index is not None:
                if type(self.index) is not int or not -_INDEX_BOUND < self.index < _INDEX_BOUND:
                    self.index = fit_index(self.index)
                if self.index is not None:
                    event["index"] = self.index
            if self.dependencies is not None:
                self.dependencies = _dependency_ids(self.dependencies)
                if self.dependencies:
                    event["dependencies"] = self.dependencies
            if self.roles is not None:
                event.update(self.roles)
            if not wf.owner:  # where it runs: the run's own environment names the owner's
                event["environment"] = process_environment()
            event["used"] = self._begun_used = self._used
            self._used = {}
            wf._emit(event)
            wf._open_tasks[self] = None
        except Exception as exc:
            report_once(("task-begin", type(exc)), f"recording a task begin failed: {exc!r}")
        return self

    def end(self, status: str = "finished", message: str | None = None, *, at: float | None = None) -> None:
        """Record the task's end with the values generated (and used after ``begin``); idempotent.

        ``at``: when it ended (``time.time()`` seconds; see :meth:`begin`); default now."""
        if self._state is _ENDED:
            return
        try:
            if self._state is _CREATED:
                self.begin(at=at)
            self._state = _ENDED
            self._begun_used = None
            wf = self.workflow
            wf._open_tasks.pop(self, None)
            if wf._sections:
                wf._close_sections(self, status, message)
            self.status, message = wire_status(status), status_message(status, message)
            message = None if message is None else message_text(message)
            status = self.status
            event: dict[str, Any] = {"type": "task", "event": "end", "id": self.id,
                                     "time": self._left_at or _at(at), "workflow_id": wf.id,
                                     "transformation": self.transformation, "status": self.status,
                                     "used": self._used, "generated": self._generated}
            if message is not None:
                event["message"] = message
            self._used, self._generated = {}, {}
            wf._emit(event)
        except Exception as exc:
            report_once(("task-end", type(exc)), f"recording a task end failed: {exc!r}")

    def use(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> None:
        """Input values by attribute name (sent with ``begin``, or with ``end`` once begun):
        ``use(lr=0.1)``, or a mapping ``use(config)`` (copied now: later changes to it are
        not recorded)."""
        if self._state is _ENDED:
            report_once(("use-after-end", self.transformation), f"task {self.transformation!r}: "
                        "values used after its end are not recorded (call use before end)")
            return
        try:
            self._used = self._merge(self._used, values, named)
            begun = self._begun_used
            if begun:
                self._check_used_again(begun)
        except Exception as exc:
            report_once(("task-use", type(exc)), f"task.use failed: {exc!r}")

    def _check_used_again(self, begun: dict[str, Any]) -> None:
        """Say so when a value sent with ``begin`` is used again with another value: both
        would be stored under the one id (``<task>/used/<name>``), the first not told apart."""
        for name, value in self._used.items():
            if name in begun and not _same(begun[name], value):
                report_once(("used-again", self.transformation, name),
                            f"task {self.transformation!r}: {name!r} was recorded as used at its "
                            "begin with another value; the store keeps both under one id. To "
                            "record a change, use another name (e.g. with an adaptation task) "
                            "or generate the new value")

    def generate(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> None:
        """Output values by attribute name (sent with ``end``): ``generate(loss=0.3)``, or a
        mapping ``generate(metrics)`` (copied now)."""
        if self._state is _ENDED:
            report_once(("generate-after-end", self.transformation), f"task {self.transformation!r}: "
                        "values generated after its end are not recorded (call generate before end)")
            return
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
        self._token = set_current(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        reset_current(self._token)
        self._token = None
        if exc is None or is_clean_exit(exc):
            self.end()
        else:
            self.end("failed", describe(exc))


def _task_id(task: object, what: str) -> str | None:
    """The id of a ``parent`` / ``dependencies`` entry (a Task, an id, an object with an ``id``),
    or None (logged) when there is no id the wire format takes."""
    if type(task) is str:
        return fit_id(task, what)
    try:
        task_id = task.id if type(task) is Task else getattr(task, "id", None)
    except Exception:  # a property that raises
        task_id = None
    if isinstance(task_id, str):
        return fit_id(task_id, what)
    report_once(("task-ref", type(task)), f"parent / dependencies take Tasks or task ids (str), "
                f"not {type(task).__name__}; ignored")
    return None


def _dependency_ids(dependencies: object) -> list[str]:
    """The ids of ``dependencies=``: bad entries are left out (logged); an iterable that raises
    midway keeps the entries read until then. Never raises."""
    ids: list[str] = []
    try:
        if isinstance(dependencies, (str, Task)):
            dependencies = [dependencies]
        for d in dependencies:  # type: ignore[attr-defined]
            task_id = d if type(d) is str and 0 < len(d) <= MAX_ID else _task_id(d, "dependencies")
            if task_id:
                ids.append(task_id)
    except Exception as exc:
        report_once(("dependencies", type(exc)), f"task dependencies=: {exc!r}; "
                    f"{'the entries before it are kept' if ids else 'ignored'}")
    return ids


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except Exception:  # an array's ambiguous truth value, a broken __eq__
        return False
