"""``provkg demo``: the seismic scientific-ML lifecycle end to end, captured, linked and queried.

Layout. The lifecycle itself (synthetic SEG-Y, curation, preparation, learning) is user code
in ``examples/seismic/`` that imports only ``provkg.capture``; it ships in the wheel as
``provkg/_data/examples/seismic`` and :mod:`provkg.demo.example` imports it by path. This
package does what a user of provkg would do around such code:

- ``run``      the use case: :func:`run_demo` (typed keywords in, :class:`DemoResult` out)
- ``example``  find and import the example; read the domain KG's facts about the SEG-Y file
- ``summary``  what the lifecycle's own Python measured (``provkg-demo/run.json``)
- ``answers``  Q1-Q7 (and DNNProv's d6-d8) via ``run_query``, checked against the summary
- ``curves``   each configuration's training, validation and test numbers, read from the store
- ``plots``    those numbers drawn (one loss scale for all), and the best model's lineage
- ``report``   ``report.md`` / ``report.html``, numbers rounded for reading
- ``readable`` how numbers, durations and identifiers are shown

Nothing here prints: ``provkg demo`` (:mod:`provkg.cli.demo`) draws the progress and the
answers. Re-running with the same settings reuses the previous run (its summary and its
triples) and only asks the questions again; ``fresh`` (or ``online``, which wants to watch
training) deletes the demo's provenance and output folder and starts over.
"""

from __future__ import annotations

from provkg.demo.run import KG_GRAPH, RUN_PREFIX, DemoListener, DemoResult, OnlineHook, QuietListener, run_demo

__all__ = ["run_demo", "DemoResult", "DemoListener", "QuietListener", "OnlineHook",
           "RUN_PREFIX", "KG_GRAPH"]
