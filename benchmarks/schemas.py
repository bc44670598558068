"""The PROV-ML paper's typed vs tag-based experiment (section 5.4, Fig. 10) across stores.

Same as ``provkg bench schemas``; for example the committed full-scale run:

    .venv/bin/python benchmarks/schemas.py --scale 1 --stores oxigraph,memory,rdflib,oxigraph-server,virtuoso

Results: benchmarks/results/schemas-<scale>.{json,md,png}; data: benchmarks/work/ (git-ignored).
"""

import sys

from provkg.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "schemas", *sys.argv[1:]]))
