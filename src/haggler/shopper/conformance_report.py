"""Rendering a conformance report for people: one Rich table, one summary line."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from haggler.shopper.conformance import ConformanceReport

STATUS_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}


def report_table(report: ConformanceReport) -> Table:
    version = report.protocol or "nash.v1 / negotiate.v1"
    table = Table(title=f"{escape(version)} conformance: {escape(report.base_url)}", title_justify="left",
                  show_lines=False, expand=False)
    table.add_column("check", overflow="fold")
    table.add_column("section", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold", ratio=1)
    for r in report.results:
        style = STATUS_STYLE.get(r.status, "")
        level = r.level if r.level == "MUST" else f"[dim]{r.level}[/dim]"
        table.add_row(f"{escape(r.id)}\n[dim]{escape(r.title)}[/dim]", r.section, level,
                      f"[{style}]{r.status.upper()}[/{style}]", escape(r.detail))
    return table


def summary_line(report: ConformanceReport) -> str:
    counts = report.counts()
    parts = ", ".join(f"{counts[s]} {s}" for s in ("pass", "fail", "warn", "skip") if counts[s])
    failures = len(report.must_failures)
    verdict = "[green]conforms[/green]" if report.ok else \
        f"[bold red]does not conform[/bold red] ({failures} MUST failure{'s' if failures != 1 else ''})"
    return f"{verdict}: {parts}; {report.chat_starts} chat starts used"


def print_report(report: ConformanceReport, console: Console | None = None) -> None:
    console = console or Console()
    console.print(report_table(report))
    if report.halted:
        console.print(f"[yellow]stopped early:[/yellow] {escape(report.halted)}")
    console.print(summary_line(report))
