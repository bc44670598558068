"""Runs across processes: the owner of a run, and the processes that record tasks into it.

The process that creates a workflow *owns* the run: it alone records the run's begin and end.
Another process can record tasks into the same run:

* a child made by ``os.fork()`` (``multiprocessing`` with the ``fork`` start method, ``Pool``
  workers, PyTorch ``DataLoader`` workers) continues with the workflows that were open in the
  parent (the fork hooks below): it gets a sender of its own (the parent's thread, queue,
  files and connections are left alone), and
* a process that received the ``Workflow`` object pickled (a ``spawn`` child:
  ``Process(target=f, args=(wf,))``, ``pool.map(f, [(wf, x), ...])``, ``Pool(initializer=...,
  initargs=(wf,))``) gets a view of the run (``Workflow.__reduce__``).

Such a process mints task ids ``<run id>.<pid>-<6 hex digits>.<n>`` (:func:`process_tag`:
deterministic within the process, unique across processes even when a pid is reused or on
another host), never records the run's begin or end, and makes each event durable before
``emit`` returns, since it may leave through ``os._exit`` or be terminated right after a task
(see ``emitter``).
"""

from __future__ import annotations

import os

from provkg.capture import emitter as _emitter_module
from provkg.capture.context import _workflows
from provkg.capture.exits import block_stop_signals, reset_in_forked_child, unblock_stop_signals
from provkg.capture.report import report_once

__all__ = ["process_tag"]


def process_tag() -> str:
    """Tells this process's task ids from those of other processes of the same run."""
    return f"{os.getpid()}-{os.urandom(3).hex()}"


def _after_fork_in_child() -> None:
    reset_in_forked_child()  # a stop signal sent meanwhile ends the child here
    try:
        _emitter_module.forget_inherited()
        for wf in list(_workflows):
            if not wf._ended:
                wf._continue_in_child()
    except Exception as exc:  # pragma: no cover - must never break the user's fork
        report_once(("fork", type(exc)), f"continuing capture in a forked child failed: {exc!r}")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=block_stop_signals, after_in_parent=unblock_stop_signals,
                        after_in_child=_after_fork_in_child)
