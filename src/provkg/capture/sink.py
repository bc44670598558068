"""The sink interface (opening one by URL: :mod:`provkg.capture.sink_urls`).

A sink receives batches of wire-format event dicts from the background thread. Raising from
``send`` means "not delivered, try again later" (the batch is spooled and re-sent);
raising ``SinkRejected`` means "delivered and refused" (the batch is kept in ``rejected/``).

Optional, for processes other than the one that opened the sink: ``forked()`` is called in a
forked child (right after ``fork``: no thread, no network I/O) and returns the sink the child
uses, leaving the parent's files and connections alone; a sink without it is not shared with a
forked child (the child spools its events for ``provkg replay``). A sink that can be pickled
goes with a pickled workflow to the process that receives it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs

__all__ = ["Sink", "SinkRejected", "MemorySink", "UnavailableSink", "send_in_halves",
           "url_options"]


@runtime_checkable
class Sink(Protocol):
    """Where captured events go. Called from one background thread at a time.

    A sink may also have a ``target`` attribute: where it sends, as messages show it (no
    password); provkg's own sinks do. It is not part of the protocol, so any object with
    ``send`` and ``close`` stays a sink."""

    def send(self, events: list[dict[str, Any]]) -> None:
        """Deliver a batch of wire-format v1 event dicts, or raise (the batch will be retried)."""

    def close(self) -> None:
        """Release resources; called once, after the last ``send``."""


class SinkRejected(Exception):
    """The receiver understood the batch and refused it (HTTP 4xx): retrying will not help.
    ``too_large``: the batch as a whole was too big (HTTP 413); smaller batches may pass.
    ``by_event``: the receiver refused what some event(s) of the batch hold (HTTP 400 / 422):
    the others may pass on their own.

    Either way the sender sends the batch in halves, down to single events: only an event
    refused on its own is set aside (``rejected/`` of the spool)."""

    def __init__(self, message: str, *, too_large: bool = False, by_event: bool = False,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.too_large = too_large
        self.by_event = by_event
        self.status = status  # the HTTP status, for an HTTP receiver

    @property
    def divisible(self) -> bool:
        """Whether a part of the batch may pass where the whole did not."""
        return self.too_large or self.by_event


#: an event this small that a receiver calls too large (413) means it takes nothing
SMALL_EVENT = 64 * 1024


def send_in_halves(batch: list[Any], deliver: Callable[[list[Any]], object], *,
                   refused: Callable[[list[Any], SinkRejected], object],
                   delivered: Callable[[list[Any]], object],
                   before: Callable[[list[list[Any]]], bool] | None = None,
                   failures: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                   size: Callable[[Any], int] | None = None,
                   ) -> tuple[list[Any], BaseException | None]:
    """Deliver ``batch`` with ``deliver(part)``. A part the receiver refuses as too large or
    for what some of its items hold (:attr:`SinkRejected.divisible`) is sent in halves, down
    to single items; ``refused(part, exc)`` gets what is refused on its own, ``delivered(part)``
    what arrived. ``before(stack)`` sees the parts still to send (the next one last) before
    each attempt and may return True to stop there. One of ``failures`` (the receiver is away)
    stops the delivery: returns the items not delivered, in order, and the exception; else
    ``([], None)``. The live sender and ``provkg replay`` share this.

    With ``size`` (an item's encoded bytes): one item under ``SMALL_EVENT`` refused as too large
    stops the delivery too, as a receiver that is away: it takes nothing (a proxy's body limit
    set too low), and setting aside every event one request and two files at a time would
    lose them all."""
    parts = [batch] if batch else []  # a stack: the next part to send is the last
    while parts:
        if before is not None and before(parts):
            return [], None
        part = parts.pop()
        try:
            deliver(part)
        except SinkRejected as exc:
            if exc.divisible and len(part) > 1:
                mid = len(part) // 2
                parts += (part[mid:], part[:mid])
            elif exc.too_large and size is not None and len(part) == 1 and size(part[0]) < SMALL_EVENT:
                parts.append(part)
                away = ConnectionError(f"the receiver refuses even a single small event as too "
                                       f"large ({exc}): is a proxy's body limit set too low?")
                away.__cause__ = exc
                return [item for p in reversed(parts) for item in p], away
            else:
                refused(part, exc)
        except failures as exc:
            parts.append(part)
            return [item for p in reversed(parts) for item in p], exc
        else:
            delivered(part)
    return [], None


def url_options(query: str, known: tuple[str, ...], what: str) -> dict[str, str]:
    """The ``?k=v`` options of a sink URL (the last of a repeated one). An option the sink does
    not know is refused by name: ``?compresion=gzip`` was silently ignored (the listener refuses
    it), and the events went out uncompressed without a word."""
    given = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(given) - set(known))  # blank or not: a typo is said
    if unknown:
        raise ValueError(f"{what} URL option {unknown[0]!r} is unknown "
                         f"(known: {', '.join(known)})")
    return {k: v[-1] for k, v in given.items() if v[-1]}  # the last; a blank one: not given


class MemorySink:
    """Keeps every delivered event in ``self.events`` (tests, notebooks, in-process consumers)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.batches = 0
        self.closed = False
        self._lock = threading.Lock()

    def send(self, events: list[dict[str, Any]]) -> None:
        with self._lock:
            self.events.extend(events)
            self.batches += 1

    def close(self) -> None:
        self.closed = True

    def forked(self) -> MemorySink:
        """In a forked child: this process's copy, with a fresh lock (events sent by the child
        stay in the child's memory)."""
        self._lock = threading.Lock()
        return self


class UnavailableSink:
    """Stands in for a sink that could not be opened (or shared with this process): every
    batch goes to the spool, for ``provkg replay``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def send(self, events: list[dict[str, Any]]) -> None:
        raise ConnectionError(self.reason)

    def close(self) -> None:
        pass

    def forked(self) -> UnavailableSink:
        return self
