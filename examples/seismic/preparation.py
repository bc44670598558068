"""Phase 2, learning-data preparation: slices -> tiles -> labelled HDF5 train / validation / test.

The model trainer's pipeline, captured against ``specs/preparation.yaml``. Each step writes
its product to a file and captures it by reference, derived from what it read, so the lineage
of every HDF5 set reaches back through the tiles and the selected slices to the curated SEG-Y
file; the parameters the queries ask about (slice range, tile size, noise threshold) are
values used along that chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import segyio

from provkg import capture

__all__ = ["PreparationParams", "Dataset", "PreparationResult", "cut_tiles", "prepare"]

WORKFLOW = "seismic-preparation"
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class PreparationParams:
    slice_start: int        # inline numbers, inclusive
    slice_end: int
    tile_size: int
    tile_stride: int
    noise_threshold: float  # tile RMS / slice RMS below which a tile is dropped


@dataclass(frozen=True)
class Dataset:
    split: str
    uri: str
    path: Path
    tiles: int
    inlines: tuple[int, int]


@dataclass
class PreparationResult:
    params: PreparationParams
    datasets: dict[str, Dataset]
    tiles_kept: int
    tiles_dropped: int
    class_counts: list[int]
    run_id: str
    extra: dict[str, Any] = field(default_factory=dict)


def cut_tiles(slices: np.ndarray, inlines: np.ndarray, *, size: int, stride: int,
              noise_threshold: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Square tiles of every (crossline x sample) slice, low-signal ones dropped.

    Returns the tiles (n, size, size), their positions (n, 3: inline, crossline index,
    sample index) and how many were dropped.
    """
    tiles, positions, dropped = [], [], 0
    _, n_xl, n_s = slices.shape
    for image, inline in zip(slices, inlines):
        reference = float(np.sqrt(np.mean(image ** 2))) + 1e-12
        for j in range(0, n_xl - size + 1, stride):
            for k in range(0, n_s - size + 1, stride):
                tile = image[j:j + size, k:k + size]
                if np.sqrt(np.mean(tile ** 2)) / reference < noise_threshold:
                    dropped += 1
                    continue
                tiles.append(tile)
                positions.append((int(inline), j, k))
    return (np.asarray(tiles, dtype=np.float32).reshape(-1, size, size),
            np.asarray(positions, dtype=np.int32).reshape(-1, 3), dropped)


def _write_set(path: Path, tiles: np.ndarray, labels: np.ndarray, positions: np.ndarray,
               **attrs: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as h5:
        h5.create_dataset("tiles", data=tiles, compression="gzip", compression_opts=1)
        h5.create_dataset("labels", data=labels)
        h5.create_dataset("positions", data=positions)
        for key, value in attrs.items():
            h5.attrs[key] = value


def prepare(curated_path: Path, *, interpretation_path: Path, params: PreparationParams,
            facies: dict[int, str], out_dir: Path, sink: Any, run_id: str | None = None,
            agent: str | None = None) -> PreparationResult:
    """Run the preparation workflow; events go to ``sink``."""
    p = params
    curated = capture.ref(curated_path.resolve().as_uri())
    out_dir.mkdir(parents=True, exist_ok=True)
    with capture.workflow(WORKFLOW, sink=sink, run_id=run_id, agent=agent) as wf:
        with wf.task("select_slices", used={"curated_file": curated, "slice_start": p.slice_start,
                                            "slice_end": p.slice_end}) as select:
            with segyio.open(str(curated_path), "r", iline=189, xline=193) as f:
                cube = segyio.tools.cube(f)
                all_inlines = np.asarray(f.ilines)
            keep = (all_inlines >= p.slice_start) & (all_inlines <= p.slice_end)
            inlines = all_inlines[keep]
            slices_path = out_dir / f"slices-{p.slice_start}-{p.slice_end}.npy"
            np.save(slices_path, cube[keep])
            selected = capture.ref(slices_path.resolve().as_uri(), derived_from=[curated])
            select.generate(selected_slices=selected, slice_count=int(keep.sum()))

        with wf.task("cut_tiles", used={"selected_slices": selected, "tile_size": p.tile_size,
                                        "tile_stride": p.tile_stride,
                                        "noise_threshold": p.noise_threshold},
                     dependencies=[select.id]) as cut:
            tiles, positions, dropped = cut_tiles(np.load(slices_path), inlines, size=p.tile_size,
                                                  stride=p.tile_stride,
                                                  noise_threshold=p.noise_threshold)
            tiles_path = out_dir / f"tiles-{p.tile_size}.h5"
            _write_set(tiles_path, tiles, np.zeros(len(tiles), np.int8), positions,
                       tile_size=p.tile_size, noise_threshold=p.noise_threshold)
            tiles_ref = capture.ref(tiles_path.resolve().as_uri(), derived_from=[selected])
            cut.generate(tiles=tiles_ref, tiles_kept=len(tiles), tiles_dropped=dropped)

        interpretation = capture.ref(interpretation_path.resolve().as_uri())
        with wf.task("label_and_split", used={"tiles": tiles_ref, "interpretation": interpretation,
                                              "facies_classes": [facies[k] for k in sorted(facies)]},
                     dependencies=[cut.id]) as split:
            interpreted = np.load(interpretation_path, mmap_mode="r")
            first_inline = int(all_inlines[0])
            centre = p.tile_size // 2
            labels = np.array([interpreted[il - first_inline, j + centre, k + centre]
                               for il, j, k in positions], dtype=np.int8)
            datasets = _split_by_inline(tiles, labels, positions, inlines, out_dir=out_dir,
                                        params=p)
            class_counts = np.bincount(labels[np.isin(positions[:, 0], _split_inlines(inlines)[0])],
                                       minlength=len(facies)).tolist()
            split.generate(**{f"{d.split}_set": capture.ref(d.uri, derived_from=[tiles_ref, curated])
                              for d in datasets.values()}, class_counts=class_counts)
        run = wf.id
    return PreparationResult(p, datasets, len(tiles), dropped, class_counts, run)


def _split_inlines(inlines: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous blocks of inlines: 70 % train, 15 % validation, the rest test."""
    n = len(inlines)
    a, b = max(1, round(0.7 * n)), max(2, round(0.85 * n))
    return inlines[:a], inlines[a:b], inlines[b:]


def _split_by_inline(tiles: np.ndarray, labels: np.ndarray, positions: np.ndarray,
                     inlines: np.ndarray, *, out_dir: Path,
                     params: PreparationParams) -> dict[str, Dataset]:
    datasets = {}
    for split, block in zip(SPLITS, _split_inlines(inlines)):
        mask = np.isin(positions[:, 0], block)
        path = out_dir / f"{split}.h5"
        _write_set(path, tiles[mask], labels[mask], positions[mask], split=split,
                   slice_start=params.slice_start, slice_end=params.slice_end,
                   tile_size=params.tile_size, noise_threshold=params.noise_threshold)
        datasets[split] = Dataset(split, path.resolve().as_uri(), path, int(mask.sum()),
                                  (int(block[0]), int(block[-1])))
    return datasets
