"""Where and how to talk to a SPARQL service: what a server's store URL says
(:func:`provkg.store.urls.parse_endpoint` reads it), apart from which kind of server it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Endpoint", "CONNECT_TIMEOUT_S", "READ_TIMEOUT_S"]

#: seconds to connect to an endpoint (store URL option ``connect_timeout=``)
CONNECT_TIMEOUT_S = 5.0
#: seconds to wait for an answer when the caller sets no time limit (store URL option
#: ``timeout=``): past Virtuoso's MaxQueryExecutionTime of 600 s (docs/reference/stores.md), so that
#: its own time-limit answer comes first
READ_TIMEOUT_S = 900.0

@dataclass(frozen=True)
class Endpoint:
    """Where and how to talk to a SPARQL service (what a server's store URL says)."""

    query_url: str
    update_url: str
    gsp_url: str | None = None  # Graph Store Protocol endpoint, for fast bulk writes
    user: str | None = None
    password: str | None = None
    default_graph: str | None = None  # writes without a graph go here (None: the default graph)
    union_param: str | None = None  # query parameter asking for the union default graph
    dataset_post: bool = False  # GSP POST of N-Quads to gsp_url adds to the whole dataset
    streaming_upload: bool = False  # takes a whole file as one chunked POST
    extra_params: dict[str, str] = field(default_factory=dict)
    connect_timeout: float = CONNECT_TIMEOUT_S  # seconds to connect
    timeout: float = READ_TIMEOUT_S  # seconds to wait for an answer when the caller sets no limit
