"""The ingest's background writer: batches added to the store in threads of their own, so
mapping the next batch overlaps with loading this one."""

from __future__ import annotations

import queue
import threading

from provkg.store import Store
from provkg.term import Triple

__all__ = ["StoreWriter"]


class StoreWriter:
    """Adds batches to the store in background threads, so mapping the next batch (Python)
    overlaps with loading this one (the store's native code, which releases the GIL).

    Small batches are gathered up to ``min_triples`` first: each bulk load into an on-disk
    Oxigraph store has a fixed cost, so fewer, larger loads are much faster. Up to
    ``store.parallel_adds`` loads run at once; memory stays bounded because ``put`` waits
    while one gathered buffer is already queued behind the running loads."""

    def __init__(self, store: Store, *, min_triples: int = 200_000,  # = Oxigraph's add chunk
                 max_bytes: int = 32 * 1024 * 1024):
        self.store = store
        self.min_triples = min_triples
        #: a buffer is handed over at this many bytes of objects too: else large values (long
        #: texts, lists) are held 200,000 triples' worth at a time, several times the file in RSS
        self.max_bytes = max_bytes
        self._bytes = 0
        self._queue: queue.Queue[list[Triple] | None] = queue.Queue(maxsize=1)
        self._buffer: list[Triple] = []
        self._error: BaseException | None = None
        self._threads = [threading.Thread(target=self._run, name=f"provkg-ingest-writer-{i}",
                                          daemon=True)
                         for i in range(max(1, store.parallel_adds))]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    # the mapper's own terms: trusted. Duplicates across batches (a task's begin
                    # and end) are left to the store, which keeps one copy: a set here cost 8 %
                    # of the CPU
                    self.store.add(item, trusted=True)
            except BaseException as exc:  # handed to the caller's thread by _check()
                self._error = exc
            finally:
                self._queue.task_done()

    def _check(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def _hand_over(self) -> None:
        buffer, self._buffer, self._bytes = self._buffer, [], 0
        if buffer:
            self._queue.put(buffer)

    def put(self, triples: list[Triple]) -> None:
        self._check()
        self._buffer.extend(triples)
        self._bytes += sum(map(len, [t[2] for t in triples]))
        if len(self._buffer) >= self.min_triples or self._bytes >= self.max_bytes:
            self._hand_over()

    def drain(self) -> None:
        """Wait until everything put so far is in the store."""
        self._hand_over()
        self._queue.join()
        self._check()

    def close(self) -> None:
        """Write what was put, then stop the threads (once; later calls do nothing)."""
        threads, self._threads = self._threads, []
        if not threads:
            return
        try:
            self.drain()
        finally:
            for _ in threads:
                self._queue.put(None)
            for thread in threads:
                thread.join()
