"""The target schemas of the mapper: one object each, and what differs between them.

``typed`` (PROV-ML, the default) says what an execution or value is with classes,
``tagged`` (PROVLake, Listing 2 of the PROV-ML paper) with ``provlake:tag`` literals on
the prospective side, and ``sprov`` (S-PROV) with its own invocation / component layout.
Code asks a schema what it does (:attr:`Schema.typed_classes`, :attr:`Schema.keeps_summaries`)
rather than comparing names, so a fourth schema is one more member here.

>>> Schema.named("tagged").typed_classes, str(Schema.SPROV)
(False, 'sprov')
>>> Schema.named("owl") is None
True
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Schema", "ALL_SCHEMAS", "LIFECYCLE_SCHEMAS", "schema_names"]


class Schema(StrEnum):
    """A target schema; its value is the name the CLI, the settings and the API take."""

    TYPED = "typed"
    TAGGED = "tagged"
    SPROV = "sprov"

    @classmethod
    def named(cls, name: object) -> Schema | None:
        """The schema called ``name``, or None (callers say the error in their own terms)."""
        if not isinstance(name, str):
            return None
        try:
            return cls(name)
        except ValueError:
            return None

    @property
    def typed_classes(self) -> bool:
        """Kinds (training, a data set, a model) are PROV-ML classes, not tags or generic terms."""
        return self is Schema.TYPED

    @property
    def provlake_layout(self) -> bool:
        """The PROVLake retrospective layout (runs, tasks, values) of typed and tagged, which
        the canned lifecycle queries read; S-PROV has a layout of its own."""
        return self is not Schema.SPROV

    @property
    def keeps_summaries(self) -> bool:
        """Sections marked ``granularity: summary`` are stored as summaries (S-PROV has no
        summary terms: its sections are kept in full, and the ingest says so)."""
        return self.provlake_layout

    @property
    def untyped_names(self) -> str:
        """How names missing from the spec are stored, for the ingest's warnings."""
        return "as plain PROVLake" if self.provlake_layout else "with generic S-PROV terms"


#: every schema, in the order the CLI lists them
ALL_SCHEMAS: tuple[Schema, ...] = tuple(Schema)
#: the schemas the canned lifecycle queries (q*, p*, d*) are written for
LIFECYCLE_SCHEMAS: tuple[Schema, ...] = tuple(s for s in Schema if s.provlake_layout)


def schema_names(schemas: tuple[Schema, ...] = ALL_SCHEMAS) -> str:
    """``"typed, tagged, sprov"``: the names, for an error that lists what is expected."""
    return ", ".join(s.value for s in schemas)
