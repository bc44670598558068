"""What callers pass to runs and tasks, made into what the wire format takes.

Names, end statuses, status messages and the numeric settings of ``workflow(...)``: each
function returns a usable value for anything it is given (logged once when it had to choose),
and never raises, so that a bad argument costs its own value only.
"""

from __future__ import annotations

import enum
import hashlib
import numbers
from collections.abc import Mapping
from typing import Any, overload

from provkg.capture.report import report_once
from provkg.capture.values import MAX_NAME
from provkg.wire import KINDS, MAX_TAG_VALUE, MAX_TAGS, PHASES

__all__ = ["Status", "fit_name", "fit_setting", "wire_status", "status_message", "message_text",
           "run_fields", "spool_dirname", "task_fields"]

_MAX_MESSAGE = 4096


class Status(enum.StrEnum):
    """The wire format's two end statuses (events carry ``.value``)."""

    FINISHED = "finished"
    FAILED = "failed"


#: the words an ``end(status)`` may use for each of the wire format's two statuses
_FINISHED_WORDS = frozenset({"finished", "finish", "success", "succeeded", "successful", "ok",
                             "done", "completed", "complete"})
_FAILED_WORDS = frozenset({"failed", "failure", "fail", "error", "errored", "killed",
                           "cancelled", "canceled", "aborted", "timeout", "crashed"})


def wire_status(status: object) -> str:
    """The wire status for what the caller said: ``finished`` for the success words (any
    case), ``failed`` for anything else, with a warning when the word was not ``failed``-like.
    Never raises."""
    if isinstance(status, str) and (status == "finished" or status == "failed"):
        return str(status)
    said = message_text(status).strip()
    word = said.lower()
    if word in _FINISHED_WORDS:
        return Status.FINISHED.value
    if word not in _FAILED_WORDS:
        report_once(("status", word[:40]), f"end status {said[:40]!r} is neither "
                    "'finished' nor 'failed'; recorded as 'failed'")  # as the caller wrote it
    return Status.FAILED.value


def status_message(status: object, message: object) -> str | None:
    """Keep the caller's own status word when it was mapped and no message says more."""
    if message is None and not (isinstance(status, str) and status in ("finished", "failed")):
        return f"ended with status {message_text(status)[:80]!r}"
    return message  # type: ignore[return-value]


def message_text(message: object) -> str:
    """A status message as text, cut to ``_MAX_MESSAGE`` characters; never raises."""
    try:
        return str(message)[:_MAX_MESSAGE]
    except Exception:
        try:
            return repr(message)[:_MAX_MESSAGE]
        except Exception:
            return type(message).__name__


def fit_name(value: object, what: str) -> str:
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


@overload
def fit_setting(value: Any, default: int, what: str) -> int: ...
@overload
def fit_setting(value: Any, default: float, what: str) -> float: ...
def fit_setting(value: Any, default: float, what: str) -> float:
    """A numeric setting of ``workflow(...)``: ``value`` when it is a number of 0 or more
    (an int where ``default`` is one), else ``default`` (logged)."""
    kind = type(default)
    try:
        # ``value`` is left un-narrowed (Any): numbers.Real promises only < and <=, yet int,
        # float, Fraction and numpy's numbers all take >=; a type whose >= raises is caught below
        number = isinstance(value, numbers.Integral if kind is int else numbers.Real) and \
            not isinstance(value, bool)
        if number and value >= 0:
            # (seconds beyond 11 days are "forever": a thread cannot wait for infinity)
            return int(value) if kind is int else min(float(value), 1e6)
    except Exception:  # noqa: BLE001 - a number type whose comparison or conversion raises
        pass
    report_once(("setting", what), f"workflow {what}= must be a number of 0 or more"
                f"{' (an integer)' if kind is int else ''}; using {default}")
    return default


def spool_dirname(run_id: str) -> str:
    """The run's spool folder: one plain name inside the spool (not ``.``, ``..`` nor
    ``rejected``, where replay would never look)."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    encoded = name.encode("utf-8", "replace")
    if len(encoded) > 200:  # file systems cap a name at 255 *bytes*: é is 2, 訓 is 3
        digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = encoded[:180].decode("utf-8", "ignore") + "-" + digest  # distinct ids, distinct folders
    return f"run_{name}" if not name.strip(".") or name == "rejected" else name


def run_fields(*, label: object, tags: object, phase: object) -> dict[str, Any]:
    """The begin event's ``label``, ``tags`` and ``phase`` from what ``workflow(...)`` was
    given; what does not fit is left out or cut (logged once), never the run."""
    out: dict[str, Any] = {}
    if label is not None:
        text = label if isinstance(label, str) else str(label)
        if text:
            out["label"] = text[:MAX_NAME]
    if tags is not None:
        if isinstance(tags, Mapping):
            fitted = {str(k)[:MAX_NAME]: (v if isinstance(v, str) else str(v))[:MAX_TAG_VALUE]
                      for k, v in list(tags.items())[:MAX_TAGS] if str(k)}
            if len(tags) > MAX_TAGS:
                report_once(("tags", "many"), f"workflow tags: only the first {MAX_TAGS} are recorded")
            if fitted:
                out["tags"] = fitted
        else:
            report_once(("tags", type(tags)), "workflow tags= must be a mapping of names to text; ignored")
    if phase is not None:
        if phase in PHASES:
            out["phase"] = phase
        else:
            report_once(("phase", str(phase)[:40]), f"workflow phase must be one of {', '.join(PHASES)}; ignored")
    return out


def task_fields(*, kind: object, granularity: object) -> dict[str, Any] | None:
    """A task begin's ``kind`` and ``granularity``, or None; an unknown one is left out (logged)."""
    out: dict[str, Any] = {}
    if kind is not None:
        if kind in KINDS:
            out["kind"] = kind
        else:
            report_once(("kind", str(kind)[:40]), f"task kind must be one of {', '.join(KINDS)}; ignored")
    if granularity is not None:
        if granularity in ("full", "summary", "both"):
            out["granularity"] = granularity
        else:
            report_once(("granularity", str(granularity)[:40]),
                        "task granularity must be 'full', 'summary' or 'both'; ignored")
    return out or None
