"""What a long-lived ingest service remembers of the summary states it wrote, across sessions.

The queue's applier maps each chunk in a session of its own (so a chunk is wholly in the
store once it is applied), and every session ends by writing the state of each parent that
has not ended (:meth:`SectionSummaries.park_all`). The next session reads that state back
and merges it: parsing it costs time in proportion to the parent's executions, so a training
with 50,000 batches directly under it made every chunk cost more than the one before.

:class:`SummaryCache` keeps, per parent and state text, the facts that text was written from.
A session that reads a state it finds here takes the facts without parsing. The key is the
very text the store holds, so a state another process wrote (another server, an
``provkg ingest``) is not in the cache and is parsed as before: the cache never changes an
answer, only skips work. (A pending record another process turned into a rollup with the
same facts has the same text: ``ended`` tells them apart.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from provkg.mapper.summary_section import Key
from provkg.term import Triple

__all__ = ["SummaryCache"]

#: parents remembered (the most recently written); each holds its facts
_KEPT = 1024

class SummaryCache:
    """``(parent, state text, ended)`` -> the section's facts and the triples written with them.

    ``ended`` is in the key: the same facts are written as a pending record while the parent
    runs and as its rollup once it ended, with other triples (which a later session must
    retract when it replaces them)."""

    def __init__(self, kept: int = _KEPT):
        self._kept = kept
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Key, str, bool], tuple[str, dict[str, Any], frozenset[Triple]]] = \
            OrderedDict()
        self.hits = 0

    def put(self, key: Key, text: str, ended: bool, section: str, facts: dict[str, Any],
            stored: frozenset[Triple]) -> None:
        """Remember that ``text`` was written for ``key``'s ``section`` (as its rollup when
        ``ended``, else as a pending record) from ``facts`` (a copy is kept: the session goes
        on changing its own) with the triples ``stored``."""
        with self._lock:
            self._entries[(key, text, ended)] = (section, dict(facts), stored)
            self._entries.move_to_end((key, text, ended))
            while len(self._entries) > self._kept:
                self._entries.popitem(last=False)

    def take(self, key: Key, text: str, ended: bool) -> tuple[str, dict[str, Any], frozenset[Triple]] | None:
        """The facts behind ``text``, if this process wrote it so (removed: the session that
        takes them writes a newer state, which it puts back)."""
        with self._lock:
            found = self._entries.pop((key, text, ended), None)
        if found is not None:
            self.hits += 1
        return found
