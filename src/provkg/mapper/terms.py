"""Vocabulary terms as ready N-Triples strings (``<iri>``), built once at import.

The mapper writes millions of triples; spelling each predicate with ``iri()`` on
every use would cost more than the rest of the mapping.
"""

from __future__ import annotations

from provkg.term import iri
from provkg.vocab import PROV, PROVKG, PROVLAKE, PROVML, PROVONE, RDF, RDFS, SPROV, Vocabulary

__all__ = ["COMMENT", "LABEL", "PK", "PL", "PML", "PO", "SP", "A", "P", "term_of"]

A = iri(RDF.type)
LABEL = iri(RDFS.label)
COMMENT = iri(RDFS.comment)


class _Terms:
    """Attribute access to ``<iri>`` strings of one vocabulary: ``P.used == '<...#used>'``."""

    def __init__(self, vocab: type[Vocabulary]):
        for name, full in vocab.terms().items():
            setattr(self, name, iri(full))

    def __getattr__(self, name: str) -> str:
        # only for names the vocabulary lacks (set attributes are found first); it also tells
        # type checkers that every term is a str
        raise AttributeError(f"no vocabulary term {name!r}")


P = _Terms(PROV)
PK = _Terms(PROVKG)
PL = _Terms(PROVLAKE)
PML = _Terms(PROVML)
SP = _Terms(SPROV)
PO = _Terms(PROVONE)


def term_of(full_iri: str) -> str:
    """``<full_iri>`` (validated)."""
    return iri(full_iri)
