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
from collections.abc import Iterator

from diskplan.cli.options import TargetError, add_overrides, apply_overrides, open_targets
from diskplan.model.geometry import Geometry
from diskplan.model.report import CHECK_FORMAT, CHECK_VERSION, Report, build_report, report_json
from diskplan.model.safetext import safe
from diskplan.model.toolsay import tools_say


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


def tools_json(report: Report, reported: Geometry) -> dict[str, object]:
    """``check --json``: each partition gets a ``tools`` object (README.md)."""
    out = report_json(report)
    says = tools_say(reported, report.disk.table)
    partitions = out["partitions"]
    assert isinstance(partitions, list)  # report_json's dicts, one per partition
    for p in partitions:
        p["tools"] = says[int(p["number"])].as_json()
    return out


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


MAX_LANES = 8  # reading children at most, one per core


def checked(targets: list[str], args: argparse.Namespace) -> Iterator[tuple[Report | None, Geometry | None, str]]:
    """For each target in turn: (the report, the geometry as the device reports it, "") or (None, None, why it
    could not be read). The report judges the geometry with the user's overrides; what the other tools would
    say uses the reported one. libparted's reads all start at once, in one child per core; no partition is
    probed for a filesystem (nothing here shows libparted's guess; the layers are diskplan's own sniffing)."""
    for opened in open_targets(targets, lanes=min(os.cpu_count() or 1, MAX_LANES), filesystems=False):
        try:
            disk = opened if isinstance(opened, TargetError) else apply_overrides(opened, args)
        except TargetError as exc:
            disk = exc
        if isinstance(disk, TargetError) or isinstance(opened, TargetError):
            yield None, None, str(disk)
        else:
            yield build_report(disk), opened.geometry, ""


def _json_result(one: tuple[Report | None, Geometry | None, str]) -> tuple[int, dict[str, object] | None, str]:
    """(exit status, the report's JSON object or None, why it could not be read)."""
    report, reported, error = one
    if report is None or reported is None:
        return 2, None, error
    doc = tools_json(report, reported)
    _raw_entries(report, doc)
    return (1 if report.all_findings else 0), doc, ""


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.json:
        results = [_json_result(c) for c in checked(args.target, args)]
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
    from diskplan.cli.checktext import console, render

    codes = []
    out = console()
    for i, (report, reported, error) in enumerate(checked(args.target, args)):
        if report is None or reported is None:
            print(f"diskplan check: {safe(error)}", file=sys.stderr)
            codes.append(2)
            continue
        codes.append(1 if report.all_findings else 0)
        if i:
            out.print()
        render(report, out, reported)
    return max(codes)
