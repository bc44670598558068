"""Use cases the API, the CLI and the benchmarks call; the only place that composes
events, specs, the mapper, stores and queries.

- ``loading``: open a store, load ontologies and RDF files
- ``ingest``: events (files, spools, batches) -> mapper -> store; domain links
- ``querying``: canned queries and read-only SPARQL against a store
"""
