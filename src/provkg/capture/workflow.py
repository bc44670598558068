"""Workflow runs and tasks: the user-facing capture API.

Every public method here is guarded: a failure inside provenance code is logged once per cause
and never reaches user code, while an exception raised by user code inside ``with`` blocks marks
the task and the workflow ``failed`` (with the message) and propagates unchanged.

Processes. The process that creates a workflow *owns* the run: it alone records the run's begin
and end. Another process can record tasks into the same run:

* a child made by ``os.fork()`` (``multiprocessing`` with the ``fork`` start method, ``Pool``
  workers, PyTorch ``DataLoader`` workers) continues with the workflows that were open in the
  parent (``os.register_at_fork``): it gets a sender of its own (the parent's thread, queue,
  files and connections are left alone), and
* a process that received the ``Workflow`` object pickled (a ``spawn`` child:
  ``Process(target=f, args=(wf,))``, ``pool.map(f, [(wf, x), ...])``, ``Pool(initializer=...,
  initargs=(wf,))``) gets a view of the run.

Such a process mints task ids ``<run id>.<pid>-<6 hex digits>.<n>`` (deterministic within the
process, unique across processes even when a pid is reused or on another host), never records
the run's begin or end, and makes each event durable before ``emit`` returns, since it may leave
through ``os._exit`` or be terminated right after a task (see ``emitter``).

Exits. While a workflow this process owns is open, and the process's SIGTERM handler is the
default one (set from the main thread), a SIGTERM (SLURM, Kubernetes) ends the open tasks and
the run ``failed`` with "terminated by SIGTERM", flushes (at most ``flush_timeout``, spooling the
rest), restores the default handler and re-raises the signal (exit status 143); a SIGHUP (a
closed terminal or ssh session) likewise, "terminated by SIGHUP" (129). Other processes
(forked children, workers) keep the default handler: their events are on disk already, and a
Python-level handler could keep an idle ``Pool`` worker from dying (see ``_activate``). At
interpreter exit, a workflow still open is ended the same way, with a message saying the process
exited before ``end()`` (and the uncaught exception, if there was one); in a process that does
not own the run, only its own open tasks are ended.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import mmap
import numbers
import os
import pickle
import signal
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from time import time as _now
from types import TracebackType
from typing import Any, TypeVar

from provkg.capture import emitter as _emitter_module
from provkg.capture.emitter import Emitter
from provkg.capture.environment import capture_environment, default_agent, process_environment
from provkg.capture.report import report_once, shown_url
from provkg.capture.sink import Sink, UnavailableSink
from provkg.capture.sink_urls import open_sink
from provkg.capture.spool import DEFAULT_SPOOL, DEFAULT_SPOOL_BYTES, Spool
from provkg.capture import values as _values
from provkg.capture.values import _INT_BOUND as _INDEX_BOUND
from provkg.capture.values import _PLAIN, MAX_ID, MAX_NAME, fit_id, fit_index, report_unsent_domains, snapshot_values

__all__ = ["workflow", "Workflow", "Task", "current_workflow", "current_task",
           "sole_active_workflow", "active_workflows"]

T = TypeVar("T")
_MAX_MESSAGE = 4096
_current_workflow: ContextVar[Workflow | None] = ContextVar("provkg_workflow", default=None)
_current_task: ContextVar[Task | None] = ContextVar("provkg_task", default=None)
#: every Workflow of this process that may still record (to continue them in a forked child)
_workflows: weakref.WeakSet[Workflow] = weakref.WeakSet()
#: the workflows this process records into now: begun (or received) and not ended
_active: dict[Workflow, None] = {}


def _shared_flag() -> Any:
    """One zeroed byte of memory a forked child shares with this process (None if none)."""
    try:
        return mmap.mmap(-1, 1)
    except (OSError, ValueError):  # pragma: no cover
        return None


def current_workflow() -> Workflow | None:
    """The workflow whose ``with`` block (or ``begin()``) is active in this context; failing
    that (a thread of a pool, a worker process), the only workflow active in this process.
    With several active and none in this context, None: pass the workflow explicitly."""
    wf = _current_workflow.get()
    if wf is None or wf._ended:  # (an outer run ended while an inner block was active)
        return sole_active_workflow()
    return wf


def sole_active_workflow() -> Workflow | None:
    """The workflow active in this process when there is exactly one, else None."""
    try:
        (wf,) = _active
    except (ValueError, RuntimeError):
        return None
    return wf


_values.current_run = current_workflow  # refs remember the run they were made in


def active_workflows() -> int:
    """How many workflows this process records into now."""
    return len(_active)


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
        max_spool_bytes: the size limit of this run's spool folder (beyond it events are
            dropped and logged); per run: runs sharing a spool root may take this much each.

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


class Workflow:
    """One run of a prospective workflow. Create it with ``capture.workflow(...)``."""

    def __init__(self, name: str, *, sink: str | Sink, run_id: str | None = None,
                 agent: str | None = None, flush_timeout: float = 5.0,
                 spool: str | os.PathLike[str] | None = None, batch_size: int = 50,
                 linger: float = 1.0, max_queue: int = 20_000,
                 max_spool_bytes: int = DEFAULT_SPOOL_BYTES, _owner: bool = True) -> None:
        self.name = _name(name, "workflow name")
        self.id = run_id if isinstance(run_id, str) and 0 < len(run_id) <= 900 else uuid.uuid4().hex
        if run_id is not None and self.id != run_id:
            report_once(("run_id", type(run_id)), "workflow run_id must be a non-empty string of at "
                        "most 900 characters; a random id is used instead")
        if agent is not None and not (isinstance(agent, str) and 0 < len(agent) <= MAX_NAME):
            report_once(("agent", type(agent)), "workflow agent must be a non-empty string of at "
                        f"most {MAX_NAME} characters; the default agent is recorded instead")
            agent = None
        self.agent = agent if agent else default_agent()
        self.status: str | None = None
        #: whether this process owns the run (records its begin and end); see the module doc
        self.owner = _owner
        self._counter = itertools.count(1)
        self._id_prefix = f"{self.id}." if _owner else f"{self.id}.{_process_tag()}."
        self._open_tasks: dict[Task, None] = {}  # begun, not ended (ended at SIGTERM / exit)
        self._sink_arg = sink if isinstance(sink, str) else None
        self._used: dict[str, Any] = {}
        self._generated: dict[str, Any] = {}
        self._began = False
        self._ended = False
        self._sections: list[Task] = []
        self._token: Any = None
        #: one byte shared with the processes forked while the run is open, set when the owner
        #: ends it: else a Pool created in one run and reused in the next records into the
        #: ended run
        self._end_flag = _shared_flag() if _owner else None
        try:
            opened: Sink = open_sink(sink)
        except Exception as exc:
            shown = repr(shown_url(sink[:200])) if isinstance(sink, str) else type(sink).__name__
            reason = shown_url(str(exc)) if isinstance(sink, str) else exc
            report_once(("sink-open", shown[:80]), f"cannot open the sink {shown}: {reason}; "
                        "events are spooled for `provkg replay`")
            opened = UnavailableSink(f"sink {shown} could not be opened: {reason}")
        default_root = os.environ.get("PROVKG_SPOOL", DEFAULT_SPOOL)
        try:
            root = Path(spool if spool is not None else default_root)
        except TypeError:
            report_once(("spool-arg", type(spool)), f"workflow spool= must be a folder (str or "
                        f"Path), not {type(spool).__name__}; using {default_root}")
            root = Path(default_root)
        max_spool_bytes = _setting(max_spool_bytes, DEFAULT_SPOOL_BYTES, "max_spool_bytes")
        self.emitter = Emitter(opened, Spool(root, _safe_dirname(self.id), max_bytes=max_spool_bytes),
                               batch_size=_setting(batch_size, 50, "batch_size"),
                               linger=_setting(linger, 1.0, "linger"),
                               max_queue=_setting(max_queue, 20_000, "max_queue"),
                               flush_timeout=_setting(flush_timeout, 5.0, "flush_timeout"),
                               run_id=self.id, durable=not _owner)
        self._emit = self.emitter.emit
        _workflows.add(self)
        if not _owner:  # a view of a run begun elsewhere: it records tasks from now on
            self._began = True
            _activate(self)

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
            _activate(self)
        except Exception as exc:
            report_once(("wf-begin", type(exc)), f"recording the workflow begin failed: {exc!r}")
        return self

    def end(self, status: str = "finished", message: str | None = None) -> None:
        """Record the end of the run, deliver what is queued (at most ``flush_timeout`` s) and
        spool the rest; idempotent. ``status`` is ``"finished"`` or ``"failed"``.

        In a process that does not own the run (see the module docstring) this records no
        event: it delivers this process's events and stops recording here."""
        if self._ended:
            return
        self._ended = True
        try:
            if self._end_flag is not None:
                self._end_flag[0] = 1
            if not self._began:
                self.begin()
            status, message = _status(status), _status_message(status, message)
            message = None if message is None else _text(message)
            if self._sections:  # sections whose loop was left by an exception or a break
                self._close_sections(None, status, message)
            # tasks begun and never ended (newest first): failed, with the run's reason if any
            reason = message if status == "failed" and message else \
                "the workflow ended while this task was open"
            for task in reversed(list(self._open_tasks)):
                task.end("failed", reason)
            if self.owner:
                self.status = status
                event: dict[str, Any] = {"type": "workflow", "event": "end", "id": self.id,
                                         "time": time.time(), "workflow": self.name,
                                         "status": self.status}
                if message is not None:
                    event["message"] = message
                event["used"], event["generated"] = self._used, self._generated
                self._emit(event)
            if self._token is not None:
                if _current_workflow.get() is self:  # not when an inner run's block is active
                    try:
                        _current_workflow.reset(self._token)
                    except ValueError:  # ended in another context than it began
                        _current_workflow.set(None)
                self._token = None
            _deactivate(self)
            # in a forked child too, for the refs made there (the parent's stay the parent's)
            report_unsent_domains(self, last=not _active)
            self.emitter.close(adopt=self.owner)
        except Exception as exc:
            report_once(("wf-end", type(exc)), f"recording the workflow end failed: {exc!r}")

    # -- other processes --------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled, a workflow becomes a view of the same run in the receiving process (see the
        module docstring); in this process, unpickling gives this very object back."""
        return (_receive, (self._portable_state(),))

    def _portable_state(self) -> dict[str, Any]:
        sink: Any = self._sink_arg
        if sink is None:
            try:
                sink = pickle.dumps(self.emitter.sink)
            except Exception:  # an object of the user's that cannot travel: the view spools
                sink = None
        emitter = self.emitter
        return {"name": self.name, "id": self.id, "agent": self.agent, "sink": sink,
                "sink_type": type(emitter.sink).__name__,
                "spool": os.path.abspath(emitter.spool.root),
                "flush_timeout": emitter.flush_timeout,
                "batch_size": emitter.batch_size, "linger": emitter.linger,
                "max_queue": emitter.max_queue, "max_spool_bytes": emitter.spool.max_bytes}

    def _continue_in_child(self) -> None:
        """Right after ``fork``, in the child: record into the run as a non-owner, through a
        sender of this process's own (no thread is started here; the parent's are gone)."""
        parent_sink = self.emitter.sink
        try:
            forked = getattr(parent_sink, "forked", None)
            sink: Sink = forked() if callable(forked) else UnavailableSink(
                f"the sink {type(parent_sink).__name__} cannot be shared with a forked child "
                "(it has no forked() method)")
        except Exception as exc:
            sink = UnavailableSink(f"the sink {type(parent_sink).__name__} could not be "
                                   f"reopened in a forked child: {exc!r}")
        self.emitter = self.emitter.child(sink)
        self._emit = self.emitter.emit
        if self._end_flag is not None:
            self._emit = self._emit_while_open
        self.owner = False
        self._began = True
        self._counter = itertools.count(1)
        self._id_prefix = f"{self.id}.{_process_tag()}."
        for task in self._open_tasks:  # the parent's tasks: the parent ends them
            task._state = 2
        self._open_tasks = {}
        self._sections = []

    def _emit_while_open(self, event: dict[str, Any]) -> None:
        """A forked child's emit: nothing more once the owner has ended the run."""
        if not self._end_flag[0]:  # type: ignore[index]
            self.emitter.emit(event)
            return
        report_once(("ended-in-owner", self.id), (
            f"run {self.id!r} was ended by the process that owns it, and this process "
            f"(pid {os.getpid()}) was forked while it was open (a pool created inside an earlier "
            "run?): what it captures now is not recorded into the ended run. Create the pool "
            "inside the run, or pass the run to the workers (a workflow pickles)"))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued events are delivered (or spooled); True when none is left in memory."""
        try:
            return self.emitter.flush(timeout)
        except Exception as exc:
            report_once(("flush", type(exc)), f"flush failed: {exc!r}")
            return False

    def __enter__(self) -> Workflow:
        self.begin()
        # the innermost `with` is the current run, even inside another run's block
        if _current_workflow.get() is not self and not self._ended:
            try:
                self._token = _current_workflow.set(self)
            except Exception:
                self._token = None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None or _is_clean_exit(exc):
            self.end()
        else:
            self.end("failed", _describe(exc))

    # -- values of the run itself -----------------------------------------------------

    def use(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> Workflow:
        """Values the whole run used (e.g. its configuration): by name, or a mapping. Recorded
        by the process that owns the run (with its begin or end)."""
        if not self.owner:
            _not_here("use")
        if self._too_late("use"):
            return self
        try:
            for part in (values or {}, named):
                snapshot_values(part, into=self._used, where=f"workflow {self.name!r}")
        except Exception as exc:
            report_once(("wf-use", type(exc)), f"workflow.use failed: {exc!r}")
        return self

    def _too_late(self, verb: str) -> bool:
        """Whether the run has ended (logged once): its values went with its end event, and
        nothing would send these."""
        if self._ended:
            report_once((f"wf-{verb}-ended", self.id), f"workflow {self.name!r}: {verb}() after "
                        "the run ended is not captured (the run's values go with its end "
                        "event); record them before the run ends, or on a task")
        return self._ended

    def generate(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> Workflow:
        """Values the whole run produced (by name, or a mapping); sent with its end event, by
        the process that owns the run."""
        if not self.owner:
            _not_here("generate")
        if self._too_late("generate"):
            return self
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
            # the section is the current task in the loop's body, as in a ``with`` block:
            # tracked functions called there nest under it
            token = _set_current(section)
            try:
                yield item, section
            except GeneratorExit:
                # the loop was left (break or an exception): we cannot tell which from here, so
                # the section stays open until its parent (or the run) ends, and takes its status
                section._left_at = time.time()
                raise
            finally:
                _reset_current(token)
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
                 "_used", "_generated", "_state", "_token", "_left_at", "_begun_used")

    def __init__(self, workflow: Workflow, transformation: str, parent: Task | str | None,
                 index: int | None, used: Mapping[str, Any] | None,
                 dependencies: Iterable[Task | str] | None) -> None:
        self.workflow = workflow
        self.id = f"{workflow._id_prefix}{next(workflow._counter)}"
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
            if type(self.transformation) is not str or not 0 < len(self.transformation) <= MAX_NAME:
                event["transformation"] = self.transformation = _name(self.transformation,
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
            if not wf.owner:  # where it runs: the run's own environment names the owner's
                event["environment"] = process_environment()
            event["used"] = self._begun_used = self._used
            self._used = {}
            wf._emit(event)
            wf._open_tasks[self] = None
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
            self._begun_used = None
            wf = self.workflow
            wf._open_tasks.pop(self, None)
            if wf._sections:
                wf._close_sections(self, status, message)
            self.status, message = _status(status), _status_message(status, message)
            message = None if message is None else _text(message)
            status = self.status
            event: dict[str, Any] = {"type": "task", "event": "end", "id": self.id,
                                     "time": self._left_at or _now(), "workflow_id": wf.id,
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
        if self._state == 2:
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
        if self._state == 2:
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
        self._token = _set_current(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _reset_current(self._token)
        self._token = None
        if exc is None or _is_clean_exit(exc):
            self.end()
        else:
            self.end("failed", _describe(exc))


# -- small helpers --------------------------------------------------------------------


def _set_current(task: Task) -> Any:
    """Make ``task`` the current task (the default parent of tracked calls); a token for
    :func:`_reset_current`, or None when that failed."""
    try:
        return _current_task.set(task)
    except Exception:
        return None


def _reset_current(token: Any) -> None:
    """Undo :func:`_set_current`; nothing when its token belongs to another context (a
    section loop closed elsewhere)."""
    if token is None:
        return
    try:
        _current_task.reset(token)
    except (ValueError, RuntimeError):
        pass


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


#: the words an ``end(status)`` may use for each of the wire format's two statuses
_FINISHED = frozenset({"finished", "finish", "success", "succeeded", "successful", "ok", "done",
                       "completed", "complete"})


def _status(status: object) -> str:
    """The wire status for what the caller said: ``finished`` for the success words (any
    case), ``failed`` for anything else, with a warning when the word was not ``failed``-like.
    Never raises."""
    if isinstance(status, str) and (status == "finished" or status == "failed"):
        return str(status)
    said = _text(status).strip()
    word = said.lower()
    if word in _FINISHED:
        return "finished"
    if word not in ("failed", "failure", "fail", "error", "errored", "killed", "cancelled",
                    "canceled", "aborted", "timeout", "crashed"):
        report_once(("status", word[:40]), f"end status {said[:40]!r} is neither "
                    "'finished' nor 'failed'; recorded as 'failed'")  # as the caller wrote it
    return "failed"


def _status_message(status: object, message: object) -> str | None:
    """Keep the caller's own status word when it was mapped and no message says more."""
    if message is None and not (isinstance(status, str) and status in ("finished", "failed")):
        return f"ended with status {_text(status)[:80]!r}"
    return message  # type: ignore[return-value]


def _name(value: object, what: str) -> str:
    """A name the wire format takes (a non-empty string of at most ``MAX_NAME`` characters):
    ``value``, else its text cut to ``MAX_NAME`` characters, else ``"unnamed"`` (logged).
    Never raises."""
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME:
        return value
    try:
        text = str(value)[:MAX_NAME] if value is not None else ""
    except Exception:  # an object whose __str__ raises
        text = ""
    text = text or "unnamed"
    report_once(("name", what), f"{what} must be a non-empty string of at most {MAX_NAME} characters; "
                f"using {text[:80]!r}")
    return text


def _setting(value: Any, default: T, what: str) -> T:
    """A numeric setting of ``workflow(...)``: ``value`` when it is a number of 0 or more
    (an int where ``default`` is one), else ``default`` (logged)."""
    kind = type(default)
    try:
        if isinstance(value, numbers.Integral if kind is int else numbers.Real) and \
                not isinstance(value, bool) and value >= 0:
            # (seconds beyond 11 days are "forever": a thread cannot wait for infinity)
            return kind(value) if kind is int else min(float(value), 1e6)  # type: ignore[return-value]
    except Exception:  # noqa: BLE001 - a number type whose comparison or conversion raises
        pass
    report_once(("setting", what), f"workflow {what}= must be a number of 0 or more"
                f"{' (an integer)' if kind is int else ''}; using {default}")
    return default


def _text(message: object) -> str:
    """A status message as text, cut to ``_MAX_MESSAGE`` characters; never raises."""
    try:
        return str(message)[:_MAX_MESSAGE]
    except Exception:
        try:
            return repr(message)[:_MAX_MESSAGE]
        except Exception:
            return type(message).__name__


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except Exception:  # an array's ambiguous truth value, a broken __eq__
        return False


def _safe_dirname(run_id: str) -> str:
    """The run's spool folder: one plain name inside the spool (not ``.``, ``..`` nor
    ``rejected``, where replay would never look)."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    encoded = name.encode("utf-8", "replace")
    if len(encoded) > 200:  # file systems cap a name at 255 *bytes*: é is 2, 訓 is 3
        digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = encoded[:180].decode("utf-8", "ignore") + "-" + digest  # distinct ids, distinct folders
    return f"run_{name}" if not name.strip(".") or name == "rejected" else name


def _is_clean_exit(exc: BaseException) -> bool:
    return isinstance(exc, (SystemExit, GeneratorExit)) and getattr(exc, "code", None) in (0, None)


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails must not replace the user's exception
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _process_tag() -> str:
    """Tells this process's task ids from those of other processes of the same run."""
    return f"{os.getpid()}-{os.urandom(3).hex()}"


def _not_here(what: str) -> None:
    report_once(("wf-values-here", what), f"workflow.{what}() in a process that does not own the "
                "run (a forked child or a worker): the run's own values are recorded by its owner; "
                "record them on a task here")


def _receive(state: dict[str, Any]) -> Workflow:
    """Unpickle a workflow: this process's object for that run, else a new view of it."""
    for wf in list(_workflows):
        if wf.id == state["id"] and not wf._ended:
            return wf
    sink: Any = state.get("sink")
    try:
        if isinstance(sink, bytes):
            sink = pickle.loads(sink)
    except Exception as exc:
        sink = None
        problem = f"could not be rebuilt here: {exc!r}"
    else:
        problem = "could not be pickled"
    if sink is None:
        sink = UnavailableSink(f"the sink {state.get('sink_type')} of run {state['id']} {problem}")
    return Workflow(state["name"], sink=sink, run_id=state["id"], agent=state.get("agent"),
                    flush_timeout=state["flush_timeout"], spool=state["spool"],
                    batch_size=state["batch_size"], linger=state["linger"],
                    max_queue=state["max_queue"], max_spool_bytes=state["max_spool_bytes"],
                    _owner=False)


# -- the process's lifecycle: fork, SIGTERM, exit ----------------------------------------

_terminating = False


def _activate(wf: Workflow) -> None:
    if wf.owner and any(other.id == wf.id and other.owner for other in _active):
        # both would number their tasks RUN.1, RUN.2, ...: the store would merge them
        report_once(("run-id-twice", wf.id), f"workflow {wf.name!r}: run id {wf.id!r} is "
                    "already used by another workflow running in this process; their tasks "
                    "get the same ids and are merged in the store. Give each run an id of its "
                    "own (or leave run_id out)")
    _active[wf] = None
    if wf.owner:
        # Only the owner: a process that does not own the run has each event on disk already,
        # and must die of SIGTERM at once. A Python-level handler runs only when the main thread
        # is back in the interpreter: an idle Pool worker waiting for a lock that the pool, as
        # it terminates, never releases would hang Pool.terminate().
        _install_sigterm()


def _deactivate(wf: Workflow) -> None:
    _active.pop(wf, None)
    if not _active:
        _uninstall_sigterm()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


#: the signals whose default action ends the process and that schedulers and terminals send:
#: SIGTERM (SLURM, Kubernetes) and SIGHUP (a closed terminal or ssh session)
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _install_sigterm() -> None:
    """Our handler for each stop signal whose handler is the default one (a handler of the
    user's or of a library is never replaced, nor an ignored signal: nohup); ``signal``
    allows it from the main thread only."""
    if not _in_main_thread():
        return
    for sig in _STOP_SIGNALS:
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_sigterm)
        except (ValueError, OSError, AttributeError):
            pass


def _uninstall_sigterm() -> None:
    if not _in_main_thread():
        return
    for sig in _STOP_SIGNALS:
        try:
            if signal.getsignal(sig) is _on_sigterm:
                signal.signal(sig, signal.SIG_DFL)
        except (ValueError, OSError, AttributeError):
            pass


def _abort_all(message: str) -> None:
    for wf in reversed(list(_active)):
        try:
            wf.end("failed", message)  # its open tasks too
        except Exception as exc:  # pragma: no cover - guarded inside already
            report_once(("abort", type(exc)), f"ending an open workflow failed: {exc!r}")


def _on_sigterm(signum: int, frame: Any) -> None:
    """End what is open as failed, flush (bounded), then die of the signal as if not handled."""
    global _terminating
    if _terminating:
        return
    _terminating = True
    try:
        _abort_all(f"terminated by {signal.Signals(signum).name}")
        _emitter_module.close_all()  # workflows that were ending when the signal came
    except BaseException:  # noqa: BLE001 - dying anyway: the default action must follow
        pass
    try:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
    finally:
        os._exit(128 + signum)  # only if the signal did not end the process


def _end_open_at_exit() -> None:
    """Interpreter exit with workflows still open: end them (and their tasks) as failed."""
    if not _active:
        return
    message = "the process exited before end() was called"
    exc = getattr(sys, "last_value", None)  # set when an uncaught exception was printed
    if isinstance(exc, BaseException):
        message += f": uncaught {_describe(exc)}"
    _abort_all(message)


# registered after the emitter's atexit hook, so it runs before it (atexit is LIFO)
atexit.register(_end_open_at_exit)


# A SIGTERM reaching a new child before its hook below resets the handler finds ours, which the
# reset then turns into a no-op: the signal is lost (the child lives on) and Pool.terminate()
# waits for ever on such a worker. SIGTERM is blocked
# across fork instead: it waits in the kernel and, unblocked after the reset, kills the child
# as the default action does.
_sigterm_blocked_for_fork = False


def _before_fork() -> None:
    global _sigterm_blocked_for_fork
    _sigterm_blocked_for_fork = False
    try:
        ours = {sig for sig in _STOP_SIGNALS if signal.getsignal(sig) is _on_sigterm}
        if ours:
            signal.pthread_sigmask(signal.SIG_BLOCK, ours)
            _sigterm_blocked_for_fork = True
    except (ValueError, OSError, AttributeError):
        pass


def _unblock_sigterm_after_fork() -> None:
    if _sigterm_blocked_for_fork:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_STOP_SIGNALS))
        except (ValueError, OSError, AttributeError):  # pragma: no cover
            pass


def _after_fork_in_child() -> None:
    global _terminating
    _terminating = False
    try:
        _uninstall_sigterm()  # the parent's: this process owns no run (see _activate)
    except Exception:  # pragma: no cover - must never break the user's fork
        pass
    _unblock_sigterm_after_fork()  # a SIGTERM sent meanwhile ends the child here
    try:
        _emitter_module.forget_inherited()
        for wf in list(_workflows):
            if not wf._ended:
                wf._continue_in_child()
    except Exception as exc:  # pragma: no cover - must never break the user's fork
        report_once(("fork", type(exc)), f"continuing capture in a forked child failed: {exc!r}")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_unblock_sigterm_after_fork,
                        after_in_child=_after_fork_in_child)
