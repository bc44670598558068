"""What provkg reads from a SPARQL text without parsing it: the dataset clause, the prefixes
declared and used, the nesting depth, and a syntax error said with line, column and the text
near the place (whatever words the backend used).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from provkg.errors import QuerySyntaxError
from provkg.term import MAX_NESTING, SPARQL_NOISE, blank_noise, nesting_depth

__all__ = ["declared_prefixes", "has_dataset_clause", "prefix_declarations",
           "refuse_deep_nesting", "syntax_error", "undeclared_prefix"]


_OXIGRAPH_AT = re.compile(r"^\s*error at \d+:\d+:\s*")

_LINE_COLUMN = [
    re.compile(r"\bat (\d+):(\d+)"),  # oxigraph: "error at 2:9: ..."
    re.compile(r"line (\d+),? (?:between )?columns? (\d+)", re.IGNORECASE),  # oxigraph parsers
    re.compile(r"\(at char \d+\), \(line:(\d+), col:(\d+)\)"),  # pyparsing (rdflib)
    re.compile(r"line (\d+)\b", re.IGNORECASE),  # virtuoso: "SPARQL compiler, line 3: ..."
]


_FROM = re.compile(r"(?<![\w?$:])FROM(?![\w:])", re.IGNORECASE)


def has_dataset_clause(query: str) -> bool:
    """Whether a SPARQL query names its dataset (``FROM`` / ``FROM NAMED``): then the store
    must use that dataset instead of its default (the union of all graphs).

    >>> has_dataset_clause('SELECT * FROM <http://ex.org/g> WHERE { ?s ?p "FROM" }')
    True
    >>> has_dataset_clause('SELECT ?from WHERE { ?s <http://ex.org/from> "FROM" } # FROM')
    False
    """
    return _FROM.search(SPARQL_NOISE.sub(" ", query)) is not None


#: a prefixed name outside IRIs, strings and comments (``ex:s``, ``:x``, ``éte:Bar``)
_PREFIXED_NAME = re.compile(r"(?<![\w?$:.@\\-])([^\W\d][\w.-]*)?:")
_DEFINE = re.compile(r"\bdefine\s+\S+", re.IGNORECASE)
_PREFIX_DECL = re.compile(r"\bPREFIX\s+([^\W\d][\w.-]*)?:", re.IGNORECASE)


_IRI_AT = re.compile(r"\s*<([^>]*)>")


def prefix_declarations(query: str) -> list[tuple[str, str | None]]:
    """``(prefix, IRI)`` of each ``PREFIX`` line of a query, in order (``""`` for ``PREFIX :``;
    IRI None where none follows)."""
    found = []
    for m in _PREFIX_DECL.finditer(blank_noise(query)):  # found where no string hides it
        iri = _IRI_AT.match(query, m.end())  # read from the query: blanking hid the IRI
        found.append((m.group(1) or "", iri.group(1) if iri is not None else None))
    return found


def declared_prefixes(query: str) -> set[str]:
    """The prefixes a query declares (``PREFIX ex: <...>``; ``""`` for ``PREFIX : <...>``)."""
    return {prefix for prefix, _ in prefix_declarations(query)}


def undeclared_prefix(query: str, store_declares: Callable[[str], bool] | None = None) -> str | None:
    """For a query that does not parse, the first prefix it uses without declaring it, said
    as such, with where it is (parsers name the characters they expected instead, never the
    prefix); None when every prefix is declared. ``store_declares(prefix)`` tells a prefix the
    store declares itself (Virtuoso: bif:, xsd:, ...); without it, the store declares none.

    >>> undeclared_prefix("SELECT ?s WHERE { ?s foo:bar ?o }")
    'prefix foo: is not declared (add PREFIX foo: <IRI> before the query) at 1:22'
    >>> undeclared_prefix("PREFIX ex: <http://e/> SELECT * { ex:s ?p :x }")
    'prefix : is not declared (add PREFIX : <IRI> before the query) at 1:43'
    """
    # an undeclared prefix is the likeliest cause of any syntax error; Virtuoso's pragmas
    # (define input:...) are no prefixed names
    text = _DEFINE.sub(lambda m: " " * len(m.group(0)), blank_noise(query))
    declared = declared_prefixes(query)
    for m in _PREFIXED_NAME.finditer(text):
        prefix = m.group(1) or ""
        if prefix in declared or (store_declares is not None and store_declares(prefix)):
            declared.add(prefix)
            continue
        line = text.count("\n", 0, m.start()) + 1
        column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        return (f"prefix {prefix}: is not declared (add PREFIX {prefix}: <IRI> before the query) "
                f"at {line}:{column}")
    return None


#: a backend message past this size (or of several lines) lists what the parser would have
#: taken instead (Oxigraph: every Unicode range): the text near the place says more
_LONG_MESSAGE = 160


def refuse_deep_nesting(query: str) -> None:
    """Refuse a query whose brackets nest deeper than ``MAX_NESTING``: Oxigraph's parser
    recurses per level, and about 3,000 levels take the process down (`provkg sparql` ends
    in a segmentation fault).

    Raises:
        QuerySyntaxError: it nests too deep."""
    if sum(map(query.count, "({[!<")) > MAX_NESTING:  # else it cannot: counted at C speed
        depth = nesting_depth(query)
        if depth > MAX_NESTING:
            raise QuerySyntaxError(f"the query nests its brackets {depth} deep; at most "
                                   f"{MAX_NESTING} are taken")


def _near(query: str, line: int, column: int) -> str | None:
    """Where a query stops parsing, shown as its text around that point: Oxigraph's list of
    expected character ranges tells a user nothing.

    >>> _near("SELECT * WHERE { ?s ?p ?o FILTER(", 1, 34)
    'the query does not parse from here: "WHERE { ?s ?p ?o FILTER(" ⟵ (end of the query)'
    >>> _near("SELECT * WHERE { ?s ?p ?o ", 1, 27)
    'the query does not parse from here: "… * WHERE { ?s ?p ?o" ⟵ (end of the query)'
    """
    lines = query.rstrip().splitlines()
    if not 0 < line or not lines:
        return None
    if line > len(lines):  # past the last line: the query ended too soon
        line, column = len(lines), len(lines[-1]) + 1
    text = lines[line - 1]
    start = max(0, column - 1 - 24)
    before = text[start:column - 1]
    if start > 0 and not text[start - 1].isspace() and " " in before.strip():
        # begin at a word, not inside one ("LECT * WHERE ...")
        before = "…" + before[before.index(" "):]
    before = before.lstrip()
    after = text[column - 1:column - 1 + 24]
    if not after.strip() and line == len(lines):
        return f'the query does not parse from here: "{before}" ⟵ (end of the query)'
    return f'the query does not parse from here: "{before}" ⟵ "{after}"'


def syntax_error(message: str, *, what: str = "SPARQL", query: str | None = None,
                 store_declares: Callable[[str], bool] | None = None) -> QuerySyntaxError:
    """A :class:`QuerySyntaxError` with the line and column found in a backend's message
    (when it gives them: nothing depends on it); with ``query``, an undeclared prefix is named
    (see :func:`undeclared_prefix`)."""
    if query is not None:
        said = undeclared_prefix(query, store_declares)
        if said is not None:
            where = re.search(r" at (\d+):(\d+)$", said)
            assert where is not None  # undeclared_prefix ends each message " at LINE:COLUMN"
            return QuerySyntaxError(f"{what} syntax error: {said[:where.start()]}",
                                    line=int(where.group(1)), column=int(where.group(2)))
    line = column = None
    for pattern in _LINE_COLUMN:
        m = pattern.search(message)
        if m:
            line = int(m.group(1))
            column = int(m.group(2)) if m.lastindex and m.lastindex >= 2 else None
            if pattern is _LINE_COLUMN[0]:  # said once, as "(line L, column C)" below
                message = _OXIGRAPH_AT.sub("", message, count=1)
            break
    if (query is not None and line is not None and column is not None
            and (len(message.strip()) > _LONG_MESSAGE or "\n" in message.strip())):
        message = _near(query, line, column) or message
    text = f"{what} syntax error: {message.strip()}"
    if column is None:  # line only (Virtuoso): keep the message free of "column None"
        exc = QuerySyntaxError(text)
        exc.line = line
        return exc
    return QuerySyntaxError(text, line=line, column=column)
