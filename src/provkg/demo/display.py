"""What the demo shows in the terminal: a progress display per phase, online losses, answer tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID,
                           TextColumn, TimeElapsedColumn)
from rich.table import Table
from rich.text import Text

from provkg.demo.answers import Answer, short

__all__ = ["PhaseProgress", "print_answers"]


class PhaseProgress:
    """The lifecycle's progress callbacks drawn as one rich progress bar per phase.

    ``online`` (optional) is called after each epoch with the capture workflow, the
    training's running result and the epoch number; it returns a line to print.
    """

    def __init__(self, console: Console, *,
                 online: Callable[..., str | None] | None = None) -> None:
        self.console = console
        self.online = online
        self.bars = Progress(SpinnerColumn(), TextColumn("[bold cyan]{task.fields[phase]:<12}"),
                             TextColumn("{task.description}"), BarColumn(bar_width=30),
                             MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                             transient=False)
        self.current: TaskID | None = None

    def __enter__(self) -> PhaseProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._finish_current()
        self.bars.stop()

    def _finish_current(self) -> None:
        if self.current is not None:
            task = self.bars.tasks[self.current]
            self.bars.update(self.current, completed=task.total)
            self.current = None

    def phase(self, name: str, description: str, total: int) -> None:
        self._finish_current()
        self.current = self.bars.add_task(description, total=max(total, 1), phase=name)

    def advance(self, steps: int = 1) -> None:
        if self.current is not None:
            self.bars.advance(self.current, steps)

    def note(self, text: str) -> None:
        self.console.print(f"   [dim]{text}[/dim]")

    def epoch_done(self, *, workflow: Any, result: Any, epoch: int) -> None:
        if self.online is not None:
            line = self.online(workflow=workflow, result=result, epoch=epoch)
            if line:
                self.console.print(f"   [magenta]online[/magenta] {line}")


def print_answers(console: Console, answers: list[Answer]) -> None:
    """One table per answer, with its check against the lifecycle's own numbers."""
    for a in answers:
        table = Table(title=f"[bold]{a.name.upper()}[/bold] {a.question}", title_justify="left",
                      show_lines=False, header_style="bold", expand=False)
        for column in a.columns:
            table.add_column(Text(column), overflow="fold")
        for row in a.rows:  # Text: a stored value is data, not rich markup
            table.add_row(*(Text(short(v)) for v in row))
        console.print(table)
        if not a.rows:
            console.print("   [yellow](no rows)[/yellow]")
        if a.check:
            mark = "[green]✓[/green]" if a.ok else "[bold red]✗ does not match[/bold red]"
            console.print(f"   {mark} [dim]checked against the lifecycle's own Python: {a.check}[/dim]")
        console.print()
