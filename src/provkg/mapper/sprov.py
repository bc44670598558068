"""S-PROV mapping (being written; see issue 4)."""

from __future__ import annotations

from typing import Any

from provkg.errors import MappingError

__all__ = ["prospective_triples", "map_workflow_event", "map_task_event"]


def _todo(*_: Any, **__: Any) -> Any:
    raise MappingError("the sprov schema is not available yet")


prospective_triples = map_workflow_event = map_task_event = _todo
