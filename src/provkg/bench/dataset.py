"""Synthetic events -> provkg's own mapper -> one N-Triples file per schema.

The typed and tagged datasets are built in two processes at once (one per core), each
generating the same seeded events and mapping them with its schema; a worker can go on to
bulk-load its file into an embedded Oxigraph store on disk, so "events -> triples -> both
datasets loaded" is one timed pipeline.

The mapper states a task's class and links on both its begin and its end event; duplicates
are dropped per event group (see :class:`provkg.bench.synthetic.EventGroup`), so every line
of a file is a distinct triple and the line count is the dataset's triple count.
"""

from __future__ import annotations

import multiprocessing
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from provkg.bench import synthetic
from provkg.bench.synthetic import Shape

__all__ = ["DatasetReport", "build_datasets", "domain_kg_ntriples", "write_dataset"]

_BUFFER = 8 * 1024 * 1024


@dataclass(frozen=True)
class DatasetReport:
    """What one worker of the pipeline did, with wall-clock seconds per step."""

    schema: str
    path: str
    triples: int
    events: int
    map_seconds: float                  # generate + map + write
    load_seconds: float | None = None   # bulk load into embedded Oxigraph on disk
    compact_seconds: float | None = None  # then its compaction (Store.optimize), for queries
    store_dir: str | None = None
    store_triples: int | None = None
    peak_rss: int | None = None         # bytes, of the worker process (mapping + loading)


def domain_kg_ntriples() -> list[str]:
    """The synthetic domain KG as N-Triples lines (identical in both datasets)."""
    import pyoxigraph

    out = []
    for t in pyoxigraph.parse(synthetic.domain_kg_turtle(), format=pyoxigraph.RdfFormat.TURTLE):
        out.append(f"{t.subject} {t.predicate} {t.object} .\n")
    return out


def _specs(shape: Shape) -> dict:
    from provkg.spec import parse_spec

    return {name: parse_spec(text, source=f"<synthetic {name}>")
            for name, text in synthetic.spec_texts(shape).items()}


def write_dataset(shape: Shape, schema: str, path: Path, *, progress: bool = False,
                  position: int = 0) -> DatasetReport:
    """Generate the events of ``shape``, map them in ``schema`` and write N-Triples to ``path``.

    The file holds the prospective triples of the three specs, the domain KG and the
    retrospective triples, each distinct triple once.
    """
    from provkg.mapper import MapState, finish, map_batch, map_spec
    from provkg.service.ingest import rare_collections

    start = time.perf_counter()
    specs = _specs(shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    shared_seen: set[tuple[str, str, str]] = set()
    triples = events = 0
    bar = _bar(total=synthetic.count_groups(shape), desc=f"map {schema:6}", unit="epoch",
               enabled=progress, position=position)
    # collected as provkg's own ingest is: the default thresholds took a third of the mapping
    with rare_collections(), open(path, "w", encoding="utf-8", buffering=_BUFFER) as out:
        for spec in specs.values():
            fresh = [t for t in dict.fromkeys(map_spec(spec, schema=schema)) if t not in shared_seen]
            shared_seen.update(fresh)
            out.write("".join(f"{s} {p} {o} .\n" for s, p, o in fresh))
            triples += len(fresh)
        kg = domain_kg_ntriples()
        out.write("".join(kg))
        triples += len(kg)
        state = MapState(specs, schema=schema)
        for group in synthetic.iter_event_groups(shape):
            mapped = dict.fromkeys(map_batch(group.events, state))
            if group.shared:
                mapped = dict.fromkeys(t for t in mapped if t not in shared_seen)
                shared_seen.update(mapped)
            out.write("".join(f"{s} {p} {o} .\n" for s, p, o in mapped))
            triples += len(mapped)
            events += len(group.events)
            bar.update(1)
        rest = [t for t in dict.fromkeys(finish(state)) if t not in shared_seen]
        if state.summaries is not None and state.summaries.retract:
            # a rollup written and then rewritten: the file holds both versions (the ingest
            # service deletes the old one; nothing here can)
            raise RuntimeError(f"{path}: {len(state.summaries.retract):,} rollup triples were "
                               "replaced while mapping: the events end a parent before its sections")
        if rest:  # tasks whose run never came: a generator bug, visible in the count
            out.write("".join(f"{s} {p} {o} .\n" for s, p, o in rest))
            triples += len(rest)
    bar.close()
    return DatasetReport(schema=schema, path=str(path), triples=triples, events=events,
                         map_seconds=time.perf_counter() - start)


def bulk_load_oxigraph(path: Path, store_dir: Path) -> tuple[float, float, int]:
    """Bulk-load an N-Triples file into a fresh embedded Oxigraph store on disk, then compact
    it as ``provkg load`` does (``OxigraphStore.compact``: without it the loaded table files
    overlap and the first process to query finds Q5 several times slower).

    Returns (load seconds, compaction seconds, triples in the store)."""
    import pyoxigraph

    if store_dir.exists():
        shutil.rmtree(store_dir)
    start = time.perf_counter()
    store = pyoxigraph.Store(str(store_dir))
    store.bulk_load(path=str(path), format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    loaded = time.perf_counter()
    store.optimize()
    compacted = time.perf_counter()
    count = len(store)
    del store
    return loaded - start, compacted - loaded, count


def _worker(shape: Shape, schema: str, path: str, store_dir: str | None, progress: bool,
            position: int) -> DatasetReport:
    import resource

    report = write_dataset(shape, schema, Path(path), progress=progress, position=position)
    extra: dict[str, object] = {}
    if store_dir is not None:
        seconds, compact, count = bulk_load_oxigraph(Path(path), Path(store_dir))
        extra = {"load_seconds": seconds, "compact_seconds": compact, "store_dir": store_dir,
                 "store_triples": count}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return DatasetReport(**{**report.__dict__, **extra, "peak_rss": rss})


def build_datasets(shape: Shape, work: Path, *, schemas: tuple[str, ...] = ("typed", "tagged"),
                   load_oxigraph: bool = True, progress: bool = False,
                   parallel: bool = True) -> tuple[dict[str, DatasetReport], float]:
    """Both datasets of ``shape`` under ``work`` (``{schema}.nt``), each optionally loaded into
    ``work/oxigraph-{schema}``. Returns the reports and the pipeline's wall-clock seconds."""
    work.mkdir(parents=True, exist_ok=True)
    jobs = {s: (shape, s, str(work / f"{s}.nt"),
                str(work / f"oxigraph-{s}") if load_oxigraph else None, progress, i)
            for i, s in enumerate(schemas)}
    start = time.perf_counter()
    if parallel and len(jobs) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(len(jobs)) as pool:
            pending = {s: pool.apply_async(_worker, job) for s, job in jobs.items()}
            reports = {s: r.get() for s, r in pending.items()}
    else:
        reports = {s: _worker(*job) for s, job in jobs.items()}
    return reports, time.perf_counter() - start


def _bar(*, total: int, desc: str, unit: str, enabled: bool, position: int):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, position=position,
                leave=True, dynamic_ncols=True, mininterval=0.5)
