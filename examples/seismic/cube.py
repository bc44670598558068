"""A small synthetic post-stack seismic cube, written as a real SEG-Y file.

The "acquisition" of the example: a layered earth with four seismic facies
(continuous parallel reflectors, a transparent shale, a channelised interval
with dipping lenses, and a chaotic salt body rising as a dome), a dim "shadow"
zone under the salt, convolved with a Ricker wavelet, plus random noise and a
few spikes for the curation phase to clean. Everything is seeded, so the same
geometry gives the same bytes.

The geometry (inline / crossline numbers, sample interval, grid origin and bin
size in a projected CRS) is the one the geoscientists recorded in the domain
knowledge graph; ``write_segy`` writes it into the binary and trace headers the
way a processing centre would (inline / crossline at bytes 189 / 193, CDP X / Y
at 181 / 185 with a coordinate scalar at byte 71).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import segyio

__all__ = ["SurveyGeometry", "FACIES", "SyntheticCube", "synthesize_cube", "write_segy"]

#: facies label -> name (the classes the learning phase predicts)
FACIES: dict[int, str] = {
    0: "parallel-layered",
    1: "transparent-shale",
    2: "channelised",
    3: "chaotic-salt",
}

# coordinate scalar -100: header values are centimetres (SEG-Y rev1, byte 71)
COORDINATE_SCALAR = -100


@dataclass(frozen=True)
class SurveyGeometry:
    """The 3D grid of a post-stack survey, as the domain KG describes it."""

    inline_start: int
    inline_end: int
    crossline_start: int
    crossline_end: int
    samples: int
    sample_interval_ms: float
    origin_x: float          # easting of (inline_start, crossline_start), metres
    origin_y: float          # northing of the same corner, metres
    bin_size: float          # metres between neighbouring inlines and crosslines
    crs: str = "http://www.opengis.net/def/crs/EPSG/0/31983"  # SIRGAS 2000 / UTM 23S

    @property
    def inlines(self) -> int:
        return self.inline_end - self.inline_start + 1

    @property
    def crosslines(self) -> int:
        return self.crossline_end - self.crossline_start + 1

    def xy(self, inline: int, crossline: int) -> tuple[float, float]:
        """Projected coordinates of a bin: crosslines run east, inlines north."""
        return (
            self.origin_x + (crossline - self.crossline_start) * self.bin_size,
            self.origin_y + (inline - self.inline_start) * self.bin_size,
        )


@dataclass(frozen=True)
class SyntheticCube:
    amplitude: np.ndarray   # (inlines, crosslines, samples) float32, noisy
    facies: np.ndarray      # same shape, int8 labels of FACIES
    geometry: SurveyGeometry


def _ricker(peak_hz: float, dt_s: float, half: int = 12) -> np.ndarray:
    t = np.arange(-half, half + 1) * dt_s
    a = (np.pi * peak_hz * t) ** 2
    return ((1 - 2 * a) * np.exp(-a)).astype(np.float32)


def _convolve_traces(reflectivity: np.ndarray, wavelet: np.ndarray) -> np.ndarray:
    """Convolve every trace (last axis) with a short wavelet, same length out."""
    half = len(wavelet) // 2
    padded = np.pad(reflectivity, ((0, 0), (0, 0), (half, half)))
    out = np.zeros_like(reflectivity)
    n = reflectivity.shape[2]
    for k, w in enumerate(wavelet):
        out += w * padded[:, :, k:k + n]
    return out


def _facies_model(g: SurveyGeometry, rng: np.random.Generator) -> np.ndarray:
    il = np.arange(g.inlines)[:, None, None]
    xl = np.arange(g.crosslines)[None, :, None]
    z = np.arange(g.samples)[None, None, :]
    ns = g.samples
    # gently undulating horizons, then a salt dome rising from the base
    h1 = 0.28 * ns + 3 * np.sin(2 * np.pi * xl / 40) + 2 * np.cos(2 * np.pi * il / 30)
    h2 = 0.50 * ns + 4 * np.sin(2 * np.pi * (xl + il) / 50)
    h3 = 0.74 * ns + 3 * np.cos(2 * np.pi * xl / 35)
    cx, ci = 0.6 * g.crosslines, 0.5 * g.inlines
    dome = 0.22 * ns * np.exp(-(((xl - cx) / (0.18 * g.crosslines)) ** 2
                               + ((il - ci) / (0.3 * g.inlines)) ** 2))
    facies = np.zeros((g.inlines, g.crosslines, ns), dtype=np.int8)
    facies[np.broadcast_to(z >= h1, facies.shape)] = 1
    facies[np.broadcast_to(z >= h2, facies.shape)] = 2
    facies[np.broadcast_to(z >= h3 - dome, facies.shape)] = 3
    return facies


def _reflectivity(facies: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n_il, n_xl, ns = facies.shape
    # parallel layers: one reflection coefficient per sample, laterally continuous
    layered = np.broadcast_to(rng.normal(0, 1, ns), facies.shape) * (
        1 + 0.05 * rng.normal(size=facies.shape))
    shale = 0.12 * rng.normal(size=facies.shape)
    # channels: reflectors dipping across the crosslines, broken into lenses
    xl = np.arange(n_xl)[None, :, None]
    z = np.arange(ns)[None, None, :]
    dip_phase = (z + 0.6 * xl) % 7
    lenses = (rng.random((n_il, n_xl // 4 + 1, ns)) > 0.35).repeat(4, axis=1)[:, :n_xl]
    channels = np.where(dip_phase < 1, 0.9, 0.0) * lenses * np.sign(rng.normal(size=facies.shape))
    salt = 0.45 * rng.normal(size=facies.shape)
    stack = np.stack([layered, shale, channels, salt])
    return np.take_along_axis(stack, facies[None].astype(np.intp), axis=0)[0].astype(np.float32)


def synthesize_cube(geometry: SurveyGeometry, *, seed: int = 7, noise: float = 0.08) -> SyntheticCube:
    """A seeded synthetic amplitude cube with its facies labels."""
    rng = np.random.default_rng(seed)
    facies = _facies_model(geometry, rng)
    wavelet = _ricker(30.0, geometry.sample_interval_ms / 1000.0)
    amplitude = _convolve_traces(_reflectivity(facies, rng), wavelet)
    # a shadow (low-signal zone) under the crest of the salt: the preparation
    # phase's noise threshold is there to drop tiles cut from it
    il0, xl0 = geometry.inlines // 2, int(0.6 * geometry.crosslines)
    shadow = np.ones_like(amplitude)
    shadow[max(0, il0 - 8):il0 + 8, max(0, xl0 - 12):xl0 + 12, geometry.samples // 3:] = 0.05
    amplitude *= shadow
    amplitude += noise * rng.normal(size=amplitude.shape).astype(np.float32)
    spikes = rng.random(amplitude.shape) < 0.002
    amplitude[spikes] += rng.choice([-4.0, 4.0], size=int(spikes.sum()))
    return SyntheticCube(amplitude.astype(np.float32), facies, geometry)


def write_segy(cube: SyntheticCube, path: Path, *, survey_name: str) -> Path:
    """Write ``cube`` as an inline-sorted SEG-Y rev1 file (IEEE float32 samples)."""
    g = cube.geometry
    spec = segyio.spec()
    spec.sorting = segyio.TraceSortingFormat.INLINE_SORTING
    spec.format = 5  # 4-byte IEEE float
    spec.iline, spec.xline = 189, 193
    spec.ilines = list(range(g.inline_start, g.inline_end + 1))
    spec.xlines = list(range(g.crossline_start, g.crossline_end + 1))
    spec.samples = [i * g.sample_interval_ms for i in range(g.samples)]
    dt_us = int(round(g.sample_interval_ms * 1000))
    path.parent.mkdir(parents=True, exist_ok=True)
    with segyio.create(str(path), spec) as f:
        f.text[0] = segyio.tools.create_text_header({
            1: f"SURVEY {survey_name}  SYNTHETIC POST-STACK AMPLITUDE (provkg example)",
            2: f"INLINES {g.inline_start}-{g.inline_end}  CROSSLINES {g.crossline_start}-{g.crossline_end}",
            3: f"SAMPLES {g.samples} @ {g.sample_interval_ms} MS  FORMAT IEEE FLOAT32",
            4: "INLINE BYTE 189  CROSSLINE BYTE 193  CDP X 181  CDP Y 185  SCALAR 71 = -100",
            5: f"CRS EPSG:{g.crs.rsplit('/', 1)[-1]}  GRID ORIGIN {g.origin_x:.0f} E {g.origin_y:.0f} N",
        })
        f.bin.update(hdt=dt_us, hns=g.samples, format=5)
        tr = 0
        for i, il in enumerate(spec.ilines):
            for j, xl in enumerate(spec.xlines):
                x, y = g.xy(il, xl)
                f.header[tr] = {
                    segyio.TraceField.TRACE_SEQUENCE_LINE: tr + 1,
                    segyio.TraceField.INLINE_3D: il,
                    segyio.TraceField.CROSSLINE_3D: xl,
                    segyio.TraceField.CDP: tr + 1,
                    segyio.TraceField.SourceGroupScalar: COORDINATE_SCALAR,
                    segyio.TraceField.CDP_X: int(round(x * 100)),
                    segyio.TraceField.CDP_Y: int(round(y * 100)),
                    segyio.TraceField.TRACE_SAMPLE_COUNT: g.samples,
                    segyio.TraceField.TRACE_SAMPLE_INTERVAL: dt_us,
                }
                f.trace[tr] = cube.amplitude[i, j]
                tr += 1
    return path
