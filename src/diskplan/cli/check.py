"""``diskplan check TARGET...``: every partition's alignment at once, like ``parted align-check`` for all.

Several targets are checked in one process (fleets, CI): one report after another, or with ``--json`` one
document holding every disk's report (like ``lsblk -J``).

Exit status: 0 nothing found, 1 findings, 2 a target could not be read (the others are still checked).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from diskplan.cli.options import TargetError, add_overrides, apply_overrides, open_target
from diskplan.model.extent import Role
from diskplan.model.geometry import Geometry
from diskplan.model.report import CHECK_FORMAT, CHECK_VERSION, Report, build_report, report_json
from diskplan.model.safetext import safe
from diskplan.model.stackfindings import walk_lines
from diskplan.model.toolsay import tools_say
from diskplan.model.units import human_bytes

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "notice": "cyan"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan check",
        description="Check every partition's alignment and explain each finding.",
        epilog="Exit status: 0 nothing found, 1 findings, 2 a target could not be read (the others are still "
        "checked).",
    )
    p.add_argument("target", nargs="+", help="block device or image file (several: each is checked)")
    p.add_argument("--json", action="store_true", help="print one JSON object; for several targets one document "
                   "with a list of them (see README.md)")
    add_overrides(p)
    return p


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
        f": {geom.sectors} sectors × {geom.logical} B = {human_bytes(geom.size_bytes)}, "
        f"physical block {geom.physical} B, alignment offset {geom.alignment_offset} B, "
        f"table {disk.table.label or 'none'}",
    ))
    g = report.grain
    console.print(
        f"grain: {g.sectors} sectors = {human_bytes(g.sectors * geom.logical)}"
        + (f", offset {g.offset}s" if g.offset else "")
    )
    console.print(Text(f"starts judged by: {geom.page_rule()}"))
    if report.partitions:
        t = RichTable(box=None, pad_edge=False, header_style="bold")
        for col in ("#", "start", "end", "size"):
            t.add_column(col, justify="right")
        t.add_column("name")
        t.add_column("physical")
        t.add_column("grain")
        t.add_column("findings")
        for r in report.partitions:
            p = r.partition
            t.add_row(
                str(p.number),
                f"{p.start}s",
                f"{p.end}s",
                human_bytes(p.size * geom.logical),
                Text(safe(p.name) or p.role.value),
                *((NOT_JUDGED, NOT_JUDGED) if p.role is Role.EXTENDED
                  else (_yes(r.aligned_physical), _yes(r.aligned_grain))),
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
    """What parted, fdisk and sgdisk would print about each partition (model.toolsay)."""
    says = tools_say(reported, report.disk.table)
    if not says:
        return
    console.print(Text("what the tools say (from the geometry the device reports):", style="bold"))
    target = safe(report.disk.source)
    for number, say in says.items():
        console.print(Text(f"  partition {number}:"))
        for line in say.lines(target):
            console.print(Text(f"    {line}"))


def tools_json(report: Report, reported: Geometry) -> dict[str, object]:
    """``check --json``: each partition gets a ``tools`` object (README.md)."""
    out = report_json(report)
    says = tools_say(reported, report.disk.table)
    partitions = out["partitions"]
    assert isinstance(partitions, list)  # report_json's dicts, one per partition
    for p in partitions:
        p["tools"] = says[int(p["number"])].as_json()
    return out


def console() -> Console:
    """On a terminal, lines fit its width; piped, they are never wrapped (rich would cut them at 80
    columns, arithmetic included, and a script reads whole lines)."""
    if sys.stdout.isatty():
        return _Console(highlight=False)
    return _Console(highlight=False, soft_wrap=True, width=1 << 16)


def _raw_entries(report: Report, doc: dict[str, object]) -> None:
    """Each GPT partition's unique GUID and its 64 attribute bits, from the raw entries (libparted gives neither)."""
    from diskplan.backend.gptattrs import raw_entries
    from diskplan.backend.gptcheck import check_gpt

    disk = report.disk
    if disk.table.label != "gpt":
        return
    entries = raw_entries(disk.table, check_gpt(disk.source, disk.geometry.logical, disk.geometry.sectors))
    partitions = doc["partitions"]
    assert isinstance(partitions, list)
    for part in partitions:
        e = entries.get(part["number"])
        if e is not None:
            part["guid"], part["attribute_bits"] = e.part_guid, f"0x{e.attributes:016x}"


def check_one(target: str, args: argparse.Namespace) -> tuple[Report | None, Geometry | None, str]:
    """(the report, the geometry as the device reports it, "") or (None, None, why the target could not be read).
    The report judges the geometry with the user's overrides; what the other tools would say uses the reported one."""
    try:
        as_read = open_target(target)
        disk = apply_overrides(as_read, args)
    except TargetError as exc:
        return None, None, str(exc)
    return build_report(disk), as_read.geometry, ""


def _json_result(target: str, args: argparse.Namespace) -> tuple[int, dict[str, object] | None, str]:
    """(exit status, the report's JSON object or None, why it could not be read)."""
    report, reported, error = check_one(target, args)
    if report is None or reported is None:
        return 2, None, error
    doc = tools_json(report, reported)
    _raw_entries(report, doc)
    return (1 if report.all_findings else 0), doc, ""


def _json_group(targets: list[str], args: argparse.Namespace) -> list[tuple[int, dict[str, object] | None, str]]:
    return [_json_result(t, args) for t in targets]


def _json_results(targets: list[str], args: argparse.Namespace) -> list[tuple[int, dict[str, object] | None, str]]:
    """Every target's result, in order. Many targets are split between forked workers, one per core: each read
    spends most of its time in its own libparted child, so they overlap."""
    from diskplan.backend.isolate import IsolatedFailure, start_isolated

    workers = min(os.cpu_count() or 1, len(targets) // 16, 8)
    if workers < 2:
        return _json_group(targets, args)
    groups = [targets[i::workers] for i in range(workers)]
    children = [start_isolated(_json_group, g, args) for g in groups]
    results: list[list[tuple[int, dict[str, object] | None, str]]] = []
    for group, child in zip(groups, children, strict=True):
        try:
            results.append(child.result(timeout=60 + 40 * len(group)))
        except IsolatedFailure as exc:
            results.append([(2, None, f"the check failed: {exc.reason}")] * len(group))
    out: list[tuple[int, dict[str, object] | None, str]] = [(2, None, "")] * len(targets)
    for w, rows in enumerate(results):
        out[w::workers] = rows
    return out


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if len(args.target) > 1:  # each read runs in a forked child: imported once here, every child inherits it
        import diskplan.backend.libparted  # noqa: F401
    if args.json:
        results = _json_results(args.target, args)
        for _, _, error in results:
            if error:
                print(f"diskplan check: {safe(error)}", file=sys.stderr)
        codes = [code for code, _, _ in results]
        if len(args.target) == 1:
            if results[0][1] is not None:
                print(json.dumps(results[0][1], indent=2))
        else:  # one document for all of them, its status the worst of theirs
            print(json.dumps({"format": CHECK_FORMAT, "version": CHECK_VERSION,
                              "disks": [doc for _, doc, _ in results if doc is not None],
                              "errors": [{"target": t, "error": e} for t, (_, _, e) in zip(args.target, results,
                                                                                          strict=True) if e],
                              "status": max(codes)}, indent=2))
        return max(codes)
    codes = []
    out = console()
    for i, target in enumerate(args.target):
        report, reported, error = check_one(target, args)
        if report is None or reported is None:
            print(f"diskplan check: {safe(error)}", file=sys.stderr)
            codes.append(2)
            continue
        codes.append(1 if report.all_findings else 0)
        if i:
            out.print()
        render(report, out, reported)
    return max(codes)
