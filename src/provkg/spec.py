"""Prospective specs v1 (DESIGN.md section 4): what each transformation and attribute *is*.

A spec is YAML (or JSON, which YAML reads too). Loading keeps the line of every
node, so each problem is reported as ``FILE:LINE: field.path: message`` and all
problems are reported at once::

    workflow: flower-training
    phase: learning
    transformations:
      - {name: training, kind: training, used: [{name: learning_rate, role: hyperparameter}]}
      - {name: epoch, kind: section, of: training, granularity: full,
         generated: [{name: loss, role: evaluation_measure, concept: seis:loss}]}

This module does no RDF: the mapper turns a :class:`Spec` into prospective triples.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
import json
import re
from pathlib import Path, PureWindowsPath
from typing import Annotated, Any, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, StrictStr,
                      ValidationError)

from provkg.errors import BadSpec, NotFound
from provkg.problems import describe
from provkg.term import is_valid_iri, location_form, path_location
from provkg.vocab import PREFIXES

#: whether problems may quote the spec's own names (the CLI: yes, it helps to see the typo;
#: the API: no, DESIGN section 7: an error never echoes what a client sent)
_ECHO: ContextVar[bool] = ContextVar("spec_echo", default=True)


def _said(name: object, otherwise: str = "") -> str:
    """`` 'name'`` where problems may quote names, else ``otherwise``."""
    return f" {name!r}" if _ECHO.get() else otherwise


def _named(name: object) -> str:
    return f"named {name!r}" if _ECHO.get() else "of that name"

__all__ = [
    "KINDS",
    "PHASES",
    "ROLES",
    "Attribute",
    "DataStore",
    "Spec",
    "Transformation",
    "ValidatedFiles",
    "expand_curie",
    "load_spec",
    "parse_spec",
    "parse_stored_spec",
    "ok_line",
    "spec_changes",
    "validate_files",
]

KINDS = ("transformation", "training", "validation", "evaluation", "section",
         "feature_extraction", "adaptation")
ROLES = ("hyperparameter", "model_hyperparameter", "model", "model_schema", "evaluation_measure",
         "dataset", "dataset_characteristic", "feature_set", "data_reference", "domain_reference",
         "plain")
PHASES = ("curation", "preparation", "learning")

Kind = Literal["transformation", "training", "validation", "evaluation", "section",
               "feature_extraction", "adaptation"]
Role = Literal["hyperparameter", "model_hyperparameter", "model", "model_schema",
               "evaluation_measure", "dataset", "dataset_characteristic", "feature_set",
               "data_reference", "domain_reference", "plain"]
Name = Annotated[StrictStr, Field(min_length=1, max_length=256)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Attribute(_Model):
    """A used or generated attribute of a transformation."""

    name: Name
    role: Role = "plain"
    #: domain concept the attribute holds: an IRI or a CURIE with a prefix of ``vocab.PREFIXES``
    concept: StrictStr | None = None
    #: name of a data store of the spec's ``data_stores`` where its data lives
    store: Name | None = None
    description: StrictStr | None = None

    @property
    def concept_iri(self) -> str | None:
        """The concept as a full IRI (CURIEs expanded), or None."""
        return None if self.concept is None else expand_curie(self.concept)


class Transformation(_Model):
    """A prospective data transformation: a stage, a section of one, or any step."""

    name: Name
    kind: Kind = "transformation"
    #: for sections: the stage or section this one is part of
    of: Name | None = None
    used: list[Attribute] = Field(default_factory=list)
    generated: list[Attribute] = Field(default_factory=list)
    #: sections only: ``summary`` keeps per-section summaries on the parent instead of every execution
    granularity: Literal["full", "summary"] = "full"
    description: StrictStr | None = None

    def attribute(self, name: str) -> Attribute | None:
        """The used or generated attribute called ``name`` (generated wins a tie)."""
        for a in self.generated:
            if a.name == name:
                return a
        for a in self.used:
            if a.name == name:
                return a
        return None


def _store_location(text: str) -> str:
    """A data store's location in the spelling values' locations have (a path as its
    ``file:`` URI): it is written as an ``xsd:anyURI``, which a reasoner checks."""
    expected = "expected a URI (file:///data/lake, s3://bucket/prefix) or an absolute path"
    if text.startswith("~"):  # a spec POSTed to a server would get the server's home
        raise ValueError(f"{expected}: a spec is read on other machines and by other users, "
                         "where ~ is another folder")
    if text.startswith("/"):
        return path_location(text)
    if re.match(r"[A-Za-z]:[\\/]", text):  # C:\data\lake: a Windows path, not scheme "c"
        return path_location(PureWindowsPath(text))
    if re.match(r"[A-Za-z]:", text):  # C:data\lake, C: (drive-relative), not scheme "c"
        raise ValueError(f"{expected}: {text!r} is relative to a drive's current folder")
    if text.startswith("\\\\"):  # \\server\share\lake: a UNC path, file://server/share/lake
        return location_form("file:" + PureWindowsPath(text).as_posix())
    form = location_form(text)
    if not (":" in text[1:] and text[0].isalpha() and is_valid_iri(form)):
        raise ValueError(expected)
    if form.lower().startswith("file:") and not form[5:].startswith("/"):
        raise ValueError(f"{expected}: {text!r} is a relative file: URI")
    return form


class DataStore(_Model):
    """Where data lives: a file system, an object store, a DBMS."""

    name: Name
    kind: StrictStr | None = None
    location: Annotated[StrictStr, AfterValidator(_store_location)] | None = None
    description: StrictStr | None = None


class Spec(_Model):
    """A workflow's prospective provenance."""

    workflow: Name
    phase: Literal["curation", "preparation", "learning"]
    transformations: list[Transformation] = Field(min_length=1)
    data_stores: list[DataStore] = Field(default_factory=list)
    description: StrictStr | None = None

    _by_name: dict[str, Transformation] = PrivateAttr(default_factory=dict)
    _parents: set[str] = PrivateAttr(default_factory=set)  # what sections are ``of``

    def model_post_init(self, __context: Any) -> None:
        self._by_name = {t.name: t for t in self.transformations}
        self._parents = {t.of for t in self.transformations if t.kind == "section" and t.of}

    def transformation(self, name: str) -> Transformation | None:
        """The transformation called ``name``, or None."""
        return self._by_name.get(name)

    def has_sections(self, name: str) -> bool:
        """Whether a section of this spec is ``of`` transformation ``name`` (a section without
        any is innermost: the batches)."""
        return name in self._parents

    def stage_kind(self, name: str) -> str | None:
        """The kind of the stage a transformation belongs to: its own kind, or for a
        section the kind of the first non-section up its ``of`` chain."""
        seen: set[str] = set()
        t = self._by_name.get(name)
        while t is not None and t.kind == "section" and t.of is not None and t.name not in seen:
            seen.add(t.name)
            t = self._by_name.get(t.of)
        return None if t is None else t.kind


def expand_curie(text: str) -> str:
    """An IRI from ``prefix:local`` (a prefix of ``vocab.PREFIXES``) or an absolute IRI.

    >>> expand_curie("seis:numberOfSlices")
    'https://w3id.org/provkg/seismic#numberOfSlices'

    Raises:
        BadSpec: when ``text`` is neither.
    """
    prefix, sep, local = text.partition(":")
    if sep and prefix in PREFIXES and not local.startswith("//"):
        full = PREFIXES[prefix] + local
        if is_valid_iri(full):
            return full
    elif sep and (local.startswith("//") or prefix in ("urn", "tag", "mailto")) and is_valid_iri(text):
        return text
    known = ", ".join(sorted(PREFIXES))
    raise BadSpec(f"expected an absolute IRI (https://...) or a CURIE with one of the prefixes {known}")


# ---------------------------------------------------------------------------
# loading with line numbers


def _marks(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int],
           problems: list[tuple[tuple[Any, ...], str]]) -> None:
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


def _field(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class _Report:
    def __init__(self, source: str, lines: dict[tuple[Any, ...], int]):
        self.source, self.lines, self.problems = source, lines, []

    def line(self, path: tuple[Any, ...]) -> int:
        for n in range(len(path), -1, -1):
            if path[:n] in self.lines:
                return self.lines[path[:n]]
        return 1

    def add(self, path: tuple[Any, ...], message: str, *, at: tuple[Any, ...] | None = None) -> None:
        """``at``: the path whose line to give, when ``path`` stops short of it."""
        text = f"{self.source}:{self.line(path if at is None else at)}: {_field(path)}: {message}"
        if text not in self.problems:
            self.problems.append(text)
            self.problems.sort(key=lambda p: int(p[len(self.source) + 1:].split(":", 1)[0]))


#: a spec nests about six levels deep (transformations, used, an attribute, ...)
MAX_SPEC_DEPTH = 64
#: values a spec may expand to, YAML aliases counted at their full size
MAX_SPEC_NODES = 100_000
_TOO_DEEP = f"nested deeper than {MAX_SPEC_DEPTH} levels (a spec needs about 6)"


#: line breaks as YAML counts lines (PyYAML's marks count each of these as one)
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
#: what ends a plain scalar in block context: a key's ``:`` or a comment's `` #``
_PLAIN_END = re.compile(r"[ \t]#|:(?=[ \t]|$)")
#: a key's ``:`` right after a quoted scalar, an alias or a flow collection
_KEY_AFTER = re.compile(r"[ \t]*:(?=[ \t]|$)")
#: characters that matter inside a flow collection
_FLOW_MARK = re.compile(r"[\[\]{}\"',#]")
#: node properties (``&anchor``, ``!tag``) just before a node
_PROPERTIES_END = re.compile(r"(?:(?:^|[ \t])[&!][^ \t\[\]{},]*)+[ \t]*$")
_DOUBLE_QUOTED_REST = re.compile(r'(?:[^"\\]|\\.)*"')
_SINGLE_QUOTED_REST = re.compile(r"(?:[^']|'')*'(?!')")


def _quote_end(line: str, start: int, quote: str) -> int:
    """Where the quoted scalar open before ``start`` closes on ``line`` (just after its
    quote), or -1 when it goes on past the line."""
    m = (_DOUBLE_QUOTED_REST if quote == '"' else _SINGLE_QUOTED_REST).match(line, start)
    return -1 if m is None else m.end()


def _opens_quote(line: str, at: int) -> bool:
    """Does the quote at ``line[at]``, in a flow collection, begin a quoted scalar (it
    follows ``[ { , : ?``, a node's properties or a line start), not sit inside a plain one?"""
    before = line[:at]
    if before and before[-1] not in " \t[{,:":
        return False  # glued to plain text: it's
    before = _PROPERTIES_END.sub("", before).rstrip(" \t")
    return not before or before[-1] in "[{,:?"


def _nesting_excess(text: str, limit: int) -> int | None:
    """The line at which YAML (or JSON) ``text`` first nests deeper than ``limit``
    collections, or None when it does not.

    Read from the text alone, without a parser, so the answer does not depend on which
    parser (libyaml, PyYAML's Python reader, json) or which version reads the spec later,
    nor on the limits those set themselves. Flow collections count their brackets outside
    quoted scalars and comments; block collections their indentation (an indentless
    sequence under a key too). Where the text is unclear (multi-line plain scalars, block
    scalars, invalid YAML), lines are skipped, so the depth found is never more than a
    parser would build: a spec is refused for nothing it does not hold."""
    stack: list[tuple[int, bool]] = []  # open block collections: (column, is a sequence)
    flow = 0  # open flow collections
    quote = ""  # the quote of a quoted scalar going on past a line
    text_above = -2  # a block or multi-line plain scalar: its lines are indented past this

    def open_block(column: int, sequence: bool) -> bool:
        """A block collection at ``column`` (or one more entry of an open one): too deep?"""
        while stack and stack[-1][0] > column:
            stack.pop()
        if stack and stack[-1][0] == column:
            if stack[-1][1] == sequence:
                return False
            if stack[-1][1]:  # a key in the column of an indentless sequence: it ended
                stack.pop()
                if stack and stack[-1] == (column, False):
                    return False
        stack.append((column, sequence))
        return len(stack) + flow > limit

    for number, line in enumerate(_LINE_BREAK.split(text), 1):
        p = 0
        if quote:  # a quoted scalar's next line: nothing of structure before it closes
            p = _quote_end(line, 0, quote)
            if p < 0:
                continue
            quote = ""
            if not flow:  # a multi-line scalar is no key: the rest is a comment at most
                continue
        elif text_above > -2 and not flow:
            body = line.lstrip(" ")
            if not body.strip() or len(line) - len(body) > text_above:
                continue
            text_above = -2
        flow_start = -1  # the column where a flow collection opened on this line
        block = not flow
        if block:
            body = line.lstrip(" \t")
            p = len(line) - len(body)
            if not body or body[0] == "#" or (p == 0 and body[0] == "%"):
                continue
            if p == 0 and body[:3] in ("---", "...") and body[3:4] in ("", " ", "\t"):
                stack.clear()  # a document's start or end
                p = 3
        keyed = False  # this line has had a key: another one is no YAML, not more depth
        first = True
        node = -1  # the column of the node's properties (&anchor, !tag) before it, if any
        while True:
            if block:  # block context, at a node
                while p < len(line) and line[p] in " \t":
                    p += 1
                if p >= len(line) or line[p] == "#":
                    break
                c = line[p]
                after = line[p + 1:p + 2]
                if c in "-?:" and after in ("", " ", "\t"):
                    if open_block(p, c == "-"):
                        return number
                    p, first, node = p + 1, False, -1
                    continue
                if c in "&!":  # properties: the node follows
                    node = p if node < 0 else node
                    while p < len(line) and line[p] not in " \t":
                        p += 1
                    continue
                start = p if node < 0 else node
                if first:  # a node starting a line is inside a collection left of it
                    while stack and stack[-1][0] >= start:
                        stack.pop()
                    first = False
                if c in "|>":  # a block scalar: its text is indented past its collection
                    text_above = stack[-1][0] if stack else -1
                    break
                if c in "\"'":
                    p = _quote_end(line, p + 1, c)
                    if p < 0:
                        quote = c
                        break
                elif c in "[{":
                    flow, flow_start, block, p = 1, start, False, p + 1
                    if len(stack) + flow > limit:
                        return number
                    continue
                elif c == "*":
                    while p < len(line) and line[p] not in " \t":
                        p += 1
                else:  # a plain scalar: a key, or a value that may go on on the next lines
                    m = _PLAIN_END.search(line, p)
                    if m is None or m.group()[0] != ":":
                        text_above = stack[-1][0] if stack else -1
                        break
                    p = m.start()
                m = _KEY_AFTER.match(line, p)
                if m is None or keyed:
                    break
                if open_block(start, False):
                    return number
                keyed, p, node = True, m.end(), -1
                continue
            # flow context
            m = _FLOW_MARK.search(line, p)
            if m is None:
                break
            p = m.end()
            c = m.group()
            if c in "[{":
                flow += 1
                if len(stack) + flow > limit:
                    return number
            elif c in "]}":
                flow = max(flow - 1, 0)
                if not flow:  # back in block context: a key may follow the collection
                    m = _KEY_AFTER.match(line, p)
                    if m is None or keyed or flow_start < 0:
                        break
                    if open_block(flow_start, False):
                        return number
                    keyed, block, p = True, True, m.end()
            elif c in "\"'" and _opens_quote(line, m.start()):
                p = _quote_end(line, p, c)
                if p < 0:
                    quote = c
                    break
            elif c == "#" and (m.start() == 0 or line[m.start() - 1] in " \t"):
                break
    return None


def _check_shape(text: str, source: str) -> None:
    """Refuse, before anything builds the document, a spec nested deeper than
    :data:`MAX_SPEC_DEPTH` (it crashed the recursive steps: RecursionError, then a segfault)
    or one whose aliases expand past :data:`MAX_SPEC_NODES` values (300 bytes of nested
    aliases took 1.1 GB). The YAML event stream is read iteratively, so this pass is safe.
    Text that is not YAML is left to the parser, which reports it with its line.

    The depth is measured on the text first, before any parser sees it: parsers refuse deep
    nesting with their own words at their own limits (libyaml's scanner reads a line of
    brackets whole before yielding an event), and the message must be this module's."""
    line = _nesting_excess(text, MAX_SPEC_DEPTH)
    if line is not None:
        _raise([f"{source}:{line}: {_TOO_DEEP}"])
    depth = nodes = 0
    sizes: dict[str, int] = {}  # anchor -> values it expands to
    open_: list[tuple[str | None, int]] = []  # enclosing collections: (anchor, nodes before)
    try:
        for ev in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(ev, yaml.CollectionStartEvent):
                depth, nodes = depth + 1, nodes + 1
                if depth > MAX_SPEC_DEPTH:
                    line = ev.start_mark.line + 1
                    _raise([f"{source}:{line}: {_TOO_DEEP}"])
                open_.append((ev.anchor, nodes - 1))
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
                anchor, before = open_.pop()
                if anchor:
                    sizes[anchor] = nodes - before
            elif isinstance(ev, yaml.ScalarEvent):
                nodes += 1
                if ev.anchor:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                nodes += sizes.get(ev.anchor or "", 1)
            if nodes > MAX_SPEC_NODES:
                line = ev.start_mark.line + 1 if ev.start_mark else 1
                _raise([(f"{source}:{line}: more than {MAX_SPEC_NODES:,} values (names, "
                         "kinds, attributes...: about 3,000 transformations; YAML aliases "
                         "count at the size of what they name); split the workflow's spec "
                         "or write a smaller one")])
    except yaml.YAMLError:
        return


def parse_spec(text: str, *, source: str = "<string>", echo: bool = True) -> Spec:
    """Parse and validate a spec from YAML or JSON text. ``echo=False`` (the API): problems
    name line and field but never quote the spec's own names back.

    Raises:
        BadSpec: listing every problem as ``SOURCE:LINE: field: message`` (one per line);
            ``exc.problems`` holds them as a list.
    """
    token = _ECHO.set(echo)
    try:
        _check_shape(_yaml_view(text), source)  # (the view changes no count)
        return _parse_checked(text, source)
    finally:
        _ECHO.reset(token)


def parse_stored_spec(text: str, *, source: str) -> Spec:
    """Parse a spec document provkg stored (:func:`provkg.service.ingest.spec_document`):
    JSON it wrote from a spec that passed :func:`parse_spec`, so without the size check,
    which its spelled-out defaults could fail for a large spec that passed it (a
    7,000-transformation spec, say, would then be skipped).

    Raises:
        BadSpec: as :func:`parse_spec` (a document another provkg version wrote)."""
    return _parse_checked(text, source)


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


def _parse_checked(text: str, source: str) -> Spec:
    """:func:`_parse_document`, Python's own limits said as a spec problem: a BadSpec, not a
    traceback in the CLI or a 500 from the API."""
    try:
        return _parse_document(text, source)
    except RecursionError:
        raise BadSpec(f"{source}: the spec nests too deeply (or a YAML anchor refers to "
                      "itself)") from None
    except ValueError as exc:
        if isinstance(exc, BadSpec) or not has_overlong_number(text):
            raise
        raise BadSpec(f"{source}: a number has more than 4,300 digits") from None


def _parse_document(text: str, source: str) -> Spec:
    """:func:`parse_spec` of text :func:`_check_shape` has passed."""
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
            report = _Report(source, {})
            _check(spec, report)
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
                _raise([f"{source}:{line}: not valid JSON: a \\u escape of half a surrogate "
                        f"pair (\\ud800-\\udfff without its other half) is not a character "
                        f"(column {mark.column + 1 if mark is not None else 1})"])
            _raise([f"{source}:{line}: not valid YAML or JSON: {exc.problem or exc}"])
    except yaml.YAMLError as exc:
        if not is_json or _lone_surrogate(data):
            _raise([f"{source}:1: not valid YAML or JSON: {exc}"])
    report = _Report(source, lines)
    for path, msg in dupes:
        report.add(path, msg)
    if not isinstance(data, dict):
        report.add((), "a spec is a mapping with workflow, phase and transformations")
        _raise(report.problems)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_input=False, include_url=False):
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("function-", "constrained-"))))
            message = _pydantic_message(err, loc, is_json=is_json)
            if err["type"] == "extra_forbidden" and not _ECHO.get():
                # the line says where; the key itself is what the client sent (a pasted secret)
                report.add(loc[:-1], message, at=loc)
            elif err["type"] == "invalid_key":  # YAML read `1:` or `true:` as a number / bool:
                # not an index of the path, and its line is the key's (YAML wrote it as text)
                siblings = [p for p in lines if len(p) == len(loc) and p[:-1] == loc[:-1]
                            and isinstance(p[-1], str) and not _text_key(p[-1])]
                at = next((p for p in siblings if p[-1].lower() == str(loc[-1]).lower()),
                          siblings[0] if siblings else loc[:-1])
                shown = f" {at[-1] if siblings else loc[-1]!s}" if _ECHO.get() else ""
                report.add(loc[:-1], f"the key{shown} is a number or true/false, not a name: "
                           "quote it (\"...\")", at=at)
            else:
                report.add(loc, message)
        _check_raw(data, report)
        _raise(report.problems)
    _check(spec, report)
    if report.problems:
        _raise(report.problems)
    return spec


def _pydantic_message(err: dict[str, Any], loc: tuple[Any, ...], *, is_json: bool = False) -> str:
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
        model = _ITEMS.get(part)  # type: ignore[assignment]
        if model is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _raise(problems: list[str]) -> Any:
    exc = BadSpec("\n".join(problems))
    exc.problems = problems  # type: ignore[attr-defined]
    raise exc


def _check_raw(data: dict[str, Any], report: _Report) -> None:
    """Cross-field checks on a spec pydantic refused, so every problem shows at once."""
    try:
        trs = [t for t in data.get("transformations") or [] if isinstance(t, dict)]
    except TypeError:
        return
    names = {t.get("name") for t in trs if isinstance(t.get("name"), str)}
    of = {t["name"]: t.get("of") for t in trs if isinstance(t.get("name"), str) and t.get("kind") == "section"}
    first: dict[str, int] = {}
    for i, t in enumerate(data.get("transformations") or []):
        name = t.get("name") if isinstance(t, dict) else None
        if isinstance(name, str) and name in first:
            report.add(("transformations", i, "name"),
                       f"duplicate transformation name{_said(name)} (first at transformations[{first[name]}])")
        elif isinstance(name, str):
            first[name] = i
        if isinstance(name, str) and name in of and _raw_cycle(of, name):
            report.add(("transformations", i, "of"), f"sections form a cycle through{_said(name, ' this one')}; "
                       "the chain must end at a stage (training, validation, ...)")
        if isinstance(t, dict) and t.get("kind") == "section" and not t.get("of"):
            report.add(("transformations", i, "of"), "a section needs `of`: the stage or section it is part of")
        elif isinstance(t, dict) and isinstance(t.get("of"), str) and t["of"] not in names:
            report.add(("transformations", i, "of"), f"no transformation {_named(t['of'])} in this spec")
        for side in ("used", "generated"):
            attrs = t.get(side) if isinstance(t, dict) else None
            for j, a in enumerate(attrs if isinstance(attrs, list) else []):
                if isinstance(a, dict) and isinstance(a.get("concept"), str):
                    try:
                        expand_curie(a["concept"])
                    except BadSpec as exc:
                        report.add(("transformations", i, side, j, "concept"), str(exc))


def _raw_cycle(of: dict[str, Any], name: str) -> bool:
    """``name``'s ``of`` chain (sections only, as written) comes back to a section."""
    seen: set[str] = set()
    while isinstance(name, str) and name in of:
        if name in seen:
            return True
        seen.add(name)
        name = of[name]
    return False


def _check(spec: Spec, report: _Report) -> None:
    by_name: dict[str, int] = {}
    for i, t in enumerate(spec.transformations):
        if t.name in by_name:
            report.add(("transformations", i, "name"),
                       f"duplicate transformation name{_said(t.name)} (first at transformations[{by_name[t.name]}])")
        by_name.setdefault(t.name, i)
    stores: dict[str, int] = {}
    for i, s in enumerate(spec.data_stores):
        if s.name in stores:
            report.add(("data_stores", i, "name"), f"duplicate data store name{_said(s.name)}")
        stores.setdefault(s.name, i)
    for i, t in enumerate(spec.transformations):
        where = ("transformations", i)
        if t.kind == "section":
            if t.of is None:
                report.add(where + ("of",), "a section needs `of`: the stage or section it is part of")
            elif t.of not in by_name:
                report.add(where + ("of",), f"no transformation {_named(t.of)} in this spec")
            elif _cyclic(spec, t.name):
                report.add(where + ("of",), f"sections form a cycle through{_said(t.name, ' this one')}; "
                           "the chain must end at a stage (training, validation, ...)")
        elif t.of is not None:
            report.add(where + ("of",), f"only sections have `of` (this one is kind {t.kind!r})")
        if t.granularity != "full" and t.kind != "section":
            report.add(where + ("granularity",), "only sections have a granularity")
        elif t.granularity != "full" and spec.has_sections(t.name):
            # its executions would be summaries only, and the sections of it would hang
            # from executions the graph no longer holds (q4, q5 and q7 would lose every
            # batch of such epochs)
            report.add(where + ("granularity",), "only an innermost section (no section is `of` "
                       "it) may be kept as a summary: summarise the sections inside it instead")
        _check_attributes(t, where, stores, report)


def _cyclic(spec: Spec, name: str) -> bool:
    return _raw_cycle({t.name: t.of for t in spec.transformations if t.kind == "section"}, name)


def _check_attributes(t: Transformation, where: tuple[Any, ...], stores: dict[str, int],
                      report: _Report) -> None:
    first: dict[str, tuple[str, Attribute]] = {}
    for side in ("used", "generated"):
        seen: set[str] = set()
        for j, a in enumerate(getattr(t, side)):
            path = where + (side, j)
            if a.name in seen:
                report.add(path + ("name",), f"duplicate attribute name{_said(a.name)} in {side}")
            seen.add(a.name)
            other = first.get(a.name)
            if other is not None and (other[1].role, other[1].concept) != (a.role, a.concept):
                report.add(path + ("name",), f"{_said(a.name, ' this name').strip()} is also {other[0]} with another role or "
                           "concept; one name is one attribute")
            first.setdefault(a.name, (side, a))
            if a.concept is not None:
                try:
                    expand_curie(a.concept)
                except BadSpec as exc:
                    report.add(path + ("concept",), str(exc))
            if a.store is not None and a.store not in stores:
                known = (", ".join(sorted(stores)) if _ECHO.get() else f"{len(stores)} declared") \
                    if stores else "none declared"
                report.add(path + ("store",), f"no data store {_named(a.store)} in data_stores ({known})")


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
    _check_shape(_yaml_view(text), str(p))  # before json.loads too: it recurses
    if p.suffix.lower() == ".json":  # YAML would also take JSON5-ish text (trailing commas)
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            _raise([f"{p}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})"])
        except RecursionError:
            _raise([f"{p}:1: {_TOO_DEEP}"])
        except ValueError:
            if not has_overlong_number(text):
                raise
            _raise([f"{p}: a number has more than 4,300 digits"])
    return _parse_checked(text, str(p))


def spec_changes(old: Spec, new: Spec) -> list[str]:
    """What registering ``new`` changes for a workflow that had ``old``, one item per kind of
    change: ``transformations added: eval``, ``transformations changed: training (used -lr
    +learning_rate)``, ``phase learning -> preparation``; empty when nothing that maps differs."""
    mine = {t.name: t for t in new.transformations}
    theirs = {t.name: t for t in old.transformations}
    parts = []
    for what, names in (("added", sorted(mine.keys() - theirs.keys())),
                        ("removed", sorted(theirs.keys() - mine.keys()))):
        if names:
            parts.append(f"transformations {what}: {', '.join(names)}")
    changed = [f"{n} ({_transformation_changes(theirs[n], mine[n])})"
               for n in sorted(mine.keys() & theirs.keys()) if mine[n] != theirs[n]]
    if changed:
        parts.append(f"transformations changed: {', '.join(changed)}")
    if new.phase != old.phase:
        parts.append(f"phase {old.phase} -> {new.phase}")
    if new.data_stores != old.data_stores:
        parts.append("data stores changed")
    if new.description != old.description:
        parts.append("description changed")
    return parts


def _transformation_changes(old: Transformation, new: Transformation) -> str:
    """``kind training -> evaluation; used -lr +learning_rate ~batch_size`` (~: role or concept)."""
    out = [f"{field} {getattr(old, field)} -> {getattr(new, field)}"
           for field in ("kind", "of", "granularity") if getattr(old, field) != getattr(new, field)]
    for side in ("used", "generated"):
        was = {a.name: a for a in getattr(old, side)}
        now = {a.name: a for a in getattr(new, side)}
        diff = [f"-{n}" for n in sorted(was.keys() - now.keys())]
        diff += [f"+{n}" for n in sorted(now.keys() - was.keys())]
        diff += [f"~{n}" for n in sorted(was.keys() & now.keys()) if was[n] != now[n]]
        if diff:
            out.append(f"{side} {' '.join(diff)}")
    return "; ".join(out) or "description"


@dataclass
class ValidatedFiles:
    """What :func:`validate_files` found."""

    #: the files that are valid, with their specs, in the order given
    valid: list[tuple[str, Spec]] = field(default_factory=list)
    #: (``"note"`` or ``"error"``, text) in the order of the files: each problem of each file,
    #: and a note for two files that are specs of one workflow
    messages: list[tuple[str, str]] = field(default_factory=list)
    #: whether any file was not valid
    failed: bool = False


def validate_files(files: list[str]) -> ValidatedFiles:
    """Load each spec file; every problem is kept (one message per line, ``FILE:LINE:
    field: message``), not raised."""
    out = ValidatedFiles()
    seen: dict[str, str] = {}
    for f in files:
        try:
            spec = load_spec(f)
            if spec.workflow in seen and seen[spec.workflow] != f:
                # said, not refused (two versions may be compared with --store), since `provkg
                # ingest --spec a --spec b` refuses them: a folder check that says ok must not
                # be followed by a load that fails
                said = (f"{f} and {seen[spec.workflow]} are both specs of workflow "
                        f"{spec.workflow!r}: an ingest takes one spec per workflow")
                out.messages.append(("note", said))
            seen.setdefault(spec.workflow, f)
            out.valid.append((f, spec))
        except BadSpec as exc:
            out.failed = True
            out.messages += [("error", line) for line in getattr(exc, "problems", [str(exc)])]
        except NotFound as exc:
            out.failed = True
            out.messages.append(("error", str(exc)))
    return out


def ok_line(path: str, spec: Spec) -> str:
    """``FILE: ok (workflow 'w', phase p, N transformations)``."""
    n = len(spec.transformations)
    return (f"{path}: ok (workflow {spec.workflow!r}, phase {spec.phase}, "
            f"{n} transformation{'' if n == 1 else 's'})")
