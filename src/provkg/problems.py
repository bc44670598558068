"""provkg's own words for a field that failed validation.

Every validated input (events, specs, settings, REST parameters) names a bad field in these
words, chosen by pydantic's error *type* and its context values, which are part of pydantic's
documented API: the wording of pydantic's own ``msg`` changes between releases, and a message
a user or a test relies on must not. A type not listed here falls back to pydantic's text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: pydantic error type -> provkg's wording (``str.format`` with the error's ``ctx``)
MESSAGES: dict[str, str] = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
    "string_type": "must be text",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "greater_than": "must be more than {gt}",
    "greater_than_equal": "must be {ge} or more",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be {le} or less",
    "string_too_short": "must have at least {min_length} characters",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
    "string_pattern_mismatch": "does not have the expected form",
    "url_parsing": "must be a URL",
    "url_scheme": "must be a URL of scheme {expected_schemes}",
    "json_invalid": "must be JSON",
}


def describe(err: Mapping[str, Any]) -> str:
    """provkg's sentence for one entry of ``ValidationError.errors()``."""
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])  # provkg's own validators raise these: their text is ours
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    template = MESSAGES.get(kind)
    if template is None:
        return str(err.get("msg", kind))
    try:
        return template.format(**ctx)
    except (KeyError, IndexError):
        return template.split(" {", 1)[0]
