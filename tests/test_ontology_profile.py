"""provkg's ontologies are in the OWL 2 DL profile, as OWLAPI's profile checker (the OWLAPI 3.4.3
jar owlready2 bundles, run by tests/owl/ProfileCheck.java) decides over each file's imports
closure, every import answered from ``ontology/`` and ``ontology/imports/``, never the web.

The one exception is PROV-O's own: it declares ``prov:specializationOf`` and
``prov:wasRevisionOf`` both ``owl:AnnotationProperty`` and ``owl:ObjectProperty`` (illegal
punning in OWL 2 DL), upstream, in the W3C's file we import unchanged."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import owlready2
import pytest
import rdflib
from rdflib import OWL, RDF

from provkg import ontology

CHECKER = Path(__file__).parent / "owl" / "ProfileCheck.java"
PROV_O = "http://www.w3.org/ns/prov#"

#: (violating ontology, OWLAPI violation class, the term it is about): PROV-O's upstream punning
UPSTREAM_EXCEPTIONS = {
    (PROV_O, "IllegalPunning", PROV_O + "specializationOf"),
    (PROV_O, "IllegalPunning", PROV_O + "wasRevisionOf"),
}


@dataclass(frozen=True)
class Violation:
    checked: str     # the file whose imports closure was checked
    ontology: str    # the ontology (of that closure) holding the violating axiom
    kind: str        # OWLAPI's violation class, e.g. UseOfUndeclaredAnnotationProperty
    description: str

    @property
    def term(self) -> str:
        """The first IRI the violation names (the punned / undeclared term)."""
        found = re.search(r"<([^>]+)>", self.description)
        return found[1] if found else ""

    @property
    def upstream(self) -> bool:
        return (self.ontology, self.kind, self.term) in UPSTREAM_EXCEPTIONS


def _owlapi_jar() -> Path:
    jars = sorted((Path(owlready2.__file__).parent / "pellet").glob("owlapi-distribution-*.jar"))
    assert jars, "owlready2's bundled OWLAPI jar (pellet/owlapi-distribution-*.jar) is missing"
    return jars[0]


def _ontology_iris(path: Path) -> list[str]:
    graph = rdflib.Graph().parse(path, format="xml" if path.suffix == ".owl" else "turtle")
    return [str(s) for s in graph.subjects(RDF.type, OWL.Ontology)]


def _local_copies(folder: Path) -> Path:
    """A mappings file (IRI TAB path) for every ontology the checker may meet as an import."""
    lines = []
    for path in [*ontology.all_ontology_paths(), *ontology.import_paths()]:
        lines += [f"{iri}\t{path.resolve()}" for iri in _ontology_iris(path)]
    mappings = folder / "local-copies.tsv"
    mappings.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return mappings


def profile_violations(paths: list[Path], folder: Path) -> list[Violation]:
    """Every OWL 2 DL violation OWLAPI reports for ``paths`` (each with its imports closure)."""
    java = shutil.which("java")
    assert java, "no java on PATH (scripts/test installs a JDK)"
    done = subprocess.run(
        [java, "-cp", str(_owlapi_jar()), str(CHECKER), str(_local_copies(folder)), *map(str, paths)],
        cwd=folder, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, f"profile checker failed ({done.returncode}):\n{done.stderr}"
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    checked = {Path(fields[1]).resolve() for fields in lines if fields[0] == "DONE"}
    assert checked == {p.resolve() for p in paths}, done.stdout  # every file was checked
    return [Violation(*fields[1:]) for fields in lines if fields[0] == "VIOLATION"]


@pytest.fixture(scope="module")
def violations(tmp_path_factory) -> list[Violation]:
    return profile_violations(ontology.all_ontology_paths(), tmp_path_factory.mktemp("owl-profile"))


@pytest.mark.parametrize("name", ontology.ontology_names())
def test_ontology_is_in_the_owl2_dl_profile(violations, name):
    path = str(ontology.ontology_path(name))
    ours = sorted({f"{v.ontology} {v.kind}: {v.description}"
                   for v in violations if v.checked == path and not v.upstream})
    assert not ours, "\n".join(ours)


def test_the_upstream_exception_is_exactly_prov_o_punning(violations):
    """The exception is real (the checker does read the imports) and covers nothing else."""
    upstream = {(v.ontology, v.kind, v.term) for v in violations if v.upstream}
    assert upstream == UPSTREAM_EXCEPTIONS


def _broken_copy(folder: Path, name: str, extra: str) -> Path:
    copy = folder / f"broken-{name}.ttl"
    copy.write_text(ontology.read_ontology(name) + extra, encoding="utf-8")
    return copy


def test_an_undeclared_annotation_property_is_a_violation(tmp_path):
    broken = _broken_copy(tmp_path, "seismic",
                          '\n<https://w3id.org/provkg/seismic> dcterms:creator "provkg"@en .\n')
    found = [v for v in profile_violations([broken], tmp_path) if not v.upstream]
    assert [(v.kind, v.term) for v in found] == [
        ("UseOfUndeclaredAnnotationProperty", "http://purl.org/dc/terms/creator")]


def test_an_rdf_json_range_is_a_violation_even_when_declared(tmp_path):
    """Why provkg.ttl ranges its JSON-valued properties rdfs:Literal (its header comment)."""
    text = ontology.read_ontology("provkg")
    assert "rdfs:range rdf:JSON" not in text
    declared_range = ":environment\n    a owl:DatatypeProperty ;\n    rdfs:domain prov:Activity ;\n    rdfs:range "
    assert text.count(declared_range + "rdfs:Literal ;") == 1
    broken = tmp_path / "broken-provkg.ttl"
    broken.write_text(text.replace(declared_range + "rdfs:Literal ;", declared_range + "rdf:JSON ;")
                      + "\nrdf:JSON a rdfs:Datatype .\n", encoding="utf-8")
    found = [v for v in profile_violations([broken], tmp_path) if not v.upstream]
    assert found and {v.kind for v in found} == {"UseOfUnknownDatatype"}
    assert all("JSON" in v.description for v in found)
