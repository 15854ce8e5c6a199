"""``diskplan export TARGET|PLAN --format json|sfdisk|parted|ansible|ignition|repart``: a table (read from a disk
or image) or a plan file (JSON plan, relative or exact, or ``sfdisk --dump`` text), printed as a JSON plan, an
sfdisk script, parted commands, an Ansible playbook, an Ignition config or systemd-repart.d files (``-o DIR``).
``--layout-only`` and ``--relative`` print the layout alone, to copy onto another disk (model.formats.layoutcopy).

Exit status: 0 printed, 2 the target or plan could not be read or expressed.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys

from diskplan.backend.raw.gptattrs import partition_guids
from diskplan.backend.raw.tableid import disk_fingerprint
from diskplan.backend.read.planread import read_plan_text
from diskplan.cli.options import TargetError, open_target
from diskplan.cli.textout import write_document
from diskplan.model.formats import planfile, registry
from diskplan.model.formats.layoutcopy import layout_only, relative_layout
from diskplan.model.formats.planfile import (
    PlanFileError,
    PlanSpec,
    load_plan,
    spec_from_table,
)
from diskplan.model.formats.repart import repart_files
from diskplan.model.safetext import safe
from diskplan.model.value import replace

FORMATS = tuple(registry.FORMATS)
PLAN_PROBE_BYTES = 1 << 16


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan export",
        description="Print a disk's table or a plan file as a JSON plan, an sfdisk script, parted commands, an "
        "Ansible playbook (community.general.parted), an Ignition config (storage.disks) or systemd-repart.d "
        "files. A format that cannot express the plan says why, and prints nothing.",
        epilog="TARGET is a block device or an image file; PLAN is a JSON plan or `sfdisk --dump` output "
        "(- reads standard input). Exit status: 0 printed, 2 could not read or express it.",
    )
    p.add_argument("source", metavar="TARGET|PLAN", help="disk, image file, or plan file")
    p.add_argument("--format", "-f", choices=FORMATS, default="json", help="output format (default: json)")
    p.add_argument(
        "--device",
        metavar="DEV",
        help="the disk the sfdisk/parted/ansible/ignition output is for (default: TARGET itself; for a PLAN, "
        "DEVICE)",
    )
    copy = p.add_mutually_exclusive_group()
    copy.add_argument("--layout-only", action="store_true",
                      help="the layout alone, to copy onto another disk: no keeps, made_against, disk size or "
                      "GPT usable area (apply makes the partitions new and empty there)")
    copy.add_argument("--relative", action="store_true",
                      help="as --layout-only, with sizes in bytes and the last partition taking the rest, for a "
                      "disk of another size or sector size (primary partitions only)")
    p.add_argument("--output", "-o", metavar="FILE|DIR", help="write to FILE instead of standard output "
                   "(--format repart: a directory, one .conf file per partition)")
    return p


def _is_plan_file(path: str) -> bool:
    """A regular file holding text is a plan; a block device or binary data is a target."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(PLAN_PROBE_BYTES)
    except OSError:
        return False
    if not head.strip() or b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the probe's end is still text
        return exc.start >= len(head) - 3
    return True


def _read_plan(path: str) -> PlanSpec:
    try:
        spec = load_plan(read_plan_text(path))
        if spec.script is not None:
            raise PlanFileError("this sfdisk script leaves starts, sizes or numbers to the disk it is applied to: "
                                "`diskplan apply SCRIPT DISK` places them there (as sfdisk does), then "
                                "`diskplan export DISK` prints the result")
        return spec
    except PlanFileError as exc:
        raise PlanFileError(f"{'standard input' if path == '-' else path}: {exc}") from exc


def load_source(source: str, copy: str = "") -> tuple[PlanSpec, str]:
    """The plan and the device name scripts should use by default. ``copy``: "layout" or "relative" for the
    layout alone (model.formats.layoutcopy), "" for the disk's own plan (every partition kept, made_against)."""
    if source == "-" or _is_plan_file(source):
        spec = _read_plan(source)
        if copy == "relative" and spec.relative is None:
            raise PlanFileError(f"{source}: --relative makes a relative plan from a disk's table: give the disk, "
                                "or apply this plan to one and export that")
        return (layout_only(spec) if copy else spec), "DEVICE"
    disk = open_target(source)
    try:
        if copy == "relative":
            return relative_layout(spec_from_table(disk.table, disk.geometry), disk.geometry), "DEVICE"
        if copy:
            return layout_only(spec_from_table(disk.table, disk.geometry)), "DEVICE"
        spec = spec_from_table(disk.table, disk.geometry, partition_guids(disk))  # every partition kept (keeps)
        return replace(spec, made_against=disk_fingerprint(disk)), source
    except PlanFileError as exc:
        raise PlanFileError(f"{source}: {exc}") from exc


def write_repart(spec: PlanSpec, directory: str) -> list[str]:
    """The .conf files in ``directory`` (made if missing); refused when it holds .conf files already, which
    repart would read beside them."""
    files = repart_files(spec)
    os.makedirs(directory, exist_ok=True)
    old = sorted(n for n in os.listdir(directory) if n.endswith(".conf"))
    if old:
        raise PlanFileError(f"{directory} already holds {old[0]}: systemd-repart would read it with the plan's "
                            "files (give an empty directory)")
    for name, text in files:
        with open(os.path.join(directory, name), "x", encoding="utf-8") as f:
            f.write(text)
    return [name for name, _ in files]


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        copy = "relative" if args.relative else "layout" if args.layout_only else ""
        spec, default_device = load_source(args.source, copy)
        for note in (*spec.notes, *planfile.not_carried(spec, args.format)):  # what the output does not carry
            print(f"diskplan export: note: {safe(note)}", file=sys.stderr)
        if args.format == "repart" and args.output:
            names = write_repart(spec, args.output)
            print(f"diskplan export: wrote {len(names)} file(s) to {safe(args.output)}: {', '.join(names)}",
                  file=sys.stderr)
            return 0
        text = registry.render(spec, args.format, args.device or default_device)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            write_document(text)
    except BrokenPipeError:
        raise  # the reader went away: main ends quietly
    except (TargetError, PlanFileError) as exc:
        print(f"diskplan export: {safe(str(exc))}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = getattr(exc, "filename", None) or args.output or args.source
        print(f"diskplan export: {safe(str(where))}: {safe(detail)}", file=sys.stderr)
        return 2
    return 0
