"""``diskplan stack TARGET [-N N] [intent]``: plan the layers above a partition aligned (md RAID, LVM, LUKS, a
filesystem) and print the commands that make them, with the arithmetic of every offset; or, for a partition
that already holds a stack, what those commands would have been and where the stack differs.

Prints commands, never runs them. Reads the disk read-only.

Exit status: 0 printed (a plan, or an existing stack as planned or differing only where nothing is lost),
1 an existing layer's data lies where every write costs more (its verdict says what and how it could be
mended), 2 the target could not be read or the intent cannot be built.
"""

from __future__ import annotations

import argparse
import sys

from diskplan.cli.helpformat import LateWidthFormatter
from diskplan.cli.options import TargetError, _size, add_overrides, open_target
from diskplan.cli.textout import write_document
from diskplan.model.disk import Disk
from diskplan.model.extent import Role
from diskplan.model.formats.jsontext import as_text
from diskplan.model.grain import optimal_grain
from diskplan.model.safetext import safe
from diskplan.model.sizes import Amount
from diskplan.model.stackplan import (
    LEVELS,
    Intent,
    IntentError,
    compare,
    intent_from,
    intent_of,
    plan_lines,
    plan_stack,
)
from diskplan.model.units import MiB, human_bytes


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan stack",
        formatter_class=LateWidthFormatter,
        description="Plan md RAID, LVM, LUKS and the filesystem above a partition so that every layer's data "
        "lies on the grain of the layer below: prints the commands (mdadm --data-offset, pvcreate "
        "--dataalignment, vgcreate -s, lvcreate -i/-I, cryptsetup luksFormat --offset, mkfs.ext4 -E "
        "stride=,stripe_width= or mkfs.xfs -d su=,sw=) with the arithmetic. On a partition that holds a "
        "stack already, says layer by layer what those commands would have made and where it differs. "
        "Runs nothing.",
        epilog="Every md member is taken to be a like partition on a like disk (name them in place of "
        "MEMBER2...). Exit status: 0 printed, 1 an existing layer costs (see its verdict), 2 could not read "
        "the target or build the intent.",
    )
    p.add_argument("target", metavar="TARGET", help="block device or image file")
    p.add_argument("-N", "--partition", type=int, metavar="N", help="the partition (default: the first one; "
                   "on a disk without a table, the whole disk)")
    g = p.add_argument_group("the intended stack (default: what the partition holds now)")
    g.add_argument("--raid", type=int, choices=LEVELS, metavar="LEVEL", help="an md array: 0, 1, 4, 5, 6 or 10")
    g.add_argument("--members", type=int, metavar="N", help="the array's members (this partition and N-1 like it)")
    g.add_argument("--chunk", type=_size, metavar="SIZE", help="the md chunk (default 512KiB, mdadm's)")
    g.add_argument("--lvm", action="store_true", help="an LVM physical volume, volume group and one LV")
    g.add_argument("--extent", type=_size, metavar="SIZE", help="the extent size wanted (default 4MiB, rounded "
                   "up to the full stripe)")
    g.add_argument("--lv-stripes", type=int, default=1, metavar="N", help="stripe the LV over N PVs (lvcreate -i)")
    g.add_argument("--lv-stripe-size", type=_size, metavar="SIZE", help="the LV's stripe size (lvcreate -I; "
                   "default 64KiB)")
    g.add_argument("--luks", choices=("luks1", "luks2"), help="a LUKS container")
    g.add_argument("--fs", choices=("ext4", "xfs"), help="the filesystem")
    p.add_argument("--json", action="store_true", help="the plan and the verdicts as JSON (for fleets)")
    add_overrides(p)
    return p


def _intent(args: argparse.Namespace, ss: int) -> Intent | None:
    """The intent the options describe, or None when they describe none (then the stack there is read)."""
    def b(a: Amount | None) -> int | None:
        return None if a is None else a.nbytes(ss)

    return intent_from(args.raid, args.members, b(args.chunk), args.lvm, b(args.extent), args.lv_stripes,
                       b(args.lv_stripe_size), args.luks, args.fs)


def _where(disk: Disk, number: int | None) -> tuple[int, int, int | None, str]:
    """(start LBA, size in bytes, partition number or None for the whole disk, the name commands use)."""
    geom = disk.geometry
    parts = [p for p in disk.table.live if p.role is not Role.EXTENDED]
    if number is not None:
        for p in parts:
            if p.number == number:
                return p.start, p.size * geom.logical, p.number, f"PARTITION{p.number}"
        raise TargetError(f"there is no partition {number}")
    if parts:
        p = parts[0]
        return p.start, p.size * geom.logical, p.number, f"PARTITION{p.number}"
    if disk.table.label is None and disk.stack(0):
        return 0, geom.size_bytes, None, "DISK"
    start = optimal_grain(geom).align_up(max(1, MiB // geom.logical))  # a new partition on the first grain
    return start, geom.size_bytes - start * geom.logical - MiB, -1, "PARTITION1"


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        disk = open_target(args.target, args)
        start, size, number, dev = _where(disk, args.partition)
        intent = _intent(args, disk.geometry.logical)
        layers = disk.stack(number or 0) if number != -1 else ()
        if intent is None and not layers:
            raise IntentError("nothing to plan: say what goes above the partition (--raid, --lvm, --luks, --fs), "
                              "or point at a partition that holds a stack")
        if layers:
            plan, verdicts = compare(disk.geometry, start, size, layers, number, intent or intent_of(layers), dev)
        else:
            plan, verdicts = plan_stack(disk.geometry, start, size, intent or Intent(), dev), ()
    except (TargetError, IntentError) as exc:
        print(f"diskplan stack: {safe(str(exc))}", file=sys.stderr)
        return 2
    where = ("the whole disk" if number is None else "a new partition at LBA "
             f"{start:,}" if number == -1 else f"partition {number} (LBA {start:,}, {human_bytes(size)})")
    if args.json:
        doc = {"target": args.target, "partition": number if number != -1 else None, **plan.as_json(),
               "commands": plan.commands(), "existing": [v.as_json() for v in verdicts]}
        write_document(as_text(doc) + "\n")
    else:
        write_document("".join(safe(line) + "\n" for line in plan_lines(f"{args.target}, {where}", plan, verdicts)))
    return 1 if any(v.status == "costs" for v in verdicts) else 0
