"""A spec's problems, each as ``SOURCE:LINE: field.path: message``, kept in line order.

:class:`Report` also says whether problems may quote the spec's own names (``echo``): the
CLI does, since seeing the typo helps; the API does not (docs/reference/rest.md: an error never
echoes what a client sent). Every check that words a problem asks the report, so the choice
is made once, by whoever parses.
"""

from __future__ import annotations

from typing import Any, NoReturn

from provkg.errors import BadSpec

__all__ = ["Report", "field_path", "raise_problems"]


def field_path(path: tuple[Any, ...]) -> str:
    """``transformations[0].used[1].name`` for a path of keys and indexes."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class Report:
    """The problems found in one spec document, with the line of each node (``lines``: path
    -> 1-based line; a path missing gives the line of its nearest ancestor)."""

    def __init__(self, source: str, lines: dict[tuple[Any, ...], int], *, echo: bool = True):
        self.source, self.lines, self.echo = source, lines, echo
        self.problems: list[str] = []

    def said(self, name: object, otherwise: str = "") -> str:
        """`` 'name'`` where problems may quote names, else ``otherwise``."""
        return f" {name!r}" if self.echo else otherwise

    def named(self, name: object) -> str:
        """``named 'name'`` where problems may quote names, else ``of that name``."""
        return f"named {name!r}" if self.echo else "of that name"

    def line(self, path: tuple[Any, ...]) -> int:
        for n in range(len(path), -1, -1):
            if path[:n] in self.lines:
                return self.lines[path[:n]]
        return 1

    def add(self, path: tuple[Any, ...], message: str, *, at: tuple[Any, ...] | None = None) -> None:
        """``at``: the path whose line to give, when ``path`` stops short of it."""
        text = f"{self.source}:{self.line(path if at is None else at)}: {field_path(path)}: {message}"
        if text not in self.problems:
            self.problems.append(text)
            self.problems.sort(key=lambda p: int(p[len(self.source) + 1:].split(":", 1)[0]))


def raise_problems(problems: list[str]) -> NoReturn:
    """Raise one BadSpec of all ``problems`` (one per line; ``exc.problems`` the list)."""
    exc = BadSpec("\n".join(problems))
    exc.problems = problems  # type: ignore[attr-defined]
    raise exc
