"""``python -m provkg.events``: print the batch envelope's JSON Schema."""

from __future__ import annotations

import json

from provkg.events.models import batch_schema

__all__: list[str] = []

if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(batch_schema(), indent=2))
