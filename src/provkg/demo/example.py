"""Where the seismic example lives, how it is imported, and what the domain KG says about it.

The example's workflow code is plain user code in ``examples/seismic/`` (it imports only
``provkg.capture``), so people read it where they would write their own. It ships inside the
wheel as ``provkg/_data/examples/seismic`` (pyproject force-include); like
:mod:`provkg.ontology`, this module looks for the installed copy first, then the source
checkout, and imports the folder as a package by path with importlib.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from provkg.errors import NotFound, ProvkgError
from provkg.store import Store
from provkg.term import iri

__all__ = ["example_dir", "load_example", "KG_FILE", "KgFacts", "kg_facts", "SAMPLES_PER_TRACE"]

#: the package name the example is imported under
PACKAGE = "provkg_seismic_example"
#: the SEG-Y volume of the KG that the demo synthesises, curates and learns from
KG_FILE = "https://w3id.org/provkg/example/seismic/segy-syn-lula-3d-pstm"
#: trace length of the synthetic volume (the KG records no recording length)
SAMPLES_PER_TRACE = 96


@cache
def example_dir() -> Path:
    """The folder holding the seismic example: the wheel's data folder, else the repo's."""
    here = Path(__file__).resolve()
    packaged = here.parents[1] / "_data" / "examples" / "seismic"
    in_repo = here.parents[3] / "examples" / "seismic"
    for folder in (packaged, in_repo):
        if (folder / "__init__.py").is_file():
            return folder
    raise NotFound(f"seismic example not found: looked in {packaged} (installed wheel) and "
                   f"{in_repo} (source checkout)")


def load_example() -> ModuleType:
    """The example folder imported as the package ``provkg_seismic_example``."""
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    folder = example_dir()
    spec = importlib.util.spec_from_file_location(
        PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        raise NotFound(f"cannot import the seismic example from {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[PACKAGE]
        raise
    return module


@dataclass(frozen=True)
class KgFacts:
    """What the geoscientists' KG states about the demo's SEG-Y volume."""

    file: str
    file_name: str
    inline_start: int
    inline_end: int
    crossline_start: int
    crossline_end: int
    sample_interval_ms: float
    footprint_wkt: str
    survey: str
    survey_label: str
    field: str
    field_label: str
    basin: str
    basin_label: str


_FACTS = """\
PREFIX seis: <https://w3id.org/provkg/seismic#>
PREFIX geo: <http://www.opengis.net/ont/geosparql#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT ?name ?il0 ?il1 ?xl0 ?xl1 ?dt ?wkt ?survey ?survey_label ?field ?field_label ?basin ?basin_label
WHERE {
  VALUES ?file { FILE }
  ?file seis:fileName ?name ; seis:inlineStart ?il0 ; seis:inlineEnd ?il1 ;
        seis:crosslineStart ?xl0 ; seis:crosslineEnd ?xl1 ; seis:sampleInterval ?dt ;
        seis:survey ?survey ; geo:hasGeometry/geo:asWKT ?wkt .
  ?survey rdfs:label ?survey_label ; seis:field ?field ; seis:basin ?basin .
  ?field rdfs:label ?field_label .
  ?basin rdfs:label ?basin_label .
}"""


def kg_facts(store: Store, file: str = KG_FILE) -> KgFacts:
    """The KG's description of ``file`` (geometry, survey, field, basin).

    Raises:
        NotFound: the store does not describe the file completely (is the KG loaded?).
    """
    rows = store.select(_FACTS.replace("FILE", iri(file))).as_dicts()
    if not rows:
        raise NotFound(f"the store has no complete description of {file} (file name, inline / "
                       "crossline range, sample interval, footprint, survey, field, basin)")
    r: dict[str, Any] = rows[0]  # numeric literals come as numbers
    return KgFacts(file, str(r["name"]), int(r["il0"]), int(r["il1"]), int(r["xl0"]),
                   int(r["xl1"]), float(r["dt"]), str(r["wkt"]), str(r["survey"]),
                   str(r["survey_label"]), str(r["field"]), str(r["field_label"]),
                   str(r["basin"]), str(r["basin_label"]))


_WKT = re.compile(r"^\s*(?:<(?P<crs>[^>]+)>\s*)?POLYGON\s*\(\((?P<ring>[^()]+)\)\)\s*$", re.IGNORECASE)


def parse_footprint(wkt: str) -> tuple[str | None, list[tuple[float, float]]]:
    """The CRS IRI (None for CRS84) and the outer ring of a WKT polygon literal.

    Raises:
        ProvkgError: ``wkt`` is not a single-ring ``POLYGON((x y, ...))``.
    """
    m = _WKT.match(wkt)
    if m is None:
        raise ProvkgError(f"footprint is not a WKT POLYGON((x y, ...)): {wkt[:80]!r}")
    points = [tuple(float(c) for c in p.split()) for p in m["ring"].split(",")]
    return m["crs"], [(p[0], p[1]) for p in points]


def survey_geometry(example: ModuleType, facts: KgFacts) -> object:
    """The example's ``SurveyGeometry`` for the grid the KG describes: the footprint's
    south-west corner is bin (first inline, first crossline); bins are square."""
    crs, ring = parse_footprint(facts.footprint_wkt)
    xs, ys = [p[0] for p in ring], [p[1] for p in ring]
    n_il = facts.inline_end - facts.inline_start + 1
    n_xl = facts.crossline_end - facts.crossline_start + 1
    bin_x = (max(xs) - min(xs)) / max(1, n_xl - 1)
    bin_y = (max(ys) - min(ys)) / max(1, n_il - 1)
    if crs is None or abs(bin_x - bin_y) > 1e-6 * max(bin_x, 1.0):
        raise ProvkgError(f"the KG footprint of {facts.file} is not a projected grid of square "
                          f"bins ({bin_x:g} x {bin_y:g}); the demo cannot lay out its traces")
    return example.lifecycle.SurveyGeometry(
        facts.inline_start, facts.inline_end, facts.crossline_start, facts.crossline_end,
        SAMPLES_PER_TRACE, facts.sample_interval_ms, min(xs), min(ys), bin_x, crs=crs)
