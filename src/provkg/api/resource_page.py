"""A small HTML page describing one resource (the Linked Data view's ``text/html``).

Every value on it is user data (ids, names, captured strings): each is escaped with
:func:`html.escape`, and only ``http(s)`` IRIs become links (a stored ``javascript:`` IRI
stays text). The page loads nothing and runs no script; the route sends it with a
``Content-Security-Policy`` that forbids both.
"""

from __future__ import annotations

from html import escape
from typing import Any

from provkg.vocab import DEFAULT_BASE, PREFIXES, XSD

__all__ = ["resource_page", "PAGE_HEADERS"]

#: sent with the page: nothing loaded, nothing run, not sniffed as another type
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                "X-Content-Type-Options": "nosniff"}

_STYLE = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
          "td,th{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}"
          "code{word-break:break-all}.dt{color:#777;font-size:.85em}")


def _short(value: str) -> str:
    """An IRI as a prefixed name when a provkg prefix covers it."""
    for prefix, namespace in PREFIXES.items():
        rest = value[len(namespace):]
        if value.startswith(namespace) and rest and all(c.isalnum() or c in "_-." for c in rest):
            return f"{prefix}:{rest}"
    return value


def _iri_html(value: str) -> str:
    shown = escape(_short(value))
    if value.startswith(DEFAULT_BASE):  # this server's own view of it
        return f'<a href="/id/{escape(value[len(DEFAULT_BASE):], quote=True)}"><code>{shown}</code></a>'
    if value.lower().startswith(("http://", "https://")):
        return f'<a href="{escape(value, quote=True)}"><code>{shown}</code></a>'
    return f"<code>{shown}</code>"


def term_html(term: dict[str, Any]) -> str:
    """One SPARQL JSON result term as escaped HTML."""
    kind, value = term["type"], str(term["value"])
    if kind == "uri":
        return _iri_html(value)
    if kind == "bnode":
        return f"<code>_:{escape(value)}</code>"
    text = f"<span>{escape(value)}</span>"
    if "xml:lang" in term:
        return f'{text} <span class="dt">@{escape(term["xml:lang"])}</span>'
    datatype = term.get("datatype")
    if datatype and datatype != XSD.string:
        return f'{text} <span class="dt">{escape(_short(datatype))}</span>'
    return text


def _table(head: tuple[str, str], rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    cells = "".join(f"<tr><td>{term_html(a)}</td><td>{term_html(b)}</td></tr>" for a, b in rows)
    return f"<table><tr><th>{head[0]}</th><th>{head[1]}</th></tr>{cells}</table>"


def resource_page(resource: str, outgoing: list[tuple[dict[str, Any], dict[str, Any]]],
                  blank: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]],
                  incoming: list[tuple[dict[str, Any], dict[str, Any]]], *,
                  notes: list[str]) -> str:
    """The page of ``resource``: its triples as subject (``outgoing``: predicate, object), those
    of the blank nodes it points to (``blank``: label -> predicate, object), and the triples
    with it as object (``incoming``: subject, predicate); ``notes``: what was left out."""
    title = escape(resource)
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title>",
             f"<style>{_STYLE}</style></head><body><h1><code>{title}</code></h1>",
             "<p>The same as RDF by content negotiation: <code>Accept: text/turtle</code>, "
             "<code>application/ld+json</code>.</p>"]
    parts += [f"<p><strong>{escape(note)}</strong></p>" for note in notes]
    parts.append(f"<h2>Properties ({len(outgoing)})</h2>")
    parts.append(_table(("property", "value"), outgoing))
    for label, rows in blank.items():
        parts.append(f"<h3><code>_:{escape(label)}</code></h3>{_table(('property', 'value'), rows)}")
    parts.append(f"<h2>Referred to by ({len(incoming)})</h2>")
    parts.append(_table(("subject", "property"), incoming))
    parts.append("</body></html>")
    return "".join(parts)
