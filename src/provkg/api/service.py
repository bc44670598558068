"""What the API's requests use, opened once per app: :func:`open_service` -> :class:`Service`.

No FastAPI here: ``provkg serve`` opens the service before it builds the app, to report a
store or queue it cannot use before it says it is serving.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from provkg.api.sparql import SparqlRunner
from provkg.api.specs import SpecRegistry
from provkg.config import Settings
from provkg.service.queue import IngestQueue
from provkg.service.queued_ingest import QueuedIngest, SavedSpecs, StoreWait, open_queued_ingest
from provkg.service.sparql_guard import check_query
from provkg.store.base import Store

__all__ = ["Service", "open_service"]


@dataclass
class Service:
    """Everything a request needs: the settings, the queued ingest (store, specs, queue) and
    the SPARQL runner."""

    settings: Settings
    ingest: QueuedIngest
    sparql: SparqlRunner
    extras: list[Any] = field(default_factory=list)  # e.g. the MQTT listener: closed first

    @property
    def store(self) -> Store:
        return self.ingest.store

    @property
    def queue(self) -> IngestQueue:
        return self.ingest.queue

    @property
    def specs(self) -> SavedSpecs:
        return self.ingest.specs

    @property
    def store_wait(self) -> StoreWait | None:
        """Set while a remote store that did not answer at the start has not been reached."""
        return self.ingest.store_wait

    @property
    def spec_lock(self) -> threading.Lock:
        """Held while a spec is registered: one registration at a time."""
        return self.ingest.spec_lock

    @property
    def closed(self) -> bool:
        return self.ingest.closed

    def close(self) -> None:
        """Stop everything, in reverse order of opening (once; later calls do nothing)."""
        if self.ingest.closed:
            return
        for extra in reversed(self.extras):
            extra.close()
        self.ingest.close(before_store=self.sparql.close)


def open_service(settings: Settings) -> Service:
    """Open the store, specs, queue and SPARQL runner the settings describe.

    Raises:
        StoreUnavailable: the store cannot be opened (e.g. another process holds it).
        QueueUnavailable: the queue folder is another process's, or cannot be created or read.
        BadParameter: the store URL is not one provkg knows.
    """
    ingest = open_queued_ingest(settings.store, SpecRegistry(settings.queue_dir),
                                queue_dir=settings.queue_dir, schema=settings.ingest_schema,
                                fsync=settings.queue_fsync,
                                apply_events=settings.queue_apply_events)
    try:
        check_query("ASK {}")  # loads the SPARQL grammar now rather than on the first request
        sparql = SparqlRunner(ingest.store, settings.store, timeout=settings.query_timeout_s,
                              max_rows=settings.max_rows, workers=settings.sparql_workers,
                              refresh_s=settings.sparql_view_refresh_s)
    except BaseException:
        ingest.close()  # releases the queue folder's lock, closes the store
        raise
    return Service(settings=settings, ingest=ingest, sparql=sparql)
