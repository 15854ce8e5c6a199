"""``diskplan check TARGET...``: every partition's alignment at once, like ``parted align-check`` for all.

Several targets are checked in one process (fleets, CI): one report after another, or with ``--json`` one
document holding every disk's report (like ``lsblk -J``).

Exit status: 0 nothing found, 1 findings, 2 a target could not be read (the others are still checked).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from diskplan.cli.options import TargetError, add_overrides, apply_overrides, open_targets
from diskplan.model.safetext import safe

# The model and the output's modules (checkjson, checktext) are imported once the reads have started
# (``checked``): they run in their children meanwhile.
if TYPE_CHECKING:
    from diskplan.model.geometry import Geometry
    from diskplan.model.report import Report


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


MAX_LANES = 8  # reading children at most, one per core


def checked(targets: list[str], args: argparse.Namespace) -> Iterator[tuple[Report | None, Geometry | None, str]]:
    """For each target in turn: (the report, the geometry as the device reports it, "") or (None, None, why it
    could not be read). The report judges the geometry with the user's overrides; what the other tools would
    say uses the reported one. libparted's reads all start at once, in one child per core; no partition is
    probed for a filesystem (nothing here shows libparted's guess; the layers are diskplan's own sniffing).
    The reads begin when this is called, before the rest of the reader and the model are imported."""
    opening = open_targets(targets, lanes=min(os.cpu_count() or 1, MAX_LANES), filesystems=False)
    from diskplan.model.report import build_report

    def reports() -> Iterator[tuple[Report | None, Geometry | None, str]]:
        for opened in opening:
            try:
                disk = opened if isinstance(opened, TargetError) else apply_overrides(opened, args)
            except TargetError as exc:
                disk = exc
            if isinstance(disk, TargetError) or isinstance(opened, TargetError):
                yield None, None, str(disk)
            else:
                yield build_report(disk), opened.geometry, ""

    return reports()


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    reports = checked(args.target, args)  # the reads run from here on, while the output's modules are imported
    if args.json:
        import json

        from diskplan.cli.checkjson import json_result
        from diskplan.model.report import CHECK_FORMAT, CHECK_VERSION

        results = [json_result(r) for r in reports]
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
    for i, (report, reported, error) in enumerate(reports):
        if report is None or reported is None:
            print(f"diskplan check: {safe(error)}", file=sys.stderr)
            codes.append(2)
            continue
        codes.append(1 if report.all_findings else 0)
        if i:
            out.print()
        render(report, out, reported)
    return max(codes)
