"""Phase 1, data curation: read a raw SEG-Y file, extract its geometry, link it, clean it.

This is the script a geoscience data team runs on a delivered volume. Its provenance is
captured with ``provkg.capture`` against ``specs/curation.yaml``: the raw file is captured by
reference with ``domain=`` the knowledge-graph IRI the geoscientists gave it, every extracted
quantity is captured as derived from the file (their spec attributes carry ``concept:`` such
as ``seis:numberOfSlices``), and the curated file as derived from the raw one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import segyio

from provkg import capture

__all__ = ["Annotation", "Extracted", "CurationResult", "read_geometry", "despike", "curate"]

WORKFLOW = "seismic-curation"


@dataclass(frozen=True)
class Annotation:
    """What the geoscientists recorded about the file (IRIs of the domain KG)."""

    segy_file: str
    survey: str
    survey_label: str
    basin: str
    basin_label: str
    field: str
    field_label: str


@dataclass(frozen=True)
class Extracted:
    """The geometry a SEG-Y file's headers state."""

    inline_start: int
    inline_end: int
    crossline_start: int
    crossline_end: int
    number_of_slices: int
    samples_per_trace: int
    sample_interval_ms: float
    coordinates: str   # WKT polygon of the trace grid, with its CRS


@dataclass(frozen=True)
class CurationResult:
    raw_uri: str
    curated_uri: str
    curated_path: Path
    extracted: Extracted
    spikes_removed: int
    run_id: str


def _corner_wkt(xs: np.ndarray, ys: np.ndarray, crs: str) -> str:
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    ring = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]
    points = ", ".join(f"{x:.10g} {y:.10g}" for x, y in ring)
    return f"<{crs}> POLYGON(({points}))"


def read_geometry(path: Path, *, crs: str) -> Extracted:
    """Inline / crossline ranges, slice count, sample interval and grid footprint from the headers."""
    with segyio.open(str(path), "r", iline=189, xline=193) as f:
        scalar = f.header[0][segyio.TraceField.SourceGroupScalar]
        factor = 1.0 / abs(scalar) if scalar < 0 else float(scalar or 1)
        xs = f.attributes(segyio.TraceField.CDP_X)[:] * factor
        ys = f.attributes(segyio.TraceField.CDP_Y)[:] * factor
        return Extracted(
            inline_start=int(f.ilines[0]), inline_end=int(f.ilines[-1]),
            crossline_start=int(f.xlines[0]), crossline_end=int(f.xlines[-1]),
            number_of_slices=len(f.ilines),
            samples_per_trace=len(f.samples),
            sample_interval_ms=segyio.tools.dt(f) / 1000.0,
            coordinates=_corner_wkt(xs, ys, crs),
        )


def despike(traces: np.ndarray, *, window: int, threshold: float) -> tuple[np.ndarray, int]:
    """Replace samples further than ``threshold`` robust amplitudes from a running median.

    ``traces`` is (n_traces, n_samples); the scale of each trace is 1.4826 x its median
    absolute amplitude. Returns the cleaned copy and the count of samples replaced.
    """
    half = window // 2
    padded = np.pad(traces, ((0, 0), (half, half)), mode="edge")
    stacked = np.stack([padded[:, k:k + traces.shape[1]] for k in range(window)])
    median = np.median(stacked, axis=0)
    scale = 1.4826 * np.median(np.abs(traces), axis=1, keepdims=True) + 1e-6
    spikes = np.abs(traces - median) > threshold * scale
    cleaned = np.where(spikes, median, traces).astype(np.float32)
    return cleaned, int(spikes.sum())


def _write_like(src: Path, dst: Path, traces: np.ndarray) -> None:
    with segyio.open(str(src), "r", iline=189, xline=193) as f:
        spec = segyio.tools.metadata(f)
        with segyio.create(str(dst), spec) as out:
            out.text[0] = f.text[0]
            out.bin = f.bin
            out.header = f.header
            out.trace = traces


def _geometry_values(g: Extracted) -> dict[str, Any]:
    return {
        "inline_start": g.inline_start, "inline_end": g.inline_end,
        "crossline_start": g.crossline_start, "crossline_end": g.crossline_end,
        "number_of_slices": g.number_of_slices, "samples_per_trace": g.samples_per_trace,
        "sample_interval": g.sample_interval_ms, "coordinates": g.coordinates,
    }


def curate(raw_path: Path, *, annotation: Annotation, out_dir: Path, sink: Any, crs: str,
           run_id: str | None = None, median_window: int = 5, spike_threshold: float = 6.0,
           agent: str | None = None) -> CurationResult:
    """Run the curation workflow on ``raw_path``; events go to ``sink``."""
    raw = capture.ref(raw_path.resolve().as_uri(), domain=annotation.segy_file)
    with capture.workflow(WORKFLOW, sink=sink, run_id=run_id, agent=agent) as wf:
        with wf.task("read_segy", used={"segy_file": raw}) as read:
            geometry = read_geometry(raw_path, crs=crs)
            read.generate(**_geometry_values(geometry))
        with wf.task("annotate", used={"segy_file": raw}, dependencies=[read.id]) as annotate:
            # the KG resource is where this data lives: captured by reference to it
            annotate.generate(
                survey=capture.ref(annotation.survey, domain=annotation.survey),
                basin=capture.ref(annotation.basin, domain=annotation.basin),
                field=capture.ref(annotation.field, domain=annotation.field),
            )
        curated_path = out_dir / (raw_path.stem + "-curated.sgy")
        with wf.task("denoise", used={"segy_file": raw, "median_window": median_window,
                                      "spike_threshold": spike_threshold},
                     dependencies=[read.id]) as denoise:
            with segyio.open(str(raw_path), "r", iline=189, xline=193) as f:
                traces = segyio.tools.collect(f.trace[:])
            cleaned, removed = despike(traces, window=median_window, threshold=spike_threshold)
            out_dir.mkdir(parents=True, exist_ok=True)
            _write_like(raw_path, curated_path, cleaned)
            curated = capture.ref(curated_path.resolve().as_uri(), derived_from=[raw])
            denoise.generate(curated_file=curated, spikes_removed=removed)
        run = wf.id
    return CurationResult(raw.location or "", curated.location or "", curated_path, geometry,
                          removed, run)
