"""provkg: provenance knowledge graphs for the scientific-ML lifecycle."""

from provkg.errors import (
    BadEvent,
    BadParameter,
    BadSpec,
    MappingError,
    NotFound,
    ProvkgError,
    QuerySyntaxError,
    QueryTimeout,
    StoreError,
    StoreUnavailable,
    UnknownQuery,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "ProvkgError",
    "BadEvent",
    "BadSpec",
    "MappingError",
    "StoreError",
    "StoreUnavailable",
    "QuerySyntaxError",
    "QueryTimeout",
    "UnknownQuery",
    "BadParameter",
    "NotFound",
]
