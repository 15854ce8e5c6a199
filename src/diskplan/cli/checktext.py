"""``diskplan check``'s text report (rich): imported only when one is printed, so ``check --json`` starts
without rich."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from diskplan.model.extent import Role
from diskplan.model.findings.report import Report
from diskplan.model.findings.stackfindings import walk_lines
from diskplan.model.findings.toolsay import tools_say
from diskplan.model.geometry import Geometry
from diskplan.model.safetext import safe
from diskplan.model.units import human_bytes

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "notice": "cyan"}


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich would exit with status 1, which means "findings" here: main ends quietly instead."""
        raise BrokenPipeError


def _yes(ok: bool) -> Text:
    return Text("yes", style="green") if ok else Text("NO", style="bold red")


NOT_JUDGED = Text("-", style="dim")  # an extended partition: a container, its logical partitions are judged


def render(report: Report, console: Console, reported: Geometry | None = None) -> None:
    """``reported``: the geometry as the device reports it, which the other tools see (default: the report's)."""
    disk, geom = report.disk, report.disk.geometry
    # Every string from the disk (its path, names, messages) goes through safe() and into Text, never
    # into markup: an escape sequence or a "[" in a partition name is shown, not acted on.
    console.print(Text.assemble(
        (safe(disk.source), "bold"),
        f" (serial {safe(geom.serial)})" if geom.serial else "",
        f": {geom.sectors} sectors × {geom.logical} B = {human_bytes(geom.size_bytes)}, "
        f"physical block {geom.physical} B, alignment offset {geom.alignment_offset} B, "
        f"table {disk.table.label or 'none'}",
    ))
    g = report.grain
    console.print(
        f"grain: {g.sectors} sectors = {human_bytes(g.sectors * geom.logical)}"
        + (f", offset {g.offset}s" if g.offset else "")
    )
    if geom.min_io > geom.physical or geom.optimal_io:  # RAID arrays and some disks say more than their block
        console.print(f"I/O hints: minimum {geom.min_io} B, optimal {geom.optimal_io} B (sysfs minimum_io_size, "
                      "optimal_io_size)")
    console.print(Text(f"starts judged by: {geom.page_rule()}"))
    if report.partitions:
        t = RichTable(box=None, pad_edge=False, header_style="bold")
        for col in ("#", "start", "end", "size"):
            t.add_column(col, justify="right")
        t.add_column("name")
        # On flash a start is judged against the page (at least 4 KiB), not the block the device reports:
        # a column saying "physical yes" beside a page warning would contradict it.
        by_page = geom.page > geom.physical
        t.add_column("page" if by_page else "physical")
        t.add_column("grain")
        t.add_column("findings")
        for r in report.partitions:
            p = r.partition
            t.add_row(
                str(p.number),
                f"{p.start}s",
                f"{p.end}s",
                human_bytes(p.size * geom.logical),
                # msdos has no names: its role goes there; a GPT partition without one is not "primary"
                Text(safe(p.name) or ("-" if disk.table.label == "gpt" else p.role.value)),
                *((NOT_JUDGED, NOT_JUDGED) if p.role is Role.EXTENDED
                  else (_yes(r.aligned_page if by_page else r.aligned_physical), _yes(r.aligned_grain))),
                ", ".join(f.code for f in r.findings) or "-",
            )
        console.print(t)
    for number, layers in disk.stacks:
        where = f"partition {number}" if number else "whole disk"
        start = next((p.start for p in disk.table.partitions if p.number == number), 0)
        for line in walk_lines(geom, start, layers, where[0].upper() + where[1:]):
            console.print(Text(f"  {safe(line)}", style="dim"))
    for f in report.all_findings:
        where = f"partition {f.partition}" if f.partition is not None else "table"
        console.print(Text.assemble((f"{f.severity}", SEVERITY_STYLE[f.severity]),
                                    f" {where}: {safe(f.message)} [{f.code}]"))
        for line in f.explanation:
            console.print(Text(f"    {safe(line)}"))
    render_tools(report, console, reported or geom)
    if not report.all_findings:
        console.print("[green]No findings: every partition is aligned.[/]")


def render_tools(report: Report, console: Console, reported: Geometry) -> None:
    """What parted, fdisk and sgdisk would print about each partition (model.findings.toolsay)."""
    says = tools_say(reported, report.disk.table)
    if not says:
        return
    console.print(Text("what the tools say (from the geometry the device reports):", style="bold"))
    target = safe(report.disk.source)
    for number, say in says.items():
        console.print(Text(f"  partition {number}:"))
        for line in say.lines(target):
            console.print(Text(f"    {line}"))


def console() -> Console:
    """On a terminal, lines fit its width; piped, they are never wrapped (rich would cut them at 80
    columns, arithmetic included, and a script reads whole lines)."""
    if sys.stdout.isatty():
        return _Console(highlight=False)
    return _Console(highlight=False, soft_wrap=True, width=1 << 16)
