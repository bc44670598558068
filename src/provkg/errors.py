"""The provkg exception tree.

One root, a short tree; foreign exceptions are mapped once, at the boundary
where they enter provkg, with ``raise X(...) from exc``::

    ProvkgError
    ├── BadEvent            an event or batch does not follow wire format v1
    ├── BadSpec             a prospective spec is invalid (file, line, field)
    ├── MappingError        events could not be turned into triples
    ├── StoreError          a store answered with an error
    │   ├── StoreUnavailable    the store cannot be reached or opened
    │   │   └── StoreUnreachable    no answer at all (down, starting, network): try later
    │   └── QuerySyntaxError    SPARQL did not parse (line and column when known)
    ├── QueryTimeout        a query ran past its time limit
    ├── UnknownQuery        no canned query has that name
    ├── BadParameter        a query parameter is missing or malformed
    │   └── ReadOnlyQuery       an update or SERVICE call where only reading is allowed
    └── NotFound            a named resource (spec, ontology, file) does not exist

The API turns these into 4xx / 5xx answers ``{"error": ..., "detail": ...}``;
the CLI prints ``error: ...`` and exits 1. The capture library never raises
them into user code.
"""

from __future__ import annotations

__all__ = [
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


class ProvkgError(Exception):
    """Root of every error provkg raises on purpose."""

    #: short machine-readable name used by the API's error body
    code = "provkg_error"


class BadEvent(ProvkgError):
    code = "bad_event"


class BadSpec(ProvkgError):
    code = "bad_spec"


class MappingError(ProvkgError):
    code = "mapping_error"


class StoreError(ProvkgError):
    code = "store_error"


class StoreUnavailable(StoreError):
    code = "store_unavailable"


class StoreUnreachable(StoreUnavailable):
    """A remote store gave no answer at all (refused or lost connection, no connection in
    time, no answer to the first probe): it may be down or still starting, unlike a store
    that answered with a refusal (a wrong account, no endpoint at that path)."""


class QuerySyntaxError(StoreError):
    code = "query_syntax"

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None):
        said = f"line {line}, column {column}"
        where = f" ({said})" if line is not None and said not in message else ""
        super().__init__(f"{message}{where}")
        self.line = line
        self.column = column


class QueryTimeout(ProvkgError):
    code = "query_timeout"


class UnknownQuery(ProvkgError):
    code = "unknown_query"


class BadParameter(ProvkgError):
    code = "bad_parameter"


class ReadOnlyQuery(BadParameter):
    """An update, or a SERVICE call, sent where only reading is allowed (``provkg sparql``,
    the server's SPARQL endpoint); ``refused`` says which: ``"update"`` or ``"service"``."""

    code = "read_only"

    def __init__(self, message: str, *, refused: str = "update"):
        super().__init__(message)
        self.refused = refused


class NotFound(ProvkgError):
    code = "not_found"
