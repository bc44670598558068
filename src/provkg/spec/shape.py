"""A spec's size, checked on its text before anything builds the document.

A spec nests about six levels deep and holds a few thousand values; a document far past
that is a mistake or an attack (deep nesting crashed the recursive steps of the parsers, 300
bytes of nested YAML aliases expanded to 1.1 GB). :func:`check_shape` refuses it with this
module's words and the line where it went too far: the depth measured on the text alone
(:func:`nesting_excess`), then the values counted on YAML's event stream, which is read
iteratively.
"""

from __future__ import annotations

import re

import yaml

from provkg.spec.report import raise_problems

__all__ = ["MAX_SPEC_DEPTH", "MAX_SPEC_NODES", "TOO_DEEP", "check_shape", "nesting_excess"]

#: a spec nests about six levels deep (transformations, used, an attribute, ...)
MAX_SPEC_DEPTH = 64
#: values a spec may expand to, YAML aliases counted at their full size
MAX_SPEC_NODES = 100_000
TOO_DEEP = f"nested deeper than {MAX_SPEC_DEPTH} levels (a spec needs about 6)"


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


def nesting_excess(text: str, limit: int) -> int | None:
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


def check_shape(text: str, source: str) -> None:
    """Refuse, before anything builds the document, a spec nested deeper than
    :data:`MAX_SPEC_DEPTH` (it crashed the recursive steps: RecursionError, then a segfault)
    or one whose aliases expand past :data:`MAX_SPEC_NODES` values (300 bytes of nested
    aliases took 1.1 GB). The YAML event stream is read iteratively, so this pass is safe.
    Text that is not YAML is left to the parser, which reports it with its line.

    The depth is measured on the text first, before any parser sees it: parsers refuse deep
    nesting with their own words at their own limits (libyaml's scanner reads a line of
    brackets whole before yielding an event), and the message must be this module's."""
    line = nesting_excess(text, MAX_SPEC_DEPTH)
    if line is not None:
        raise_problems([f"{source}:{line}: {TOO_DEEP}"])
    depth = nodes = 0
    sizes: dict[str, int] = {}  # anchor -> values it expands to
    open_: list[tuple[str | None, int]] = []  # enclosing collections: (anchor, nodes before)
    try:
        for ev in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(ev, yaml.CollectionStartEvent):
                depth, nodes = depth + 1, nodes + 1
                if depth > MAX_SPEC_DEPTH:
                    line = ev.start_mark.line + 1
                    raise_problems([f"{source}:{line}: {TOO_DEEP}"])
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
                raise_problems([(f"{source}:{line}: more than {MAX_SPEC_NODES:,} values (names, "
                                 "kinds, attributes...: about 3,000 transformations; YAML aliases "
                                 "count at the size of what they name); split the workflow's "
                                 "spec or write a smaller one")])
    except yaml.YAMLError:
        return
