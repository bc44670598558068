"""Reading a spec document (YAML, or JSON, which YAML reads too), each problem with its line.

Loading keeps the line of every node, so each problem is reported as ``FILE:LINE: field.path:
message`` naming the form expected, and all problems are reported at once. The text's size is
checked first (:mod:`provkg.spec.shape`), then the models validate it
(:mod:`provkg.spec.model`), then the cross-field rules (:mod:`provkg.spec.checks`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from provkg.errors import BadSpec, NotFound
from provkg.problems import describe
from provkg.spec.checks import check_raw, check_spec
from provkg.spec.model import Attribute, DataStore, Spec, Transformation
from provkg.spec.report import Report, raise_problems
from provkg.spec.shape import TOO_DEEP, check_shape

__all__ = ["has_overlong_number", "load_spec", "parse_spec", "parse_stored_spec"]


def _marks(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int],
           problems: list[tuple[tuple[Any, ...], str]]) -> None:
    """The line of each node under ``node`` into ``out`` (a key's line for its value), and
    each repeated key into ``problems``."""
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            k = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark)
            out[path + (k,)] = key.start_mark.line + 1
            if k in seen:
                problems.append((path + (k,), "duplicate key"))
            seen.add(k)
            _marks(value, path + (k,), out, problems)
            out[path + (k,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _marks(item, path + (i,), out, problems)


def _text_key(text: str) -> bool:
    """Does YAML read the plain key ``text`` as a string (not 1, true, null, 2.5)?"""
    try:
        return isinstance(yaml.safe_load(text), str)
    except yaml.YAMLError:
        return True


def parse_spec(text: str, *, source: str = "<string>", echo: bool = True) -> Spec:
    """Parse and validate a spec from YAML or JSON text. ``echo=False`` (the API): problems
    name line and field but never quote the spec's own names back.

    Raises:
        BadSpec: listing every problem as ``SOURCE:LINE: field: message`` (one per line);
            ``exc.problems`` holds them as a list.
    """
    check_shape(_yaml_view(text), source)  # (the view changes no count)
    return _parse_checked(text, source, echo=echo)


def parse_stored_spec(text: str, *, source: str) -> Spec:
    """Parse a spec document provkg stored (:func:`provkg.service.registration.spec_document`):
    JSON it wrote from a spec that passed :func:`parse_spec`, so without the size check,
    which its spelled-out defaults could fail for a large spec that passed it (a
    7,000-transformation spec, say, would then be skipped).

    Raises:
        BadSpec: as :func:`parse_spec` (a document another provkg version wrote)."""
    return _parse_checked(text, source, echo=True)


def _json_document(text: str) -> tuple[bool, Any, bool]:
    """(True, the data, whether an object repeats a key) when ``text`` is a JSON document,
    else (False, None, False)."""
    if text.lstrip()[:1] not in ("{", "["):
        return False, None, False
    repeated = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal repeated
        obj = dict(items)
        repeated = repeated or len(obj) != len(items)
        return obj

    try:
        return True, json.loads(text, object_pairs_hook=pairs), repeated
    except (ValueError, RecursionError):
        return False, None, False


#: a UTF-16 surrogate pair as JSON escapes it (Python's json.dumps writes any emoji so), after
#: an even number of backslashes
_PAIR_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)


def _yaml_view(text: str) -> str:
    """JSON ``text`` as PyYAML reads it: surrogate-pair escapes as the one ``\\U`` escape of
    their character (PyYAML refuses each half), on the same lines."""
    if "\\u" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        high, low = int(m.group(2), 16), int(m.group(3), 16)
        return f"{m.group(1)}\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08X}"

    return _PAIR_ESCAPE.sub(one, text)


def _lone_surrogate(data: Any) -> bool:
    """Does decoded JSON hold half a surrogate pair (not a character: no UTF-8 for it)?"""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: more digits in a row than Python converts to an int (``sys.get_int_max_str_digits``)
_OVERLONG_NUMBER = re.compile(r"\d{4301}")


def has_overlong_number(text: str) -> bool:
    """Does ``text`` hold a run of digits Python refuses to read as an int (a ValueError from
    the parser, whatever its words)?"""
    return _OVERLONG_NUMBER.search(text) is not None


def _parse_checked(text: str, source: str, *, echo: bool) -> Spec:
    """:func:`_parse_document`, Python's own limits said as a spec problem: a BadSpec, not a
    traceback in the CLI or a 500 from the API."""
    try:
        return _parse_document(text, source, echo=echo)
    except RecursionError:
        raise BadSpec(f"{source}: the spec nests too deeply (or a YAML anchor refers to "
                      "itself)") from None
    except ValueError as exc:
        if isinstance(exc, BadSpec) or not has_overlong_number(text):
            raise
        raise BadSpec(f"{source}: a number has more than 4,300 digits") from None


def _parse_document(text: str, source: str, *, echo: bool) -> Spec:
    """:func:`parse_spec` of text :func:`~provkg.spec.shape.check_shape` has passed; ``echo``:
    whether problems may quote the spec's names."""
    lines: dict[tuple[Any, ...], int] = {}
    dupes: list[tuple[tuple[Any, ...], str]] = []
    # JSON is read by JSON's rules (YAML reads {"name": 1e5} as the string "1e5"); the YAML
    # parse then only gives the lines and the repeated keys, which a valid document needs not:
    # PyYAML took 1.1 s (its constructor 5.8 s) for a 7,000-transformation one, JSON 0.08 s
    is_json, data, repeated = _json_document(text)
    if is_json and isinstance(data, dict) and not repeated and not _lone_surrogate(data):
        try:
            spec = Spec.model_validate(data)
        except ValidationError:
            pass
        else:
            report = Report(source, {}, echo=echo)
            check_spec(spec, report)
            if not report.problems:
                return spec
    try:
        # parsed once: the node tree gives the lines, the data are constructed from it
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(_yaml_view(text) if is_json else text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _marks(node, (), lines, dupes)  # first: construction merges `<<` keys into it
                if not is_json:
                    data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        if not is_json or _lone_surrogate(data):  # (JSON YAML cannot read: no lines then)
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 1
            if is_json:  # the one JSON problem that gets here
                raise_problems([f"{source}:{line}: not valid JSON: a \\u escape of half a surrogate "
                        f"pair (\\ud800-\\udfff without its other half) is not a character "
                        f"(column {mark.column + 1 if mark is not None else 1})"])
            raise_problems([f"{source}:{line}: not valid YAML or JSON: {exc.problem or exc}"])
    except yaml.YAMLError as exc:
        if not is_json or _lone_surrogate(data):
            raise_problems([f"{source}:1: not valid YAML or JSON: {exc}"])
    report = Report(source, lines, echo=echo)
    for path, msg in dupes:
        report.add(path, msg)
    if not isinstance(data, dict):
        report.add((), "a spec is a mapping with workflow, phase and transformations")
        raise_problems(report.problems)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_input=False, include_url=False):
            loc = tuple(p for p in err["loc"]
                        if not (isinstance(p, str) and p.startswith(("function-", "constrained-"))))
            message = _pydantic_message(err, loc, is_json=is_json)
            if err["type"] == "extra_forbidden" and not echo:
                # the line says where; the key itself is what the client sent (a pasted secret)
                report.add(loc[:-1], message, at=loc)
            elif err["type"] == "invalid_key":  # YAML read `1:` or `true:` as a number / bool:
                # not an index of the path, and its line is the key's (YAML wrote it as text)
                siblings = [p for p in lines if len(p) == len(loc) and p[:-1] == loc[:-1]
                            and isinstance(p[-1], str) and not _text_key(p[-1])]
                at = next((p for p in siblings if p[-1].lower() == str(loc[-1]).lower()),
                          siblings[0] if siblings else loc[:-1])
                shown = f" {at[-1] if siblings else loc[-1]!s}" if echo else ""
                report.add(loc[:-1], f"the key{shown} is a number or true/false, not a name: "
                           "quote it (\"...\")", at=at)
            else:
                report.add(loc, message)
        check_raw(data, report)
        raise_problems(report.problems)
    check_spec(spec, report)
    if report.problems:
        raise_problems(report.problems)
    return spec


def _pydantic_message(err: ErrorDetails, loc: tuple[Any, ...], *, is_json: bool = False) -> str:
    if err["type"] == "missing":
        return "required field is missing"
    if err["type"] == "extra_forbidden":
        fields = _fields_at(loc[:-1])
        return (f"unknown field; expected one of: {', '.join(fields)}" if fields
                else "unknown field")
    if err["type"] == "string_type" and is_json:
        return f"{describe(err)}: write it as a JSON string (\"...\")"
    if err["type"] == "string_type":  # `workflow: no`, `name: 1.10`: YAML read a bool or a number
        return (f"{describe(err)}; quote it (\"...\"): YAML reads yes, no, on, off, true, false and "
                "numbers as such, not as names")
    return describe(err)


#: the model of each list a spec holds, by field name
_ITEMS: dict[str, type[BaseModel]] = {"transformations": Transformation, "used": Attribute,
                                      "generated": Attribute, "data_stores": DataStore}


def _fields_at(path: tuple[Any, ...]) -> list[str]:
    """The field names a spec allows at ``path`` (a pydantic error location), as written in
    YAML (aliases); [] when the path leads nowhere known."""
    model: type[BaseModel] = Spec
    for part in path:
        if isinstance(part, int):
            continue
        item = _ITEMS.get(part)
        if item is None:
            return []
        model = item
    return [f.alias or name for name, f in model.model_fields.items()]


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file (YAML or JSON).

    Raises:
        NotFound: the file does not exist.
        BadSpec: every problem, each naming file, line and field.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise NotFound(f"spec file {str(p)!r} does not exist") from exc
    except IsADirectoryError as exc:
        raise BadSpec(f"{p}: is a folder, not a spec file (give the .yaml / .json file)") from exc
    except UnicodeDecodeError as exc:
        raise BadSpec(f"{p}:1: not UTF-8 text") from exc
    except OSError as exc:
        raise BadSpec(f"{p}: cannot read the spec file: {exc.strerror or exc}") from exc
    check_shape(_yaml_view(text), str(p))  # before json.loads too: it recurses
    if p.suffix.lower() == ".json":  # YAML would also take JSON5-ish text (trailing commas)
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise_problems([f"{p}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})"])
        except RecursionError:
            raise_problems([f"{p}:1: {TOO_DEEP}"])
        except ValueError:
            if not has_overlong_number(text):
                raise
            raise_problems([f"{p}: a number has more than 4,300 digits"])
    return _parse_checked(text, str(p), echo=True)
