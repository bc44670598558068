"""The graph contract as SHACL (``ontology/shapes/*.ttl``), checked with pyshacl.

Which shape files apply: ``common.ttl`` always; ``provlake.ttl`` with ``typed.ttl`` or
``tagged.ttl`` for those schemas, ``sprov.ttl`` for S-PROV; ``prov-base.ttl`` (the W3C PROV
base types a tool reads without reasoning) when asked. provkg's ontologies and their imports
are the class hierarchy (pyshacl's ``ont_graph``), so a shape on ``provlake:AttributeValue``
also holds for a ``provml:Model``; no inference adds triples to the data.

:func:`validate_store` reads the store whole (its N-Quads dump) and checks the union of its
graphs except the ontologies' own (``provkg init``), so it costs memory in proportion to the
store: a tool for tests, CI and audits of stores of demo size, not for a 10 M-triple store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provkg.errors import BadParameter, NotFound
from provkg.ontology import all_ontology_paths, import_paths, ontology_path

if TYPE_CHECKING:  # rdflib and pyshacl are imported lazily: only validation needs them
    import rdflib

    from provkg.store import Store

__all__ = ["SCHEMA_SHAPES", "ShapeViolation", "ValidationReport", "shape_paths", "validate_graph",
           "validate_store"]

#: schema -> the shape files (in ``ontology/shapes/``) its graphs must meet
SCHEMA_SHAPES: dict[str, tuple[str, ...]] = {
    "typed": ("common", "provlake", "typed"),
    "tagged": ("common", "provlake", "tagged"),
    "sprov": ("common", "sprov"),
}
PROV_BASE = "prov-base"

_SH = "http://www.w3.org/ns/shacl#"


@dataclass(frozen=True)
class ShapeViolation:
    """One SHACL result: the node, the property path (None: the node itself), pyshacl's
    message, the shape (a named node shape, with the property shape's path inside it)."""

    focus: str
    path: str | None
    message: str
    shape: str
    value: str | None = None
    severity: str = "Violation"

    def to_json(self) -> dict[str, Any]:
        return {"focus": self.focus, "path": self.path, "message": self.message,
                "shape": self.shape, "value": self.value, "severity": self.severity}


@dataclass
class ValidationReport:
    """What :func:`validate_graph` found: ``conforms`` when no shape was violated."""

    schemas: list[str]
    shape_files: list[str]
    triples: int
    violations: list[ShapeViolation] = field(default_factory=list)

    @property
    def conforms(self) -> bool:
        return not self.violations

    def by_focus(self) -> dict[str, list[ShapeViolation]]:
        """Violations grouped by focus node, nodes and their results in a stable order."""
        grouped: dict[str, list[ShapeViolation]] = {}
        for v in sorted(self.violations, key=lambda v: (v.focus, v.path or "", v.shape, v.message)):
            grouped.setdefault(v.focus, []).append(v)
        return grouped

    def to_json(self) -> dict[str, Any]:
        return {"conforms": self.conforms, "schemas": self.schemas, "shapes": self.shape_files,
                "triples": self.triples, "violations": len(self.violations),
                "nodes": [{"focus": focus, "results": [v.to_json() for v in found]}
                          for focus, found in self.by_focus().items()]}


def shapes_dir() -> Path:
    """The folder of the shape files (``ontology/shapes``, in a checkout or a wheel)."""
    return ontology_path("provkg").parent / "shapes"


def shape_paths(schemas: Iterable[str], *, prov_base: bool = False) -> list[Path]:
    """The shape files for ``schemas`` (keys of :data:`SCHEMA_SHAPES`), each once.

    Raises:
        BadParameter: an unknown schema.  NotFound: a shape file is missing.
    """
    names: list[str] = []
    for schema in schemas:
        if schema not in SCHEMA_SHAPES:
            raise BadParameter(f"unknown schema {schema!r}; expected one of: {', '.join(SCHEMA_SHAPES)}")
        names += SCHEMA_SHAPES[schema]
    if prov_base:
        names.append(PROV_BASE)
    paths = [shapes_dir() / f"{name}.ttl" for name in dict.fromkeys(names)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise NotFound(f"shape file missing: {', '.join(missing)}")
    return paths


def _parsed(paths: Iterable[Path]) -> rdflib.Graph:
    import rdflib

    graph = rdflib.Graph()
    for path in paths:
        graph.parse(path, format="xml" if path.suffix == ".owl" else "turtle")
    return graph


@cache
def _ontologies() -> rdflib.Graph:
    """provkg's ontologies and the local copies of their imports: the class hierarchy."""
    return _parsed([*all_ontology_paths(), *import_paths()])


def validate_graph(data: rdflib.Graph, schemas: Iterable[str], *, prov_base: bool = False) -> ValidationReport:
    """Check ``data`` against the shapes of ``schemas`` (and ``prov-base.ttl`` if ``prov_base``).

    Raises:
        BadParameter: an unknown schema.  NotFound: a shape file is missing.
    """
    import pyshacl

    schemas = list(dict.fromkeys(schemas))
    paths = shape_paths(schemas, prov_base=prov_base)
    shapes = _parsed(paths)
    _, results, _ = pyshacl.validate(data, shacl_graph=shapes, ont_graph=_ontologies(), inference="none",
                                     abort_on_first=False, allow_infos=True, allow_warnings=True)
    return ValidationReport(schemas, [p.name for p in paths], len(data), _violations(results, shapes))


def _violations(results: rdflib.Graph, shapes: rdflib.Graph) -> list[ShapeViolation]:
    """The top-level results; a nested shape's results (``sh:detail``) become the message."""
    from rdflib import RDF, URIRef

    sh = {name: URIRef(_SH + name) for name in ("ValidationResult", "focusNode", "resultPath", "resultMessage",
                                                "sourceShape", "value", "resultSeverity", "detail")}
    nested = set(results.objects(None, sh["detail"]))
    found = []
    for result in set(results.subjects(RDF.type, sh["ValidationResult"])) - nested:
        def one(key: str, node: Any = result) -> Any:
            return results.value(node, sh[key])
        path, value, severity = one("resultPath"), one("value"), one("resultSeverity")
        details = sorted({str(one("resultMessage", d)) for d in results.objects(result, sh["detail"])
                          if one("resultMessage", d) is not None})
        found.append(ShapeViolation(
            focus=_text(one("focusNode")),
            path=None if path is None else _path_text(results, path),
            message="; ".join(details) or str(one("resultMessage") or "violates the shape"),
            shape=_shape_name(shapes, one("sourceShape")),
            value=None if value is None else _text(value),
            severity=str(severity).removeprefix(_SH) if severity is not None else "Violation",
        ))
    return sorted(set(found), key=lambda v: (v.focus, v.path or "", v.shape, v.message, v.value or ""))


def _text(term: Any) -> str:
    """A node as its IRI, a literal as N-Triples (datatype kept), a blank node as ``_:b``."""
    from rdflib import BNode, Literal

    if isinstance(term, Literal):
        return term.n3()
    if isinstance(term, BNode):
        return f"_:{term}"
    return str(term)


def _path_text(graph: rdflib.Graph, path: Any) -> str:
    """A SHACL property path: an IRI, or ``^IRI`` for an inverse path (the ones provkg's shapes use)."""
    from rdflib import BNode, URIRef

    if isinstance(path, BNode):
        inverse = graph.value(path, URIRef(_SH + "inversePath"))
        if inverse is not None:
            return f"^{inverse}"
    return _text(path)


def _shape_name(shapes: rdflib.Graph, shape: Any) -> str:
    """The IRI of the named node shape a (blank) property or nested shape belongs to."""
    from rdflib import URIRef

    seen = set()
    while shape is not None and not isinstance(shape, URIRef) and shape not in seen:
        seen.add(shape)
        shape = next(shapes.subjects(None, shape), None)  # sh:property, sh:or lists, sh:not ...
    return str(shape) if isinstance(shape, URIRef) else "(anonymous shape)"


def store_graph(store: Store) -> rdflib.Graph:
    """The union of ``store``'s data graphs, the ontologies' left out (as exports read it:
    :func:`provkg.service.export_graph.data_copy`), as an rdflib graph for pyshacl."""
    import rdflib

    from provkg.service.export_graph import data_copy

    graph = rdflib.Graph()
    add = graph.add
    for quad in data_copy(store):
        add((_rdflib_term(quad.subject), _rdflib_term(quad.predicate), _rdflib_term(quad.object)))
    return graph


_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


def _rdflib_term(term: Any) -> Any:
    """A pyoxigraph term as rdflib's (a simple literal without a datatype, as rdflib parses it)."""
    import pyoxigraph as ox
    from rdflib import BNode, Literal, URIRef

    if isinstance(term, ox.NamedNode):
        return URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return BNode(term.value)
    if term.language:
        return Literal(term.value, lang=term.language)
    datatype = term.datatype.value
    return Literal(term.value, datatype=None if datatype == _XSD_STRING else URIRef(datatype))


def validate_store(store: Store, schemas: Iterable[str] | None = None, *,
                   prov_base: bool = True) -> ValidationReport:
    """Check ``store``'s graph against the shapes of ``schemas`` (default: the schemas whose
    executions the store holds, typed when it holds none).

    Raises:
        BadParameter: an unknown schema.  StoreError: the store cannot be read whole.
    """
    from provkg.service.ingest import schemas_in_store

    chosen = list(schemas or ())
    if not chosen:
        chosen = sorted(str(s.value) for s in schemas_in_store(store)) or ["typed"]
    return validate_graph(store_graph(store), chosen, prov_base=prov_base)
