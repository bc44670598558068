"""Numbers and identifiers as people read them in the demo's report and terminal tables.

Only what is shown is rounded: ``run.json`` and the stored triples keep every digit, and the
report's HTML cells carry the full value in their ``title``.
"""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from provkg.vocab import DEFAULT_BASE

__all__ = ["SIGNIFICANT", "significant", "duration", "rounded_text", "short", "cell"]

#: significant digits of a measured number in the report (losses, accuracies, thresholds)
SIGNIFICANT = 4

# a number of a `name=value; ...` pairs cell: after `=`, up to `;` or the end (a quoted
# string value starts with `"`, so it never matches)
_PAIR_NUMBER = re.compile(r"(?<==)(-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+)(?=;|$)")


def significant(value: float, digits: int = SIGNIFICANT) -> str:
    """``value`` with at most ``digits`` significant digits (0.6931471 -> '0.6931')."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.{digits}g}"


def duration(seconds: float) -> str:
    """A time span people read at a glance: µs, ms or s with 3 significant digits."""
    if math.isnan(seconds) or math.isinf(seconds):
        return str(seconds)
    size = abs(seconds)
    if size == 0:
        return "0 s"
    if size < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if size < 1:
        return f"{seconds * 1e3:.3g} ms"
    if size < 100:
        return f"{seconds:.3g} s"
    return f"{seconds:.0f} s"


def rounded_text(text: str) -> str:
    """The numbers of a ``name=value; name=value`` cell rounded to :data:`SIGNIFICANT` digits."""
    return _PAIR_NUMBER.sub(lambda m: significant(float(m.group(0))), text)


def short(value: object) -> str:
    """A cell for people: minted IRIs and file URIs shortened, numbers rounded."""
    if value is None:
        return ""
    if isinstance(value, float):
        return significant(value)
    text = str(value)
    if text.startswith(DEFAULT_BASE):
        text = unquote(text[len(DEFAULT_BASE):].split("/", 1)[-1])
    if text.startswith("file:"):
        path = PurePosixPath(unquote(urlparse(text).path))
        return "/".join(path.parts[-2:])
    return rounded_text(text)


def cell(column: str, value: object) -> str:
    """:func:`short`, with a ``*seconds`` column's number as a duration (``12.3 ms``)."""
    if column.endswith("seconds") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return duration(float(value))
    return short(value)
