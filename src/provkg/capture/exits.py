"""How runs end when the process does: stop signals, interpreter exit, and how a block ended.

While a workflow this process owns is open, and the process's SIGTERM handler is the default one
(set from the main thread), a SIGTERM (SLURM, Kubernetes) ends the open tasks and the run
``failed`` with "terminated by SIGTERM", flushes (at most ``flush_timeout``, spooling the rest),
restores the default handler and re-raises the signal (exit status 143); a SIGHUP (a closed
terminal or ssh session) likewise, "terminated by SIGHUP" (129). Other processes (forked
children, workers) keep the default handler: their events are on disk already, and a
Python-level handler could keep an idle ``Pool`` worker from dying (see :func:`activate`). At
interpreter exit, a workflow still open is ended the same way, with a message saying the process
exited before ``end()`` (and the uncaught exception, if there was one); in a process that does
not own the run, only its own open tasks are ended.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import Any

from provkg.capture import emitter as _emitter_module
from provkg.capture.context import Run, _active
from provkg.capture.report import report_once

__all__ = ["is_clean_exit", "describe", "activate", "deactivate", "block_stop_signals",
           "unblock_stop_signals", "reset_in_forked_child"]


def is_clean_exit(exc: BaseException) -> bool:
    """Whether ``exc`` leaving a block means it finished: ``sys.exit(0)``, a generator closed."""
    return isinstance(exc, (SystemExit, GeneratorExit)) and getattr(exc, "code", None) in (0, None)


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, for a failed status; never raises."""
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails must not replace the user's exception
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- the runs this process records into ----------------------------------------------------

_terminating = False


def activate(wf: Run) -> None:
    """``wf`` records in this process from now on (its begin, or its arrival here)."""
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
        _install_handlers()


def deactivate(wf: Run) -> None:
    """``wf`` records no more in this process (it ended here)."""
    _active.pop(wf, None)
    if not _active:
        _uninstall_handlers()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


#: the signals whose default action ends the process and that schedulers and terminals send:
#: SIGTERM (SLURM, Kubernetes) and SIGHUP (a closed terminal or ssh session)
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _install_handlers() -> None:
    """Our handler for each stop signal whose handler is the default one (a handler of the
    user's or of a library is never replaced, nor an ignored signal: nohup); ``signal``
    allows it from the main thread only."""
    if not _in_main_thread():
        return
    for sig in _STOP_SIGNALS:
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_stop_signal)
        except (ValueError, OSError, AttributeError):
            pass


def _uninstall_handlers() -> None:
    if not _in_main_thread():
        return
    for sig in _STOP_SIGNALS:
        try:
            if signal.getsignal(sig) is _on_stop_signal:
                signal.signal(sig, signal.SIG_DFL)
        except (ValueError, OSError, AttributeError):
            pass


def _abort_all(message: str) -> None:
    for wf in reversed(list(_active)):
        try:
            wf.end("failed", message)  # its open tasks too
        except Exception as exc:  # pragma: no cover - guarded inside already
            report_once(("abort", type(exc)), f"ending an open workflow failed: {exc!r}")


def _on_stop_signal(signum: int, frame: Any) -> None:
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
        message += f": uncaught {describe(exc)}"
    _abort_all(message)


# registered after the emitter's atexit hook (imported above), so it runs before it (atexit
# is LIFO)
atexit.register(_end_open_at_exit)


# -- across fork (provkg.capture.processes calls these) ------------------------------------

# A stop signal reaching a new child before the child's hook resets the handler finds ours,
# which the reset then turns into a no-op: the signal is lost (the child lives on) and
# Pool.terminate() waits for ever on such a worker. The signals are blocked across fork instead:
# they wait in the kernel and, unblocked after the reset, kill the child as the default action
# does.
_blocked_for_fork = False


def block_stop_signals() -> None:
    """Before fork: block the stop signals that our handler catches."""
    global _blocked_for_fork
    _blocked_for_fork = False
    try:
        ours = {sig for sig in _STOP_SIGNALS if signal.getsignal(sig) is _on_stop_signal}
        if ours:
            signal.pthread_sigmask(signal.SIG_BLOCK, ours)
            _blocked_for_fork = True
    except (ValueError, OSError, AttributeError):
        pass


def unblock_stop_signals() -> None:
    """After fork (in parent and child): undo :func:`block_stop_signals`."""
    if _blocked_for_fork:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_STOP_SIGNALS))
        except (ValueError, OSError, AttributeError):  # pragma: no cover
            pass


def reset_in_forked_child() -> None:
    """In a forked child: the default handlers again (it owns no run: see :func:`activate`),
    then the stop signals unblocked, so that one sent meanwhile ends the child here."""
    global _terminating
    _terminating = False
    try:
        _uninstall_handlers()
    except Exception:  # pragma: no cover - must never break the user's fork
        pass
    unblock_stop_signals()
