"""Workflow runs: the user-facing capture API (``capture.workflow(...)``).

Every public method here is guarded: a failure inside provenance code is logged once per cause
and never reaches user code, while an exception raised by user code inside ``with`` blocks marks
the task and the workflow ``failed`` (with the message) and propagates unchanged.

A run's tasks are :mod:`provkg.capture.task`'s; how a run continues in other processes (a
forked child, a worker that received the pickled ``Workflow``) is told in
:mod:`provkg.capture.processes`, and how it ends when the process does (SIGTERM, SIGHUP,
interpreter exit) in :mod:`provkg.capture.exits`.
"""

from __future__ import annotations

import itertools
import mmap
import os
import pickle
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from provkg.capture.arguments import (
    fit_name,
    fit_setting,
    message_text,
    run_fields,
    spool_dirname,
    status_message,
    task_fields,
    wire_status,
)
from provkg.capture.context import _active, _current_workflow, _workflows
from provkg.capture.domains import report_unsent_domains
from provkg.capture.emitter import Emitter
from provkg.capture.environment import capture_environment, default_agent
from provkg.capture.exits import activate, deactivate, describe, is_clean_exit
from provkg.capture.processes import process_tag
from provkg.capture.report import report_once, shown_url
from provkg.capture.sink import Sink, UnavailableSink
from provkg.capture.sink_urls import open_sink
from provkg.capture.spool import DEFAULT_SPOOL, DEFAULT_SPOOL_BYTES, Spool
from provkg.capture.task import Task, TaskState, reset_current, set_current
from provkg.capture.tracking import tracker
from provkg.capture.values import MAX_NAME, snapshot_values

__all__ = ["workflow", "Workflow"]

T = TypeVar("T")


def _shared_flag() -> Any:
    """One zeroed byte of memory a forked child shares with this process (None if none)."""
    try:
        return mmap.mmap(-1, 1)
    except (OSError, ValueError):  # pragma: no cover
        return None


def workflow(name: str, *, sink: str | Sink, run_id: str | None = None, agent: str | None = None,
             flush_timeout: float = 5.0, spool: str | os.PathLike[str] | None = None,
             batch_size: int = 50, linger: float = 1.0, max_queue: int = 20_000,
             max_spool_bytes: int = DEFAULT_SPOOL_BYTES, label: str | None = None,
             tags: Mapping[str, Any] | None = None, phase: str | None = None) -> Workflow:
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
        label: a readable name of the run (a trainer's run name); the ``runs`` query shows it.
        tags: name -> text, the run's own tags (``{"team": "seismic"}``).
        phase: ``curation``, ``preparation`` or ``learning``, for a workflow without a spec.

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
                    max_spool_bytes=max_spool_bytes, label=label, tags=tags, phase=phase)


class Workflow:
    """One run of a prospective workflow. Create it with ``capture.workflow(...)``."""

    def __init__(self, name: str, *, sink: str | Sink, run_id: str | None = None,
                 agent: str | None = None, flush_timeout: float = 5.0,
                 spool: str | os.PathLike[str] | None = None, batch_size: int = 50,
                 linger: float = 1.0, max_queue: int = 20_000,
                 max_spool_bytes: int = DEFAULT_SPOOL_BYTES, label: str | None = None,
                 tags: Mapping[str, Any] | None = None, phase: str | None = None,
                 _owner: bool = True) -> None:
        self.name = fit_name(name, "workflow name")
        #: what the begin event says of the run besides its name: label, tags, phase
        self._begin_fields = run_fields(label=label, tags=tags, phase=phase)
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
        #: whether this process owns the run (records its begin and end); see ``processes``
        self.owner = _owner
        self._counter: Iterator[int] = itertools.count(1)
        self._id_prefix = f"{self.id}." if _owner else f"{self.id}.{process_tag()}."
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
        max_spool_bytes = fit_setting(max_spool_bytes, DEFAULT_SPOOL_BYTES, "max_spool_bytes")
        self.emitter = Emitter(opened, Spool(root, spool_dirname(self.id), max_bytes=max_spool_bytes),
                               batch_size=fit_setting(batch_size, 50, "batch_size"),
                               linger=fit_setting(linger, 1.0, "linger"),
                               max_queue=fit_setting(max_queue, 20_000, "max_queue"),
                               flush_timeout=fit_setting(flush_timeout, 5.0, "flush_timeout"),
                               run_id=self.id, durable=not _owner)
        self._emit: Callable[[dict[str, Any]], None] = self.emitter.emit
        _workflows.add(self)
        if not _owner:  # a view of a run begun elsewhere: it records tasks from now on
            self._began = True
            activate(self)

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
            event.update(self._begin_fields)
            event["used"], self._used = self._used, {}
            self._emit(event)
            if _current_workflow.get() is None:
                self._token = _current_workflow.set(self)
            activate(self)
        except Exception as exc:
            report_once(("wf-begin", type(exc)), f"recording the workflow begin failed: {exc!r}")
        return self

    def end(self, status: str = "finished", message: str | None = None) -> None:
        """Record the end of the run, deliver what is queued (at most ``flush_timeout`` s) and
        spool the rest; idempotent. ``status`` is ``"finished"`` or ``"failed"``.

        In a process that does not own the run (see ``processes``) this records no
        event: it delivers this process's events and stops recording here."""
        if self._ended:
            return
        self._ended = True
        try:
            if self._end_flag is not None:
                self._end_flag[0] = 1
            if not self._began:
                self.begin()
            status, message = wire_status(status), status_message(status, message)
            message = None if message is None else message_text(message)
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
            deactivate(self)
            # in a forked child too, for the refs made there (the parent's stay the parent's)
            report_unsent_domains(self, last=not _active)
            self.emitter.close(adopt=self.owner)
        except Exception as exc:
            report_once(("wf-end", type(exc)), f"recording the workflow end failed: {exc!r}")

    # -- other processes --------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled, a workflow becomes a view of the same run in the receiving process (see
        ``processes``); in this process, unpickling gives this very object back."""
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
        self._id_prefix = f"{self.id}.{process_tag()}."
        for task in self._open_tasks:  # the parent's tasks: the parent ends them
            task._state = TaskState.ENDED
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
        if exc is None or is_clean_exit(exc):
            self.end()
        else:
            self.end("failed", describe(exc))

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
             dependencies: Iterable[Task | str] | None = None, kind: str | None = None,
             granularity: str | None = None) -> Task:
        """A task: one execution of ``transformation``; begins on ``with`` or ``begin()``.

        Args:
            transformation: the transformation's name in the workflow's spec.
            parent: the enclosing task (an epoch's training, a batch's epoch) or its id.
            index: the position of a section within its parent (epoch / batch number).
            used: input values by attribute name (scalars, lists, ``capture.ref(...)``).
            dependencies: tasks (or ids) this one waited for.
            kind: what the transformation is (``training``, ``validation``, ``evaluation``,
                ``section``, ``adaptation``...: a spec's ``kind``), for a workflow without a
                written spec; a written spec wins.
            granularity: a section kept ``"full"``, as per-parent ``"summary"`` (rollups)
                only, or ``"both"`` (the default for an innermost section).
        """
        task = Task(self, transformation, parent, index, used, dependencies)
        if kind is not None or granularity is not None:
            task.roles = task_fields(kind=kind, granularity=granularity)
        return task

    def sections(self, transformation: str, items: Iterable[T], *, parent: Task | str | None = None,
                 start: int = 0, kind: str | None = None,
                 granularity: str | None = None) -> Iterator[tuple[T, Task]]:
        """Loop over ``items`` with one section task per item (``index`` = its position).

        >>> from provkg.capture import MemorySink
        >>> with workflow("demo", sink=MemorySink()) as wf, wf.task("training") as training:
        ...     for epoch, section in wf.sections("epoch", range(2), parent=training):
        ...         section.generate(loss=1.0 / (epoch + 1))
        """
        for position, item in enumerate(items, start):
            section = self.task(transformation, parent=parent, index=position, kind=kind,
                                granularity=granularity).begin()
            self._sections.append(section)
            # the section is the current task in the loop's body, as in a ``with`` block:
            # tracked functions called there nest under it
            token = set_current(section)
            try:
                yield item, section
            except GeneratorExit:
                # the loop was left (break or an exception): we cannot tell which from here, so
                # the section stays open until its parent (or the run) ends, and takes its status
                section._left_at = time.time()
                raise
            finally:
                reset_current(token)
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
        return tracker(transformation, generated=generated, parent=parent, workflow=self)


def _not_here(what: str) -> None:
    report_once(("wf-values-here", what), f"workflow.{what}() in a process that does not own the "
                "run (a forked child or a worker): the run's own values are recorded by its owner; "
                "record them on a task here")


def _receive(state: dict[str, Any]) -> Workflow:
    """Unpickle a workflow: this process's object for that run, else a new view of it."""
    for wf in list(_workflows):
        if wf.id == state["id"] and not wf._ended:
            return cast(Workflow, wf)  # only Workflow.__init__ adds to _workflows
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
