"""Applying one chunk of queued batches (:class:`provkg.service.queue.IngestQueue`'s applier):
a store outage, or a bug, is retried and never dropped, so nothing acknowledged is lost; a batch
that cannot be applied because of its content is set aside and the others are applied."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

from provkg.errors import ProvkgError, StoreError
from provkg.service.queue_files import invalid_payloads

__all__ = ["RETRY_MAX_S", "StopApplying", "apply_with_retry"]

log = logging.getLogger("provkg.queue")

#: seconds between retries at most (they start at 0.1 s and double)
RETRY_MAX_S = 5.0
#: a retried problem is logged again after this many seconds
_RETRY_LOG_EVERY_S = 60.0


class StopApplying(Exception):
    """The applier gives up a chunk because the queue is closing (it stays on disk)."""


def apply_with_retry(chunk: list[bytes], *, apply: Callable[[list[bytes]], None],
                     dead_letter: Callable[[bytes, str], None], closing: Callable[[], bool],
                     failing: Callable[[str | None], None],
                     outages: tuple[type[BaseException], ...] = (StoreError,)) -> None:
    """``apply(chunk)`` until it succeeds. ``outages`` (the store's errors, the queue's own
    unavailability) and unexpected errors (when every batch decodes and validates) are retried, each
    problem told to ``failing`` (and None once done); another ``ProvkgError`` or an invalid
    batch is content: the batch at fault goes to ``dead_letter``, the others are applied.

    Raises:
        StopApplying: ``closing()`` said so while retrying.
    """
    delay = 0.1
    said: tuple[str, float] = ("", 0.0)  # the problem last logged, and when
    again = functools.partial(apply_with_retry, apply=apply, dead_letter=dead_letter,
                              closing=closing, failing=failing, outages=outages)
    try:
        while True:
            try:
                apply(chunk)
                return
            except outages as exc:
                problem = str(exc)
            except ProvkgError as exc:
                if len(chunk) > 1:  # find the bad batch, apply the good ones
                    for payload in chunk:
                        again([payload])
                    return
                dead_letter(chunk[0], f"ingest refused it: {exc}")
                return
            except Exception as exc:
                # a batch that does not decode is content, not an outage: look for it (and
                # only if all decode, for one that does not validate either)
                invalid = invalid_payloads(chunk, decode_only=True) or invalid_payloads(chunk)
                if invalid:
                    for i, reason in invalid.items():
                        dead_letter(chunk[i], f"it does not follow the wire format: {reason}")
                    rest = [p for i, p in enumerate(chunk) if i not in invalid]
                    if rest:
                        again(rest)
                    return
                log.exception("applying queued batches failed unexpectedly")
                problem = f"{type(exc).__name__}: {exc}"
            if closing():
                log.warning("stopping with batches not yet applied (kept on disk): %s", problem)
                raise StopApplying
            failing(problem)
            now = time.monotonic()
            if problem != said[0] or now - said[1] >= _RETRY_LOG_EVERY_S:
                # once per problem and then each minute: a line per 5 s retry for hours (a
                # store down at the start) would be 720 lines an hour
                log.warning("could not apply queued batches (%s); retrying in %.1f s",
                            problem, delay)
                said = (problem, now)
            time.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
    finally:
        failing(None)
