"""The provkg parts the demo builds on that an installation may lack, imported when used."""

from __future__ import annotations

import importlib
from typing import Any

from provkg.errors import ProvkgError

__all__ = ["require"]


def require(module: str, what: str) -> Any:
    """Import a provkg module the demo builds on, or say plainly which part is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProvkgError(f"provkg demo needs {module} ({what}), which this installation does "
                          f"not have: {exc}") from exc
