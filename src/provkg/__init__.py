"""provkg: provenance knowledge graphs for the scientific-ML lifecycle.

The public Python API, all of it importable from here::

    from provkg import capture                       # record a workflow (the light part)
    from provkg import open_store, load_spec, ingest_paths, run_query

    with open_store("oxigraph:provkg-store") as store:
        ingest_paths(store, ["provkg-events"], specs=[load_spec("spec.yaml")])
        rows = run_query(store, "q3", {"workflow": "flower-training"})
        print(rows.columns, rows.rows)

Names are imported on first use, so ``from provkg import capture`` loads no store, mapper
or server package. Everything else under ``provkg.*`` is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from provkg.errors import (
    BadEvent,
    BadParameter,
    BadSpec,
    MappingError,
    NotFound,
    ProvkgError,
    QuerySyntaxError,
    QueryTimeout,
    ReadOnlyQuery,
    StoreError,
    StoreUnavailable,
    StoreUnreachable,
    UnknownQuery,
)

if TYPE_CHECKING:
    from provkg import capture
    from provkg.queries.catalog import CannedQuery
    from provkg.service.ingest import IngestReport, ingest_events, ingest_paths, register_spec
    from provkg.service.querying import query_catalog, render_query, run_query
    from provkg.spec import Spec, load_spec, parse_spec
    from provkg.store import Rows, Store, open_store

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "capture": "provkg.capture",
    "open_store": "provkg.store",
    "Store": "provkg.store",
    "Rows": "provkg.store",
    "Spec": "provkg.spec",
    "load_spec": "provkg.spec",
    "parse_spec": "provkg.spec",
    "register_spec": "provkg.service.ingest",
    "ingest_events": "provkg.service.ingest",
    "ingest_paths": "provkg.service.ingest",
    "IngestReport": "provkg.service.ingest",
    "run_query": "provkg.service.querying",
    "render_query": "provkg.service.querying",
    "query_catalog": "provkg.service.querying",
    "CannedQuery": "provkg.queries.catalog",
}

__all__ = [
    "__version__",
    # capture
    "capture",
    # stores
    "open_store",
    "Store",
    "Rows",
    # specs
    "Spec",
    "load_spec",
    "parse_spec",
    "register_spec",
    # ingest
    "ingest_events",
    "ingest_paths",
    "IngestReport",
    # queries
    "run_query",
    "render_query",
    "query_catalog",
    "CannedQuery",
    # errors
    "ProvkgError",
    "BadEvent",
    "BadSpec",
    "MappingError",
    "StoreError",
    "StoreUnavailable",
    "StoreUnreachable",
    "QuerySyntaxError",
    "QueryTimeout",
    "UnknownQuery",
    "BadParameter",
    "ReadOnlyQuery",
    "NotFound",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'provkg' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module == f"provkg.{name}" else getattr(imported, name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
