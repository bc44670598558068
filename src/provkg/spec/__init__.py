"""Prospective specs v1 (docs/reference/spec-format.md): what each transformation and attribute *is*.

A spec is YAML (or JSON, which YAML reads too). Loading keeps the line of every
node, so each problem is reported as ``FILE:LINE: field.path: message`` and all
problems are reported at once::

    workflow: flower-training
    phase: learning
    transformations:
      - {name: training, kind: training, used: [{name: learning_rate, role: hyperparameter}]}
      - {name: epoch, kind: section, of: training, granularity: full,
         generated: [{name: loss, role: evaluation_measure, concept: seis:loss}]}

This package does no RDF: the mapper turns a :class:`Spec` into prospective triples. Its
parts: the model (:mod:`.model`), the loader with line numbers (:mod:`.loader`, with the
problem report of :mod:`.report` and the cross-field rules of :mod:`.checks`), the size
check on the text before any parser builds it (:mod:`.shape`), the words for what changes
between two specs (:mod:`.diff`) and the check of several files (:mod:`.files`). Every name
other modules use is importable from ``provkg.spec``.
"""

from __future__ import annotations

from provkg.spec.diff import spec_changes
from provkg.spec.files import ValidatedFiles, ok_line, validate_files
from provkg.spec.loader import has_overlong_number, load_spec, parse_spec, parse_stored_spec
from provkg.spec.model import (
    KINDS,
    PHASES,
    ROLES,
    Attribute,
    DataStore,
    Spec,
    Transformation,
    expand_curie,
)
from provkg.spec.shape import MAX_SPEC_DEPTH, MAX_SPEC_NODES

__all__ = [
    "KINDS",
    "MAX_SPEC_DEPTH",
    "MAX_SPEC_NODES",
    "PHASES",
    "ROLES",
    "Attribute",
    "DataStore",
    "Spec",
    "Transformation",
    "ValidatedFiles",
    "expand_curie",
    "has_overlong_number",
    "load_spec",
    "parse_spec",
    "parse_stored_spec",
    "ok_line",
    "spec_changes",
    "validate_files",
]
