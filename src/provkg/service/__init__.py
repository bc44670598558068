"""Use cases the API, the CLI and the benchmarks call; the only place that composes
events, specs, the mapper, stores and queries.

- ``loading``: load ontologies and RDF files, export a store
- ``ingest``: events (files, spools, batches) -> mapper -> store (``ingestor``: the
  session; ``registration``: specs); ``links``: domain links
- ``querying``: canned queries and read-only SPARQL against a store; ``specs``: the specs
  a store holds

Use cases take typed arguments and return typed results (reports, rows, notes as strings);
they never print, never read command-line arguments and draw no progress: a caller that
wants progress passes a callback (:mod:`provkg.service.progress`). Printing is
:mod:`provkg.cli`'s.
"""
