"""Defaults that the CLI, the settings and the service share, importable with no extra."""

from __future__ import annotations

from provkg.schemas import ALL_SCHEMAS

__all__ = ["DEFAULT_STORE", "INGEST_SCHEMAS"]

#: embedded Oxigraph on disk, in the working directory
DEFAULT_STORE = "oxigraph:provkg-data"
#: what PROVKG_INGEST_SCHEMA (and provkg ingest --schema) accepts
INGEST_SCHEMAS = tuple(s.value for s in ALL_SCHEMAS)
