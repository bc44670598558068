"""Use case: export the store, one run or one value's lineage as RDF (N-Quads, TriG, Turtle),
W3C PROV (PROV-JSON, PROV-N, PROV-XML, PROV-JSONLD, written by the ``prov`` package) or a
Workflow Run Crate (RO-Crate, written by the ``rocrate`` package).

>>> export_format("runs/run-1.provn"), export_format("crate.zip"), export_format("out/")
('prov-n', 'ro-crate', 'ro-crate')
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from provkg.errors import BadParameter, StoreError
from provkg.service.export_graph import Scope, local_copy, prov_classes, scope_of
from provkg.service.export_prov import PROV_FORMATS, prov_document, serialize_prov
from provkg.vocab import DEFAULT_BASE

if TYPE_CHECKING:
    from provkg.store import Store

__all__ = ["EXPORT_FORMATS", "FILE_NAMES", "MEDIA_TYPES", "ExportReport", "export", "export_bytes", "export_format"]

#: every export format, with its media type (``GET /v1/export``)
MEDIA_TYPES = {
    "nq": "application/n-quads", "trig": "application/trig", "ttl": "text/turtle",
    "prov-json": "application/json", "prov-n": "text/provenance-notation",
    "prov-xml": "application/xml", "prov-jsonld": "application/ld+json", "ro-crate": "application/zip",
}
EXPORT_FORMATS = tuple(MEDIA_TYPES)
#: file endings -> format (a name ending otherwise, and not a folder, is refused)
_ENDINGS = {".nq": "nq", ".nq.gz": "nq", ".trig": "trig", ".ttl": "ttl", ".provn": "prov-n",
            ".json": "prov-json", ".provx": "prov-xml", ".xml": "prov-xml", ".jsonld": "prov-jsonld",
            ".zip": "ro-crate"}
FILE_NAMES = {"nq": "export.nq", "trig": "export.trig", "ttl": "export.ttl", "prov-json": "export.json",
               "prov-n": "export.provn", "prov-xml": "export.provx", "prov-jsonld": "export.jsonld",
               "ro-crate": "export-crate.zip"}


@dataclass
class ExportReport:
    """What an export wrote: its format, what it covers, and how many of each PROV record
    (PROV formats, RO-Crate) or RDF statements (``statements``) it holds."""

    format: str
    scope: str
    target: str
    counts: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        said = ", ".join(f"{n:,} {what}" for what, n in self.counts.items())
        return f"exported {self.scope} as {self.format} to {self.target}: {said}"


def export_format(path: str, given: str | None = None) -> str:
    """The format of an export to ``path``: ``given``, else the one its name says (a folder,
    or a name without a suffix, is an RO-Crate folder; ``-``, standard output, N-Quads).

    Raises:
        BadParameter: an unknown format, or a name that says none.
    """
    if given is not None:
        if given not in MEDIA_TYPES:
            raise BadParameter(f"unknown export format {given!r}; expected one of: {', '.join(EXPORT_FORMATS)}")
        return given
    if path == "-":  # standard output: the backup's N-Quads, as ever
        return "nq"
    name = path.lower()
    for ending, fmt in sorted(_ENDINGS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(ending):
            return fmt
    if path.endswith(("/", os.sep)) or Path(path).is_dir() or not Path(path).suffix:
        return "ro-crate"
    raise BadParameter(f"{path}: the name says no export format (.nq .trig .ttl .json .provn .provx "
                       ".xml .jsonld, .zip or a folder for ro-crate); give --format")


def _counts(document: object) -> dict[str, int]:
    from prov import model as M

    kinds = (("activities", M.ProvActivity), ("entities", M.ProvEntity), ("agents", M.ProvAgent),
             ("usages", M.ProvUsage), ("generations", M.ProvGeneration), ("derivations", M.ProvDerivation))
    return {name: len(list(document.get_records(kind))) for name, kind in kinds}  # type: ignore[attr-defined]


def _rdf(store: Store, scope: Scope, fmt: str) -> tuple[bytes, int]:
    import pyoxigraph as ox

    if scope.nodes is None:  # every graph, ontologies and domain KGs too: what `load` reads back
        dump = io.BytesIO()
        store.dump(dump)
        quads = list(ox.parse(dump.getvalue(), format=ox.RdfFormat.N_QUADS))
    else:
        quads = list(local_copy(store, scope))
    target = {"nq": ox.RdfFormat.N_QUADS, "trig": ox.RdfFormat.TRIG, "ttl": ox.RdfFormat.TURTLE}[fmt]
    if fmt == "ttl":  # Turtle has no graphs: the triples of every graph, once each
        quads = list(dict.fromkeys(ox.Quad(q.subject, q.predicate, q.object) for q in quads))
    prefixes = {"prov": "http://www.w3.org/ns/prov#"} if fmt != "nq" else None
    return ox.serialize(quads, format=target, prefixes=prefixes) or b"", len(quads)


def _run_activities(store: Store, scope: Scope, base: str) -> dict[str, set[str]]:
    """Run IRI -> its executions in ``scope``: every run of the store, the run of a run's
    scope, or the runs a lineage's executions belong to."""
    from provkg.service.export_graph import run_activities as activities_of
    from provkg.vocab import PROVLAKE, PROVML, SPROV

    if scope.run is not None:
        return {scope.run: activities_of(store, scope.run)}
    classes = " ".join(f"<{c}>" for c in (PROVLAKE.WorkflowExecution, PROVML.LearningProcessExecution,
                                          SPROV.WFExecution))
    rows = store.select(f"SELECT DISTINCT ?r WHERE {{ {{ ?t <{PROVLAKE.isPartOf}> ?r }} UNION "
                        f"{{ VALUES ?c {{ {classes} }} ?r a ?c }} FILTER(isIRI(?r)) }}", hide_system_graphs=False).rows
    runs = {str(r) for (r,) in rows if str(r).startswith(f"{base}run/")}
    out = {run: activities_of(store, run) for run in sorted(runs)}
    if scope.nodes is not None:
        out = {run: acts & scope.nodes for run, acts in out.items() if acts & scope.nodes}
    return out


def export_bytes(store: Store, fmt: str, *, run: str | None = None, lineage: str | None = None,
                 with_data: bool = False, base: str = DEFAULT_BASE) -> tuple[bytes, ExportReport]:
    """The export in format ``fmt`` as bytes (an RO-Crate as a zip) and its report.

    Raises:
        BadParameter: an unknown format, both ``run`` and ``lineage``.  NotFound: no such
            run or value.  StoreError: the store cannot be read.
    """
    fmt = export_format("-", fmt or "prov-json")
    if run is not None and lineage is not None:
        raise BadParameter("give --run or --lineage, not both")
    scope = scope_of(store, run=run, lineage=lineage, base=base)
    report = ExportReport(fmt, scope.label, "-")
    if fmt in ("nq", "trig", "ttl"):
        data, statements = _rdf(store, scope, fmt)
        report.counts = {"statements": statements}
        return data, report
    classes = prov_classes(store)
    copy = local_copy(store, scope)
    document = prov_document(copy, classes, base=base)
    report.counts = _counts(document)
    if fmt in PROV_FORMATS:
        return serialize_prov(document, fmt), report
    with tempfile.TemporaryDirectory(prefix="provkg-crate-") as folder:
        crate = _crate(store, scope, copy, classes, serialize_prov(document, "prov-json"), with_data, base)
        zipped = Path(folder) / "crate.zip"
        crate.write_zip(str(zipped))
        return zipped.read_bytes(), report


def _crate(store: Store, scope: Scope, copy: object, classes: object, prov_json: bytes, with_data: bool,
           base: str) -> Any:
    from provkg.service.export_crate import build_crate
    from provkg.service.registration import stored_specs

    specs = {spec.workflow: spec for spec in stored_specs(store)}
    return build_crate(copy, _run_activities(store, scope, base), specs, classes,  # type: ignore[arg-type]
                       prov_json, title=scope.label, with_data=with_data, base=base)


def export(store: Store, target: str | BinaryIO, fmt: str | None = None, *, run: str | None = None,
           lineage: str | None = None, with_data: bool = False, base: str = DEFAULT_BASE) -> ExportReport:
    """Write the export to the file or folder ``target`` (whole or not at all) or to the
    binary stream ``target``; the format is ``fmt`` or the one ``target``'s name says.

    Raises:
        BadParameter, NotFound, StoreError (as :func:`export_bytes`; also a file that
            cannot be written).
    """
    name = target if isinstance(target, str) else "-"
    fmt = export_format(name, fmt)
    if fmt == "nq" and run is None and lineage is None:  # the backup: every graph, .gz too
        from provkg.service.loading import export_store

        lines = export_store(store, target)
        return ExportReport(fmt, "the whole store", name, {"statements": lines})
    if name.lower().endswith(".gz"):
        raise BadParameter(f"{name}: only a whole-store N-Quads export is compressed (.nq.gz)")
    if fmt == "ro-crate" and isinstance(target, str) and _is_folder(name):
        return _write_crate_folder(store, Path(target), run=run, lineage=lineage, with_data=with_data, base=base)
    data, report = export_bytes(store, fmt, run=run, lineage=lineage, with_data=with_data, base=base)
    report.target = name
    if isinstance(target, str):
        _write_file(Path(target), data)
    else:
        target.write(data)
        target.flush()
    return report


def _is_folder(name: str) -> bool:
    return not name.lower().endswith(".zip")


def _write_file(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _write_crate_folder(store: Store, folder: Path, *, run: str | None, lineage: str | None,
                        with_data: bool, base: str) -> ExportReport:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BadParameter(f"{folder}: an RO-Crate folder must be new or empty")
    if run is not None and lineage is not None:
        raise BadParameter("give --run or --lineage, not both")
    scope = scope_of(store, run=run, lineage=lineage, base=base)
    classes = prov_classes(store)
    copy = local_copy(store, scope)
    document = prov_document(copy, classes, base=base)
    crate = _crate(store, scope, copy, classes, serialize_prov(document, "prov-json"), with_data, base)
    partial = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        crate.write(str(partial))
        if folder.exists():
            folder.rmdir()
        os.replace(partial, folder)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise StoreError(f"cannot write {folder}: {exc.strerror or exc}") from exc
    return ExportReport("ro-crate", scope.label, str(folder), _counts(document))
