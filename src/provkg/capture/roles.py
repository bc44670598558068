"""Values that say what they are, and nested configurations as flat dotted names.

``capture.hyperparameters(lr=0.1)``, ``capture.measures(loss=0.3)``, ``capture.datasets(...)``,
``capture.models(...)`` and ``capture.with_role(role, ...)`` make a mapping whose values carry
a role (wire format v1's optional ``role``): a workflow whose values say their roles needs
no written spec. A mapping, not keyword arguments of ``use``, so no role word can collide
with a value's name.

A nested configuration (a dict, a dataclass, an ``argparse.Namespace``, a pydantic model, an
OmegaConf config) is flattened to dotted names (``optimizer.lr``), wherever values are taken.

>>> dict(hyperparameters({"optimizer": {"lr": 0.1, "betas": [0.9, 0.99]}}, epochs=3))
{'optimizer.lr': 0.1, 'optimizer.betas': [0.9, 0.99], 'epochs': 3}
>>> measures(loss=0.3).role
'evaluation_measure'
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from provkg.wire import ROLES

__all__ = ["Roled", "RoleValue", "datasets", "flat_items", "hyperparameters", "is_config",
           "measures", "models", "with_role"]

#: values kept as they are: nothing in them to flatten
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: nesting deeper than this is kept as the value it is (and refused there if it is no value)
_MAX_CONFIG_DEPTH = 16


class Roled(dict[str, Any]):
    """A mapping of values of one role (see the module's docstring)."""

    __slots__ = ("role",)

    def __init__(self, role: str, values: Any = None, /, **named: Any) -> None:
        super().__init__()
        self.role = role if role in ROLES else "plain"
        for source in (values, named):
            if type(source) is dict and _SCALARS.issuperset(map(type, source.values())) and \
                    all(type(k) is str for k in source):
                self.update(source)  # the per-batch path: flat already
            elif source is not None:
                for name, value in flat_items(source):
                    self[name] = value


class RoleValue:
    """A captured value and its role, as a task keeps it until the event is written."""

    __slots__ = ("value", "role")

    def __init__(self, value: Any, role: str) -> None:
        self.value, self.role = value, role

    def __eq__(self, other: object) -> bool:
        other_value = other.value if isinstance(other, RoleValue) else other
        return bool(self.value is other_value or self.value == other_value)

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"RoleValue({self.value!r}, {self.role!r})"


def with_role(role: str, values: Any = None, /, **named: Any) -> Roled:
    """Values of ``role`` (one of :data:`provkg.wire.ROLES`; another name is ``plain``)."""
    return Roled(role, values, **named)


def hyperparameters(values: Any = None, /, **named: Any) -> Roled:
    """Settings of a training (``lr``, ``batch_size``, an optimizer's config)."""
    return Roled("hyperparameter", values, **named)


def measures(values: Any = None, /, **named: Any) -> Roled:
    """Evaluation measures (``loss``, ``accuracy``): what the canned queries rank by."""
    return Roled("evaluation_measure", values, **named)


def datasets(values: Any = None, /, **named: Any) -> Roled:
    """Data sets a task used (usually ``capture.ref(...)``: data by reference)."""
    return Roled("dataset", values, **named)


def models(values: Any = None, /, **named: Any) -> Roled:
    """Models a task generated or used (a checkpoint's ``capture.ref(...)``)."""
    return Roled("model", values, **named)


def is_config(value: Any) -> bool:
    """A nested configuration to flatten: a mapping, a dataclass instance, a Namespace, a
    pydantic model, an OmegaConf config."""
    if getattr(type(value), "CAPTURED_AS_VALUE", False):  # capture.ref(...): data by reference
        return False
    if isinstance(value, Mapping) or isinstance(value, argparse.Namespace):
        return True
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    kind = type(value)
    return (hasattr(value, "model_dump") and hasattr(kind, "model_fields")) or \
        kind.__module__.startswith("omegaconf")


def flat_items(values: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of a configuration, depth first in its own order; a name that is
    not a string is written with ``str``."""
    for key, value in _members(values):
        name = f"{prefix}{key}"
        if depth < _MAX_CONFIG_DEPTH and is_config(value) and not isinstance(value, RoleValue):
            inner = list(flat_items(value, f"{name}.", depth + 1))
            if inner:
                yield from inner
                continue
        yield name, value


def _members(values: Any) -> list[tuple[str, Any]]:
    if isinstance(values, Mapping):
        return [(k if isinstance(k, str) else str(k), v) for k, v in values.items()]
    if isinstance(values, argparse.Namespace):
        return list(vars(values).items())
    if dataclasses.is_dataclass(values) and not isinstance(values, type):
        return [(f.name, getattr(values, f.name)) for f in dataclasses.fields(values)]
    kind = type(values)
    if kind.__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf  # only when the value is one of its configs

        return list(OmegaConf.to_container(values, resolve=True).items())
    if hasattr(values, "model_dump"):
        return list(values.model_dump().items())
    return []
