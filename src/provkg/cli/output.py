"""What commands print, and how: row formats (table, JSON, CSV), progress bars on stderr,
the notes every command words alike.

Data goes to stdout, diagnostics (``note: ...``, ``warning: ...``, ``error: ...``, progress)
to stderr, so ``--format json`` / ``csv`` output stays clean for scripts.

>>> print(format_rows(Rows(["a", "n"], [["x", 1]]), "csv"))
a,n
x,1
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from provkg.service.json_values import json_cell, text_cell
from provkg.store import Rows, display_url
from provkg.vocab import DEFAULT_BASE

if TYPE_CHECKING:
    from provkg.service.progress import Progress, ProgressBar
    from provkg.store import Store

__all__ = ["compact", "error", "format_rows", "note", "progress_bar", "shown", "snapshot_note",
           "stderr_progress", "table", "warning"]


def note(text: str) -> None:
    """``note: TEXT`` on stderr."""
    print(f"note: {text}", file=sys.stderr)


def warning(text: str) -> None:
    """``warning: TEXT`` on stderr."""
    print(f"warning: {text}", file=sys.stderr)


def error(text: str) -> None:
    """``error: TEXT`` on stderr."""
    print(f"error: {text}", file=sys.stderr)


def snapshot_note(store: Store, doing: str) -> None:
    """Say, when ``store`` is read as a snapshot because another process (an ingest, a
    server) holds it, that the command is ``doing`` (answering, checking, reading, exporting)
    from what that process had written when this command started."""
    if store.snapshot:
        note(f"{display_url(store.url)} is in use by another process (an ingest or a server): "
             f"{doing} what it had written when this command started")


def compact(store: Store) -> None:
    """Let the store reorganize its files after a bulk load (``compact_after_load``), saying
    so on stderr: it takes a while."""
    from provkg.service.loading import compact_after_load

    if sys.stderr.isatty():
        print("compacting the store's files for queries ...", end="\r", file=sys.stderr, flush=True)
    seconds = compact_after_load(store)
    if seconds is not None:
        print(f"compacted the store's files for queries in {seconds:.1f} s", file=sys.stderr)


# -- progress --------------------------------------------------------------------


class _Bar:
    """A tqdm bar of bytes on stderr, gone when closed."""

    def __init__(self, label: str, total: int):
        from tqdm import tqdm

        self._bar = tqdm(total=total, unit="B", unit_scale=True, desc=label, file=sys.stderr,
                         leave=False)

    def advance(self, n: int) -> None:
        self._bar.update(n)

    def describe(self, text: str) -> None:
        self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        self._bar.close()


def progress_bar(label: str, total: int) -> ProgressBar:
    """A progress bar of ``total`` bytes labelled ``label`` on stderr (a
    :data:`provkg.service.progress.Progress`)."""
    return _Bar(label, total)


def stderr_progress() -> Progress | None:
    """:func:`progress_bar` when stderr is a terminal; None (no bar) in a pipe or a log."""
    return progress_bar if sys.stderr.isatty() else None


# -- rows ------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def format_rows(rows: Rows, fmt: str, *, short_ids: bool = False) -> str:
    """Rows as ``json`` (``{"columns": [...], "rows": [[...]]}``, numbers as numbers), ``csv``,
    or a ``table`` for people; with ``short_ids`` the table shows a captured value's, task's or
    run's IRI as the id it was minted from (``run-1/training``; JSON and CSV keep the IRI)."""
    if fmt == "json":  # strict JSON: NaN / Infinity as the API writes them; integers exact
        return json.dumps({"columns": rows.columns,
                           "rows": [[json_cell(_plain(v)) for v in r] for r in rows.rows]},
                          allow_nan=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(rows.columns)
        writer.writerows([[text_cell(v) for v in r] for r in rows.rows])
        return out.getvalue().rstrip("\n")
    cell = _short_cell if short_ids else text_cell
    return table(rows.columns, [[cell(v) for v in r] for r in rows.rows])


#: minted kinds whose one path part is the id a client gave (provkg.term.mint_iri)
_ID_KINDS = tuple(f"{DEFAULT_BASE}{kind}/" for kind in ("value", "task", "run", "agent"))


def _short_cell(value: object) -> str:
    """A minted IRI as its id; other cells as :func:`text_cell` writes them.

    >>> _short_cell("https://w3id.org/provkg/id/task/run-1/epoch%203")
    'run-1/epoch 3'
    """
    text = text_cell(value)
    if isinstance(value, str) and text.startswith(_ID_KINDS):
        minted = text[len(DEFAULT_BASE):].split("/", 1)[1]
        return unquote(minted) if minted else text
    return text


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    r"""``text`` for a terminal: control characters other than tab and newline as ``\xNN``.

    >>> shown("a\x1b[31mred")
    'a\\x1b[31mred'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


#: the width of a table written to a pipe or a file: wider than any row it holds
_UNWRAPPED = 1_000_000


def table(columns: list[str], cells: list[list[str]], *, title: str | None = None) -> str:
    """A table for people, as wide as the terminal (at least 80 columns); written to a pipe or a
    file it is never wrapped (a script or a pager reads whole lines)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Text, not str: rich reads a str as markup, and stored values like "[red]x[/red]",
    # "[1,null]" or "[better]" are data, shown as they are; control characters (an ESC that
    # would recolour or retitle the terminal: anyone who sends events can store one) escaped
    grid = Table(title=Text(shown(title)) if title is not None else None)
    for c in columns:
        grid.add_column(Text(shown(c)), overflow="fold")
    for r in cells:
        grid.add_row(*(Text(shown(v)) for v in r))
    width = max(80, Console().width) if sys.stdout.isatty() else _UNWRAPPED
    console = Console(file=io.StringIO(), width=width, force_terminal=False)
    console.print(grid)
    return console.file.getvalue().rstrip("\n")  # type: ignore[attr-defined]
