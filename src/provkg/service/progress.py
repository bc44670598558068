"""How a long use case reports progress: through a callback its caller passes, never by drawing.

A use case that reads many bytes (``ingest_paths``, ``load_files``) takes ``progress``: a
:data:`Progress` factory, called with a label and the total number of bytes, that returns a
:class:`ProgressBar`; or None for none. The command line passes one that draws on stderr
(``provkg.cli.output.progress_bar``); the API and the benchmarks pass none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["NO_BAR", "Progress", "ProgressBar", "start"]


class ProgressBar(Protocol):
    """One piece of work under way."""

    def advance(self, n: int) -> None:
        """``n`` more units (bytes) are done."""

    def describe(self, text: str) -> None:
        """What is done so far, in words (``1,000 events, 9,000 triples``)."""

    def close(self) -> None:
        """The work is over (done, failed or interrupted)."""


#: (label, total units) -> a bar for that work
Progress = Callable[[str, int], ProgressBar]


class _NoBar:
    def advance(self, n: int) -> None:
        pass

    def describe(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


#: the bar of a use case given no ``progress``
NO_BAR: ProgressBar = _NoBar()


def start(progress: Progress | None, label: str, total: int) -> ProgressBar:
    """``progress(label, total)``, or :data:`NO_BAR` when ``progress`` is None (or False,
    what callers passed before progress was a callback)."""
    return progress(label, total) if callable(progress) else NO_BAR
