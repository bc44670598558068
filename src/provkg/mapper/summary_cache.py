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

from provkg.mapper.summary_section import Key, Part
from provkg.term import Triple

__all__ = ["SummaryCache"]

#: parents remembered (the most recently written); each holds its facts
_KEPT = 1024

class SummaryCache:
    """``(parent, section)`` -> the state texts last written for it (each with whether it is a
    rollup), its facts, its pending record's parts and the triples written with them.

    A session takes an entry only when the store holds every one of those texts for the
    parent; the texts it holds besides (another process wrote them) are parsed and merged.
    The facts are given away, not copied: a session that fails drops the whole cache
    (:meth:`clear`), since its facts may then hold what it did not write."""

    def __init__(self, kept: int = _KEPT):
        self._kept = kept
        self._lock = threading.Lock()
        #: parent -> section -> (texts, facts, parts, stored); parents most recent last
        self._entries: OrderedDict[Key, dict[str, tuple[frozenset[tuple[str, bool]], dict[str, Any],
                                                        list[Part], frozenset[Triple]]]] = OrderedDict()
        self.hits = 0

    def put(self, key: Key, section: str, texts: frozenset[tuple[str, bool]], facts: dict[str, Any],
            parts: list[Part], stored: frozenset[Triple]) -> None:
        """Remember that ``texts`` ((text, rollup?) pairs) were written for ``key``'s
        ``section`` from ``facts`` (its pending record's ``parts``) with the triples ``stored``."""
        with self._lock:
            self._entries.setdefault(key, {})[section] = (texts, facts, list(parts), stored)
            self._entries.move_to_end(key)
            while len(self._entries) > self._kept:
                self._entries.popitem(last=False)

    def take(self, key: Key, states: list[tuple[str, bool]]) -> tuple[
            list[tuple[str, dict[str, Any], list[Part], frozenset[Triple], bool]], list[tuple[str, bool]]]:
        """The sections of ``key`` whose every written text is among ``states`` (found in the
        store): (section, facts, parts, stored triples, rollup?) each, removed from the cache;
        and the states left to parse."""
        found = set(states)
        hits = []
        with self._lock:
            for section, (texts, facts, parts, stored) in self._entries.pop(key, {}).items():
                if texts <= found:
                    found -= texts
                    hits.append((section, facts, parts, stored, any(r for _, r in texts)))
        self.hits += len(hits)
        return hits, [s for s in states if s in found]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
