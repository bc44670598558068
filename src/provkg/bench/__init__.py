"""Benchmarks that need the whole stack: the paper's typed (PROV-ML) vs tag-based
(PROVLake) experiment (``provkg bench schemas``).

Modules:
    synthetic  seeded, deterministic capture events + specs + a small domain KG
    dataset    events -> provkg's mapper -> N-Triples files (typed and tagged)
    timing     the repetition rule (cold run, warm runs until the median is tight)
    worker     one store in a child process: load, then answer timed queries
    servers    the benchmark's store set-ups (embedded, rdflib, Oxigraph server, Virtuoso)
    schemas    ``cmd_schemas``: the experiment, its JSON and Markdown results
    plot       the Fig. 10-style PNG
"""
