"""``provkg demo``: the seismic lifecycle end to end, drawn in the terminal with rich.

The use case is :func:`provkg.demo.run_demo`; this module turns the arguments into its
keywords, shows its progress (one bar per phase, the online losses) and prints what it
returns: one table per answer with its check, then where the report is.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from provkg.demo import OnlineHook, run_demo
from provkg.demo.answers import Answer
from provkg.demo.readable import cell

__all__ = ["cmd_demo", "PhaseProgress", "RichListener", "print_answers"]


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo as ``provkg demo`` was asked to; 0 when every answer checks out."""
    console = Console(highlight=False)
    result = run_demo(store=args.store, out=args.out, sink=args.sink, online=args.online,
                      fresh=args.fresh, epochs=args.epochs, small=args.small,
                      listener=RichListener(console))
    console.rule("[bold]Questions to the knowledge graph[/bold] (PROV-ML paper, Table 1)")
    print_answers(console, result.answers)
    console.print(f"report: [bold]{result.report_html}[/bold] (and report.md); "
                  f"{result.triples:,} triples in {result.store_url}; {result.seconds:.1f} s")
    if result.failed:
        console.print(f"[bold red]the graph's answers to {', '.join(result.failed)} do not match "
                      "what the lifecycle measured[/bold red]")
        return 1
    return 0


class RichListener:
    """The demo's :class:`provkg.demo.DemoListener`, drawn on a rich console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def started(self) -> None:
        self.console.rule("[bold]provkg demo[/bold]: a seismic facies classifier, from SEG-Y to model")

    def knowledge_loaded(self, triples: int) -> None:
        self.console.print(f"loaded the ontologies and the seismic KG ({triples} triples: basins, "
                           "fields, wells, surveys, SEG-Y files)")

    def reusing(self, out: Path) -> None:
        self.console.print(f"[yellow]reusing the run in {out} (same settings, its provenance is "
                           "in the store); --fresh starts over[/yellow]")

    @contextmanager
    def lifecycle(self, online: OnlineHook | None) -> Iterator[PhaseProgress]:
        with PhaseProgress(self.console, online=online) as progress:
            yield progress


class PhaseProgress:
    """The lifecycle's progress callbacks drawn as one rich progress bar per phase.

    ``online`` (optional) is called after each epoch with the capture workflow, the
    training's running result and the epoch number; it returns a line to print.
    """

    def __init__(self, console: Console, *, online: OnlineHook | None = None) -> None:
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
    """One table per answer (numbers rounded for reading), what it ranks by, and its check
    against the lifecycle's own numbers."""
    for a in answers:
        table = Table(title=f"[bold]{a.name.upper()}[/bold] {a.question}", title_justify="left",
                      show_lines=False, header_style="bold", expand=False)
        for column in a.columns:
            table.add_column(Text(column), overflow="fold")
        for row in a.rows:  # Text: a stored value is data, not rich markup
            table.add_row(*(Text(cell(c, v)) for c, v in zip(a.columns, row)))
        console.print(table)
        if a.ranked_by:
            console.print(Text(f"   ranked by {a.ranked_by}", style="dim"))
        if not a.rows:
            console.print("   [yellow](no rows)[/yellow]")
        if a.check:
            mark = "[green]✓[/green]" if a.ok else "[bold red]✗ does not match[/bold red]"
            console.print(f"   {mark} [dim]checked against the lifecycle's own Python: {a.check}[/dim]")
        console.print()
