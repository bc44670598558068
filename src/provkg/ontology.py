"""The one reader of provkg's ontology files (``ontology/*.ttl``).

The files live at the repository root in ``ontology/`` and ship inside the wheel
as ``provkg/_data/ontology`` (pyproject force-include). This module finds them in
either place, so an editable checkout and an installed wheel behave the same.

``ontology/imports/`` holds local copies of the W3C / community ontologies ours
build on (PROV-O, ML Schema, ProvONE), so OWL reasoning works
offline: :func:`load_owlready_world` loads everything into an owlready2 world with
every ``owl:imports`` redirected to those copies, and :func:`run_reasoner`
classifies it with HermiT.

>>> ontology_names()
['provlake', 'prov-ml', 's-prov', 'seismic', 'provkg']
>>> "owl:Ontology" in read_ontology("prov-ml")
True
>>> ontology_path("prov-ml").name
'prov-ml.ttl'

"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from provkg.errors import NotFound, ProvkgError

if TYPE_CHECKING:  # owlready2 is imported lazily: only reasoning needs it
    import owlready2

__all__ = [
    "ontology_names",
    "ontology_path",
    "read_ontology",
    "ontology_name",
    "ontology_text",
    "ONTOLOGY_FORMATS",
    "all_ontology_paths",
    "import_paths",
    "import_graphs",
    "ontology_iri",
    "find_ontology_dir",
    "load_owlready_world",
    "run_reasoner",
]

#: our ontologies, in dependency order (each builds only on the ones before it)
_FILES: dict[str, str] = {
    "provlake": "provlake.ttl",
    "prov-ml": "prov-ml.ttl",
    "s-prov": "s-prov.ttl",
    "seismic": "seismic.ttl",
    "provkg": "provkg.ttl",
}

#: ontology IRI (as used in owl:imports) -> file in ``ontology/imports/``
#: (trailing "#" or "/" ignored when matching)
_IMPORTS: dict[str, str] = {
    "http://www.w3.org/ns/prov-o": "prov-o.ttl",
    "http://www.w3.org/ns/prov": "prov-o.ttl",
    "http://www.w3.org/ns/mls": "MLSchema.ttl",
}

#: the owl:Ontology IRI each of our files declares (used to resolve imports among ours)
_ONTOLOGY_IRIS: dict[str, str] = {
    "provlake": "https://w3id.org/provkg/provlake",
    "prov-ml": "https://w3id.org/provkg/provml",
    "s-prov": "https://w3id.org/provkg/s-prov",  # provkg's edition; terms keep S-PROV's namespace
    "seismic": "https://w3id.org/provkg/seismic",
    "provkg": "https://w3id.org/provkg/ns",
}


@cache
def _ontology_dir() -> Path:
    return find_ontology_dir(Path(__file__).resolve().parent)


def find_ontology_dir(package_dir: Path) -> Path:
    """The folder holding our .ttl files, given the folder of the ``provkg`` package.

    An installed wheel has them in ``<package>/_data/ontology``; a source checkout
    (editable install) in ``<repo>/ontology`` next to ``<repo>/src/provkg``.

    Raises:
        NotFound: neither folder exists.
    """
    packaged = package_dir / "_data" / "ontology"
    if packaged.is_dir():
        return packaged
    in_repo = package_dir.parents[1] / "ontology"
    if in_repo.is_dir():
        return in_repo
    raise NotFound(
        f"ontology folder not found: looked in {packaged} (installed wheel) and "
        f"{in_repo} (source checkout)"
    )


def ontology_names() -> list[str]:
    """Names of provkg's ontologies, in dependency order."""
    return list(_FILES)


#: the namespace prefixes (docs/how-to/sparql.md), which users reach for before the file stems
_ALIASES = {"provml": "prov-ml", "sprov": "s-prov", "seis": "seismic"}

#: media type -> rdflib serializer name, Turtle (the files' own form) first
ONTOLOGY_FORMATS = {"text/turtle": "turtle", "application/n-triples": "nt",
                    "application/rdf+xml": "xml"}


def ontology_name(name: str) -> str:
    """The ontology's name for a name or its namespace prefix (``provml`` -> ``prov-ml``)."""
    return _ALIASES.get(name, name)


def ontology_path(name: str) -> Path:
    """Path of the Turtle file of ontology ``name`` (or its prefix, e.g. ``provml``).

    Raises:
        NotFound: ``name`` is not one of :func:`ontology_names`, or its file is missing.
    """
    try:
        file_name = _FILES[ontology_name(name)]
    except KeyError:
        raise NotFound(
            f"unknown ontology {name!r}; expected one of: {', '.join(_FILES)}"
        ) from None
    path = _ontology_dir() / file_name
    if not path.is_file():
        raise NotFound(f"ontology file missing: {path}")
    return path


def read_ontology(name: str) -> str:
    """Turtle text of ontology ``name`` (see :func:`ontology_names`).

    Raises:
        NotFound: unknown name or missing file.
    """
    return ontology_path(name).read_text(encoding="utf-8")


def ontology_text(name: str, media: str) -> str:
    """Ontology ``name`` in ``media`` (a key of :data:`ONTOLOGY_FORMATS`): the file itself
    for Turtle, else rdflib's serialization of it (RDF/XML is what owlready2 reads).

    Raises:
        NotFound: unknown name or missing file.
    """
    path = ontology_path(name)
    if media == "text/turtle":
        return path.read_text(encoding="utf-8")
    return _serialized(path, path.stat().st_mtime, ONTOLOGY_FORMATS[media])


def ontology_terms(name: str) -> list[dict[str, str]]:
    """The classes and properties ontology ``name`` declares: IRI, kind (``class``,
    ``object property``, ``datatype property``, ``annotation property``), English (or untagged)
    label and comment, and the superclass or domain / range where it states one; by IRI.

    Raises:
        NotFound: unknown name or missing file.
    """
    path = ontology_path(name)
    return _terms(path, path.stat().st_mtime)


@cache
def _terms(path: Path, mtime: float) -> list[dict[str, str]]:  # mtime: cache key only
    import rdflib
    from rdflib.namespace import OWL, RDF, RDFS

    graph = rdflib.Graph().parse(path, format="turtle")
    kinds = {OWL.Class: "class", RDFS.Class: "class", OWL.ObjectProperty: "object property",
             OWL.DatatypeProperty: "datatype property",
             OWL.AnnotationProperty: "annotation property"}

    def text(subject: rdflib.term.Node, prop: rdflib.term.Node) -> str:
        values = [o for o in graph.objects(subject, prop) if isinstance(o, rdflib.Literal)]
        preferred = [o for o in values if o.language in (None, "en")] or values
        return str(min(preferred, key=str)) if preferred else ""

    def first_iri(subject: rdflib.term.Node, prop: rdflib.term.Node) -> str:
        values = sorted(str(o) for o in graph.objects(subject, prop) if isinstance(o, rdflib.URIRef))
        return values[0] if values else ""

    out: dict[str, dict[str, str]] = {}
    for cls, kind in kinds.items():
        for subject in graph.subjects(RDF.type, cls):
            if not isinstance(subject, rdflib.URIRef) or str(subject) in out:
                continue
            out[str(subject)] = {
                "iri": str(subject), "kind": kind, "label": text(subject, RDFS.label),
                "comment": text(subject, RDFS.comment),
                "parent": first_iri(subject, RDFS.subClassOf if kind == "class" else RDFS.subPropertyOf),
                "domain": first_iri(subject, RDFS.domain), "range": first_iri(subject, RDFS.range)}
    return [out[k] for k in sorted(out)]


@cache
def _serialized(path: Path, mtime: float, fmt: str) -> str:  # mtime: cache key only
    import rdflib

    graph = rdflib.Graph().parse(path, format="turtle")
    return graph.serialize(format=fmt)


def all_ontology_paths() -> list[Path]:
    """Paths of our five ontology files, in dependency order."""
    return [ontology_path(name) for name in _FILES]


def ontology_iri(name: str) -> str:
    """The ``owl:Ontology`` IRI declared by ontology ``name``."""
    ontology_path(name)  # same NotFound for unknown names
    return _ONTOLOGY_IRIS[name]


def import_paths() -> list[Path]:
    """Paths of the local copies of the ontologies ours import (PROV-O, MLS)."""
    folder = _ontology_dir() / "imports"
    return [folder / f for f in dict.fromkeys(_IMPORTS.values())]


def import_graphs() -> dict[str, Path]:
    """Graph IRI (the ontology's IRI) -> local copy, for each ontology ours import
    (PROV-O, ML Schema): what ``provkg init`` loads next to ours."""
    folder = _ontology_dir() / "imports"
    first_iri: dict[str, str] = {}  # per file, the first IRI it answers for
    for iri, f in _IMPORTS.items():
        first_iri.setdefault(f, iri)
    return {iri: folder / f for f, iri in first_iri.items()}


def load_owlready_world(extra_paths: Iterable[Path | str] = ()) -> owlready2.World:
    """A fresh owlready2 world holding our ontologies, their imports and ``extra_paths``.

    Every ``owl:imports`` is answered from ``ontology/imports`` or from our own
    files, so nothing is fetched from the network (owlready2 would try to).
    ``extra_paths`` are further RDF files (Turtle, N-Triples, RDF/XML), e.g. a
    small instance graph to check for consistency with :func:`run_reasoner`.
    xsd:dateTime literals keep milliseconds only (HermiT rejects more digits).

    Raises:
        NotFound: a file is missing, or a file imports an ontology with no local copy.
        ProvkgError: a file cannot be parsed.
    """
    import owlready2  # lazy: a large module that only reasoning needs

    world = owlready2.World()
    loaded: set[Path] = set()

    def load(path: Path) -> None:
        path = path.resolve()
        if path in loaded:
            return
        loaded.add(path)
        imports, ntriples = _ntriples_without_imports(path)
        for iri in imports:  # dependencies first, from the local copies
            load(_local_copy(iri, importer=path))
        try:
            world.get_ontology(path.as_uri()).load(fileobj=io.BytesIO(ntriples), format="ntriples")
        except Exception as exc:  # owlready2 raises assorted parser errors
            raise ProvkgError(f"owlready2 could not load {path}: {exc}") from exc

    for path in [*all_ontology_paths(), *(Path(p) for p in extra_paths)]:
        load(path)
    return world


def _local_copy(iri: str, *, importer: Path) -> Path:
    """The local file standing for ontology ``iri`` (imported by ``importer``)."""
    key = iri.rstrip("#/")
    for name, own_iri in _ONTOLOGY_IRIS.items():
        if own_iri == key:
            return ontology_path(name)
    if key in _IMPORTS:
        path = _ontology_dir() / "imports" / _IMPORTS[key]
        if path.is_file():
            return path
    raise NotFound(f"{importer} imports {iri}, which has no local copy in ontology/imports")


def _ntriples_without_imports(path: Path) -> tuple[list[str], bytes]:
    """The ``owl:imports`` IRIs of an RDF file and its other triples as N-Triples.

    owlready2 reads N-Triples but not Turtle, and would fetch imports itself.
    """
    if not path.is_file():
        raise NotFound(f"RDF file missing: {path}")
    return _convert(path, path.stat().st_mtime)


@cache
def _convert(path: Path, mtime: float) -> tuple[list[str], bytes]:  # mtime: cache key only
    from rdflib import OWL, Graph  # lazy, like owlready2

    graph = Graph()
    fmt = _RDF_FORMATS.get(path.suffix.lower(), "turtle")
    try:
        graph.parse(path, format=fmt)
    except Exception as exc:  # rdflib raises many parser exception types
        raise ProvkgError(f"could not parse {path} as {fmt}: {exc}") from exc
    imports = sorted(str(o) for o in graph.objects(None, OWL.imports))
    graph.remove((None, OWL.imports, None))
    ntriples = graph.serialize(format="nt", encoding="utf-8")
    return imports, _DATETIME_FRACTION.sub(rb"\1\2", ntriples)


#: HermiT rejects xsd:dateTime literals with more than three fractional digits of a
#: second (provkg writes microseconds): keep milliseconds, which reasoning never misses
_DATETIME_FRACTION = re.compile(
    rb'("\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\d+((?:Z|[+-]\d\d:\d\d)?"\^\^'
    rb"<http://www\.w3\.org/2001/XMLSchema#dateTime(?:Stamp)?>)"
)


_RDF_FORMATS = {".ttl": "turtle", ".nt": "nt", ".owl": "xml", ".rdf": "xml", ".xml": "xml",
                ".nq": "nquads", ".jsonld": "json-ld"}


def run_reasoner(world: owlready2.World) -> None:
    """Classify ``world`` with HermiT (needs ``java``), adding inferred types in place.

    Datatypes outside the OWL 2 datatype map (``rdf:JSON``, ``geo:wktLiteral``)
    are ignored rather than rejected.

    Raises:
        ProvkgError: the world is inconsistent, some named class is unsatisfiable,
            or the reasoner could not run (e.g. no Java runtime).
    """
    import owlready2

    try:
        owlready2.sync_reasoner(
            world, infer_property_values=False, debug=0, ignore_unsupported_datatypes=True
        )
    except owlready2.OwlReadyInconsistentOntologyError as exc:
        raise ProvkgError("OWL reasoner: the ontologies and data are inconsistent") from exc
    except owlready2.OwlReadyJavaError as exc:
        detail = next((line for line in str(exc).splitlines() if "Exception" in line), str(exc))
        raise ProvkgError(f"OWL reasoner (HermiT) failed: {detail.strip()}") from exc
    except OSError as exc:  # no java executable
        raise ProvkgError(f"OWL reasoner could not start Java: {exc}") from exc
    unsatisfiable = sorted(c.iri for c in world.inconsistent_classes() if c is not owlready2.Nothing)
    if unsatisfiable:
        raise ProvkgError(f"OWL reasoner: unsatisfiable classes: {', '.join(unsatisfiable)}")
